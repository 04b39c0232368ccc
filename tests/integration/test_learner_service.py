"""LearnerService against a real redis-server: exactly-once intake, weights, bad entries,
crash and resume, the samples-per-insert ratio and checkpoint errors."""

from __future__ import annotations

import dataclasses
import gc
import threading
import time
from collections import Counter

import msgpack
import numpy as np
import pytest
import torch

from tests.disk import FILLER, small_disk
from tests.fault_report import report
from tests.integration.conftest import learner_service, renamed, tiny_net_games
from zeroforge.deploy.config import RunConfig, TrainConfig
from zeroforge.deploy.ray.failures import stop_losses
from zeroforge.learner.learner import CheckpointError, Learner, LearnerConfig
from zeroforge.learner.run_dir_fence import EPOCH_NAME, LOCK_NAME
from zeroforge.learner.service import (
    CHECKPOINT_NAME,
    REJECTION_REASONS,
    SERVICE_STATE_FORMAT,
    LearnerService,
)
from zeroforge.shared.formats import load_weights
from zeroforge.shared.games import make_game
from zeroforge.shared.nets import NetConfig, build_net
from zeroforge.shared.run_files import snapshot_files
from zeroforge.shared.samples import GameSamples
from zeroforge.shared.search import SearchConfig
from zeroforge.shared.transport import SampleStream, TransportError, WeightStore, stream_key

GAME = "tictactoe"


def train_config(learner: dict | None = None, **run: object) -> TrainConfig:
    """A tiny tic-tac-toe run: trains after a few games, publishes every 3 steps; ``run``
    keywords of the learner's section (publish, checkpoint, snapshot timing) go there."""
    learner_kw = dict(batch_size=16, min_replay=32, samples_per_insert=2.0, lr=0.01,
                      optimizer="adamw", replay_capacity=5000, device="cpu",
                      publish_every_steps=3, checkpoint_every_s=3600.0,
                      train_steps_per_round=5)
    learner_kw.update(learner or {})
    run_kw: dict = dict(torch_threads=1)
    for key, value in run.items():
        (learner_kw if key in LearnerConfig.__dataclass_fields__ else run_kw)[key] = value
    return TrainConfig(game=GAME, net=NetConfig.preset("tiny"),
                       search=SearchConfig(num_simulations=4),
                       learner=LearnerConfig(**learner_kw), run=RunConfig(**run_kw))


@pytest.fixture(scope="module")
def played() -> list[GameSamples]:
    """Real self-play games (tiny random net, 4 simulations), played once per module."""
    return tiny_net_games(GAME, 40, simulations=4, parallel=16, worker_id="w0")


def drain(service: LearnerService, max_read: int = 8, limit: int = 500) -> list[dict]:
    """Turns until one reads nothing and trains nothing."""
    turns = []
    for _ in range(limit):
        turn = service.run_once(max_read=max_read, block_ms=0)
        turns.append(turn)
        if turn["read"] == 0 and turn["steps"] == 0:
            return turns
    raise AssertionError(f"service still busy after {limit} turns")


def assert_each_once(service: LearnerService, games: list[GameSamples]) -> None:
    counts = Counter(service.recent_game_ids)
    assert set(counts) == {g.game_id for g in games}
    assert set(counts.values()) == {1}, [k for k, v in counts.items() if v > 1]
    assert service.games_received == len(games)
    positions = sum(g.num_positions for g in games)
    assert service.positions_received == positions
    assert service.learner.replay.inserted == positions


def series(snapshot: dict, name: str) -> dict[tuple, float]:
    return {tuple(tuple(p) for p in labels): v
            for labels, v in snapshot["values"].get(name, [])}


def test_every_game_arrives_once_and_weights_are_published(
        redis_server, redis_client, run_id, tmp_path, played):
    games = renamed(played, "once")
    producer = SampleStream(redis_client, run_id)
    store = WeightStore(redis_client, run_id)
    service = learner_service(train_config(), redis_server.url, run_id, str(tmp_path))
    # Version 0 (the random initialisation) is there before any game or step.
    assert store.latest_version() == 0
    version0, weights0 = store.fetch()
    assert version0 == 0
    build_net(NetConfig.preset("tiny"), make_game(GAME).spec).load_state_dict(weights0)

    published = []
    for start in range(0, len(games), 10):
        producer.append(games[start:start + 10])
        published += [t["published"] for t in drain(service, max_read=3) if t["published"]]
    assert_each_once(service, games)
    assert service.learner.steps > 0 and service.status()["unacked"] == len(games)
    assert published == sorted(set(published)) and published[0] == 1
    assert store.latest_version() == published[-1] == service.learner.version

    service.learner.step()  # a step nobody published yet
    service.stop()
    # stop published the unpublished step, and fetch returns exactly those weights.
    final, weights = store.fetch()
    assert final == published[-1] + 1 == service.learner.version
    for name, tensor in service.learner.weights().items():
        torch.testing.assert_close(weights[name], tensor, rtol=0, atol=0)
    info = producer.info()
    assert info.pending == 0 and info.length == 0  # all acked (after the checkpoint)


