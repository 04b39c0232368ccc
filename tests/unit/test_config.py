"""Config files and flags map onto the frozen dataclasses; mistakes name themselves."""

from __future__ import annotations

import pytest

from zeroforge.deploy.config import TrainConfig, load_train_config
from zeroforge.shared.config import ConfigError
from zeroforge.shared.nets import NetConfig


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


def test_a_net_preset_name_takes_field_overrides():
    """``net: go_small`` in a preset, ``--set net.score_head=false``: the preset with one
    field changed (how the go9 ablation removes a lever), also after ``--set net=NAME``."""
    c = load_train_config("go9", ["net.score_head=false", "net.global_pool_every=0"])
    small = NetConfig.preset("go_small")
    assert c.net == small.replace(score_head=False, global_pool_every=0)
    c = load_train_config("go9", ["net=go_cpu", "net.blocks=2"])
    assert c.net == NetConfig.preset("go_cpu").replace(blocks=2)
    with pytest.raises(ConfigError, match="unknown net preset 'nope'"):
        load_train_config("go9", ["net=nope", "net.blocks=2"])


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
    (["inference.num_gpus=0"], "InferenceServerConfig.num_gpus must be in (0, 1]"),
    (["inference.num_gpus=2"], "InferenceServerConfig.num_gpus must be in (0, 1]"),
    (["distributed.stream_shards=0"], "stream_shards must be >= 1"),
    (["distributed.stream_servers=-1"], "stream_servers >= 0"),
    (['distributed.stream_redis=["redis://:secret@h:6379/0"]'], "without credentials"),
    (['distributed.stream_redis=["h:6379"]'], "must be a redis:// or rediss:// URL"),
])
def test_bad_keys_and_values_are_named(overrides, needle):
    with pytest.raises(ConfigError) as err:
        load_train_config(None, overrides)
    assert needle in str(err.value)
    assert "\n" not in str(err.value)


def test_gpu_presets_fill_one_gpu_between_servers_and_learner(monkeypatch):
    """The *-gpu presets place two inference servers and the learner on one GPU: Ray is
    asked for their shares (``resources.needs``), which add up to one GPU."""
    from zeroforge.deploy.ray import ray_calls, resources

    monkeypatch.setattr(ray_calls.RayCalls, "cluster_resources",
                        lambda self: {"CPU": 32.0, "GPU": 1.0})
    for preset in ("go9-gpu", "gomoku15-gpu"):
        c = load_train_config(preset)
        assert c.distributed.inference == "server" and c.learner.device == "auto"
        # an actor a worker: node hosts would run the twelve searching workers as threads
        # of one process, taking turns at its GIL (a third of the positions/s on the H200)
        assert c.distributed.workers_per_host == 1, preset
        server = resources.needs(c, "inference")
        learner = resources.needs(c, "learner")
        assert server["GPU"] == c.inference.num_gpus < 1
        total = c.distributed.inference_servers * server["GPU"] + learner["GPU"]
        assert total == pytest.approx(1.0), preset
        cpus = (c.selfplay.workers * c.distributed.worker_cpus
                + c.distributed.inference_servers * server["CPU"] + learner["CPU"]
                + c.distributed.evaluator_cpus)
        assert cpus <= 16, f"{preset} reserves {cpus} CPUs: more than the 16 cores it is for"
    monkeypatch.setattr(ray_calls.RayCalls, "cluster_resources", lambda self: {"CPU": 4.0})
    assert resources.needs(load_train_config("go9-gpu"), "inference")["GPU"] == 0.0


def test_an_inference_server_asks_ray_for_its_share_of_a_gpu(monkeypatch):
    from zeroforge.deploy.ray import hosts

    asked: dict = {}

    class _Remote:
        def options(self, **options):
            asked.update(options)
            return self

        def remote(self, *args):
            return "handle"

    monkeypatch.setattr(hosts.ray, "cluster_resources", lambda: {"CPU": 32.0, "GPU": 1.0})
    monkeypatch.setattr(hosts.ray, "remote", lambda cls: _Remote())
    c = load_train_config("gomoku15-gpu")
    assert hosts.make_inference_actor(c.game, c.net, c.inference, None, "r") == "handle"
    assert asked["num_gpus"] == 0.4 and asked["num_cpus"] == 1.0


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


@pytest.mark.parametrize("module, sides", [
    ("zeroforge.learner.config", ("actors", "deploy")),
    ("zeroforge.actors.config", ("learner", "deploy")),
    ("zeroforge.shared.run_context", ("actors", "learner", "deploy")),
])
def test_each_section_lives_beside_its_side(module, sides):
    """A side's section imports no other side, and the run context no side."""
    from tests.unit.test_layers import modules_loaded_by

    crossing = [m for m in modules_loaded_by(module)
                if m.split(".")[:2] in [["zeroforge", side] for side in sides]]
    assert sorted(crossing) == []


def test_flags_are_overrides_applied_once():
    """``--workers 8`` is ``selfplay.workers=8``, applied after the ``--set`` flags to the
    same dict before the one ``from_dict``; a flag not given adds nothing."""
    import argparse

    from zeroforge.deploy.config import TRAIN_FLAGS, flag_overrides

    args = argparse.Namespace(workers=8, steps=None, game="go9", run_dir="")
    flags = flag_overrides(args, TRAIN_FLAGS)
    assert flags == ["game=go9", "run.run_dir=", "selfplay.workers=8"]
    assert flag_overrides(args, TRAIN_FLAGS, skip=(None, "")) == ["game=go9",
                                                                  "selfplay.workers=8"]
    c = load_train_config(None, ["selfplay.workers=2", *flags[::2]])
    assert c.selfplay.workers == 8 and c.game == "go9"
