"""Redis sized for the run (shared/transport/sizing.py): maxclients, maxmemory and the client
output-buffer limits from known shapes, worked out by hand; bad values refused in one line."""

from __future__ import annotations

import dataclasses
import math

import pytest

from zeroforge.shared.transport import (
    CONNECTIONS_PER_PROCESS,
    ProcessConnections,
    RedisServerConfig,
    RedisSizing,
    RunShape,
    conf_bytes,
    expected_connections,
    largest_sizing,
    size_servers,
)

MB = 1 << 20

BIG = RunShape(workers=10_000, nodes=300, bytes_per_game=50_000 - 256, blob_bytes=8 * MB,
               learner_replicas=4, evaluator=True, inference_servers=2, stream_shards=8,
               stream_servers=4, max_backlog=2000, weights_keep=3, workers_per_host=1)
"""10k workers on 300 nodes, one an actor, 8 shards on 4 stream servers; a game 50,000 B in
Redis (its 256 B of entry overhead included), an 8 MB blob."""


def test_connections_with_headroom_make_maxclients():
    run, stream = size_servers(BIG)["run"], size_servers(BIG)["stream"]
    # run's Redis: 10,000 workers x 1 + learner 4 + evaluator 4 + 2 inference servers x 3
    # + controller 2 + driver and tools 8 = 10,024; replicas 1..3 hold none
    assert expected_connections(BIG, "run")[0] == 10_024
    assert run.maxclients == 12_530  # x 1.25
    # each stream server: 10,000 + learner 4 + evaluator 1 + tools 2 = 10,007 -> 12,508.75
    assert expected_connections(BIG, "stream")[0] == 10_007
    assert stream.maxclients == 12_509
    assert "10,024 connections expected" in run.reasons[0]
    assert "self-play worker 10,000 x 1" in run.reasons[0]


def test_maxclients_is_never_below_redis_default():
    small = dataclasses.replace(BIG, workers=100, nodes=10)
    assert size_servers(small)["run"].maxclients == 10_000
    assert "never below Redis's default 10,000" in size_servers(small)["run"].reasons[0]


def test_node_hosts_hold_connections_by_node_not_by_worker():
    """The default, a host a node: 300 hosts' shared transports, each 3 connections a
    server plus a blocked read for each shard the server holds (none on the run's, two on
    each stream server); the same at 1,000 workers as at 10,000."""
    hosts = dataclasses.replace(BIG, workers_per_host=0)
    assert expected_connections(hosts, "run")[0] == 300 * 3 + 24
    assert expected_connections(hosts, "stream")[0] == 300 * (3 + 2) + 7
    fewer = dataclasses.replace(hosts, workers=1_000)
    assert expected_connections(fewer, "run") == expected_connections(hosts, "run")
    assert "self-play host 300 x 3" in size_servers(hosts)["run"].reasons[0]
    # without stream servers the run's Redis holds the 8 shards: 3 + 8 a host
    one_server = dataclasses.replace(hosts, stream_servers=0)
    assert expected_connections(one_server, "run")[0] == 300 * (3 + 8) + 24
    # hosts of 16: ceil(10,000 / 16) = 625 hosts
    sixteen = dataclasses.replace(BIG, workers_per_host=16)
    assert expected_connections(sixteen, "run")[0] == 625 * 3 + 24


def test_the_connection_table_is_where_a_kind_changes(monkeypatch):
    monkeypatch.setitem(CONNECTIONS_PER_PROCESS, "self-play worker",
                        ProcessConnections(2, 2, "two clients"))
    assert expected_connections(BIG, "run")[0] == 10_000 * 2 + 24
    assert set(CONNECTIONS_PER_PROCESS) == set(BIG.processes())


def test_the_run_redis_memory_holds_weights_and_their_replies():
    run = size_servers(BIG)["run"]
    # weights (3 kept + 1 publishing + the evaluator's best) x 8 MB = 40 MB; replies in
    # flight: 300 nodes + 2 inference servers + the evaluator, 8 MB each = 2,424 MB; base
    # 64 MB: 2,528 MB x 1.25 = 3,160 MB. The shards live on the stream servers.
    assert run.maxmemory_bytes == 3160 * MB
    # a blob twice over is 16 MB: the 32 MB floor
    assert run.normal_limit_bytes == 32 * MB
    assert "303 readers" in run.reasons[1]
    # the average on a channel of its own: 4 more blobs (3 kept + 1 publishing), 32 MB,
    # x 1.25 = 40 MB more
    apart = size_servers(dataclasses.replace(BIG, weights_channels=2))["run"]
    assert apart.maxmemory_bytes == 3200 * MB
    assert "on each of 2 channels" in apart.reasons[1]


