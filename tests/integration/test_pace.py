"""Rate limiting on both sides against a real redis-server: a learner whose samples per
insert is low makes a running self-play worker pause before its next move, and the worker
resumes once the learner has trained enough; the learner counts its own waits at target;
a dead learner's pace expires; a pace read that fails never stops self-play."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from tests.integration.conftest import learner_service, renamed, tiny_net_games
from zeroforge.actors.config import SelfPlayConfig
from zeroforge.actors.selfplay_service import SelfPlayService
from zeroforge.deploy.config import RunConfig, TrainConfig
from zeroforge.deploy.runtime.builder import build_selfplay
from zeroforge.learner.config import LearnerConfig
from zeroforge.learner.service import LearnerService
from zeroforge.shared.nets import NetConfig
from zeroforge.shared.pace import Pace, selfplay_should_pause
from zeroforge.shared.samples import GameSamples
from zeroforge.shared.search import SearchConfig
from zeroforge.shared.transport import PaceSignal, RedisServer, SampleStream, open_transport

GAME = "tictactoe"


def train_config(**learner: object) -> TrainConfig:
    """Tic-tac-toe, tiny net; the learner trains after 32 positions at 4 samples per insert
    (workers pause below 4 x (1 - 0.25) = 3), one step a turn so a test can hold its
    ratio low."""
    kw: dict = dict(batch_size=16, min_replay=32, samples_per_insert=4.0,
                    samples_per_insert_tolerance=0.25, lr=0.01, optimizer="adamw",
                    replay_capacity=5000, device="cpu", publish_every_steps=5,
                    checkpoint_every_s=3600.0, train_steps_per_round=1)
    kw.update(learner)
    return TrainConfig(game=GAME, net=NetConfig.preset("tiny"),
                       search=SearchConfig(num_simulations=2),
                       selfplay=SelfPlayConfig(games_in_parallel=4),
                       learner=LearnerConfig(**kw), run=RunConfig(torch_threads=1))


@pytest.fixture(scope="module")
def played() -> list[GameSamples]:
    return tiny_net_games(GAME, 20, simulations=2, parallel=10, worker_id="x")


def wait_until(condition: Callable[[], bool], timeout_s: float = 60.0,
               what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s:g} s")
        time.sleep(0.02)


@pytest.fixture
def running() -> Iterator[Callable[[SelfPlayService], threading.Thread]]:
    """Starts a worker's ``run`` in a thread; stops and joins it after the test."""
    started: list[tuple[SelfPlayService, threading.Thread]] = []
    failures: list[BaseException] = []

    def start(worker: SelfPlayService) -> threading.Thread:
        def target() -> None:
            try:
                worker.run()
            except BaseException as err:  # reported by the fixture, not lost in a thread
                failures.append(err)

        thread = threading.Thread(target=target, daemon=True, name="selfplay-run")
        started.append((worker, thread))
        thread.start()
        return thread

    yield start
    for worker, thread in started:
        worker.stop()
        thread.join(timeout=60)
        assert not thread.is_alive(), "the worker did not stop"
    assert not failures, f"the worker's run raised {failures[0]!r}"


def throttled_metric(worker: SelfPlayService) -> float:
    rows = worker.stats()["values"]["selfplay_throttled_seconds_total"]
    return sum(v for labels, v in rows)


def test_a_learner_behind_pauses_a_running_worker_until_it_caught_up(
        redis_server, redis_client, run_id, tmp_path, played, running):
    config = train_config()
    url = redis_server.url
    stream = SampleStream(redis_client, run_id)
    stream.append(renamed(played, "pace"))
    learner: LearnerService = learner_service(config, url, run_id, str(tmp_path))
    turn = learner.run_once(max_read=64, block_ms=0)
    # 20 games in, one step of 16 trained: far below the floor of 3 samples per insert.
    assert turn["added"] == 20 and turn["steps"] == 1
    assert learner.samples_per_insert() < 3.0
    observer = open_transport(url, run_id).pace()
    assert selfplay_should_pause(observer.read())
    assert learner.status()["selfplay_paused"] is True

    ctx = dataclasses.replace(config.context(run_id, url), run_dir=str(tmp_path))
    worker = build_selfplay(config, ctx, open_transport(url, run_id), 0)
    backlog = stream.info().length
    running(worker)
    wait_until(lambda: worker.throttled_s >= 1.0, what="worker paused for a second")
    # Paused before its first move: nothing played, nothing appended.
    assert worker.worker.stats.positions == 0 and worker.appended == 0
    assert stream.info().length == backlog
    assert throttled_metric(worker) > 0

    # The learner trains (one step a turn; nothing new arrives) up to the floor, and
    # publishes the new pace at once: the worker plays and appends again.
    for _ in range(200):
        if learner.samples_per_insert() >= 3.0:
            break
        assert worker.appended == 0, "the worker played before the learner caught up"
        learner.run_once(max_read=64, block_ms=0)
    assert learner.samples_per_insert() >= 3.0
    assert not selfplay_should_pause(observer.read())
    wait_until(lambda: worker.appended > 0, what="worker resumed")
    # It stays resumed: the learner reads nothing more, so its ratio stays above the floor.
    paused_for, appended = worker.throttled_s, worker.appended
    wait_until(lambda: worker.appended >= appended + 8, what="more games")
    assert worker.throttled_s == paused_for

    learner.stop()
    assert observer.read() is None  # a stopped learner clears its pace


class RecordedPace:
    """The run's real Redis pace signal, with every pace the learner publishes kept."""

    def __init__(self, signal: PaceSignal) -> None:
        self.signal, self.published = signal, []
        self.ttl_s, self.malformed = signal.ttl_s, 0

    def publish(self, pace: Pace) -> None:
        self.published.append(pace)
        self.signal.publish(pace)

    def read(self) -> Pace | None:
        return self.signal.read()

    def clear(self) -> None:
        self.signal.clear()


