"""A self-play worker as a long-running service: play, append finished games to the stream.

A plain class (``shared.service.Service``): the local run steps it with ``run_once``, the
Ray runtime runs ``run`` in an actor. Evaluations come from an injected evaluator (a
``RemoteEvaluator`` of inference servers) or, by default, from its own network kept fresh
from the weight source.

Pace: ``run`` (the distributed worker's loop) checks the learner's pace
(``shared.pace``, read through a ``PaceSignal`` at most every ``PACE_READ_S``) before each
move and, while the learner's samples-per-insert is below its floor, waits in short sleeps
instead of playing (its finished games are already appended), counting the time in
``selfplay_throttled_seconds_total``. ``run_once`` never looks: the local loop steps the
learner in the same thread, where a wait for it would never end.
"""

from __future__ import annotations

import collections
import logging
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from zeroforge.actors.config import SelfPlayConfig
from zeroforge.actors.cpu_share import CpuShare
from zeroforge.actors.game_records import RecordWriter, selfplay_writer
from zeroforge.actors.selfplay import SelfPlayWorker
from zeroforge.actors.selfplay_groups import InFlightWorker
from zeroforge.actors.selfplay_sizes import MixedSizeWorker
from zeroforge.shared.games import Game, make_game
from zeroforge.shared.metrics import Recorder
from zeroforge.shared.nets import (
    ExportedEvaluator,
    InferenceConfig,
    NetConfig,
    TorchEvaluator,
    build_net,
    make_evaluator,
)
from zeroforge.shared.pace import PACE_READ_S, selfplay_should_pause
from zeroforge.shared.run_context import RunContext
from zeroforge.shared.search import (
    CachedEvaluator,
    Evaluator,
    SearchConfig,
    VersionedEvaluator,
    cache_counts,
)
from zeroforge.shared.transport import (
    PaceSignal,
    RefusedVersions,
    SampleSink,
    TransportError,
    WeightsIntegrityError,
    WeightSource,
    WriterCounts,
    publish_age_s,
)

log = logging.getLogger(__name__)

WEIGHTS_POLL_S = 2.0
"""Seconds between looks for newer weights (own network only)."""
STOP_APPEND_GRACE_S = 30.0
"""Seconds a stopped worker keeps retrying the append of its finished games (long enough
for a supervised Redis to restart) before it gives them up, loudly."""


class WorkerBasics:
    """What every self-play worker service shares (``SelfPlayService``, the simulating
    ``ReplayWorker``): its stop, its metrics snapshot, the ids of the games it appended,
    its error count and its appends (counted), over the attributes its ``__init__`` sets
    (it calls ``_count_writes`` there once the sink is set)."""

    recorder: Recorder
    appended_ids: collections.deque[str]
    errors: int
    sink: SampleSink
    worker_id: str
    worker_label: str
    _stop: threading.Event
    _writes_counted: WriterCounts | None = None

    def _count_error(self) -> None:
        self.errors += 1

    def _append(self, games: list) -> None:
        """Append ``games`` (``append_held``: held and retried while the transport is
        away), then count what the appends cost this worker (``_count_writes``)."""
        try:
            append_held(self.sink, games, self._stop, self.worker_id, self._count_error)
        finally:
            self._count_writes()

    def _count_writes(self) -> None:
        """Follow the sink's counts of this worker's appends (its thread's) into
        ``selfplay_backpressure_seconds_total``, ``selfplay_games_resent_total`` and
        ``selfplay_games_rerouted_total``; the first call puts the series in at 0, so a
        dashboard shows "never waited"."""
        now = self.sink.writer_counts()
        before = self._writes_counted or WriterCounts()
        kind = {"worker_kind": "selfplay", "worker": self.worker_label}
        for metric, delta in (
                ("selfplay_backpressure_seconds_total",
                 now.backpressure_wait_s - before.backpressure_wait_s),
                ("selfplay_games_resent_total", now.resent - before.resent),
                ("selfplay_games_rerouted_total", now.rerouted - before.rerouted)):
            if delta > 0 or self._writes_counted is None:
                self.recorder.inc(metric, max(delta, 0), **kind)
        self._writes_counted = now

    def stop(self) -> None:
        self._stop.set()

    def stats(self) -> dict:
        return self.recorder.snapshot()

    def game_ids(self) -> list[str]:
        return list(self.appended_ids)


