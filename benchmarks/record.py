"""A benchmark's result document: printed for the reader, and kept as raw rows
(``docs/data/``) when the run is asked to."""

from __future__ import annotations

import json
from pathlib import Path


def print_and_keep(doc: object, path: str | Path | None) -> None:
    """Print ``doc`` as indented JSON on stdout and, if ``path`` is given, write the same
    text there (a record in docs/data/ is exactly what the run printed)."""
    text = json.dumps(doc, indent=1)
    print(text)
    if path:
        Path(path).write_text(text + "\n")