def test_within_one_turn_the_dip_and_the_recovery_are_both_published(
        redis_server, redis_client, run_id, tmp_path, played):
    """One turn reads 20 games (the ratio drops to 0) and trains until the budget is used
    up (ratio 4): workers must be told to wait as soon as the games are in, and to go on
    as soon as the floor (3) is passed, not only see the turn's end."""
    config = train_config(train_steps_per_round=100)
    url = redis_server.url
    SampleStream(redis_client, run_id).append(renamed(played, "turn"))
    learner = learner_service(config, url, run_id, str(tmp_path))
    recorded = RecordedPace(learner.pacer.signal)
    learner.pacer.signal = recorded
    turn = learner.run_once(max_read=64, block_ms=0)
    assert turn["added"] == 20 and turn["steps"] > 1
    decisions = [selfplay_should_pause(p) for p in recorded.published]
    assert decisions[0] is True  # published right after the read, before any step
    assert recorded.published[0].samples_per_insert == 0.0
    assert decisions[-1] is False and learner.samples_per_insert() >= 3.0
    first_resume = decisions.index(False)
    assert all(decisions[:first_resume])
    # The resume went out at the step that crossed the floor, not at the end of the turn.
    assert recorded.published[first_resume].samples_per_insert < 3.0 + 16 / 140
    learner.close()


def test_the_learner_counts_its_waits_at_target_only(redis_server, redis_client, run_id,
                                                     tmp_path, played):
    config = train_config(samples_per_insert=1.0, train_steps_per_round=50)
    url = redis_server.url
    learner = learner_service(config, url, run_id, str(tmp_path))
    learner.run_once(block_ms=150)  # an empty window: waiting for data is not throttling
    assert learner.throttled_s == 0.0
    SampleStream(redis_client, run_id).append(renamed(played, "lt"))
    learner.run_once(block_ms=0)
    assert learner.learner.steps > 0 and not learner.learner.can_train()  # at target
    learner.run_once(block_ms=150)  # nothing to read, nothing it may train: throttled
    assert learner.throttled_s > 0.0
    values = learner.stats()["values"]
    assert values["learner_throttled_seconds_total"] == [[[], pytest.approx(
        learner.throttled_s)]]
    assert values["learner_samples_per_insert_floor"] == [[[], 0.75]]
    status = learner.status()
    assert status["throttled_s"] == round(learner.throttled_s, 1)
    assert status["samples_per_insert_tolerance"] == 0.25
    assert status["samples_per_insert_target"] == 1.0
    # At target the learner cannot train, so its pace never asks workers to wait.
    assert not learner.current_pace().trainable
    assert not selfplay_should_pause(learner.current_pace())
    assert not selfplay_should_pause(open_transport(url, run_id).pace().read())
    # The total survives a restart (checkpointed like the other counters).
    waited = learner.throttled_s
    learner.stop()
    again = learner_service(config, url, run_id, str(tmp_path))
    assert again.throttled_s == pytest.approx(waited)
    assert again.stats()["values"]["learner_throttled_seconds_total"] == [[[], pytest.approx(
        waited)]]
    again.close()


def test_without_a_limit_the_learner_never_pauses_workers(redis_server, redis_client, run_id,
                                                          tmp_path, played):
    config = train_config(samples_per_insert=0.0)
    url = redis_server.url
    SampleStream(redis_client, run_id).append(renamed(played, "nl"))
    learner = learner_service(config, url, run_id, str(tmp_path))
    learner.run_once(block_ms=0)
    pace = open_transport(url, run_id).pace().read()
    assert pace is not None and pace.target == 0.0 and pace.trainable
    assert not selfplay_should_pause(pace)
    learner.close()


def own_net_worker(url: str, run_id: str, pace_url: str | None = None) -> SelfPlayService:
    """A worker with its own tiny net (no weights published: it keeps its initial ones),
    its pace read from the Redis at ``pace_url`` (default: the run's)."""
    config = train_config()
    transport = open_transport(url, run_id)
    return SelfPlayService(config.context(run_id, url), config.net, config.search,
                           config.selfplay, transport.samples(), transport.weights(),
                           worker_id="w7", seed=3,
                           pace=open_transport(pace_url or url, run_id).pace())


def test_a_dead_learners_pace_expires_and_workers_play_on(redis_server, run_id, running):
    url = redis_server.url
    # What a learner killed while workers were paused leaves behind (a short TTL here).
    open_transport(url, run_id).pace(ttl_s=1.5).publish(
        Pace(samples_per_insert=0.5, target=4.0, tolerance=0.25, trainable=True))
    worker = own_net_worker(url, run_id)
    running(worker)
    wait_until(lambda: worker.throttled_s > 0, what="worker paused")
    wait_until(lambda: worker.appended > 0, what="worker played on after the expiry")
    assert open_transport(url, run_id).pace().read() is None
    assert worker.pace_errors == 0


def test_a_failing_pace_read_never_stops_self_play(redis_server, run_id, caplog):
    elsewhere = RedisServer().start()
    worker = own_net_worker(redis_server.url, run_id, pace_url=elsewhere.url)
    elsewhere.stop()  # the pace's Redis is gone; the stream's is fine
    with caplog.at_level(logging.WARNING, logger="zeroforge.actors.selfplay_service"):
        played = worker.run(max_games=8)
    assert played >= 8 and worker.pace_errors >= 1 and worker.errors >= worker.pace_errors
    assert worker.throttled_s == 0.0
    lines = [r.getMessage() for r in caplog.records if "pace" in r.getMessage()]
    assert len(lines) == 1 and "\n" not in lines[0] and "unthrottled" in lines[0]
