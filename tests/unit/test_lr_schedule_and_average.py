"""The learning rate over the run's budget (learner/lr_schedule.py) and the averaged
weights the learner publishes (``learner.average_horizon``), with their resume."""

from __future__ import annotations

import math

import pytest
import torch

from tests.unit.test_learner import make_learner, one_hot_game
from zeroforge.learner.config import LearnerConfig
from zeroforge.learner.lr_schedule import LrSchedule, RunClock


def config(**kw) -> LearnerConfig:
    return LearnerConfig(**{"lr": 0.1, **kw})


def test_cosine_over_steps_warms_up_then_falls_to_a_tenth():
    s = LrSchedule(config(lr_schedule="cosine", total_steps=1000, warmup_steps=10))
    assert s.lr(0) == pytest.approx(0.01) and s.lr(9) == pytest.approx(0.1)
    assert s.lr(10) == pytest.approx(0.1 * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.01))))
    assert s.lr(500) == pytest.approx(0.055)
    assert s.lr(1000) == pytest.approx(0.01) == s.lr(5000)
    assert "cosine over 1000 steps to 0.1x after 10 warm-up steps" in s.describe()


def test_the_run_budget_is_its_step_limit_else_its_minutes_of_run_time():
    by_steps = LrSchedule(config(lr_schedule="step"), max_steps=400, minutes=30)
    assert [by_steps.lr(n) for n in (0, 199, 200, 300, 1000)] == pytest.approx(
        [0.1, 0.1, 0.01, 0.001, 0.001])
    by_time = LrSchedule(config(lr_schedule="cosine"), minutes=10)
    # the step count does not matter, the run's seconds do
    assert by_time.lr(10**6, run_seconds=0) == pytest.approx(0.1)
    assert by_time.lr(3, run_seconds=300) == pytest.approx(0.055)
    assert by_time.lr(3, run_seconds=600) == pytest.approx(0.01)
    assert "over 10 minutes" in by_time.describe()


def test_a_schedule_without_a_budget_stays_constant_and_says_so():
    s = LrSchedule(config(lr_schedule="cosine"))
    assert s.lr(10**6, run_seconds=10**6) == 0.1
    assert "constant" in s.describe() and "needs a budget" in s.describe()
    assert LrSchedule(config()).describe() == "learning rate 0.1, constant"
    with pytest.raises(ValueError, match="lr_schedule must be"):
        config(lr_schedule="linear")


def test_the_run_clock_counts_from_the_first_game_only():
    now = [100.0]
    clock, learner = RunClock(lambda: now[0]), make_learner()
    clock.tick(learner, started=False)
    now[0] = 200.0
    clock.tick(learner, started=True)     # the first game came: the count starts here
    assert learner.run_seconds == 0.0
    now[0] = 230.0
    clock.tick(learner, started=True)
    assert learner.run_seconds == pytest.approx(30.0)


def weights_of(learner) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in learner.raw_weights().items()}


def test_the_published_weights_follow_the_recent_steps_then_a_moving_average():
    lrn = make_learner(samples_per_insert=0, average_horizon=16 * 1000)
    lrn.add([one_hot_game(lrn.game, 30, s) for s in range(3)])
    after = []
    for _ in range(3):
        lrn.step()
        after.append(weights_of(lrn))
    published = lrn.weights()
    for name, value in published.items():
        if value.is_floating_point():
            # early on the older weights keep (1 + n) / (10 + n) after n steps, not the
            # n / (n + 1) of a plain mean: the first steps' weights fade fast
            expected = after[0][name]
            for n, a in enumerate(after[1:], start=1):
                keep = (1 + n) / (10 + n)
                expected = keep * expected + (1 - keep) * a[name]
            assert torch.allclose(value, expected, atol=1e-6), name
            assert not torch.allclose(value, sum(a[name] for a in after) / 3, atol=1e-6) \
                or torch.equal(after[0][name], after[-1][name])
    assert any(not torch.equal(published[k], after[-1][k]) for k in published)
    # past the horizon, the newest weights weigh exp(-batch / horizon) of a step
    short = make_learner(samples_per_insert=0, average_horizon=16)
    short.add([one_hot_game(short.game, 30, s) for s in range(3)])
    for _ in range(5):
        short.step()
    before = {k: v.clone() for k, v in short.weights().items()}
    short.step()
    keep = math.exp(-1.0)
    name = next(k for k, v in before.items() if v.is_floating_point())
    expected = keep * before[name] + (1 - keep) * short.raw_weights()[name]
    assert torch.allclose(short.weights()[name], expected, atol=1e-6)
    # without averaging, what is published is what is trained
    plain = make_learner(samples_per_insert=0)
    plain.add([one_hot_game(plain.game, 30, 0)])
    plain.step()
    assert all(torch.equal(v, plain.raw_weights()[k]) for k, v in plain.weights().items())


def test_self_play_plays_the_raw_weights_unless_told_to_play_the_average():
    apart = make_learner(samples_per_insert=0, average_horizon=160)
    both = make_learner(samples_per_insert=0, average_horizon=160, average_selfplay=True)
    plain = make_learner(samples_per_insert=0)
    for lrn in (apart, both, plain):
        lrn.add([one_hot_game(lrn.game, 30, s) for s in range(3)])
        lrn.train_available(4)
    assert apart.separate_average and not both.separate_average
    assert not plain.separate_average
    for name, value in apart.selfplay_weights().items():
        assert torch.equal(value, apart.raw_weights()[name])
    assert any(not torch.equal(v, apart.weights()[k])
               for k, v in apart.selfplay_weights().items())
    for name, value in both.selfplay_weights().items():
        assert torch.equal(value, both.weights()[name])
    for name, value in plain.selfplay_weights().items():
        assert torch.equal(value, plain.weights()[name])
        assert torch.equal(value, plain.raw_weights()[name])


def test_the_checkpoint_keeps_the_average_for_players_and_the_raw_weights_for_resuming(
        tmp_path):
    a = make_learner(samples_per_insert=0, average_horizon=160, lr_schedule="cosine")
    a.add([one_hot_game(a.game, 30, s) for s in range(3)])
    a.run_seconds = 42.0
    a.train_available(4)
    path = a.save(tmp_path / "ck.pt")
    blob = torch.load(path, weights_only=True)
    assert all(torch.equal(blob["model"][k], v) for k, v in a.weights().items())
    assert all(torch.equal(blob["raw_model"][k], v) for k, v in a.raw_weights().items())
    b = make_learner(samples_per_insert=0, average_horizon=160, lr_schedule="cosine")
    b.restore(path)
    assert (b.averaged_steps, b.run_seconds) == (4, 42.0)
    assert all(torch.equal(b.weights()[k], v) for k, v in a.weights().items())
    assert all(torch.equal(b.raw_weights()[k], v) for k, v in a.raw_weights().items())
    # the next step is the same on both: raw weights, optimizer and average all restored
    a.step()
    b.step()
    assert all(torch.allclose(b.weights()[k], v) for k, v in a.weights().items())
    # a checkpoint of a learner that did not average: the average starts at the next step
    c = make_learner(samples_per_insert=0)
    c.add([one_hot_game(c.game, 30, 0)])
    c.train_available(2)
    d = make_learner(samples_per_insert=0, average_horizon=160)
    d.restore(c.save(tmp_path / "plain.pt"))
    assert d.average is None and d.averaged_steps == 0
    d.step()
    assert all(torch.equal(v, d.raw_weights()[k]) for k, v in d.weights().items())
