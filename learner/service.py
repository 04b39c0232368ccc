"""The learner service: a ``Learner`` fed from the run's sample stream, publishing weights.

A plain class (the distributed runtime wraps it in a Ray actor; tests drive it directly).
One turn (``run_once``) reads finished games from the stream, checks them, adds the good
ones to the replay window, trains as far as the samples-per-insert ratio allows, publishes
new weights every ``learner.publish_every_steps`` steps and checkpoints every
``learner.checkpoint_every_s`` seconds.

Pace
    The learner offers its pace (``shared.pace``) after taking a turn's games in, between
    training steps and at the turn's end (``PacePublisher`` decides when it goes out).
    Self-play workers wait while the ratio is below the target less the tolerance; the
    learner waits for data at the target, counted in ``learner_throttled_seconds_total``.

Exactly once
    The checkpoint (``RUN_DIR/checkpoint.pt``, one file) holds the learner's state *and*
    the stream cursor: the id of the last entry added to the replay window, plus the
    service's counters. Entries are acknowledged only after a checkpoint that contains
    them has been written ("checkpoint first, then ack", see ``shared.transport.stream``).
    After a crash the restored service calls ``skip_through(cursor)``: re-delivered
    entries at or below the cursor are already in the restored replay window and are
    dropped; those above it were lost with the crash and are added again. So every game
    lands in the replay window (and in ``games_received``) exactly once.

Weights versions
    Version 0 is the random initialisation: a fresh learner publishes it at construction,
    so inference servers and workers have weights before the first training step. Each
    later publish is ``Learner.publish()`` (version + 1). A version number is never reused
    for other weights: a learner that resumes, or that finds a newer version in Redis than
    its own (a crash after a publish but before the next checkpoint, or a run restarted
    without its checkpoint), publishes its current weights under the next free version.

Bad input
    Entries the stream cannot decode are rejected by the stream (mirrored here into
    ``rejected_entries_total{reason}``); decoded games of another game, board size or
    shape (``wrong_game``, ``wrong_size``) or not possible under the run's rules
    (``check_game``'s reasons) are acknowledged, counted and logged in one line.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import threading
import time
from pathlib import Path

import torch

from zeroforge.learner.checkpoint_health import CheckpointHealth
from zeroforge.learner.config import LearnerConfig
from zeroforge.learner.game_id_window import GameIdWindow
from zeroforge.learner.learner import CHECKPOINT_NAME, CheckpointError, Learner
from zeroforge.learner.lr_schedule import LrSchedule, RunClock
from zeroforge.learner.pace_publisher import PacePublisher
from zeroforge.learner.pending_acks import PendingAcks, ack
from zeroforge.learner.received_games import ReceivedGames
from zeroforge.learner.replica_group import ReplicaGroup
from zeroforge.learner.run_dir_fence import RunDirFence
from zeroforge.learner.sample_checks import REJECTION_REASONS
from zeroforge.learner.service_metrics import (
    count_restored_totals,
    new_recorder,
    record_training,
    set_gauges,
)
from zeroforge.learner.service_state import SERVICE_STATE_FORMAT, ServiceState
from zeroforge.learner.service_status import service_status
from zeroforge.learner.snapshots import WeightSnapshots
from zeroforge.learner.stream_drain import drain_stream
from zeroforge.learner.weights_out import PublishedWeights
from zeroforge.shared.nets import NetConfig
from zeroforge.shared.pace import Pace
from zeroforge.shared.run_context import RunContext
from zeroforge.shared.samples import EntryLimits, GameSamples
from zeroforge.shared.transport import (
    FencedError,
    StreamConfig,
    Transport,
    TransportError,
    advance_cursor,
    signer_for_run,
    take_epoch_patiently,
)

log = logging.getLogger(__name__)

__all__ = ["LearnerService", "REJECTION_REASONS", "SERVICE_STATE_FORMAT"]

RECENT_GAME_IDS = 10_000
"""The last game ids received that ``game_ids`` reports (and the checkpoint keeps, for
checkpoints that predate ``ReceivedGames``): ~1 MB at most."""
DRAIN_GRACE_S = 30.0
"""How long the final drain waits for an unreachable Redis (a supervised one is back in
about a second) before it stops with games left in the stream."""


class LearnerService:
    """The run's learner: stream in, weights out, checkpoints in ``run_dir``.

    ``resume=True`` restores ``run_dir/checkpoint.pt`` if it exists (a corrupt one raises
    ``CheckpointError``; a missing one starts fresh, as on a run's first start);
    ``resume=False`` starts fresh and overwrites the checkpoint at the first save.
    ``stream_config`` names the consumer group and consumer (a restarted learner must keep
    its consumer name to get its pending entries back) and the backlog limit;
    ``weights_keep`` is how many versions the weight store keeps; ``recent_game_ids`` how
    many of the last received game ids ``game_ids`` reports.

    Not thread-safe: ``run_once``, ``run``, ``checkpoint`` and ``stop`` belong to one
    thread (to stop ``run`` from elsewhere, set its ``stop`` event); ``stats`` and
    ``status`` only read and may be called from another.
    """

    def __init__(self, ctx: RunContext, net: NetConfig, learner: LearnerConfig,
                 transport: Transport, resume: bool = True, *,
                 stream_config: StreamConfig | None = None, weights_keep: int = 3,
                 recent_game_ids: int = RECENT_GAME_IDS,
                 group: ReplicaGroup | None = None, ends_run: bool = True) -> None:
        """``ends_run``: ``run`` returns at a run limit (steps, games, minutes). A
        distributed run's learner gets False: it keeps taking games (training no step
        past ``run.max_learner_steps``) until its stop, and the controller, which checks
        the same limits, stops the run in order, workers first, so that no game is
        appended after the learner's final drain."""
        self.ctx = ctx
        self.ends_run = ends_run
        self.config = learner
        self.run_id = ctx.run_id
        self.run_dir = Path(ctx.run_dir)
        self.checkpoint_path = self.run_dir / CHECKPOINT_NAME
        if ctx.torch_threads:
            # Process-wide; the service owns its process in a distributed run.
            torch.set_num_threads(ctx.torch_threads)
        self.learner = Learner(learner, ctx.game, net, ctx.size_mix())
        self.learner.schedule = LrSchedule(learner, ctx.max_learner_steps, ctx.minutes)
        log.info("%s", self.learner.schedule.describe())
        self._run_clock = RunClock()
        self.recorder = new_recorder()
        self.cursor: str | None = None
        """Id of the last stream entry added to the replay window."""
        self.games_received = 0
        self.positions_received = 0
        self.rejected: collections.Counter[str] = collections.Counter()
        """Entries rejected by reason: the stream's decode failures, ``wrong_game`` and the
        semantic checks' reasons (``zeroforge.learner.sample_checks.REASONS``)."""
        self.recent_game_ids = GameIdWindow(recent_game_ids)
        """Ids of the last received games, oldest first, each once (checkpointed)."""
        self.received = ReceivedGames()
        """Every game id received over the run: a copy is dropped however late it comes."""
        self.transport_errors = 0
        """Redis failures ``run`` rode out (and failed acks, retried at the next checkpoint)."""
        self.throttled_s = 0.0
        """Seconds this learner (and those it resumed from) waited at its target ratio."""
        self.undrained = False
        """The final drain gave up on an unreachable Redis: games may be left unread."""
        self.checkpoint_health = CheckpointHealth(self.checkpoint_path, self.recorder,
                                                  learner.checkpoint_every_s)
        self.last_losses: dict[str, float] = {}
        self.pending = PendingAcks()
        """Entries in the replay window not acked yet (acked after the checkpoint)."""
        self._stream_mirror: collections.Counter[str] = collections.Counter()
        self._stream_info: dict[str, int] = {}
        self._dirty = False
        self._closed = False

        self.snapshots = WeightSnapshots(self.run_dir, self.config.snapshot_every_s,
                                         self.recorder)
        # Fence off every earlier learner of the run, in Redis and in the run directory,
        # before restoring: an old one's last checkpoint is then either what this one
        # restores or refused, and none of its acks, publishes or pace goes through.
        self.transport = transport
        self.epoch = take_epoch_patiently(transport)  # waits out a Redis outage
        """This learner's epoch in the run's Redis (``shared.transport.fencing``)."""
        self.run_dir_fence = RunDirFence(self.run_dir)
        self.run_dir_fence.claim()
        self.fenced_by: int | None = None
        """The newer learner's epoch once this one has been fenced off (it then stops)."""
        # signed with the key in the run directory: readers refuse weights without it
        self.out = PublishedWeights(transport, self.run_id, self.learner, self.recorder,
                                    weights_keep,
                                    signer_for_run(ctx.run_dir, ctx.weights_public_key))
        self.weights = self.out.store
        """Self-play's weights channel (``PublishedWeights``)."""
        if resume and self.checkpoint_path.exists():
            self._restore()
        count_restored_totals(self.recorder, self.learner, self.games_received,
                              self.positions_received, self.throttled_s, self.rejected)

        # Entries are decoded within what the run's longest legal game needs, so a hostile
        # one costs no more memory than its bytes (shared.samples.EntryLimits).
        limits = EntryLimits.for_games(g.spec for g in self.learner.games.values())
        self.stream = transport.samples(dataclasses.replace(
            stream_config or StreamConfig(), entry_limits=limits))
        # Re-delivered entries at or below the cursor are already in the restored window.
        try:
            self.stream.skip_through(self.cursor, self.received.__contains__)
        except ValueError as err:  # e.g. a cursor of more stream shards than the run has
            transport.close()
            raise CheckpointError(f"{self.checkpoint_path}: {err}") from None
        self.pacer = PacePublisher(transport.pace(), on_error=self._count_transport_error)
        self.out.publish_initial()
        self.group = group
        """The data-parallel group this learner leads (``learner.replicas`` > 1): formed
        when ``run`` starts, told to stop by ``stop``."""
        self._last_checkpoint = time.monotonic()
        self.snapshots.start()

    # --- one turn --------------------------------------------------------------------------
    def run_once(self, max_read: int = 64, block_ms: int = 200) -> dict:
        """Read up to ``max_read`` games, train, maybe publish and checkpoint.

        Waits up to ``block_ms`` for new games only when there is nothing to train on, so
        an idle learner does not spin and a busy one never waits. Returns what happened. A
        Redis failure (read, publish) is raised at the turn's end: with Redis down the
        learner still trains on what it holds and checkpoints it (acks wait for Redis)."""
        self._check_open()
        self._run_clock.tick(self.learner, started=self.games_received > 0)
        trainable = self._trainable()
        wait = 0 if trainable else block_ms
        at_target = not trainable and self._at_target()
        started = time.monotonic()
        failure: TransportError | None = None
        try:
            entries = self.stream.read(max_read, wait)
        except TransportError as err:
            entries, failure = [], err
        if at_target:
            self._count_throttled(time.monotonic() - started)
        self._mirror_stream_rejections()
        added, wrong = self._take(entries)
        # The games just read lowered the ratio: say so before training on them, or
        # workers would only ever see the ratio after a turn's training had raised it.
        self.publish_pace()
        # the pace is published between steps too: a turn can take many seconds on a loaded
        # machine, workers should resume as soon as the ratio is back at the floor, and the
        # record must not expire meanwhile (``publish_pace`` calls Redis only when the
        # decision changes or ``PACE_PUBLISH_S`` has passed)
        metrics = self.learner.train_available(self._step_budget(), self.publish_pace)
        if metrics:
            self._dirty = True
            self.last_losses = metrics[-1]
            record_training(self.recorder, self.learner, metrics)
        published = None
        if self.learner.steps - self.out.steps_at_publish >= self.config.publish_every_steps:
            try:
                published = self._publish()
            except TransportError as err:  # tried again next turn
                failure = failure or err
        checkpointed = self._checkpoint_due() and self.checkpoint() is not None
        self.snapshots.maybe_write(
            self.learner.weights,
            self.learner.raw_weights if self.learner.separate_average else None)
        self._refresh_stream_info()
        self.publish_pace()
        if failure is not None:
            raise failure
        return {"read": len(entries), "added": added, "wrong_game": wrong,
                "steps": len(metrics), "published": published, "checkpointed": checkpointed}

    def _take(self, entries: list[tuple[str, GameSamples]]) -> tuple[int, int]:
        """Add the games that fit this run; ack-and-count the ones that do not."""
        entries = self._drop_duplicates(entries)
        added, wrong_ids = 0, []
        for entry_id, game in entries:
            reason, problem = self.learner.rejection(game)
            if problem:
                wrong_ids.append(entry_id)
                self.rejected[reason] += 1
                self.recorder.inc("rejected_entries_total", reason=reason)
                log.warning("rejected sample entry %s (game %s): %s", entry_id,
                            game.game_id or "?", problem)
                continue
            self.learner.add([game])
            self.cursor = advance_cursor(self.cursor, entry_id)
            self.pending.add(entry_id)
            self.games_received += 1
            self.positions_received += game.num_positions
            if game.game_id:
                self.recent_game_ids.remember(game.game_id)
                self.received.remember(game.game_id)
            self.recorder.inc("learner_games_received_total")
            self.recorder.inc("learner_positions_received_total", game.num_positions)
            self.recorder.observe("learner_policy_lag_versions",
                                  self.learner.version - game.weights_version)
            added += 1
        if added:
            self._dirty = True
        if wrong_ids:
            # Acked at once: such an entry can never become good, and left pending it
            # would come back after every restart. Nothing of it enters the checkpoint.
            self._ack(wrong_ids)
        return added, len(wrong_ids)

    def _drop_duplicates(self, entries: list[tuple[str, GameSamples]]
                         ) -> list[tuple[str, GameSamples]]:
        """``entries`` less the games already received (by game id, ``ReceivedGames``):
        those are acked at once, counted as ``duplicate`` and never trained on. Acking a
        copy early is safe: its original is either in the checkpoint or still pending and
        comes back after a crash."""
        fresh, copies = self.received.split(game.game_id for _, game in entries)
        dropped = [entries[i][0] for i in copies]
        if dropped:
            self.rejected["duplicate"] += len(dropped)
            self.recorder.inc("rejected_entries_total", len(dropped), reason="duplicate")
            log.warning("dropped %d sample entries whose game was already received "
                        "(a resent append): %s", len(dropped), ", ".join(dropped[:5]))
            self._ack(dropped)
        return [entries[i] for i in fresh]

    def _step_budget(self) -> int:
        budget = self.config.train_steps_per_round
        limit = self.ctx.max_learner_steps
        if limit:
            budget = min(budget, max(limit - self.learner.steps, 0))
        return budget

    def _at_step_limit(self) -> bool:
        limit = self.ctx.max_learner_steps
        return bool(limit and self.learner.steps >= limit)

    def _trainable(self) -> bool:
        """A batch may be trained now (window, samples-per-insert budget, step limit)."""
        return self.learner.can_train() and not self._at_step_limit()

    def _at_target(self) -> bool:
        """Training is held back by the samples-per-insert budget alone: the window is
        warm, the ratio is at its target (no batch fits), and no step limit is reached."""
        c = self.config
        return (c.samples_per_insert > 0 and len(self.learner.replay) >= max(c.min_replay, 1)
                and not self.learner.can_train() and not self._at_step_limit())

    def _count_throttled(self, seconds: float) -> None:
        self.throttled_s += seconds
        self.recorder.inc("learner_throttled_seconds_total", seconds)

    # --- pace ------------------------------------------------------------------------------
    def current_pace(self) -> Pace:
        """The pace self-play should follow now (``shared.pace``)."""
        return Pace(samples_per_insert=self.samples_per_insert(),
                    target=self.config.samples_per_insert,
                    tolerance=self.config.samples_per_insert_tolerance,
                    trainable=self._trainable())

    def publish_pace(self, force: bool = False) -> bool:
        """Offer ``current_pace`` to the run's pace signal (``PacePublisher``: a Redis call
        only when the pause decision changes or the record needs renewing); returns whether
        it was published. Never raises."""
        return self.pacer.offer(self.current_pace(), force)

    def _count_transport_error(self, err: TransportError | None = None) -> None:
        self.transport_errors += 1

    # --- weights ---------------------------------------------------------------------------
    def _publish(self) -> int:
        """Publish the current weights as the next version (``PublishedWeights``)."""
        version = self.out.publish()
        self._dirty = True
        return version

    # --- checkpoints -----------------------------------------------------------------------
    def _checkpoint_due(self) -> bool:
        if not self._dirty:
            return False
        if time.monotonic() - self._last_checkpoint >= self.config.checkpoint_every_s:
            return True
        if self.checkpoint_health.failures:
            # the disk is failing: try again on the timer only, not every turn (a failed
            # write of the whole replay window costs as much as a good one)
            return False
        # Unacked entries count against the workers' backlog limit: checkpoint (and so ack)
        # early rather than let the workers block until the timer fires.
        return self.pending.due_early(max(self.stream.config.max_backlog // 2, 1))

    def checkpoint(self) -> Path | None:
        """Save the learner with the stream cursor and counters, then ack what it holds.

        A write that fails (a full or read-only disk: an OSError) leaves the last good
        checkpoint as it was (``Learner.save`` writes a temp file and renames it), acks
        nothing (the games received since stay pending in the stream, so a successor or a
        ``--resume`` gets them again), is counted in
        ``learner_save_failures_total{file="checkpoint"}`` and said in one log line for a
        run of failures; training goes on, the next try comes after
        ``checkpoint_every_s``. Returns None then."""
        self._check_open()
        extra = ServiceState(
            stream_cursor=self.cursor, games_received=self.games_received,
            positions_received=self.positions_received,
            steps_at_publish=self.out.steps_at_publish, rejected=dict(self.rejected),
            recent_game_ids=list(self.recent_game_ids), throttled_s=self.throttled_s,
            trained_s=self.snapshots.lived(), received=self.received,
            run_id=self.run_id, learner_epoch=self.run_dir_fence.epoch).to_extra()
        try:
            path = self.learner.save(self.checkpoint_path, extra, self.run_dir_fence.commit)
        except OSError as err:
            self._last_checkpoint = time.monotonic()  # the next try after checkpoint_every_s
            self.checkpoint_health.failed(err, len(self.pending))
            return None
        self.checkpoint_health.written()
        self._last_checkpoint = time.monotonic()
        self._dirty = False
        # Only now: an entry acked before the checkpoint that holds it could be lost.
        if self.pending.ack_all(self.stream):
            self.transport_errors += 1
        if not self.pending:
            # Everything handed out is acked now, so anything still pending for us is a
            # delivery whose reply was lost (see SampleSource.recover_pending): fetch it.
            self.stream.recover_pending()
        return path

    def _ack(self, ids: list[str]) -> None:
        """Ack entries that never enter the window (rejected, duplicates) at once; on a
        Redis failure keep them for the next checkpoint (re-delivered ones at or below the
        cursor are skipped on restart, so a late ack is harmless)."""
        kept = ack(self.stream, ids)
        if kept:
            self.transport_errors += 1
            self.pending.ids[:0] = kept

    def _restore(self) -> None:
        extra = self.learner.restore(self.checkpoint_path)
        state = ServiceState.from_extra(extra, self.checkpoint_path,
                                        games_seen=self.learner.games_seen,
                                        positions_inserted=self.learner.replay.inserted)
        self.cursor = state.stream_cursor
        self.games_received = state.games_received
        self.positions_received = state.positions_received
        self.out.steps_at_publish = state.steps_at_publish
        self.throttled_s = state.throttled_s
        self.snapshots.lived_before = state.trained_s
        self.rejected.update(state.rejected)
        self.received = state.received
        for game_id in state.recent_game_ids:
            # older checkpoints kept copies and no ``received``: each id is taken once
            self.recent_game_ids.remember(game_id)
            self.received.remember(game_id)
        log.info("resumed from %s: step %d, %d games, weights v%d, stream cursor %s",
                 self.checkpoint_path, self.learner.steps, self.games_received,
                 self.learner.version, self.cursor)

    # --- loop and shutdown -----------------------------------------------------------------
    def run(self, stop: threading.Event | None = None, max_read: int = 64,
            block_ms: int = 200) -> dict:
        """``run_once`` until ``stop`` is set, ``run.max_learner_steps`` or ``run.minutes``
        (counted from its first game); then ``stop()`` (final publish, checkpoint, acks).
        Redis failures are logged in one line, counted and retried with backoff. Returns
        ``status()``."""
        if self.group is not None and self.learner.group is None:
            # Formed here, not at construction: the other replicas learn the group's
            # address from this (constructed) service, and the wait for them must not hold
            # up the host actor's creation.
            self.learner.join_group(self.group)
        # ``run.minutes`` count from the first game this learner takes: minutes its
        # workers spend waiting for the cluster to place them are not the run's
        start = float("inf")
        received = self.games_received
        backoff = 0.1
        try:
            while not self._finished(start, stop):
                try:
                    self.run_once(max_read, block_ms)
                    backoff = 0.1
                    if start == float("inf") and self.games_received > received:
                        start = time.monotonic()
                except TransportError as err:
                    self.transport_errors += 1
                    log.warning("learner turn failed, retrying in %.1f s: %s", backoff, err)
                    if stop is not None:
                        stop.wait(backoff)
                    else:
                        time.sleep(backoff)
                    backoff = min(backoff * 2, 5.0)
            self.drain()
            self.stop()
        except FencedError as err:
            self.fenced_by = err.newer
            log.error("learner (epoch %d) stops without writing anything more: %s",
                      err.epoch, err)
            self.close()
        return self.status()  # after the final publish and acks: what they could not do

    def drain(self, max_read: int = 256) -> int:
        """Take every game already in the stream into the replay window (no training), so
        the final checkpoint holds the games workers appended just before they stopped
        (``stream_drain``); sets ``undrained`` when the stream could not be read to its
        end within ``DRAIN_GRACE_S``."""
        def take(entries: list[tuple[str, GameSamples]]) -> int:
            self._mirror_stream_rejections()
            return self._take(entries)[0]

        taken, ended = drain_stream(self.stream, take, DRAIN_GRACE_S, max_read,
                                    self._count_transport_error)
        self._mirror_stream_rejections()
        if not ended:
            self.undrained = True
        return taken

    def _finished(self, start: float, stop: threading.Event | None) -> bool:
        return bool((stop is not None and stop.is_set())
                    or (self.ends_run and self.limit_reached(start)))

    def limit_reached(self, start: float) -> str | None:
        """Which of the run's limits (counted from monotonic time ``start``) is reached:
        ``steps``, ``games`` or ``minutes``; None while the run goes on. The one place the
        run's limits are checked, in the local run as in a distributed one."""
        c = self.ctx
        if self._at_step_limit():
            return "steps"
        if c.max_games and self.games_received >= c.max_games:
            return "games"
        if c.minutes and time.monotonic() - start >= c.minutes * 60:
            return "minutes"
        return None

    def stop(self) -> None:
        """Publish unpublished training, write the final checkpoint, ack, disconnect."""
        if self._closed:
            return
        self.pacer.clear()  # workers still running (ended at a limit) play on at once
        if self.learner.steps > self.out.steps_at_publish:
            try:
                self._publish()
            except TransportError as err:
                self.transport_errors += 1
                log.warning("final publish failed (the checkpoint keeps the weights): %s", err)
        self.checkpoint()
        if self.group is not None:
            self.group.stop()  # after the checkpoint: the replicas hold nothing to save
        self._refresh_stream_info()  # the final status shows the backlog after the acks
        self.close()

    def close(self) -> None:
        """Disconnect without a checkpoint (what a crash amounts to)."""
        if not self._closed:
            self._closed = True
            self.transport.close()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("LearnerService is stopped")

    # --- reporting -------------------------------------------------------------------------
    def game_ids(self) -> list[str]:
        """Ids of the last received games (``recent_game_ids``), oldest first."""
        return list(self.recent_game_ids)

    def _mirror_stream_rejections(self) -> None:
        for reason, n in self.stream.rejected.items():
            delta = n - self._stream_mirror[reason]
            if delta:
                self._stream_mirror[reason] = n
                self.rejected[reason] += delta
                self.recorder.inc("rejected_entries_total", delta, reason=reason)

    def _refresh_stream_info(self) -> None:
        try:
            info = self.stream.info()
        except TransportError as err:
            self.transport_errors += 1
            log.warning("stream info unavailable: %s", err)
            return
        self._stream_info = {"backlog": info.length, "pending": info.pending,
                             "undelivered": info.lag}

    def samples_per_insert(self) -> float:
        """Positions trained per position inserted so far."""
        return self.learner.samples_trained / max(self.learner.replay.inserted, 1)

    def stats(self) -> dict:
        """The metrics snapshot (``shared.metrics.Recorder.snapshot``)."""
        set_gauges(self.recorder, self.learner, self.samples_per_insert(),
                   self._stream_info.get("backlog", 0))
        return self.recorder.snapshot()

    def status(self) -> dict:
        """Human-level numbers, from memory (no Redis call): stream figures are as of the
        last turn (``service_status``)."""
        return service_status(self)
