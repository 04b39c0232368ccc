"""benchmarks/plan_check.py's arithmetic: the prediction read from a plan, the rates and the
comparison (no run, no plan subprocess)."""

from __future__ import annotations

import pytest

from benchmarks.plan_check import compare, predict, rates


def plan_doc(saturates: str | None, intake_demand: float = 35e3) -> dict:
    return {"saturates_first": saturates,
            "figures": {"bytes_per_position": 168.0},
            "parts": [
                {"part": "sample intake", "demand": intake_demand, "unit": "B/s",
                 "per_unit": 20e3, "load": intake_demand / 20e3},
                {"part": "learner steps", "demand": 12.9, "unit": "steps/s",
                 "per_unit": 6.9, "load": 12.9 / 6.9},
            ]}


def test_learner_bound_runs_at_one_replica_and_takes_in_its_batches() -> None:
    pred = predict(plan_doc("learner steps"), batch_size=256, samples_per_insert=16)
    assert pred["part"] == "learner steps" and pred["rate"] == 6.9
    assert pred["positions_per_s"] == pytest.approx(6.9 * 256 / 16)


def test_stream_bound_runs_at_the_shard_capacity_in_positions() -> None:
    pred = predict(plan_doc("sample intake"), batch_size=256, samples_per_insert=0)
    assert pred["rate"] == 20e3 and pred["unit"] == "B/s"
    assert pred["positions_per_s"] == pytest.approx(20e3 / 168)


def test_nothing_saturating_predicts_the_most_loaded_part_at_its_demand() -> None:
    doc = plan_doc(None, intake_demand=5e3)
    doc["parts"][1].update(demand=3.0, load=3.0 / 6.9)
    pred = predict(doc, batch_size=256, samples_per_insert=16)
    assert pred["part"] == "learner steps" and pred["rate"] == 3.0
    assert not pred["saturates"]


def test_rates_and_comparison() -> None:
    def snap(steps: float, positions: float, throttled: float) -> dict:
        worker = (("worker", "w0"), ("worker_kind", "selfplay"))
        return {"values": {
            "learner_steps_total": {(): steps},
            "learner_positions_received_total": {(): positions},
            "selfplay_positions_total": {worker: positions * 2},
            "selfplay_throttled_seconds_total": {worker: throttled},
            "learner_throttled_seconds_total": {(): 0.0},
            "learner_samples_per_insert": {(): 12.5}}}

    got = rates(snap(100, 1000, 10), snap(800, 12200, 60), seconds=100, workers=1)
    assert got["learner_steps_per_s"] == 7.0
    assert got["positions_received_per_s"] == 112.0
    assert got["positions_offered_per_s"] == 224.0
    assert got["worker_throttled_share"] == 0.5
    assert got["samples_per_insert"] == 12.5
    assert compare(7.0, 8.0)["within_25pct"]
    assert not compare(100.0, 133.0)["within_25pct"]
    assert compare(4.0, 3.0) == {"predicted": 4.0, "measured": 3.0, "ratio": 0.75,
                                 "within_25pct": True}
