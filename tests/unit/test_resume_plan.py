"""``zeroforge train --resume [auto]``: what resumes, under which run id, and what is
refused (preflight.resume_plan, on real checkpoints in a temporary run directory)."""

import pytest

from zeroforge.deploy.config import load_train_config
from zeroforge.deploy.preflight import CHECKPOINT_FILE, PreflightError, resume_plan
from zeroforge.learner.learner import CHECKPOINT_NAME, Learner
from zeroforge.learner.service_state import ServiceState


def config(run_dir, run_id=""):
    return load_train_config(None, ["net=tiny", f"run.run_dir={run_dir}",
                                    f"run.run_id={run_id}"])


def checkpoint_of(run_dir, run_id: str) -> None:
    c = config(run_dir)
    state = ServiceState(stream_cursor=None, games_received=0, positions_received=0,
                         steps_at_publish=0, rejected={}, recent_game_ids=[],
                         throttled_s=0.0, run_id=run_id)
    Learner(c.learner, c.game, c.net).save(run_dir / CHECKPOINT_NAME, state.to_extra())


def test_the_name_agrees_with_the_learners():
    assert CHECKPOINT_FILE == CHECKPOINT_NAME


def test_without_a_checkpoint_auto_starts_fresh(tmp_path):
    c = config(tmp_path, "r1")
    assert resume_plan(c, None) == (c, False)
    assert resume_plan(c, "auto") == (c, False)
    assert resume_plan(c, "yes") == (c, True)  # a missing checkpoint is a fresh start


def test_auto_continues_this_runs_checkpoint_and_takes_its_run_id(tmp_path):
    checkpoint_of(tmp_path, "r1")
    c, resume = resume_plan(config(tmp_path, "r1"), "auto")
    assert resume and c.run.run_id == "r1"
    c, resume = resume_plan(config(tmp_path), "auto")  # no run id given: the checkpoint's
    assert resume and c.run.run_id == "r1"
    c, resume = resume_plan(config(tmp_path), "yes")
    assert resume and c.run.run_id == "r1"


def test_auto_refuses_another_runs_checkpoint_and_moves_nothing(tmp_path):
    checkpoint_of(tmp_path, "r1")
    before = (tmp_path / CHECKPOINT_NAME).read_bytes()
    with pytest.raises(PreflightError, match="the checkpoint of run 'r1', not of 'r2'") as caught:
        resume_plan(config(tmp_path, "r2"), "auto")
    assert "\n" not in str(caught.value)
    assert (tmp_path / CHECKPOINT_NAME).read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [CHECKPOINT_NAME]
    # an explicit --resume takes it, under the run id it is given
    c, resume = resume_plan(config(tmp_path, "r2"), "yes")
    assert resume and c.run.run_id == "r2"


def test_a_corrupt_checkpoint_is_one_line(tmp_path):
    (tmp_path / CHECKPOINT_NAME).write_bytes(b"garbage")
    with pytest.raises(PreflightError, match="--resume: .*corrupt or not a checkpoint"):
        resume_plan(config(tmp_path, "r1"), "auto")
