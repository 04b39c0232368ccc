"""A self-play worker as a long-running service: play, append finished games to the stream.

Plain class; the controller runs it in a Ray actor (``run`` in one thread, ``stats`` and
``stop`` from another). Evaluations come from its own network (``local``) kept fresh from
the weight store, or from inference servers (``server``) through ``RemoteEvaluator``.
"""

from __future__ import annotations

import collections
import logging
import threading
import time

import numpy as np
import torch

from actors.selfplay import SelfPlayWorker
from deploy.config import TrainConfig
from shared.games import make_game
from shared.metrics import Recorder
from shared.nets import build_net
from shared.torch_evaluator import TorchEvaluator
from shared.transport import SampleStream, WeightStore, connect
from shared.transport.connection import TransportError

log = logging.getLogger(__name__)


class SelfPlayService:
    """Plays ``selfplay.games_in_parallel`` games at a time until stopped."""

    def __init__(self, config: TrainConfig, redis_url: str, run_id: str, worker_id: str,
                 seed: int, inference: str = "local", servers: list | None = None) -> None:
        if config.run.torch_threads:
            torch.set_num_threads(config.run.torch_threads)
        self.config = config
        self.worker_id = worker_id
        self.game = make_game(config.game)
        redis = connect(redis_url)
        self.stream = SampleStream(redis, run_id)
        self.weights = WeightStore(redis, run_id)
        self.inference = inference
        if inference == "server":
            from actors.inference import RemoteEvaluator

            self.evaluator = RemoteEvaluator(servers or [])
        elif inference == "local":
            self.evaluator = TorchEvaluator(build_net(config.net, self.game.spec), device="cpu")
            self._refresh_weights()
        else:
            raise ValueError(f"inference must be 'local' or 'server', not {inference!r}")
        self.worker = SelfPlayWorker(self.game, self.evaluator, config.search, config.selfplay,
                                     seed=seed, worker_id=worker_id, run_id=run_id)
        self.recorder = Recorder()
        self._stop = threading.Event()
        self.appended_ids: collections.deque[str] = collections.deque(maxlen=100_000)
        """Ids of the games this worker appended, newest last (for exactly-once checks)."""
        self._last_poll = 0.0
        self.errors = 0

    def set_servers(self, servers: list) -> None:
        """New inference-server handles after scaling or a replacement."""
        if self.inference == "server":
            self.evaluator.set_servers(servers)

    def _refresh_weights(self) -> None:
        """Local inference: take newer published weights between moves."""
        if self.inference != "local":
            return
        self._last_poll = time.monotonic()
        try:
            newer = self.weights.fetch(newer_than=self.evaluator.weights_version)
        except TransportError as err:
            self.errors += 1
            log.warning("worker %s: cannot fetch weights: %s", self.worker_id, err)
            return
        if newer is not None:
            version, state_dict = newer
            self.evaluator.load_state_dict(state_dict, version)

    def run(self, stop: threading.Event | None = None, max_games: int = 0) -> int:
        """Play until ``stop`` is set / ``stop()`` is called (or ``max_games`` games);
        returns games appended. Finished games are always appended before returning, so
        stopping loses none."""
        if stop is not None:
            self._stop = stop
        appended = 0
        kind = {"worker_kind": "selfplay"}
        stats = self.worker.stats
        while not self._stop.is_set() and not (max_games and appended >= max_games):
            before = (stats.positions, stats.simulations)
            games = self.worker.play_moves(1)
            self.recorder.inc("selfplay_positions_total", stats.positions - before[0], **kind)
            self.recorder.inc("selfplay_simulations_total", stats.simulations - before[1], **kind)
            if self.inference == "local":
                # one network evaluation per simulation (terminal leaves included: close enough)
                self.recorder.inc("nn_evaluations_total", stats.simulations - before[1],
                                  source="local")
            if games:
                self._append(games)
                self.appended_ids.extend(g.game_id for g in games)
                appended += len(games)
                self.recorder.inc("selfplay_games_total", len(games), **kind)
            if time.monotonic() - self._last_poll >= 2.0:
                self._refresh_weights()
            self.recorder.set("weights_version", float(self.evaluator.weights_version),
                              component="selfplay")
        return appended

    def _append(self, games: list) -> None:
        """Append, retrying while Redis is away: finished games are never dropped."""
        delay = 0.5
        while True:
            try:
                self.stream.append(games)
                return
            except TransportError as err:
                self.errors += 1
                log.warning("worker %s: cannot append %d games (%s); retrying in %.1fs",
                            self.worker_id, len(games), err, delay)
                if self._stop.wait(delay) and delay > 4:
                    raise
                delay = min(delay * 2, 8.0)

    def stop(self) -> None:
        self._stop.set()

    def stats(self) -> dict:
        return self.recorder.snapshot()

    def ping(self) -> str:
        return self.worker_id


def seed_for(base: int, worker_index: int) -> int:
    """Distinct, reproducible seeds per worker slot (a replacement gets a fresh one)."""
    return int(np.random.SeedSequence([base, worker_index]).generate_state(1)[0])
