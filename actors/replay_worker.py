"""A simulating self-play worker (``selfplay.simulate_from``): the load simulator's
virtual worker, run by the real controller like any worker.

It replays recorded games (real self-play games, valid under the learner's intake checks)
under fresh game ids at ``selfplay.simulate_games_per_min``, appending each through the
run's sample sink, and polls the weights every ``WEIGHTS_POLL_S`` as a self-play worker
does between moves: the blob is fetched and verified (sha256), not decoded into a net, so
a simulating worker spends its CPU on the transport. Each new version's delivery time
(publish -> this worker has it) goes into ``weights_delivery_seconds``, and with
``selfplay.simulate_deliveries_dir`` into a file line too (the simulators' exact
quantiles).
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import threading
import time
from pathlib import Path

import msgpack
import numpy as np

from zeroforge.actors.config import SelfPlayConfig
from zeroforge.actors.selfplay_service import WEIGHTS_POLL_S, WorkerBasics
from zeroforge.shared.metrics import Recorder
from zeroforge.shared.run_context import RunContext
from zeroforge.shared.samples import GameSamples, SampleFormatError, decode
from zeroforge.shared.transport import (
    RefusedVersions,
    SampleSink,
    TransportError,
    WeightsIntegrityError,
    WeightSource,
    publish_age_s,
)

log = logging.getLogger(__name__)


def save_games(path: str | Path, games: list[bytes]) -> None:
    """Write encoded games (``shared.samples.encode``) for ``selfplay.simulate_from``."""
    Path(path).write_bytes(msgpack.packb({"zeroforge_recorded_games": 1, "games": games}))


def load_games(path: str | Path) -> list[GameSamples]:
    """The games of a ``save_games`` file; ValueError in one line naming the file and
    what is wrong with it."""
    where = f"selfplay.simulate_from {str(path)!r}"
    try:
        doc = msgpack.unpackb(Path(path).read_bytes())
    except OSError as err:
        raise ValueError(f"{where}: cannot read it ({err.strerror or err})") from None
    except Exception as err:  # msgpack raises several types for bad bytes
        raise ValueError(f"{where}: not a recorded-games file ({type(err).__name__})") from None
    if not isinstance(doc, dict) or doc.get("zeroforge_recorded_games") != 1:
        raise ValueError(f"{where}: not a recorded-games file (no zeroforge_recorded_games "
                         "1 header)")
    try:
        games = [decode(g) for g in doc.get("games", [])]
    except SampleFormatError as err:
        raise ValueError(f"{where}: a game does not decode ({err})") from None
    if not games:
        raise ValueError(f"{where}: holds no games")
    return games


class ReplayWorker(WorkerBasics):
    """One simulating worker (a ``Service``): appends a recorded game every
    ``60 / simulate_games_per_min`` s (the first at a random offset, so a host's workers
    do not append in step) and polls the weights between."""

    def __init__(self, ctx: RunContext, selfplay: SelfPlayConfig, sink: SampleSink,
                 weights: WeightSource, *, worker_id: str, seed: int,
                 games: list[GameSamples] | None = None) -> None:
        """``games``: the recorded games already loaded (a host shares one list among its
        workers); None loads ``selfplay.simulate_from``."""
        self.worker_id = worker_id
        self.run_id = ctx.run_id
        self.worker_label = worker_id[1:] if worker_id[:1] == "w" else worker_id
        self.sink = sink
        self.weights = weights
        self.games = games if games is not None else load_games(selfplay.simulate_from)
        self.interval_s = 60.0 / selfplay.simulate_games_per_min
        self.deliveries = (Path(selfplay.simulate_deliveries_dir) / f"{worker_id}.tsv"
                           if selfplay.simulate_deliveries_dir else None)
        self.rng = np.random.default_rng(seed)
        self._prefix = f"sim{seed:x}"
        self.recorder = Recorder()
        self.appended_ids: collections.deque[str] = collections.deque(maxlen=100_000)
        self.appended = 0
        self.errors = 0
        self.version = -1
        self._fetches_counted: dict[str, int] = {}
        self._stop = threading.Event()
        self._kind = {"worker_kind": "selfplay", "worker": self.worker_label}
        self.recorder.inc("selfplay_games_total", 0, **self._kind)
        self._count_writes()
        self._refused = RefusedVersions(f"worker {worker_id}", self.recorder, "selfplay")
        self.poll_weights()

    def poll_weights(self) -> None:
        """Take newer weights if any (fetched and verified); time their delivery."""
        try:
            got = self.weights.fetch_bytes(self.version)  # type: ignore[attr-defined]
        except WeightsIntegrityError as err:  # counted and logged once a version
            self._refused.note(err, self.version)
            return
        except TransportError as err:
            self.errors += 1
            log.warning("worker %s: cannot fetch weights: %s", self.worker_id, err)
            return
        if got is None:
            return
        self.version = got[0]
        age = publish_age_s(self.weights, self.version)
        if age is not None:
            self.recorder.observe("weights_delivery_seconds", age)
            if self.deliveries is not None:
                with self.deliveries.open("a") as out:
                    out.write(f"{time.time():.3f}\t{self.version}\t{age:.6f}\n")
        self.recorder.set("weights_version", float(self.version), component="selfplay")
        for source, total in self.weights.fetch_counts().items():
            counted = self._fetches_counted.get(source, 0)
            if total > counted:
                self.recorder.inc("weights_fetches_total", total - counted, source=source,
                                  **self._kind)
                self._fetches_counted[source] = total

    def run(self, stop: threading.Event | None = None) -> int:
        """Append games at the configured rate until ``stop``; returns games appended."""
        if stop is not None:
            self._stop = stop
        now = time.monotonic()
        next_game = now + self.rng.uniform(0, self.interval_s)
        next_poll = now + self.rng.uniform(0, WEIGHTS_POLL_S)
        while not self._stop.wait(max(min(next_game, next_poll) - time.monotonic(), 0)):
            now = time.monotonic()
            if now >= next_poll:
                next_poll = now + WEIGHTS_POLL_S
                self.poll_weights()
            if now >= next_game:
                next_game += self.interval_s
                self._append_one()
        self.weights.close()
        return self.appended

    def _append_one(self) -> None:
        template = self.games[self.appended % len(self.games)]
        game = dataclasses.replace(template, run_id=self.run_id, worker_id=self.worker_id,
                                   game_id=f"{self.worker_id}-{self._prefix}-{self.appended}")
        self._append([game])
        self.appended_ids.append(game.game_id)
        self.appended += 1
        self.recorder.inc("selfplay_games_total", 1, **self._kind)
        self.recorder.inc("selfplay_positions_total", game.num_positions, **self._kind)
