"""The capacity model: demands from known per-unit figures, where a run saturates first,
and what the simulator should measure."""

import dataclasses

import pytest

from zeroforge.deploy.config import load_train_config
from zeroforge.deploy.plan import UnitFigures, intake, needs, plan_json, predict_simulation, report

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


def test_the_intake_is_held_by_the_slowest_part_and_a_learner_at_the_pace_floor():
    # learner-bound: 10 steps/s x 200 / (8 x (1 - 0.25)) = 333.3 positions/s, not 250
    assert intake(config(), 1000, FIGURES) == (pytest.approx(2000 / 6), "learner steps")
    no_slack = config("learner.samples_per_insert_tolerance=0")
    assert intake(no_slack, 1000, FIGURES) == (pytest.approx(250), "learner steps")
    assert intake(config("learner.replicas=2"), 1000, FIGURES)[0] == pytest.approx(4000 / 6)
    # a slow shard: 50 kB/s / 500 B = 100 positions/s, and two shards twice that
    slow = dataclasses.replace(FIGURES, shard_bytes_per_s=50e3)
    assert intake(config(), 1000, slow) == (pytest.approx(100), "sample intake")
    assert intake(config("distributed.stream_shards=2"), 1000, slow)[0] == pytest.approx(200)
    # two workers offer 200 positions/s: nothing holds them
    assert intake(config(), 2, FIGURES) == (pytest.approx(200), "self-play")
    unpaced = config("learner.samples_per_insert=0")
    assert intake(unpaced, 1000, FIGURES) == (pytest.approx(100_000), "self-play")
    doc = plan_json(config(), 1000, 50, FIGURES, measured=False)
    assert doc["intake"] == {"positions_per_s": pytest.approx(2000 / 6),
                             "held_by": "learner steps"}
    assert "takes in 333.3 positions/s (held by learner steps" in report(
        config(), 1000, 50, FIGURES, measured=False)


def test_the_controller_line_counts_hosts_not_workers():
    hosts = [line for line in report(config(), 1000, 50, FIGURES, False).splitlines()
             if line.startswith("controller:")]
    assert hosts == ["controller: 50 hosts (a node host a node), a stats call and a liveness "
                     "check a host every 1 s: 100 Ray calls/s"]
    one = report(config("distributed.workers_per_host=1"), 1000, 50, FIGURES, False)
    assert "controller: 1,000 hosts (1 worker(s) a host" in one
    served = report(config("distributed.inference=server"), 1000, 50, FIGURES, False)
    assert "controller: 1,000 hosts (an actor a worker, as the default node hosts" in served


def test_server_fed_workers_as_threads_of_a_host_are_warned_of():
    """Node hosts (the default) run workers behind inference servers as threads: their
    searches share one core, which cost the GPU preset two thirds of its positions/s."""
    def warned(*overrides: str) -> list[str]:
        return [line for line in report(config(*overrides), 12, 1, FIGURES, False)
                .splitlines() if line.startswith("threads:")]

    # the default node hosts give server-fed workers an actor each: nothing to warn of
    assert warned("distributed.inference=server") == []
    [line] = warned("distributed.inference=server", "distributed.host_workers=thread")
    assert "distributed.workers_per_host=1" in line
    assert warned("distributed.inference=server", "distributed.workers_per_host=1") == []
    assert warned("distributed.inference=local") == []  # children of their host then
    assert warned("distributed.inference=server", "distributed.workers_per_host=4") != []
    # auto on a GPU cluster (the learner books a GPU) is servers
    assert warned("distributed.learner_gpus=1", "distributed.workers_per_host=4") != []
    assert warned("distributed.learner_gpus=1", "distributed.host_workers=thread") != []
    assert warned("distributed.learner_gpus=1") == []
    assert warned() == []  # auto with no GPU asked for: the workers' own nets
    assert load_train_config("go9-gpu").distributed.workers_per_host == 1  # the preset


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
    # the load it was measured under, a CPU (this machine's, never negative)
    assert got.measured_load is not None and got.measured_load >= 0
    assert f"load {got.measured_load:.2f} a CPU" in report(tiny, 2, 1, got, measured=True)


# --- the Redis sizing (shared/transport/sizing.py) ------------------------------------------

SIZED = dataclasses.replace(FIGURES, bytes_per_game=10_000.0)


