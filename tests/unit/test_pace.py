"""The pause decision of self-play (``shared.pace``), its wire form, the config field, and
a worker's ``run_once`` that never waits for the learner (the local loop's promise)."""

from __future__ import annotations

import json
import threading
import time

import msgpack
import pytest

from zeroforge.actors.config import SelfPlayConfig
from zeroforge.actors.selfplay_service import SelfPlayService
from zeroforge.deploy.config import RunConfig, TrainConfig, load_train_config
from zeroforge.shared.config import ConfigError
from zeroforge.shared.nets import NetConfig
from zeroforge.shared.pace import (
    Pace,
    PaceFormatError,
    decode_pace,
    encode_pace,
    pause_floor,
    selfplay_should_pause,
)
from zeroforge.shared.search import SearchConfig
from zeroforge.shared.transport import MemoryTransport


def pace(ratio: float, target: float = 16.0, tolerance: float = 0.25,
         trainable: bool = True) -> Pace:
    return Pace(samples_per_insert=ratio, target=target, tolerance=tolerance,
                trainable=trainable)


@pytest.mark.parametrize("case, signal, pauses", [
    ("no pace published (or expired, or unreadable)", None, False),
    ("before min_replay: the learner cannot train", pace(0.0, trainable=False), False),
    ("budget used up: cannot train, never wait on it", pace(11.0, trainable=False), False),
    ("spi 0: no limit", pace(0.0, target=0.0), False),
    ("spi 0 with a tolerance", pace(0.0, target=0.0, tolerance=0.5), False),
    ("well below the floor", pace(4.9), True),
    ("just below the floor (16 x 0.75 = 12)", pace(11.999), True),
    ("at the floor", pace(12.0), False),
    ("between floor and target", pace(14.0), False),
    ("at the target", pace(16.0), False),
    ("above the target", pace(17.5), False),
    ("tolerance 0: below the target pauses", pace(15.9, tolerance=0.0), True),
    ("tolerance 0: at the target plays", pace(16.0, tolerance=0.0), False),
    ("wide tolerance", pace(2.0, target=8.0, tolerance=0.9), False),
    ("wide tolerance, below", pace(0.7, target=8.0, tolerance=0.9), True),
])
def test_pause_decision(case, signal, pauses):
    assert selfplay_should_pause(signal) is pauses, case


def test_the_floor_is_the_target_less_the_tolerance():
    assert pause_floor(16.0, 0.25) == 12.0
    assert pause_floor(8.0, 0.0) == 8.0
    assert pause_floor(0.0, 0.25) == 0.0
    assert pace(1.0, target=10.0, tolerance=0.5).floor == 5.0


def test_wire_form_round_trips():
    sent = pace(7.25, target=16.0, tolerance=0.125, trainable=True)
    assert decode_pace(encode_pace(sent)) == sent
    idle = pace(0.0, target=0.0, tolerance=0.0, trainable=False)
    assert decode_pace(encode_pace(idle)) == idle


def _map(**fields: object) -> bytes:
    base = {"format": 1, "samples_per_insert": 1.0, "target": 4.0, "tolerance": 0.25,
            "trainable": True}
    base.update(fields)
    return msgpack.packb({k: v for k, v in base.items() if v is not ...})


@pytest.mark.parametrize("blob, needle", [
    (b"\xc1garbage", "not msgpack"),
    (msgpack.packb([1, 2]), "not a map"),
    (_map(format=2), "unknown pace format 2"),
    (_map(target=...), "missing field 'target'"),
    (_map(tolerance=1.0), "tolerance must be in [0, 1)"),
    (_map(samples_per_insert=float("nan")), "samples_per_insert must be a finite number"),
    (_map(target=-1.0), "target must be a finite number >= 0"),
    (_map(trainable="yes"), "trainable must be true or false"),
    (_map(samples_per_insert="3"), "samples_per_insert must be a finite number"),
])
def test_bad_wire_forms_are_one_line_errors(blob, needle):
    with pytest.raises(PaceFormatError) as err:
        decode_pace(blob)
    assert needle in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("value, ok", [("0", True), ("0.25", True), ("0.99", True),
                                       ("1", False), ("-0.1", False), (".nan", False)])
def test_the_tolerance_is_validated(value, ok):
    overrides = [f"learner.samples_per_insert_tolerance={value}"]
    if ok:
        config = load_train_config(None, overrides)
        assert config.learner.samples_per_insert_tolerance == float(value)
    else:
        with pytest.raises(ConfigError, match=r"samples_per_insert_tolerance must be in "
                                              r"\[0, 1\)"):
            load_train_config(None, overrides)


def test_default_tolerance_is_a_quarter():
    assert load_train_config(None, []).learner.samples_per_insert_tolerance == 0.25


def _worker(transport: MemoryTransport, cpu_share: float = 0.0) -> SelfPlayService:
    config = TrainConfig(game="tictactoe", net=NetConfig.preset("tiny"),
                         search=SearchConfig(num_simulations=2),
                         selfplay=SelfPlayConfig(games_in_parallel=4, cpu_share=cpu_share),
                         run=RunConfig(torch_threads=1))
    ctx = config.context(transport.run_id, "memory://pace-test")
    # No weights published: the worker plays with its random initial net.
    return SelfPlayService(ctx, config.net, config.search, config.selfplay,
                           transport.samples(), transport.weights(), worker_id="w0", seed=1,
                           pace=transport.pace())


@pytest.mark.timeout(120)  # a run_once that waited for the learner would hang here
def test_run_once_plays_even_when_the_learner_asks_workers_to_wait():
    """The local loop steps self-play and learner in one thread: ``run_once`` must never
    look at the pace (a wait there would never end)."""
    transport = MemoryTransport("pace-local")
    worker = _worker(transport)
    transport.pace().publish(pace(0.0))  # "wait": ratio 0, learner can train
    before = worker.worker.stats.positions
    worker.run_once(1)
    assert worker.worker.stats.positions > before
    assert worker.throttled_s == 0.0


@pytest.mark.timeout(120)
def test_run_waits_while_paced_and_a_stop_ends_the_wait():
    transport = MemoryTransport("pace-run")
    worker = _worker(transport)
    signal = transport.pace()
    signal.publish(pace(0.0))
    stop = threading.Event()
    thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while worker.throttled_s < 0.6 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert worker.throttled_s >= 0.6
    assert worker.worker.stats.positions == 0  # not one move while paced
    stop.set()
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert worker.worker.stats.positions == 0


def test_run_status_carries_the_throttled_seconds_of_each_side():
    from zeroforge.deploy.runtime.status import RunStatus
    from zeroforge.shared.metrics import Recorder, merge

    workers = [Recorder(), Recorder()]
    for i, (r, seconds) in enumerate(zip(workers, (3.0, 4.5), strict=True)):
        r.inc("selfplay_throttled_seconds_total", seconds, worker_kind="selfplay",
              worker=str(i))
    learner = Recorder()
    learner.inc("learner_throttled_seconds_total", 2.25)
    merged = merge([r.snapshot() for r in (*workers, learner)])
    status = RunStatus.from_metrics(merged, run_id="r", state="running", elapsed_s=10.0)
    assert status.throttled_s == {"selfplay": 7.5, "learner": 2.25}
    assert RunStatus.from_json(json.loads(status.json_text())) == status
    assert "self-play 7.5 s over all workers, learner 2.2 s" in status.text()
    old = status.to_json()
    del old["throttled_s"]  # JSON from before the key
    assert RunStatus.from_json(old).throttled_s == {}
