"""Small services a ``ProcessWorker``'s child builds by name (``tests.unit.test_host_workers``):
this module imports nothing heavy (no torch), so a child starts in well under a second."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from zeroforge.shared.metrics import Recorder


class Counting:
    """Appends ``args["games"]`` games (ids ``g0`` ..) at once and ends; raises instead
    with ``args["fail"]``."""

    def __init__(self, args: Mapping[str, Any], index: int) -> None:
        self.args, self.index = args, index
        self.recorder = Recorder()
        self.ids: list[str] = []

    def run(self, stop: threading.Event) -> int:
        if self.args.get("fail"):
            raise RuntimeError(f"worker {self.index} broke:\n{self.args['fail']}")
        for i in range(self.args["games"]):
            self.ids.append(f"g{i}")
            self.recorder.inc("selfplay_games_total", 1, worker_kind="selfplay",
                              worker=str(self.index))
        return len(self.ids)

    def stats(self) -> dict:
        return self.recorder.snapshot()

    def game_ids(self) -> list[str]:
        return list(self.ids)


def counting(args: Mapping[str, Any], index: int) -> Counting:
    """The builder a test names: ``tests.unit.process_services:counting``."""
    return Counting(args, index)
