"""The netns bed's pieces that need no root: the delaying relay (on loopback), the
teardown's guard, and the placement options the bed's runs use. The bed itself runs in
``tests/multihost`` (slow lane, root)."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests import netbed
from tests.netbed import relay
from zeroforge.deploy.config import DistributedConfig, TrainConfig
from zeroforge.deploy.ray.kinds import KINDS
from zeroforge.shared import config as cfg


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(65536):
        writer.write(data)
        await writer.drain()
    writer.close()


async def _through_relay(delay_ms: float, payload: bytes) -> tuple[float, bytes, float]:
    """(first round trip in s, everything echoed back, one-byte round trip in s)."""
    echo = await asyncio.start_server(_echo, "127.0.0.1", 0)
    target = echo.sockets[0].getsockname()[:2]
    server = await relay.start(("127.0.0.1", 0), target, delay_ms)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    t = time.perf_counter()
    writer.write(b"x")
    await reader.readexactly(1)
    small = time.perf_counter() - t
    t = time.perf_counter()
    writer.write(payload)
    back = await reader.readexactly(len(payload))
    bulk = time.perf_counter() - t
    writer.close()
    server.close()
    echo.close()
    return small, back, bulk


def test_relay_delays_each_way_and_keeps_bytes_in_order():
    payload = bytes(range(256)) * 4096  # 1 MiB, many chunks
    small, back, bulk = asyncio.run(_through_relay(40.0, payload))
    assert back == payload
    assert small >= 0.080  # 40 ms each way
    # a delay line, not a sleep per chunk: 1 MiB in 16+ chunks is not 16 x 80 ms
    assert bulk < 0.080 * 8


def test_relay_without_delay_is_a_plain_relay():
    small, back, _ = asyncio.run(_through_relay(0.0, b"hello" * 1000))
    assert back == b"hello" * 1000
    assert small < 0.080


def test_relay_refuses_bad_arguments(capsys):
    assert relay.main(["127.0.0.1:x", "127.0.0.1:1", "5"]) == 2
    assert relay.main([]) == 2
    assert "usage" in capsys.readouterr().err


def test_teardown_only_touches_bed_prefixes():
    for bad in ("", "eth0", "ray", "zf/../etc"):
        with pytest.raises(netbed.BedError):
            netbed.teardown(bad)


def test_bed_names_fit_linux_limits():
    bed = netbed.Bed(prefix="zfabcde")
    bed.subnet = "10.213.7"
    assert [bed.ip(h) for h in netbed.HOSTS] == [f"10.213.7.{i}" for i in (2, 3, 4, 5)]
    links = [bed.link(h) for h in netbed.HOSTS] + [bed.bridge]
    assert all(len(name) <= 15 for name in links)  # IFNAMSIZ - 1
    assert len(set(links)) == len(links)
    assert bed.env()["RAY_AUTH_MODE"] == "token"
    assert bed.redis_url == "redis://redis:6379/0"  # no password in the URL


def test_worker_resource_and_spread_reach_the_actor_options():
    plain = TrainConfig()
    assert "resources" not in KINDS["selfplay"].options(plain)
    placed = cfg.from_dict(TrainConfig, {"distributed": {
        "worker_resource": "zf_selfplay", "worker_spread": True, "worker_cpus": 0}})
    options = KINDS["selfplay"].options(placed)
    assert options["resources"] == {"zf_selfplay": 1.0}
    assert options["scheduling_strategy"] == "SPREAD"
    assert options["num_cpus"] == 0
    assert "resources" not in KINDS["learner"].options(placed)


def test_a_bad_worker_resource_name_is_refused():
    with pytest.raises(ValueError, match="worker_resource"):
        DistributedConfig(worker_resource="zf selfplay")
    with pytest.raises(ValueError, match="run_dir_resource"):
        DistributedConfig(run_dir_resource="run-dir")


def test_run_dir_resource_keeps_the_writers_of_the_run_dir_together():
    placed = cfg.from_dict(TrainConfig, {"distributed": {
        "worker_resource": "zf_selfplay", "run_dir_resource": "zf_run_dir"}})
    for kind in ("learner", "evaluator"):
        assert KINDS[kind].options(placed)["resources"] == {"zf_run_dir": 1.0}, kind
    assert KINDS["selfplay"].options(placed)["resources"] == {"zf_selfplay": 1.0}
    assert "resources" not in KINDS["evaluator"].options(TrainConfig())