def test_stats_and_status_report_the_catalogue_metrics(
        redis_server, redis_client, run_id, tmp_path, played):
    games = renamed(played[:20], "stats")
    SampleStream(redis_client, run_id).append(games)
    service = learner_service(train_config(), redis_server.url, run_id, str(tmp_path))
    drain(service)
    snap = service.stats()
    values = snap["values"]
    assert series(snap, "learner_games_received_total") == {(): 20.0}
    assert series(snap, "learner_positions_received_total") == {
        (): float(sum(g.num_positions for g in games))}
    assert series(snap, "learner_steps_total") == {(): float(service.learner.steps)}
    assert series(snap, "learner_samples_trained_total") == {
        (): float(service.learner.samples_trained)}
    assert series(snap, "weights_version") == {
        (("component", "learner"),): float(service.learner.version)}
    assert {k[0][1] for k in series(snap, "learner_loss")} == {"total", "policy", "value"}
    for name in ("learner_samples_per_insert", "replay_window_positions",
                 "stream_lag_entries"):
        assert name in values
    # Nothing acked yet (no checkpoint), so all 20 entries still count as lag.
    assert series(snap, "stream_lag_entries") == {(): 20.0}
    (_, lag_hist), = snap["hists"]["learner_policy_lag_versions"]
    assert sum(lag_hist[:-1]) == 20
    status = service.status()
    assert status["games_received"] == 20 and status["steps"] == service.learner.steps
    assert status["unacked"] == 20 and status["stream_backlog"] == 20
    service.stop()


def test_malformed_entries_are_rejected_counted_and_skipped(
        redis_server, redis_client, run_id, tmp_path, played, caplog):
    good = renamed(played[:12], "good")
    producer = SampleStream(redis_client, run_id)
    producer.append(good[:6])
    key = stream_key(run_id)
    redis_client.xadd(key, {b"d": b"\xc1\xc1 garbage"})
    redis_client.xadd(key, {b"d": msgpack.packb({"schema": 99, "game": GAME})})
    redis_client.xadd(key, {b"other": b"field"})
    gomoku = make_game("gomoku:width=4,height=4,k=3").spec
    t = 5
    foreign = GameSamples(gomoku.spec_string, gomoku.version,
                          np.zeros((t, *gomoku.obs_shape), np.uint8),
                          np.full((t, gomoku.num_actions), 1 / gomoku.num_actions, np.float32),
                          (np.arange(t) % 2).astype(np.int8), outcome=0, game_id="foreign")
    # Right name, wrong shapes: a worker built with other observation planes.
    misshapen = dataclasses.replace(foreign, game=GAME, game_id="misshapen")
    producer.append([foreign, misshapen])
    producer.append(good[6:])

    service = learner_service(train_config(), redis_server.url, run_id, str(tmp_path))
    with caplog.at_level("WARNING"):
        drain(service, max_read=4)
    assert_each_once(service, good)
    assert service.rejected == {"not_msgpack": 1, "unknown_schema": 1, "no_data": 1,
                                "wrong_game": 2}
    rejected = series(service.stats(), "rejected_entries_total")
    # every known reason is a series (at 0 until it happens)
    assert {k for k, v in rejected.items() if v} == {
        (("reason", r),) for r in ("not_msgpack", "unknown_schema", "no_data", "wrong_game")}
    assert rejected[(("reason", "wrong_game"),)] == 2.0
    assert sum(rejected.values()) == 5.0
    assert {dict(k)["reason"] for k in rejected} == set(REJECTION_REASONS)
    wrong = [r.getMessage() for r in caplog.records if "foreign" in r.getMessage()
             or "misshapen" in r.getMessage()]
    assert len(wrong) == 2 and all("\n" not in m for m in wrong)
    service.stop()
    assert producer.info().pending == 0


