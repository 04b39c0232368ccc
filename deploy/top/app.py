"""``zeroforge top``'s loop: poll the run server about once a second (``RunClient``:
``/api/status`` and the new part of ``/api/history``), redraw (``view.render``), and stop
on ``q``, on Ctrl-C, or when the run ends (then its final state stays on screen).

The seams: ``client`` (``status()`` / ``history(since)``), ``run_alive`` (is the run's
driver still there, when its server stops answering) and ``final_status`` (what the run
left behind when it ended), so the loop can be driven by tests without a run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from rich.console import Console
from rich.live import Live

from zeroforge.deploy.runtime.status import RunStatus
from zeroforge.deploy.top.keys import KeyReader
from zeroforge.deploy.top.view import FINAL_STATES, HistoryBuffer, Rates, render

QUIT_KEYS = frozenset("qQ")


class StatusSource(Protocol):
    def status(self) -> RunStatus: ...

    def history(self, since: float = 0.0) -> dict[str, Any]: ...


class TopError(OSError):
    """The run cannot be watched (one line)."""


class Top:
    """Watches one run until ``q``, Ctrl-C or its end; ``run()`` returns the exit code."""

    def __init__(self, client: StatusSource, run_id: str, run_alive: Callable[[], bool],
                 final_status: Callable[[], RunStatus | None] = lambda: None,
                 interval_s: float = 1.0, console: Console | None = None,
                 keys: KeyReader | None = None, give_up_s: float = 20.0) -> None:
        self.client = client
        self.run_id = run_id
        self.run_alive = run_alive
        self.final_status = final_status
        self.interval_s = interval_s
        self.console = console or Console()
        self.keys = keys or KeyReader()
        self.give_up_s = give_up_s
        self.history = HistoryBuffer()
        self.rates = Rates()
        self.status: RunStatus | None = None
        self.note = ""
        self._failing_since: float | None = None

    def poll(self) -> bool:
        """Ask the run server once; True when the run has ended (nothing more to watch).
        A failed poll of a live run is shown in the footer and retried; TopError after
        ``give_up_s`` of failures."""
        try:
            status = self.client.status()
            self.history.extend(self.client.history(since=self.history.since))
        except OSError as err:
            return self._failed(err)
        self._failing_since = None
        self.status = status
        self.rates.update(status.actors, time.monotonic())
        ended = status.state in FINAL_STATES
        self.note = "the run has ended" if ended else ""
        return ended

    def _failed(self, err: OSError) -> bool:
        if not self.run_alive():  # the driver is gone: the run has ended
            final = self.final_status()
            last = self.status or RunStatus(run_id=self.run_id, state="ended", elapsed_s=0.0)
            self.status = final or RunStatus.from_json(last.to_json() | {"state": "ended"})
            self.note = "the run has ended"
            return True
        now = time.monotonic()
        self._failing_since = self._failing_since or now
        if self.status is None or now - self._failing_since > self.give_up_s:
            raise TopError(str(err))
        self.note = f"poll failed, retrying: {err}"
        return False

    def view(self):
        assert self.status is not None
        width = max(10, min(120, self.console.width - 40))
        return render(self.status, self.history, self.rates, self.note, width)

    def run(self) -> int:
        self.poll()  # before the screen is taken: an unreachable run is one error line
        ended = self.status is not None and self.status.state in FINAL_STATES
        try:
            with self.keys, Live(self.view(), console=self.console, auto_refresh=False,
                                 redirect_stdout=False, redirect_stderr=False) as live:
                while not ended:
                    if QUIT_KEYS & set(self.keys.wait(self.interval_s)):
                        break
                    ended = self.poll()
                    live.update(self.view(), refresh=True)
        except KeyboardInterrupt:
            pass  # Ctrl-C: a normal way out; the terminal is restored by now
        if ended and self.status is not None:
            self.console.print(f"run {self.status.run_id} {self.status.state}: "
                               f"{self.status.games:,.0f} games, "
                               f"{self.status.learner_steps:,.0f} learner steps, "
                               f"weights v{self.status.weights_version:.0f}")
        return 0
