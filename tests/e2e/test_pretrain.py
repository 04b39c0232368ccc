"""`zeroforge pretrain` on SGF records whose moves follow a rule the net can learn."""

from __future__ import annotations

import io

import numpy as np

from tests.e2e.test_cli import zf
from zeroforge.deploy.config import load_train_config
from zeroforge.learner.learner import Learner
from zeroforge.learner.pretrain import pretrain
from zeroforge.shared.formats import record_from_session, write_sgf
from zeroforge.shared.games import GameSession, make_game


def write_rule_games(folder, n: int, seed: int) -> None:
    """Gomoku 6x6 games in which Black always plays the empty point next to (right of,
    wrapping) White's last stone and White plays randomly: a rule visible on the board."""
    game = make_game("gomoku6")
    rng = np.random.default_rng(seed)
    for i in range(n):
        s = GameSession(game)
        while not s.over:
            legal = s.legal_actions()
            if s.to_play == 0 and s.moves:
                a = s.moves[-1]
                while a not in legal:
                    a = (a + 1) % 36
            else:
                a = int(rng.choice(legal))
            s.play(a)
        (folder / f"g{i}.sgf").write_text(write_sgf(record_from_session(s)))
    (folder / "broken.sgf").write_text("(;GM[4]SZ[6];B[zz")


def test_pretrain_learns_the_rule_and_resumes(tmp_path):
    sgf = tmp_path / "sgf"
    sgf.mkdir()
    write_rule_games(sgf, 60, seed=1)
    config = load_train_config(None, ["game=gomoku6", "net=tiny", f"run.run_dir={tmp_path}/run",
                                      "learner.batch_size=64", "learner.optimizer=adamw",
                                      "learner.lr=0.01", "learner.augment=false"])
    report = pretrain(config.context(), config.net, config.learner, sgf, steps=300,
                      holdout=0.2, out=io.StringIO())
    assert report.games_used == 60 and report.holdout_positions > 50
    # Black's moves are predictable, White's random: well above chance (< 10%) overall
    assert report.holdout_accuracy > 0.35
    learner = Learner(config.learner, "gomoku6", config.net)
    learner.restore(tmp_path / "run" / "checkpoint.pt")
    assert learner.steps == 300 and learner.version == 1
    # the self-play run starts its own window: no records in it, and no samples-per-insert
    # budget owed for them (its learner waits for its own games, then trains at the ratio)
    assert len(learner.replay) == 0 and learner.replay.inserted == 0
    assert learner.samples_trained == 0 and not learner.can_train()


def test_pretrain_cli_reports_and_rejects(tmp_path):
    sgf = tmp_path / "sgf"
    sgf.mkdir()
    write_rule_games(sgf, 8, seed=2)
    r = zf("pretrain", "--sgf", str(sgf), "--game", "gomoku6", "--steps", "20",
           "--run-dir", str(tmp_path / "run"), "--set", "net=tiny")
    assert r.returncode == 0, r.stderr
    assert "held-out move accuracy" in r.stdout and (tmp_path / "run" / "checkpoint.pt").exists()
    assert "1 games skipped" in r.stdout  # broken.sgf does not parse: it counts
    r = zf("pretrain", "--sgf", str(sgf), "--game", "go9", "--steps", "5",
           "--run-dir", str(tmp_path / "run2"))
    assert r.returncode == 1 and "no usable go records" in r.stderr