def test_killed_learner_resumes_with_every_game_exactly_once(
        redis_server, redis_client, run_id, tmp_path, played, monkeypatch):
    games = renamed(played[:30], "kill")
    producer = SampleStream(redis_client, run_id)
    config = train_config()
    a = learner_service(config, redis_server.url, run_id, str(tmp_path))

    producer.append(games[:12])
    for _ in range(3):
        assert a.run_once(max_read=4, block_ms=0)["added"] == 4
    a.checkpoint()  # a normal checkpoint: its 12 entries are acked
    assert producer.info().pending == 0

    producer.append(games[12:24])
    for _ in range(2):
        a.run_once(max_read=4, block_ms=0)
    steps_at_checkpoint = a.learner.steps
    assert steps_at_checkpoint > 0

    def lost_ack(ids: list[str]) -> int:
        raise TransportError("injected: Redis unreachable right after the checkpoint")

    # Crash between checkpoint and ack: entries 13..20 are in the checkpoint but pending.
    monkeypatch.setattr(a.stream, "ack", lost_ack)
    a.checkpoint()
    assert a.transport_errors == 1
    a.run_once(max_read=4, block_ms=0)  # entries 21..24: read after the last checkpoint
    assert a.games_received == 24
    assert producer.info().pending == 12
    del a  # killed: no stop(), no final checkpoint, nothing more acked
    gc.collect()

    producer.append(games[24:])
    b = learner_service(config, redis_server.url, run_id, str(tmp_path), resume=True)
    assert b.games_received == 20 and b.learner.steps == steps_at_checkpoint
    drain(b, max_read=5)
    assert_each_once(b, games)
    assert b.learner.games_seen == 30
    assert b.stream.skipped_duplicates == 8  # 13..20 came back and were dropped
    b.stop()
    assert producer.info().pending == 0 and producer.info().length == 0

    # And a clean restart after stop() starts exactly where it ended.
    c = learner_service(config, redis_server.url, run_id, str(tmp_path), resume=True)
    assert c.games_received == 30 and c.learner.steps == b.learner.steps
    assert drain(c)[-1]["read"] == 0
    c.close()


def test_samples_per_insert_and_the_per_turn_cap_are_respected(
        redis_server, redis_client, run_id, tmp_path, played):
    config = train_config(learner=dict(samples_per_insert=1.0, min_replay=32),
                          train_steps_per_round=2, publish_every_steps=1000)
    games = renamed(played, "spi")
    producer = SampleStream(redis_client, run_id)
    service = learner_service(config, redis_server.url, run_id, str(tmp_path))
    producer.append(games[:1])  # fewer positions than min_replay: no training
    assert service.run_once(block_ms=0)["steps"] == 0 and service.learner.steps == 0
    producer.append(games[1:])
    turns = drain(service, max_read=64)
    # The first turn could afford ~14 steps by the ratio but stops at the per-turn cap.
    assert turns[0]["steps"] == 2 and max(t["steps"] for t in turns) == 2
    inserted = service.learner.replay.inserted
    trained = service.learner.samples_trained
    batch = config.learner.batch_size
    assert trained <= 1.0 * inserted < trained + batch  # as far as the ratio allows
    assert service.samples_per_insert() == pytest.approx(trained / inserted)
    assert series(service.stats(), "learner_samples_per_insert") == {
        (): pytest.approx(trained / inserted)}
    service.stop()


def test_run_stops_at_the_step_limit_with_a_final_checkpoint(
        redis_server, redis_client, run_id, tmp_path, played):
    config = train_config(max_learner_steps=7, train_steps_per_round=3)
    producer = SampleStream(redis_client, run_id)
    producer.append(renamed(played, "run"))
    service = learner_service(config, redis_server.url, run_id, str(tmp_path))
    status = service.run(threading.Event(), max_read=4, block_ms=50)
    assert status["steps"] == 7 and service.learner.steps == 7
    assert (tmp_path / CHECKPOINT_NAME).is_file()
    assert WeightStore(redis_client, run_id).latest_version() == service.learner.version
    with pytest.raises(RuntimeError, match="stopped"):
        service.run_once()
    # Everything read before stopping was checkpointed and acked; the rest waits.
    info = producer.info()
    assert info.pending == 0 and info.length == len(played) - service.games_received

    stop = threading.Event()
    stop.set()
    unlimited = dataclasses.replace(config, run=dataclasses.replace(config.run,
                                                                    max_learner_steps=0))
    again = learner_service(unlimited, redis_server.url, run_id, str(tmp_path))
    assert again.run(stop)["steps"] == 7  # a set stop flag returns at once


