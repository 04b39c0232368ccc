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
