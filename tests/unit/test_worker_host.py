"""``WorkerHost`` (several workers in one process) over fake workers, and the recorded-games
file of simulating workers (``actors.replay_worker``)."""

from __future__ import annotations

import threading
import time

import msgpack
import pytest

from tests.unit.test_samples import make_samples
from zeroforge.actors.replay_worker import load_games, save_games
from zeroforge.actors.worker_host import WorkerHost
from zeroforge.shared import metrics
from zeroforge.shared.samples import encode


class FakeWorker:
    """Appends one 'game' every 10 ms until its stop; fails when told to."""

    def __init__(self, index: int, fail_after: int = 0) -> None:
        self.index = index
        self.fail_after = fail_after
        self.recorder = metrics.Recorder()
        self.ids: list[str] = []

    def run(self, stop: threading.Event) -> int:
        while not stop.wait(0.01):
            self.ids.append(f"g{self.index}-{len(self.ids)}")
            self.recorder.inc("selfplay_games_total", 1, worker_kind="selfplay",
                              worker=str(self.index))
            if self.fail_after and len(self.ids) >= self.fail_after:
                raise RuntimeError(f"worker {self.index} broke")
        return len(self.ids)

    def stats(self) -> dict:
        return self.recorder.snapshot()

    def game_ids(self) -> list[str]:
        return list(self.ids)


def _games_by_label(snapshot: dict) -> dict[str, float]:
    return {dict(map(tuple, labels))["worker"]: v
            for labels, v in snapshot["values"]["selfplay_games_total"]}


def _run(host: WorkerHost) -> tuple[threading.Thread, threading.Event, list]:
    stop, out = threading.Event(), []
    thread = threading.Thread(target=lambda: out.append(host.run(stop)))
    thread.start()
    return thread, stop, out


def test_a_host_runs_its_workers_resizes_and_keeps_ended_counters():
    made: list[FakeWorker] = []

    def make(i: int) -> FakeWorker:
        made.append(FakeWorker(i))
        return made[-1]

    host = WorkerHost(make, first=6, count=3, label="h2")
    assert [w.index for w in made] == [6, 7, 8]
    thread, stop, out = _run(host)
    time.sleep(0.2)
    assert host.resize(5) == 5  # workers 9 and 10 join
    time.sleep(0.2)
    assert host.resize(2) == 2  # the newest three stop (their games stay counted)
    retired_games = sum(len(w.ids) for w in made if w.index >= 8)
    time.sleep(0.2)
    stop.set()
    thread.join(5)
    stats = host.stats()
    # one series for the host, the retired workers' games included; a row per live worker
    assert _games_by_label(stats) == {"h2": sum(len(w.ids) for w in made)}
    assert [row[0] for row in stats["workers"]] == [6, 7]
    assert [row[1] for row in stats["workers"]] == [len(made[0].ids), len(made[1].ids)]
    assert all(row[1] > 0 for row in stats["workers"])
    assert sum(len(w.ids) for w in made if w.index >= 8) == retired_games > 0
    assert out == [sum(len(w.ids) for w in made)]
    assert sorted(host.game_ids()) == sorted(i for w in made for i in w.ids)
    with pytest.raises(ValueError, match="size must be >= 0"):
        host.resize(-1)


def test_a_worker_that_fails_ends_its_host_with_its_error_after_the_others_stop():
    made: list[FakeWorker] = []

    def make(i: int) -> FakeWorker:
        made.append(FakeWorker(i, fail_after=5 if i == 1 else 0))
        return made[-1]

    host = WorkerHost(make, first=0, count=3, label="h0")
    with pytest.raises(RuntimeError, match="worker 1 broke"):
        host.run(threading.Event())
    assert all(len(w.ids) > 0 for w in made)


def test_recorded_games_round_trip_and_bad_files_say_what_is_wrong(tmp_path):
    path = tmp_path / "games.msgpack"
    save_games(path, [encode(make_samples(seed=s)) for s in range(3)])
    assert len(load_games(path)) == 3
    with pytest.raises(ValueError, match=r"simulate_from '.*nope': cannot read it"):
        load_games(tmp_path / "nope")
    (tmp_path / "junk").write_bytes(b"\xc1\xc1")
    with pytest.raises(ValueError, match="not a recorded-games file"):
        load_games(tmp_path / "junk")
    (tmp_path / "other").write_bytes(msgpack.packb({"games": []}))
    with pytest.raises(ValueError, match="no zeroforge_recorded_games 1 header"):
        load_games(tmp_path / "other")
    (tmp_path / "empty").write_bytes(msgpack.packb({"zeroforge_recorded_games": 1,
                                                    "games": []}))
    with pytest.raises(ValueError, match="holds no games"):
        load_games(tmp_path / "empty")
    (tmp_path / "bad").write_bytes(msgpack.packb({"zeroforge_recorded_games": 1,
                                                  "games": [b"not a game"]}))
    with pytest.raises(ValueError, match="a game does not decode"):
        load_games(tmp_path / "bad")


def test_a_simulating_worker_writes_each_delivery_and_the_simulators_take_exact_quantiles(
        tmp_path):
    """``selfplay.simulate_deliveries_dir``: a line per version a worker takes (none for a
    poll that finds nothing new), from which ``delivery_quantiles`` takes exact figures of
    the deliveries since a wall time."""
    import uuid

    from benchmarks.scale_sim import delivery_quantiles
    from zeroforge.actors.replay_worker import ReplayWorker
    from zeroforge.deploy.config import load_train_config
    from zeroforge.shared.games import make_game
    from zeroforge.shared.nets import build_net
    from zeroforge.shared.transport import MemoryTransport

    games, deliveries = tmp_path / "games.msgpack", tmp_path / "deliveries"
    save_games(games, [encode(make_samples(seed=s)) for s in range(2)])
    deliveries.mkdir()
    config = load_train_config(None, ["net=tiny", f"selfplay.simulate_from={games}",
                                      f"selfplay.simulate_deliveries_dir={deliveries}"])
    transport = MemoryTransport.named(f"memory://{uuid.uuid4().hex}", "sim")
    store = transport.weights()
    net = build_net(config.net, make_game(config.game).spec)
    store.publish(net, 1)
    began = time.time()
    worker = ReplayWorker(config.context("sim"), config.selfplay, transport.samples(), store,
                          worker_id="w3", seed=1)  # takes version 1 as it starts
    worker.poll_weights()  # nothing new: no line
    store.publish(net, 2)
    worker.poll_weights()
    rows = [line.split("\t") for line in (deliveries / "w3.tsv").read_text().splitlines()]
    assert [int(v) for _, v, _ in rows] == [1, 2]
    assert all(float(when) >= began - 1 and 0 <= float(age) < 30 for when, _, age in rows)
    got = delivery_quantiles(deliveries, since=0.0)
    ages = sorted(float(age) for _, _, age in rows)
    assert got["weights_delivered"] == 2 and got["weights_max_s"] == round(ages[1], 3)
    assert delivery_quantiles(deliveries, since=time.time() + 60) == {
        "weights_delivered": 0, "weights_p50_s": None, "weights_p99_s": None,
        "weights_max_s": None}
