"""``RUN_DIR/best.safetensors``: the run's strongest evaluated weights, by the ladder.

Which minute a run stops at should not decide what its user keeps. After each evaluation
the evaluator refits the run's Elo ladder (``players.ladder``); the version just evaluated
becomes the run's best when the lower end of its 95 % interval is above the current best's
(refitted with it): a version is preferred for what the games show it at least is, not
for one lucky match. Its weights go to ``best.safetensors`` and its rating to
``best.json`` (``{"version", "elo", "low", "high", "anchor", "time"}``), both written
whole (temp file, then rename), so a reader never meets half of one. The metrics
``evaluator_best_snapshot_version`` and ``evaluator_best_snapshot_elo{bound}`` carry it
to ``zeroforge status`` and the dashboard.

Only a version being evaluated can become the best (its weights are in hand then); an
older version whose interval rises in a later refit keeps second place. A restarted
evaluator reads ``best.json`` back and goes on from it.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from zeroforge.shared.formats import StateDict, weights_to_bytes

log = logging.getLogger(__name__)

WEIGHTS_NAME = "best.safetensors"
RECORD_NAME = "best.json"


class BestSnapshot:
    """The best evaluated version of the run in ``run_dir`` (see the module docstring)."""

    def __init__(self, run_dir: str | os.PathLike[str]) -> None:
        self.run_dir = Path(run_dir)
        self.record: dict[str, Any] | None = self._load()
        """What ``best.json`` says (None: no best yet)."""

    @property
    def weights_path(self) -> Path:
        return self.run_dir / WEIGHTS_NAME

    def consider(self, version: int, fit: Any, weights: StateDict) -> bool:
        """After a ladder refit (``fit``: its ``LadderFit``): make ``version`` the best if
        its interval's low end is above the best's; True when it did. A write that fails
        is logged and the old best kept (the run goes on)."""
        me = f"v{version}"
        if not fit.rated(me):
            return False
        low, high = fit.interval(me)
        if self.record is not None and self.record["version"] != version:
            holder = f"v{self.record['version']}"
            if fit.rated(holder) and fit.interval(holder)[0] >= low:
                self.record.update(_rating(fit, holder))  # its refitted place
                return False
        record = {"version": version, **_rating(fit, me), "anchor": fit.anchor,
                  "time": time.time()}
        try:
            _write_whole(self.weights_path, weights_to_bytes(weights))
            _write_whole(self.run_dir / RECORD_NAME, json.dumps(record).encode())
        except OSError as err:
            log.error("best weights v%d not written (the best stays v%s): %s", version,
                      self.record["version"] if self.record else "-", err)
            return False
        if self.record is None or self.record["version"] != version:
            log.info("best weights now v%d (Elo %.0f, 95%% %.0f..%.0f): %s", version,
                     record["elo"], low, high, self.weights_path)
        self.record = record
        return True

    def _load(self) -> dict[str, Any] | None:
        path = self.run_dir / RECORD_NAME
        try:
            record = json.loads(path.read_text())
            if not (isinstance(record, dict) and isinstance(record.get("version"), int)
                    and self.weights_path.is_file()):
                raise ValueError("no version, or no best.safetensors beside it")
            return record
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as err:
            log.warning("evaluator ignores %s (%s): the next evaluation names a best", path,
                        err)
            return None


def _rating(fit: Any, name: str) -> dict[str, float]:
    low, high = fit.interval(name)
    return {"elo": float(fit.elo[name]), "low": float(low), "high": float(high)}


def _write_whole(path: Path, data: bytes) -> None:
    temp = path.with_name(path.name + ".tmp")
    with open(temp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temp, path)
