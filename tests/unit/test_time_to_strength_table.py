"""The time-to-strength table's cells and median: runs that never reached the target rank
above every run that did, and a median that lands on one says so."""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import sys
from pathlib import Path

_DIR = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(_DIR))  # the script imports its neighbours by plain name
_spec = importlib.util.spec_from_file_location("time_to_strength", _DIR / "time_to_strength.py")
tts = importlib.util.module_from_spec(_spec)
sys.modules["time_to_strength"] = tts  # dataclasses look their module up there
_spec.loader.exec_module(tts)


def _results(*minutes):
    return [tts.SeedResult("gomoku6", i, m) for i, m in enumerate(minutes)]


def test_median_of_reached_runs():
    assert tts.median_minutes(_results(12.0, 4.0, 8.0), 60) == "8.0"


def test_a_run_that_never_got_there_ranks_last():
    assert tts.median_minutes(_results(None, 4.0, 8.0), 60) == "8.0"
    assert tts.median_minutes(_results(None, None, 8.0), 60) == ">60"


def test_even_count_takes_the_lower_middle():
    assert tts.median_minutes(_results(10.0, 2.0, None, 6.0), 30) == "6.0"


def test_cells():
    assert tts.cells(tts.SeedResult("c", 0, 7.26), 60) == "7.3"
    assert tts.cells(tts.SeedResult("c", 0, None), 45) == ">45"


def test_run_rates_come_from_the_final_status_and_a_missing_one_is_unknown(tmp_path):
    def rates():
        counts = tts.run_counts(tmp_path)
        return tts.run_rates([] if counts is None else [counts])

    assert rates() is None
    (tmp_path / "status.json").write_text(
        '{"elapsed_s": 200.0, "positions": 12000, "learner_steps": 900}')
    assert rates() == (60.0, 4.5)
    (tmp_path / "status.json").write_text('{"elapsed_s": 0, "positions": 1}')
    assert rates() is None


def test_a_staged_run_adds_its_positions_and_seconds_and_keeps_the_last_steps():
    # a resumed learner restores its step count; positions and seconds are per invocation
    assert tts.run_rates([(6000.0, 400.0, 100.0), (6000.0, 900.0, 100.0)]) == (60.0, 4.5)


def test_stage_bounds_are_the_pauses_below_the_limit_in_order_then_the_limit():
    def bounds(stages, minutes=40.0):
        return tts.stage_bounds(argparse.Namespace(stages=stages, minutes=minutes))

    assert bounds([20.0, 10.0, 10.0]) == [10.0, 20.0, 40.0]
    assert bounds([10.0, 40.0, 55.0, 0.0]) == [10.0, 40.0]  # none at or past the limit
    assert bounds([]) == [40.0]


def test_rows_written_before_the_rates_existed_still_load():
    row = {"config": "gomoku6", "seed": 0, "minutes_to_target": 2.0, "points": [],
           "run_minutes": 2.5}
    assert tts.SeedResult(**row).positions_per_s is None


def test_the_agent_searches_as_the_preset_whatever_the_run_searches_with():
    """A run's ``--set search.*`` changes self-play only; ``--eval-set`` changes the agent."""
    import argparse

    args = argparse.Namespace(
        overrides=["search.gumbel=true", "search.num_simulations=32", "learner.lr=0.01"],
        eval_overrides=[])
    preset = tts.load_train_config("gomoku6")
    judged = tts.agent_config("gomoku6", args)
    # the preset's own search, as PUCT (the preset self-plays with Gumbel)
    assert preset.search.gumbel and preset.search.num_simulations == 32
    assert judged.search == dataclasses.replace(preset.search, gumbel=False)
    assert judged.learner.lr == 0.01  # the rest of the run's overrides do apply
    args.eval_overrides = ["search.c_puct=2.5"]
    assert tts.agent_config("gomoku6", args).search.c_puct == 2.5
    assert not tts.agent_config("gomoku6", args).search.gumbel


def test_the_agent_is_puct_even_where_the_preset_self_plays_with_gumbel(tmp_path):
    import argparse

    preset = tmp_path / "g.yaml"
    preset.write_text("game: gomoku6\nnet: tiny\nsearch:\n  gumbel: true\n"
                      "  num_simulations: 32\n  c_puct: 2.0\n")
    args = argparse.Namespace(overrides=[], eval_overrides=[])
    judged = tts.agent_config(str(preset), args)
    assert not judged.search.gumbel and judged.search.c_puct == 2.0
    args.eval_overrides = ["search.gumbel=true"]
    assert tts.agent_config(str(preset), args).search.gumbel


def _points(*scores):
    return [{"minutes": 2.0 * (i + 1), "score": s} for i, s in enumerate(scores)]


def test_a_level_is_held_when_three_snapshots_in_a_row_have_a_median_at_the_target():
    from tts_rule import held_minutes

    # a first crossing at 4 minutes (one lucky match) is not a level held
    swings = _points(0.3, 0.95, 0.4, 0.5, 0.92, 0.91)
    assert held_minutes(swings, 0.9, 1) == 4.0
    assert held_minutes(swings, 0.9, 3) == 12.0  # 0.5, 0.92, 0.91: median 0.91
    assert held_minutes(_points(0.95, 0.2, 0.95, 0.2), 0.9, 3) == 6.0
    assert held_minutes(_points(0.95, 0.95), 0.9, 3) is None  # not three yet
    assert held_minutes(_points(0.95, 0.2, 0.3, 0.95), 0.9, 3) is None


def test_the_judge_records_the_first_crossing_and_the_held_minute(tmp_path):
    args = argparse.Namespace(overrides=[], eval_overrides=[], sims=4, anchor="random",
                              games=2, target=0.9, hold=3, judge_cpus=None)
    judge = tts.SnapshotJudge(args, "tictactoe", 0, tmp_path, tts.SeedResult("tictactoe", 0))
    match = {"wins": 0, "draws": 0, "losses": 0, "distinct_games": 2, "effective_games": 2.0}
    held = [judge.record(60.0 * (i + 1), tmp_path / f"s{i}", {"score": s, **match})
            for i, s in enumerate((0.95, 0.5, 0.9, 0.95))]
    assert held == [False, False, True, True]
    r = judge.result
    assert (r.first_crossing, r.minutes_to_target, r.hold) == (1.0, 3.0, 3)
