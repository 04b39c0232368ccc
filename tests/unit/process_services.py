"""Small services a ``ProcessWorker``'s child builds by name (``tests.unit.test_host_workers``,
``tests.unit.test_worker_relay``): this module imports nothing heavy (no torch), so a
child starts in well under a second."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from zeroforge.actors.worker_relay import RelayTransport
from zeroforge.shared.metrics import Recorder
from zeroforge.shared.samples import GameSamples


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


class Relaying(Counting):
    """Appends ``args["games"]`` tiny games through its host's relay (``relay``), one
    append each, then reads the pace and ends; its count is the games appended."""

    def __init__(self, args: Mapping[str, Any], index: int, relay: Connection) -> None:
        super().__init__(args, index)
        self.relay = RelayTransport(relay, "relayed")

    def run(self, stop: threading.Event) -> int:
        sink = self.relay.samples()
        for i in range(self.args["games"]):
            game_id = f"w{self.index}-g{i}"
            sink.append([GameSamples(
                game="tictactoe", game_version=1, obs=np.zeros((1, 3, 3, 3), np.uint8),
                policy=np.full((1, 9), 1 / 9, np.float32), to_play=np.zeros(1, np.int8),
                outcome=0, weights_version=0, run_id="relayed", worker_id=f"w{self.index}",
                game_id=game_id)])
            self.ids.append(game_id)
            self.recorder.inc("selfplay_games_total", 1, worker_kind="selfplay",
                              worker=str(self.index))
        if self.relay.pace().read() is None:
            raise RuntimeError("the host's pace did not come through")
        return len(self.ids)


def relaying(args: Mapping[str, Any], index: int, *, relay: Connection) -> Relaying:
    """A ``RelayedBuilder``: ``tests.unit.process_services:relaying``."""
    return Relaying(args, index, relay)