def test_a_stream_server_holds_its_shards_at_their_bound():
    stream = size_servers(BIG)["stream"]
    # 2 shards a server: 2 x 2,000 x 50,000 B = 200,000,000 (a hard bound: nothing past
    # it); the learner's read 256 x 50,000 = 12,800,000; base 64 MB:
    # 279,908,864 B x 1.25 = 349,886,080 B -> 334 MB
    expected = (200_000_000 + 12_800_000 + 64 * MB) * 1.25
    assert stream.maxmemory_bytes == math.ceil(expected / MB) * MB == 334 * MB
    assert stream.normal_limit_bytes == 32 * MB  # 2 x 12.8 MB under the floor


def test_shards_in_the_run_redis_and_a_large_reply():
    shape = RunShape(workers=100, nodes=10, bytes_per_game=100_000 - 256, blob_bytes=1 * MB,
                     stream_shards=2, stream_servers=0, evaluator=True)
    got = size_servers(shape)
    assert set(got) == {"run"}
    run = got["run"]
    # streams 2 x 2,000 x 100,000 + weights 5 MB + replies 11 MB (10 nodes + the
    # evaluator) + the learner's read 25,600,000 + base 64 MB
    total = 400_000_000 + 5 * MB + 11 * MB + 25_600_000 + 64 * MB
    assert run.maxmemory_bytes == math.ceil(total * 1.25 / MB) * MB == 608 * MB
    # the learner's read of 256 games, twice: 51,200,000 B -> 49 MB
    assert run.normal_limit_bytes == 49 * MB
    assert "the learner's read of 256" in run.reasons[2]


def test_without_the_node_cache_every_worker_reads_the_blob():
    per_worker = dataclasses.replace(BIG, weights_per_node=False)
    run = size_servers(per_worker)["run"]
    readers = 10_000 + 2 + 1
    assert run.maxmemory_bytes == math.ceil((5 * 8 + readers * 8 + 64) * 1.25) * MB
    assert "the workers" in run.reasons[1]


def test_a_large_blob_sets_the_run_redis_normal_buffer():
    shape = dataclasses.replace(BIG, blob_bytes=40 * MB)
    assert size_servers(shape)["run"].normal_limit_bytes == 80 * MB


def test_conf_lines_say_noeviction_and_both_buffers():
    s = RedisSizing(maxclients=12_530, maxmemory_bytes=3160 * MB, normal_limit_bytes=80 * MB)
    assert s.conf_lines() == [
        "maxclients 12530", "maxmemory 3160mb", "maxmemory-policy noeviction",
        "client-output-buffer-limit normal 80mb 0 0",
        "client-output-buffer-limit pubsub 32mb 8mb 60"]
    assert conf_bytes(1000) == "1000" and conf_bytes(0) == "0" and conf_bytes(MB) == "1mb"
    assert s.to_dict()["maxmemory_policy"] == "noeviction"


def test_one_config_for_several_servers_takes_the_largest_figures():
    both = size_servers(BIG)
    one = largest_sizing(both)
    assert one.maxclients == 12_530 and one.maxmemory_bytes == 3160 * MB
    assert any(r.startswith("stream: ") for r in one.reasons)


@pytest.mark.parametrize("field, value", [
    ("workers", -1), ("nodes", 0), ("bytes_per_game", -1.0), ("blob_bytes", -5),
    ("stream_shards", 0), ("max_backlog", 0), ("weights_keep", 0), ("weights_channels", 0),
    ("learner_replicas", 0),
    ("inference_servers", -1), ("stream_servers", 9)])
def test_a_bad_shape_is_refused_in_one_line_naming_the_field(field, value):
    with pytest.raises(ValueError, match=rf"RunShape\.{field}") as caught:
        dataclasses.replace(BIG, **{field: value})
    assert len(str(caught.value).splitlines()) == 1


@pytest.mark.parametrize("field, value", [
    ("maxclients", 0), ("maxmemory_bytes", 0), ("normal_limit_bytes", -1),
    ("pubsub_soft_s", -1), ("pubsub_soft_bytes", 64 * MB)])
def test_a_bad_sizing_is_refused_in_one_line_naming_the_field(field, value):
    good = dict(maxclients=10, maxmemory_bytes=MB, normal_limit_bytes=0)
    with pytest.raises(ValueError, match=rf"RedisSizing\.{field}") as caught:
        RedisSizing(**{**good, field: value})
    assert len(str(caught.value).splitlines()) == 1


def test_the_server_config_takes_a_sizing_only():
    with pytest.raises(ValueError, match=r"RedisServerConfig\.sizing"):
        RedisServerConfig(sizing="maxmemory 1gb")  # type: ignore[arg-type]
    assert RedisServerConfig(sizing=size_servers(BIG)["run"]).sizing.maxclients == 12_530