class SelfPlayService(WorkerBasics):
    """Plays ``selfplay.games_in_parallel`` games at a time, appending finished games to
    ``sink``. With ``evaluator=None`` it runs its own network on the CPU, loading newer
    weights from ``weights`` between moves. With a ``pace`` signal, ``run`` waits while the
    learner is behind (see the module docstring); without one it never waits."""

    def __init__(self, ctx: RunContext, net: NetConfig, search: SearchConfig,
                 selfplay: SelfPlayConfig, sink: SampleSink, weights: WeightSource | None,
                 *, worker_id: str, seed: int,
                 evaluator: VersionedEvaluator | None = None,
                 pace: PaceSignal | None = None) -> None:
        if ctx.torch_threads:
            torch.set_num_threads(ctx.torch_threads)
        self.worker_id = worker_id
        # The metrics' ``worker`` label: the slot's index ("w3" -> "3").
        self.worker_label = worker_id[1:] if re.fullmatch(r"w\d+", worker_id) else worker_id
        self.game = make_game(ctx.game)
        self.sink = sink
        self.weights = weights
        self._own_evaluator: TorchEvaluator | ExportedEvaluator | None = None
        """The own network's evaluator (None with inference servers): weights load into it."""
        if evaluator is None:
            if weights is None:
                raise ValueError("SelfPlayService: its own network needs a weight source")
            evaluator = self._own_evaluator = make_evaluator(
                build_net(net, self.game.spec), selfplay.backend,
                config=InferenceConfig(device="cpu", precision=selfplay.precision))
        self.evaluator: VersionedEvaluator = evaluator
        # The cache sits in front of either evaluator (own network or inference servers);
        # self.evaluator stays the bare one, which weights are loaded into. One cache per
        # board size: a table holds one game's positions.
        self.caches: list[CachedEvaluator] = []
        mix = ctx.size_mix()

        # Leaf batches in flight only where a round trip can be hidden: behind servers.
        groups = selfplay.batches_in_flight if self._own_evaluator is None else 1

        def searched_by() -> Evaluator:
            """The evaluator one search uses: a cache of its own in front (a cache is
            not shared between threads), the entries split among the groups."""
            if not selfplay.eval_cache_entries:
                return evaluator
            entries = max(1, selfplay.eval_cache_entries // groups)
            self.caches.append(CachedEvaluator(evaluator, entries))
            return self.caches[-1]

        def worker_for(game: Game, index: int) -> SelfPlayWorker | InFlightWorker:
            # the first (or only) size plays from the worker's own seed
            seed_of_size = seed if not index else seed_for(seed, index)
            if groups == 1:
                return SelfPlayWorker(game, searched_by(), search, selfplay,
                                      seed=seed_of_size, worker_id=worker_id,
                                      run_id=ctx.run_id)
            return InFlightWorker(selfplay.games_in_parallel, groups,
                                  lambda slots, ids: SelfPlayWorker(
                                      game, searched_by(), search, selfplay,
                                      seed=seed_of_size, worker_id=worker_id,
                                      run_id=ctx.run_id, slots=slots, game_ids=ids))

        self.worker: SelfPlayWorker | InFlightWorker | MixedSizeWorker
        if mix is None:
            self.worker = worker_for(self.game, 0)
        else:
            self.worker = MixedSizeWorker([make_game(s) for s in mix.specs], mix.shares,
                                          worker_for)
        self.cache = self.caches[0] if self.caches else None
        """The (first size's) evaluation cache, or None."""
        # A sample of games as SGF in the run dir, once it exists (a run writes its config
        # there at its start, so a test's default run_dir is not filled by accident).
        self.records: dict[str, RecordWriter] = {}
        """A writer per board size's game (spec string)."""
        self._run_dir = ctx.run_dir
        self.recorder = Recorder()
        self._stop = threading.Event()
        self.appended_ids: collections.deque[str] = collections.deque(maxlen=100_000)
        """Ids of the games this worker appended, newest last (for exactly-once checks)."""
        self.appended = 0
        self._last_poll = -WEIGHTS_POLL_S
        self.errors = 0
        self.pace = pace
        self.cpu_share = selfplay.cpu_share
        self.throttled_s = 0.0
        """Seconds ``run`` waited for the learner."""
        self.pace_errors = 0
        """Pace reads that failed (Redis away): each counted here and in ``errors``."""
        self._pace_read_at: float | None = None
        self._pace_pauses = False
        self._pace_failing = False
        self._fetches_counted: dict[str, int] = {}
        # The series exists from the start (at 0), so a dashboard shows "never paused".
        self.recorder.inc("selfplay_throttled_seconds_total", 0, worker_kind="selfplay",
                          worker=self.worker_label)
        self._count_writes()
        self._refused = RefusedVersions(f"worker {self.worker_id}", self.recorder, "selfplay")
        """Weights versions refused (unsigned, another key's, corrupt): logged once each."""
        self.refresh_weights()

    @property
    def own_network(self) -> bool:
        """The worker runs its own net (no inference servers)."""
        return self._own_evaluator is not None

    def refresh_weights(self) -> None:
        """Own network: take newer published weights (between moves)."""
        own = self._own_evaluator
        if own is None or self.weights is None:
            return
        self._last_poll = time.monotonic()
        try:
            newer = self.weights.fetch(newer_than=own.weights_version)
        except WeightsIntegrityError as err:  # keep playing on the weights held
            self._refused.note(err, own.weights_version)
            return
        except TransportError as err:
            self.errors += 1
            log.warning("worker %s: cannot fetch weights: %s", self.worker_id, err)
            return
        if newer is not None:
            version, state_dict = newer
            own.load_state_dict(state_dict, version)
            self._count_fetches(self.weights)
            self._time_delivery(version)

    def _time_delivery(self, version: int) -> None:
        """``weights_delivery_seconds`` of a version just taken (one small read)."""
        age = publish_age_s(self.weights, version)
        if age is not None:
            self.recorder.observe("weights_delivery_seconds", age)

    def _count_fetches(self, weights: WeightSource) -> None:
        """``weights_fetches_total`` follows the weight source's own counts."""
        for source, total in weights.fetch_counts().items():
            counted = self._fetches_counted.get(source, 0)
            if total > counted:
                self.recorder.inc("weights_fetches_total", total - counted,
                                  worker_kind="selfplay", worker=self.worker_label,
                                  source=source)
                self._fetches_counted[source] = total

    def run_once(self, moves: int = 1) -> int:
        """Play ``moves`` moves of every game, append the games that finished; returns how
        many were appended."""
        kind = {"worker_kind": "selfplay", "worker": self.worker_label}
        stats = self.worker.stats
        before = (stats.positions, stats.simulations, stats.policy_targets)
        cached = cache_counts(self.caches)
        games = self.worker.play_moves(moves)
        self.recorder.inc("selfplay_positions_total", stats.positions - before[0], **kind)
        self.recorder.inc("selfplay_simulations_total", stats.simulations - before[1], **kind)
        self.recorder.inc("selfplay_policy_targets_total", stats.policy_targets - before[2],
                          **kind)
        after = cache_counts(self.caches)
        if cached is not None and after is not None:
            lookups, hits, evaluated = (a - b for a, b in zip(after, cached, strict=True))
            self.recorder.inc("eval_cache_lookups_total", lookups, source="worker")
            self.recorder.inc("eval_cache_hits_total", hits, source="worker")
            if self.own_network:
                self.recorder.inc("nn_evaluations_total", evaluated, source="local")
        elif self.own_network:
            # one network evaluation per simulation (terminal leaves included: close enough)
            self.recorder.inc("nn_evaluations_total", stats.simulations - before[1],
                              source="local")
        self._write_records()
        if games:
            self._append(games)
            self.appended_ids.extend(g.game_id for g in games)
            self.appended += len(games)
            self.recorder.inc("selfplay_games_total", len(games), **kind)
        if time.monotonic() - self._last_poll >= WEIGHTS_POLL_S:
            self.refresh_weights()
        self.recorder.set("weights_version", float(self.evaluator.weights_version),
                          component="selfplay")
        return len(games)

    def run(self, stop: threading.Event | None = None, max_games: int = 0) -> int:
        """Play until ``stop`` is set / ``stop()`` is called (or ``max_games`` games);
        returns games appended. Finished games are always appended before returning, so
        stopping loses none."""
        if stop is not None:
            self._stop = stop
        start = self.appended
        share = CpuShare(self.cpu_share) if self.cpu_share else None
        while not self._stop.is_set() and not (max_games and self.appended - start >= max_games):
            self.wait_for_learner()
            if self._stop.is_set():
                break
            self.run_once(1)
            if share is not None:
                # counted as it goes, like the pace's waits
                self.recorder.inc("selfplay_cpu_share_seconds_total", share.hold(self._stop),
                                  worker_kind="selfplay", worker=self.worker_label)
        if self.weights is not None:
            self.weights.close()  # the node's last worker removes the node's weight cache
        return self.appended - start

    def wait_for_learner(self) -> float:
        """While the learner's pace says so, wait (in waits of at most ``PACE_READ_S``, woken
        by a stop) and count the time; returns the seconds waited. Called between moves by
        ``run`` only, when this worker holds no finished game."""
        waited = 0.0
        while not self._stop.is_set() and self._learner_behind():
            began = time.monotonic()
            next_read = (self._pace_read_at or began) + PACE_READ_S
            self._stop.wait(max(next_read - began, 0.01))
            slept = time.monotonic() - began
            waited += slept
            self.throttled_s += slept
            # Counted as it goes, so a long pause shows in the metrics while it lasts.
            self.recorder.inc("selfplay_throttled_seconds_total", slept,
                              worker_kind="selfplay", worker=self.worker_label)
        return waited

    def _learner_behind(self) -> bool:
        """The pause decision of the learner's pace, read at most every ``PACE_READ_S``
        (cached in between); False without a signal, without a pace, or when the read
        fails (logged once per run of failures, counted)."""
        if self.pace is None:
            return False
        now = time.monotonic()
        if self._pace_read_at is not None and now - self._pace_read_at < PACE_READ_S:
            return self._pace_pauses
        self._pace_read_at = now
        try:
            pace = self.pace.read()
        except TransportError as err:
            self.errors += 1
            self.pace_errors += 1
            if not self._pace_failing:
                log.warning("worker %s: cannot read the learner's pace, playing on "
                            "unthrottled: %s", self.worker_id, err)
            self._pace_failing = True
            self._pace_pauses = False
            return False
        self._pace_failing = False
        self._pace_pauses = selfplay_should_pause(pace)
        return self._pace_pauses

    def _write_records(self) -> None:
        """The sampled games as SGF (``actors.game_records``; errors are logged, counted),
        each with its own board size's writer."""
        parts = (self.worker.parts.values() if isinstance(self.worker, MixedSizeWorker)
                 else [self.worker])
        for part in parts:
            sampled, part.records = part.records, []
            if not sampled:
                continue
            spec = part.game.spec.spec_string
            if spec not in self.records:
                if not (self._run_dir and Path(self._run_dir).is_dir()):
                    continue
                self.records[spec] = selfplay_writer(self._run_dir, part.game)
            player = f"zeroforge v{int(getattr(self.evaluator, 'weights_version', 0))}"
            for game_id, moves in sampled:
                self.records[spec].write(game_id, moves, black=player, white=player,
                                         comment=f"self-play game {game_id} of run "
                                                 f"{self.worker.run_id}")


def seed_for(base: int, worker_index: int, salt: int = 0) -> int:
    """Distinct, reproducible seeds per worker slot (a replacement, or a resumed local run
    via ``salt``, gets a fresh one)."""
    return int(np.random.SeedSequence([base, worker_index, salt]).generate_state(1)[0])


def append_held(sink: SampleSink, games: list, stop: threading.Event, worker_id: str,
                failed: Callable[[], None] = lambda: None) -> None:
    """Append, retrying while the transport is away: finished games are never dropped;
    ``failed`` is called at each failed try (the worker's error count).

    The worker holds ``games`` until one append of all of them succeeds, and resends
    the whole batch after a failure. A batch whose reply was lost (the connection dropped
    after Redis ran the append script, which adds the batch whole or not at all) is sent
    again in full, so those games are in the stream twice; the learner drops the second
    copy by game id.
    Running, it retries for as long as it takes (a restarted Redis comes back); once
    ``stop`` is set, for ``STOP_APPEND_GRACE_S`` more seconds, then raises a
    ``TransportError`` that names the games lost.
    """
    delay = 0.5
    stopping_since: float | None = None
    while True:
        try:
            sink.append(games)
            return
        except TransportError as err:
            failed()
            if stop.is_set():
                now = time.monotonic()
                stopping_since = stopping_since if stopping_since is not None else now
                if now - stopping_since >= STOP_APPEND_GRACE_S:
                    raise TransportError(
                        f"worker {worker_id}: {len(games)} finished games lost: no "
                        f"append succeeded within {STOP_APPEND_GRACE_S:g} s of the stop "
                        f"({err})") from None
            log.warning("worker %s: cannot append %d games (%s); retrying in %.1fs",
                        worker_id, len(games), err, delay)
            # A stop wakes the wait early; after that, sleep so the retries stay spaced.
            if stop.wait(delay):
                time.sleep(delay)
            delay = min(delay * 2, 2.0 if stop.is_set() else 8.0)
