"""Config files and flags map onto the frozen dataclasses; mistakes name themselves."""

from __future__ import annotations

import pytest

from zeroforge.deploy.config import TrainConfig, load_train_config
from zeroforge.shared.config import ConfigError


def test_defaults_and_overrides():
    c = load_train_config(None, ["learner.lr=0.5", "search.num_simulations=12", "game=go9",
                                 "evaluation.anchors=[random, uct:10]", "net=small"])
    assert isinstance(c, TrainConfig)
    assert c.learner.lr == 0.5 and c.search.num_simulations == 12 and c.game == "go9"
    assert c.evaluation.anchors == ("random", "uct:10")
    assert c.net.trunk == (32, 64, 128)


def test_yaml_and_toml_files(tmp_path):
    y = tmp_path / "a.yaml"
    y.write_text("game: gomoku6\nlearner:\n  batch_size: 64\nnet:\n  preset: tiny\n  channels: 8\n")
    c = load_train_config(str(y))
    assert c.game == "gomoku6" and c.learner.batch_size == 64 and c.net.channels == 8
    t = tmp_path / "b.toml"
    t.write_text('game = "tictactoe"\n[search]\nnum_simulations = 33\n')
    assert load_train_config(str(t)).search.num_simulations == 33


def test_every_shipped_preset_loads():
    from zeroforge.deploy.config import CONFIG_DIR

    files = sorted(CONFIG_DIR.glob("*.yaml"))
    assert files
    for f in files:
        load_train_config(str(f))
        load_train_config(f.stem)


@pytest.mark.parametrize("overrides, needle", [
    (["learner.lrr=1"], "unknown key 'lrr'"),
    (["learner.batch_size=big"], "learner.batch_size: expected an integer"),
    (["search.add_noise=maybe"], "search.add_noise: expected true or false"),
    (["nosuch.key=1"], "unknown key 'nosuch'"),
    (["net=huge"], "unknown net preset 'huge'"),
    (["learner"], "expected section.key=value"),
    (["learner.lr=-5"], "learner.lr must be > 0"),
    (["selfplay.games_in_parallel=0"], "selfplay.games_in_parallel must be >= 1"),
    (["evaluation.games=0"], "evaluation.games must be >= 1"),
    (["selfplay.precision=fp8"], "selfplay.precision must be one of"),
    (["learner.precision=float16"], "learner.precision must be one of"),
])
def test_bad_keys_and_values_are_named(overrides, needle):
    with pytest.raises(ConfigError) as err:
        load_train_config(None, overrides)
    assert needle in str(err.value)
    assert "\n" not in str(err.value)


def test_bad_file_is_named(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("learner: [1, 2\n")
    with pytest.raises(ConfigError, match="bad.yaml: not valid yaml"):
        load_train_config(str(bad))
    with pytest.raises(ConfigError, match="no config file or preset 'nope'"):
        load_train_config("nope")


def test_keys_of_the_old_layout_still_load_and_say_where_they_went(capsys):
    c = load_train_config(None, ["run.eval_games=7", "run.publish_every_steps=9",
                                 "run.moves_per_round=3", "evaluation.anchors=[random]"])
    assert c.evaluation.games == 7 and c.learner.publish_every_steps == 9
    assert c.selfplay.moves_per_round == 3 and c.evaluation.anchors == ("random",)
    err = capsys.readouterr().err
    assert "run.eval_games is now evaluation.games" in err
    assert "run.publish_every_steps is now learner.publish_every_steps" in err


def test_each_section_lives_below_the_sides():
    """The sections import nothing from actors/, learner/ or deploy/ (a subprocess, so
    modules other tests imported do not count)."""
    import subprocess
    import sys

    code = ("import sys, zeroforge.shared.train_config; "
            "print(sorted(m for m in sys.modules if m.split('.')[:2] in "
            "(['zeroforge', 'actors'], ['zeroforge', 'learner'], ['zeroforge', 'deploy'])))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"