def test_the_redis_shape_follows_the_config():
    from zeroforge.deploy.plan import redis_shape
    from zeroforge.shared.transport import StreamConfig

    shape = redis_shape(config("distributed.stream_shards=4", "distributed.stream_servers=1",
                               "distributed.stream_redis=[redis://a:1/0,redis://b:1/0]",
                               "distributed.inference=local", "learner.replicas=2",
                               "distributed.evaluator=false"), 1000, 50, 2e4, 3_000_000)
    assert (shape.workers, shape.nodes, shape.bytes_per_game, shape.blob_bytes) == (
        1000, 50, 2e4, 3_000_000)
    assert shape.stream_shards == 4 and shape.stream_servers == 3  # 2 given + 1 started
    assert shape.inference_servers == 0 and not shape.evaluator and shape.learner_replicas == 2
    assert shape.max_backlog == StreamConfig().max_backlog
    assert shape.weights_channels == 1
    # an average kept apart from self-play's weights is a second channel to hold
    averaged = [redis_shape(config("learner.average_horizon=50000", *more), 10, 2, 1.0, 1)
                for more in ((), ("learner.average_selfplay=true",))]
    assert [s.weights_channels for s in averaged] == [2, 1]
    # more servers than shards: only the shards' servers hold any
    assert redis_shape(config("distributed.stream_servers=3"), 10, 2, 1.0, 1).stream_servers == 1
    served = redis_shape(config("distributed.inference=server",
                                "distributed.inference_servers=3"), 10, 2, 1.0, 1)
    assert served.inference_servers == 3
    # server-fed workers are an actor each (TrainConfig.placed): ten workers' connections
    assert served.workers_per_host == 1 and served.processes()["self-play worker"] == 10
    assert redis_shape(config(), 10, 2, 1.0, 1).processes()["self-play worker"] == 0


def test_weights_kept_is_the_learners():
    import inspect

    from zeroforge.deploy.plan import WEIGHTS_KEEP
    from zeroforge.learner.service import LearnerService

    default = inspect.signature(LearnerService.__init__).parameters["weights_keep"].default
    assert default == WEIGHTS_KEEP


def test_the_report_and_json_carry_the_redis_sizing():
    from zeroforge.deploy.plan import plan_json, redis_sizing

    c = config("distributed.stream_shards=4", "distributed.stream_servers=2")
    text = report(c, 10_000, 300, SIZED, measured=False)
    sizing = redis_sizing(c, 10_000, 300, SIZED.bytes_per_game, SIZED.blob_bytes)
    lines = text.splitlines()
    row = next(ln for ln in lines if ln.startswith("run's Redis "))
    assert f"{sizing['run'].maxclients:,}" in row
    assert any(ln.startswith("each stream server ") for ln in lines)
    for name in ("run's Redis", "each stream server"):
        reasons = [ln for ln in lines if ln.startswith(f"  {name}: ")]
        assert [r.split(": ", 1)[1].split()[0] for r in reasons] == [
            "maxclients", "maxmemory", "normal", "pub/sub"]
    doc = plan_json(c, 10_000, 300, SIZED, measured=False)
    assert doc["redis"]["run"]["maxclients"] == sizing["run"].maxclients
    assert doc["redis"]["stream"]["maxmemory_policy"] == "noeviction"
    assert "maxmemory-policy noeviction" in doc["redis_k8s"]
    # without the game's bytes: no sizing, no guess
    assert "Redis sizing" not in report(c, 10, 2, FIGURES, measured=False)
    assert "redis" not in plan_json(c, 10, 2, FIGURES, measured=False)


def test_plan_k8s_and_json_from_the_cli(capsys):
    import json

    from zeroforge.deploy.cli import build_parser

    argv = ["plan", "--workers", "64", "--nodes", "16", "--set",
            "distributed.stream_shards=2", "--set", "distributed.stream_servers=1"]
    args = build_parser().parse_args([*argv, "--k8s"])  # no throughput figures needed
    assert args.handler(args) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("# Sized by `zeroforge plan --set distributed.stream_shards=2")
    assert "--workers 64 --nodes 16 --k8s`" in out[0]
    directives = [ln for ln in out if not ln.startswith("#")]
    assert [d.split()[0] for d in directives] == [
        "maxclients", "maxmemory", "maxmemory-policy", "client-output-buffer-limit",
        "client-output-buffer-limit"]
    args = build_parser().parse_args([*argv, "--json", "--worker-positions-per-s", "10",
                                      "--learner-steps-per-s", "5"])
    assert args.handler(args) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["workers"] == 64 and set(doc["redis"]) == {"run", "stream"}
    assert doc["redis_k8s"] == directives
