"""The run's weight snapshots (``RUN_DIR/snapshots/``, for learning curves and the Elo
ladder) and the learner time that names them: a resumed or replaced learner goes on from
its checkpoint's time, so its snapshots come after the earlier ones, never over them."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from pathlib import Path

from zeroforge.shared.formats import StateDict, save_weights
from zeroforge.shared.metrics import Recorder
from zeroforge.shared.run_files import snapshot_path

log = logging.getLogger(__name__)


class WeightSnapshots:
    """Writes ``snapshots/weights-<s>s.safetensors`` every ``every_s`` seconds (0: never),
    ``s`` being the run's learner time (``lived``)."""

    def __init__(self, run_dir: Path, every_s: float, recorder: Recorder) -> None:
        self.run_dir = run_dir
        self.every_s = every_s
        self.recorder = recorder
        self.lived_before = 0.0
        """Seconds the run's earlier learners lived (``ServiceState.trained_s``)."""
        self.start()

    def start(self) -> None:
        """This learner's time begins now (once it is ready to train)."""
        self._started = self._last = time.monotonic()

    def lived(self) -> float:
        """Seconds of the run's learner time: earlier learners' and this one's."""
        return self.lived_before + time.monotonic() - self._started

    def maybe_write(self, weights: Callable[[], StateDict],
                    raw: Callable[[], StateDict] | None = None) -> Path | None:
        """The snapshot, if one is due; None otherwise, or when the write failed: a full
        or read-only disk skips it (one line each, minutes apart, counted in
        ``learner_save_failures_total{file="snapshot"}``) rather than end the learner, and
        no partial file stays. With ``raw`` (a learner whose average is apart from
        self-play) the raw weights go under ``snapshots/raw/`` by the same name, so a run's
        curve can be judged both ways; a snapshot is both files or neither."""
        now = time.monotonic()
        if not self.every_s or now - self._last < self.every_s:
            return None
        self._last = now
        lived = self.lived()
        files = [(snapshot_path(self.run_dir, lived), weights)]
        if raw is not None:
            files.append((snapshot_path(self.run_dir, lived, raw=True), raw))
        try:
            for path, state in files:
                path.parent.mkdir(parents=True, exist_ok=True)
                save_weights(state(), path)
        except OSError as err:
            for path, _ in files:
                with contextlib.suppress(OSError):
                    path.unlink()
            self.recorder.inc("learner_save_failures_total", file="snapshot")
            log.error("weights snapshot %s not written (skipped): %s", files[0][0], err)
            return None
        return files[0][0]
