"""The run record: what a run leaves in its run directory, the same in every mode.

```
RUN_DIR/config.yaml             the run's full config (written at start)
RUN_DIR/checkpoint.pt           learner state + stream cursor (learner.learner)
RUN_DIR/eval.jsonl              one JSON line per evaluation (the evaluator)
RUN_DIR/snapshots/weights-<seconds>s.safetensors   weight snapshots (learning curves)
RUN_DIR/ladder.json             the run's Elo ladder (players.ladder: evaluator, zeroforge rate)
RUN_DIR/games/eval|selfplay/    SGF game records (zeroforge.actors.game_records)
```

The local run and a distributed run write the same files through this module (a
distributed run assumes the run directory is reachable from the learner's and the
evaluator's nodes, as its checkpoints already do).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

CONFIG_NAME = "config.yaml"
EVAL_LOG_NAME = "eval.jsonl"
SNAPSHOT_DIR = "snapshots"
RAW_SNAPSHOT_DIR = "raw"
"""Under ``SNAPSHOT_DIR``: the raw weights of each snapshot, under the same name, when the
learner keeps its average apart from self-play (``LearnerConfig.separate_average``): the
snapshots themselves are the average, and the raw ones are what self-play learned from."""


def keep_aside(path: Path) -> Path | None:
    """Rename an earlier run's ``name.ext`` in a run dir to ``name-<its mtime>.ext`` so a new
    run does not overwrite it; returns the new path (None when there was nothing)."""
    if not path.exists():
        return None
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(path.stat().st_mtime))
    kept = path.with_name(f"{path.stem}-{stamp}{path.suffix}")
    path.rename(kept)
    return kept


def snapshot_path(run_dir: str | Path, elapsed_s: float, raw: bool = False) -> Path:
    """``RUN_DIR/snapshots/weights-<seconds>s.safetensors`` for a snapshot ``elapsed_s``
    into the learner's life (six digits, so names sort by time); with ``raw``, the raw
    weights' file of that snapshot under ``snapshots/raw/``. Runs before 0.2 wrote ``.pt``
    names; ``snapshot_files`` finds both."""
    return _snapshot_dir(run_dir, raw) / f"weights-{int(elapsed_s):06d}s.safetensors"


def _snapshot_dir(run_dir: str | Path, raw: bool) -> Path:
    folder = Path(run_dir) / SNAPSHOT_DIR
    return folder / RAW_SNAPSHOT_DIR if raw else folder


def snapshot_files(run_dir: str | Path, raw: bool = False) -> list[tuple[int, Path]]:
    """Every weight snapshot of a run as (seconds, path), oldest first (``.safetensors``
    and the ``.pt`` names of older runs; the loader tells the format from the bytes); with
    ``raw``, the raw weights' files (``RAW_SNAPSHOT_DIR``) instead."""
    found = []
    for path in _snapshot_dir(run_dir, raw).glob("weights-*s.*"):
        stem = path.name.split(".")[0]  # weights-000060s
        seconds = stem.removeprefix("weights-").removesuffix("s")
        if path.suffix in (".safetensors", ".pt") and seconds.isdigit():
            found.append((int(seconds), path))
    return sorted(found)


class RunFiles:
    """Writes and reads the run record of one run directory."""

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)

    def write_config(self, config: Mapping[str, Any]) -> Path:
        """The run's config (``shared.config.to_dict`` of a TrainConfig) as YAML."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        path = self.run_dir / CONFIG_NAME
        path.write_text(yaml.safe_dump(dict(config), sort_keys=False), encoding="utf-8")
        return path

    def append_eval(self, entry: Mapping[str, Any]) -> None:
        """One evaluation as a JSON line (``RatingService`` results)."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        path = self.run_dir / EVAL_LOG_NAME
        # A run killed mid-write leaves half a line: start on a fresh one, or this entry
        # would be glued to the broken one and lost with it.
        torn = path.exists() and path.stat().st_size and not path.read_bytes().endswith(b"\n")
        with open(path, "a", encoding="utf-8") as f:
            f.write(("\n" if torn else "") + json.dumps(dict(entry), sort_keys=True) + "\n")

    def evals(self) -> list[dict]:
        """Every evaluation recorded so far, oldest first (lines that do not parse are
        skipped: a run killed mid-write leaves half a line)."""
        path = self.run_dir / EVAL_LOG_NAME
        if not path.exists():
            return []
        out = []
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(entry, dict):
                out.append(entry)
        return out
