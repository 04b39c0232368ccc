"""A run's dashboard as its driver starts it: the history sampler and the run server,
from the run's config (``run.dashboard_host``, ``run.dashboard_port``,
``run.dashboard_interval_s``)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from zeroforge.deploy.dashboard.history import HISTORY_FILE, History, HistoryConfig, Sampler
from zeroforge.deploy.dashboard.server import RunServer
from zeroforge.deploy.runtime.status import RunStatus
from zeroforge.shared.run_files import keep_aside

if TYPE_CHECKING:  # not imported at run time: `zeroforge status` must start fast
    from zeroforge.deploy.config import RunConfig

LEGEND = ("legend: score vs X = (wins + draws/2) / games of the newest weights against X "
          "(vs minimax in tic-tac-toe 50% is perfect play: minimax never loses, so a draw "
          "every game is the best result); best = the best weights so far (replaced when "
          "newer ones score above the gating threshold, so ~50% means as strong); backlog = "
          "stream entries not yet acknowledged by the learner (it saw-tooths: acks come "
          "after each checkpoint)")
"""Printed once at the start of a run (and by ``zeroforge status``)."""

FINAL_STATUS = "status.json"
"""A finished run's last status in its run dir (``zeroforge dashboard --run-dir``)."""


def keep_earlier_history(run_dir: Path) -> Path | None:
    """An earlier run's history in this run dir (a resumed or repeated run) is kept as
    ``history-<time>.jsonl`` rather than overwritten."""
    return keep_aside(run_dir / HISTORY_FILE)


class RunDashboard:
    """History (sampled from ``source``, a merged metrics snapshot) and the run server."""

    def __init__(self, run: RunConfig, run_id: str, run_dir: str | Path,
                 status: Callable[[], RunStatus], source: Callable[[], Mapping | None],
                 started: float | None = None,
                 workers: Callable[[int], dict] | None = None) -> None:
        """``workers``: page -> per-worker rows (``RunServer``); None for a local run."""
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        keep_earlier_history(Path(run_dir))
        self.history = History(run_id, started or time.time(),
                               HistoryConfig(interval_s=run.dashboard_interval_s),
                               path=Path(run_dir) / HISTORY_FILE)
        self.sampler = Sampler(self.history, source)
        self._status = status
        self._run_dir = Path(run_dir)
        self.server = RunServer(status, self.history, run.dashboard_host,
                                run.dashboard_port, run_dir=run_dir, workers=workers)
        self.sampler.tick()  # the run's first point: its counters at zero
        self.sampler.start()
        self.server.start()

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def token_path(self) -> str:
        return str(self.server.token_path or "")

    def announce(self) -> str:
        """The start line: the URL, and where the token is when one is needed (the token
        itself is not printed: terminals of cluster jobs end up in log files)."""
        if self.server.token:
            return (f"dashboard at {self.url} (needs its token: "
                    f"`zeroforge dashboard --run-dir {self.history_dir}` prints the URL with it; "
                    f"token file {self.token_path})")
        return f"dashboard at {self.url}"

    @property
    def history_dir(self) -> str:
        return str(Path(self.token_path).parent) if self.token_path else ""

    def close(self) -> None:
        """The final sample and status (for the finished run's page), then the server
        goes."""
        self.sampler.stop()
        with contextlib.suppress(Exception):  # a failing status must not fail the stop
            (self._run_dir / FINAL_STATUS).write_text(self._status().json_text() + "\n",
                                                      encoding="utf-8")
        self.server.close()
