"""The rating subcommands (``zeroforge rate``, ``replay``).

Only argparse at import time: ``zeroforge status`` builds every parser and must start fast.
"""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    """Adds the rating subcommands to the CLI's subparsers ``sub``."""
