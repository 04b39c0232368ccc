"""The capacity model: demands from known per-unit figures, where a run saturates first,
and what the simulator should measure."""

import dataclasses

import pytest

from zeroforge.deploy.config import load_train_config
from zeroforge.deploy.plan import UnitFigures, needs, predict_simulation, report

FIGURES = UnitFigures(positions_per_s_per_worker=100.0, bytes_per_position=500.0,
                      blob_bytes=2_000_000, learner_steps_per_s=10.0,
                      shard_bytes_per_s=50e6, redis_network_bytes_per_s=1e9,
                      inference_evals_per_s=1e5)


def config(*overrides: str):
    return load_train_config(None, ["learner.samples_per_insert=8", "learner.batch_size=200",
                                    "learner.publish_every_steps=10", *overrides])


def test_demands_follow_the_workers():
    rows = {n.part: n for n in needs(config(), workers=1000, nodes=50, figures=FIGURES)}
    # 1000 x 100 positions/s x 500 B = 50 MB/s: one shard exactly
    assert rows["sample intake"].demand == pytest.approx(50e6)
    assert rows["sample intake"].units == 1
    # 100,000 positions/s x 8 / 200 = 4,000 steps/s: 400 replicas of 10 steps/s
    assert rows["learner steps"].demand == pytest.approx(4000)
    assert rows["learner steps"].units == 400
    # 400 publishes/s x 50 nodes x 2 MB = 40 GB/s; without the cache x 1000 workers
    assert rows["weights out of Redis"].demand == pytest.approx(40e9)
    direct = {n.part: n for n in needs(config("distributed.weights_per_node=false"), 1000,
                                       50, FIGURES)}
    assert direct["weights out of Redis"].demand == pytest.approx(800e9)
    assert "inference" not in rows


def test_inference_servers_only_in_server_mode():
    rows = {n.part: n for n in needs(config("distributed.inference=server",
                                            "search.num_simulations=50"), 10, 2, FIGURES)}
    assert rows["inference"].demand == pytest.approx(10 * 100 * 50)
    assert rows["inference"].units == 1


def test_the_report_marks_the_part_that_saturates_first():
    text = report(config(), 1000, 50, FIGURES, measured=False)
    marked = [line for line in text.splitlines() if "saturates first" in line]
    assert len(marked) == 1 and marked[0].startswith("learner steps")
    small = report(config(), 1, 1, dataclasses.replace(FIGURES, learner_steps_per_s=1e6),
                   measured=False)
    assert "nothing saturates" in small


def test_the_simulators_figures_are_predicted():
    got = predict_simulation(workers=100, nodes=4, games_per_min=6, positions_per_game=20,
                             blob_bytes=1000, poll_s=2, publish_every_s=10, poll_bytes=10,
                             info_bytes=150)
    assert got["positions_per_s"] == pytest.approx(200)
    # 4 blobs, 100 workers x 2 records, 500 polls
    assert got["redis_bytes_per_publish"] == pytest.approx(4 * 1000 + 100 * 300 + 500 * 10)


def test_measuring_gives_this_machines_figures():
    from zeroforge.deploy.plan import measure

    tiny = load_train_config(None, ["net=tiny", "learner.batch_size=32",
                                    "selfplay.games_in_parallel=8",
                                    "search.num_simulations=8"])
    got = measure(tiny, seconds=0.3)
    assert got.positions_per_s_per_worker > 0 and got.learner_steps_per_s > 0
    # tic-tac-toe: 3 planes of 9 bits and 9 float32 policy entries, plus per-game fields
    assert 36 < got.bytes_per_position < 400
    assert got.blob_bytes > 1000