def test_a_corrupt_checkpoint_is_a_one_line_error(redis_server, run_id, tmp_path):
    path = tmp_path / CHECKPOINT_NAME
    path.write_bytes(b"this is not a checkpoint")
    with pytest.raises(CheckpointError) as err:
        learner_service(train_config(), redis_server.url, run_id, str(tmp_path))
    assert str(tmp_path) in str(err.value) and "\n" not in str(err.value)

    good = learner_service(train_config(), redis_server.url, run_id, str(tmp_path),
                          resume=False)
    good.stop()
    blob = path.read_bytes()
    path.write_bytes(blob[: len(blob) // 2])  # truncated by a full disk, say
    with pytest.raises(CheckpointError, match="corrupt"):
        learner_service(train_config(), redis_server.url, run_id, str(tmp_path))

    config = train_config()
    learner = Learner(config.learner, GAME, config.net)
    learner.save(path, {"format": SERVICE_STATE_FORMAT, "stream_cursor": 17})
    with pytest.raises(CheckpointError, match="malformed learner-service state"):
        learner_service(config, redis_server.url, run_id, str(tmp_path))
    learner.save(path, {"format": "something-else"})
    with pytest.raises(CheckpointError, match="unknown learner-service state"):
        learner_service(config, redis_server.url, run_id, str(tmp_path))


def test_a_newer_version_in_redis_is_never_reused(redis_server, redis_client, run_id,
                                                  tmp_path):
    store = WeightStore(redis_client, run_id)
    net = build_net(NetConfig.preset("tiny"), make_game(GAME).spec)
    store.publish(net, 5)  # e.g. published by a learner that crashed before checkpointing
    service = learner_service(train_config(), redis_server.url, run_id, str(tmp_path))
    assert service.learner.version == 6 and store.latest_version() == 6
    service.close()


def test_weight_snapshots_for_learning_curves(redis_server, redis_client, run_id, tmp_path,
                                              played):
    config = train_config(snapshot_every_s=1.0)
    SampleStream(redis_client, run_id).append(renamed(played, "snap"))
    service = learner_service(config, redis_server.url, run_id, str(tmp_path))
    for _ in range(3):
        time.sleep(1.05)
        service.run_once(max_read=8, block_ms=0)
    snaps = [path for _, path in snapshot_files(tmp_path)]
    assert all(p.suffix == ".safetensors" for p in snaps)
    seconds = [int(p.stem.split("-")[1].rstrip("s")) for p in snaps]
    assert len(seconds) == 3 and seconds[0] >= 1 and seconds == sorted(set(seconds))
    net = build_net(NetConfig.preset("tiny"), make_game(GAME).spec)
    load_weights(snaps[-1], net)  # a safetensors file (zeroforge.shared.formats.weight_blob)
    service.stop()


def test_a_resumed_learner_names_its_snapshots_after_the_run_s_learner_time(
        redis_server, redis_client, run_id, tmp_path, played):
    """A replaced or resumed learner goes on from its checkpoint's learner time: its
    snapshots come after the earlier learner's, never again from 0 over them."""
    config = train_config(snapshot_every_s=1.0)
    SampleStream(redis_client, run_id).append(renamed(played, "life"))
    first = learner_service(config, redis_server.url, run_id, str(tmp_path))
    for _ in range(2):
        time.sleep(1.05)
        first.run_once(max_read=8, block_ms=0)
    first.stop()  # the final checkpoint holds its learner time
    before = {p.name: p.stat().st_mtime_ns for _, p in snapshot_files(tmp_path)}
    lived = max(s for s, _ in snapshot_files(tmp_path))
    second = learner_service(config, redis_server.url, run_id, str(tmp_path), resume=True)
    time.sleep(1.05)
    second.run_once(max_read=8, block_ms=0)
    second.stop()
    after = snapshot_files(tmp_path)
    assert len(after) == len(before) + 1, after  # one more, none overwritten
    assert {p.name: p.stat().st_mtime_ns for _, p in after if p.name in before} == before
    assert after[-1][0] > lived, (lived, after)


def test_a_full_or_read_only_run_dir_keeps_the_last_good_checkpoint(
        redis_server, redis_client, run_id, tmp_path, played, caplog):
    """Checkpoint writes that fail (disk full: ENOSPC; read-only: EROFS) are one log line
    for each run of failures and counted; the learner trains on, the last good checkpoint
    stays byte for byte, no partial file is left, nothing is acked meanwhile; once the disk
    takes writes again every game is in the checkpoint once. A final checkpoint that fails
    is in the final status, and a resume from the last good one receives the rest again."""
    producer = SampleStream(redis_client, run_id)
    config = train_config(checkpoint_every_s=0.0, snapshot_every_s=1.0)
    with small_disk(tmp_path / "run", 16) as disk:
        run_dir = str(disk.path)
        service = learner_service(config, redis_server.url, run_id, run_dir)
        path = disk.path / CHECKPOINT_NAME
        producer.append(renamed(played[:16], "good"))
        drain(service)
        good = path.read_bytes()
        assert service.checkpoint_health.failures == 0 and producer.info().pending == 0

        def failures(file: str) -> float:
            return series(service.stats(), "learner_save_failures_total")[(("file", file),)]

        def lines(words: str) -> list[str]:
            return [r.getMessage() for r in caplog.records if words in r.getMessage()]

        # 1. full: every turn trains, every checkpoint fails, one line
        disk.fill(leave=4096)
        time.sleep(1.05)  # a weights snapshot is due too
        steps = service.learner.steps
        producer.append(renamed(played[16:28], "full"))
        began = time.monotonic()
        drain(service, max_read=3)
        # a slow machine's drain can outlast the snapshot interval: one more is due then
        due = 1 + int(time.monotonic() - began)
        assert service.learner.steps > steps
        assert service.checkpoint_health.failures >= 2
        assert failures("checkpoint") == service.checkpoint_health.failures
        assert "No space left on device" in service.status()["checkpoint_error"]
        [line] = lines("checkpoint not written")
        assert "No space left on device" in line and "\n" not in line
        assert path.read_bytes() == good
        # no partial checkpoint (``.tmp``) or snapshot is left behind
        files = sorted(str(p.relative_to(disk.path)) for p in disk.path.rglob("*")
                       if p.is_file())
        assert files == sorted([FILLER, CHECKPOINT_NAME, EPOCH_NAME, LOCK_NAME])
        # each skipped snapshot is one line and one count
        assert 1 <= failures("snapshot") == len(lines("snapshot")) <= due
        assert producer.info().pending == 12  # nothing acked without a checkpoint
        full_failures = service.checkpoint_health.failures
        # disk space back: the next checkpoint holds every game, acks them, says so
        disk.free()
        producer.append(renamed(played[28:32], "back"))
        drain(service)
        assert service.checkpoint_health.failures == 0 and producer.info().pending == 0
        assert len(lines("written again after")) == 1
        assert path.read_bytes() != good

        # 2. read-only: a second run of failures, a second line
        disk.read_only()
        good = path.read_bytes()
        producer.append(renamed(played[32:36], "ro"))
        drain(service)
        assert len(lines("checkpoint not written")) == 2
        assert "Read-only file system" in lines("checkpoint not written")[1]
        read_only_failures = service.checkpoint_health.failures
        # 3. the final checkpoint fails too: no exception, the final status says so
        service.stop()
        final = service.status()
        assert "Read-only file system" in final["checkpoint_error"]
        assert final["unacked"] == 4 and producer.info().pending == 4
        assert path.read_bytes() == good
        # what a distributed run's stop makes of that report: its error names it
        amounts, [words] = stop_losses(final, {}, "")
        assert "final checkpoint was not written" in words and "Read-only" in words
        assert "4 stream entries received since are unacknowledged" in words
        assert amounts == {"unacked": 4.0, "final_checkpoint": 1.0}
        disk.writable()
        # a resume from the last good checkpoint receives the unacked games again, once
        producer.append(renamed(played[36:], "after"))
        again = learner_service(config, redis_server.url, run_id, run_dir)
        drain(again)
        assert_each_once(again, [*renamed(played[:16], "good"), *renamed(played[16:28], "full"),
                                 *renamed(played[28:32], "back"), *renamed(played[32:36], "ro"),
                                 *renamed(played[36:], "after")])
        again.stop()
        assert producer.info().pending == 0
    report(failed_writes=[full_failures, read_only_failures],
           error_lines=len(lines("checkpoint not written")))
