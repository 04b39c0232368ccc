"""Weights once per node against a real redis-server: workers of two "nodes" (two cache
directories) fetch a publish at the same time and Redis sends the blob twice, not once per
worker; a tampered file is never applied; a broken cache falls back to Redis; the node's
last user removes the cache."""

from __future__ import annotations

import threading

import pytest
import torch

from zeroforge.shared.games import make_game
from zeroforge.shared.nets import NetConfig, build_net
from zeroforge.shared.transport import NodeCachedWeights, WeightStore, connect, node_cache_dir

WORKERS_PER_NODE = 6


@pytest.fixture
def net():
    torch.manual_seed(3)
    return build_net(NetConfig.preset("small"), make_game("gomoku:size=8,k=5").spec)


def bytes_out(client) -> int:
    return int(client.info("stats")["total_net_output_bytes"])


def worker(url: str, run_id: str, cache_dir) -> NodeCachedWeights:
    """One worker's weight source: its own connection, its node's cache directory."""
    return NodeCachedWeights(WeightStore(connect(url), run_id), cache_dir)


def same_weights(got: dict, net) -> bool:
    return all(torch.equal(got[k], v) for k, v in net.state_dict().items())


def test_a_publish_leaves_redis_once_per_node(redis_server, run_id, tmp_path, net):
    learner = WeightStore(connect(redis_server.url), run_id)
    learner.publish(net, 0)
    blob_size = learner.info(0).size
    nodes = [node_cache_dir(tmp_path, run_id, f"node{n}") for n in range(2)]
    workers = [worker(redis_server.url, run_id, d) for d in nodes
               for _ in range(WORKERS_PER_NODE)]
    monitor = connect(redis_server.url)
    before = bytes_out(monitor)
    results: list = [None] * len(workers)

    def fetch(i: int) -> None:
        results[i] = workers[i].fetch()

    threads = [threading.Thread(target=fetch, args=(i,)) for i in range(len(workers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    sent = bytes_out(monitor) - before
    assert all(r is not None and r[0] == 0 and same_weights(r[1], net) for r in results)
    assert sum(w.from_redis for w in workers) == 2  # one per node
    assert sum(w.from_cache for w in workers) == len(workers) - 2
    totals = [w.fetch_counts() for w in workers]
    assert sum(t["redis"] for t in totals) == 2 and sum(t["redis_fallback"] for t in totals) == 0
    # two blobs, plus a few hundred bytes of version and sha256 per worker (and INFO)
    assert 2 * blob_size <= sent < 2 * blob_size + 2_000 * len(workers), (sent, blob_size)
    assert sent < 3 * blob_size < len(workers) * blob_size

    # a late joiner on a node gets the newest version, from the cache once it is there
    learner.publish(net, 1)
    assert workers[0].fetch(newer_than=0)[0] == 1
    late = worker(redis_server.url, run_id, nodes[0])
    version, weights = late.fetch()
    assert version == 1 and same_weights(weights, net) and late.from_cache == 1
    assert workers[0].fetch(newer_than=1) is None  # nothing newer: nothing fetched

    # the node's last user removes its directory, not before
    for w in [*workers[:WORKERS_PER_NODE], late]:
        assert nodes[0].exists()
        w.close()
    assert not nodes[0].exists() and nodes[1].exists()


def test_a_tampered_file_is_dropped_and_fetched_again(redis_server, run_id, tmp_path, net,
                                                       caplog):
    learner = WeightStore(connect(redis_server.url), run_id)
    learner.publish(net, 0)
    node = node_cache_dir(tmp_path, run_id, "n")
    first, second = worker(redis_server.url, run_id, node), worker(redis_server.url, run_id,
                                                                   node)
    assert first.fetch()[0] == 0
    blob = (node / "0.blob").read_bytes()
    (node / "0.blob").write_bytes(blob[:-16] + bytes(16))  # a flipped tail
    version, weights = second.fetch()
    assert version == 0 and same_weights(weights, net)
    assert second.from_redis == 1
    assert any("does not match its sha256" in r.getMessage() for r in caplog.records)


def test_a_broken_cache_falls_back_to_redis(redis_server, run_id, tmp_path, net, caplog):
    learner = WeightStore(connect(redis_server.url), run_id)
    learner.publish(net, 0)
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the cache directory should be")
    source = worker(redis_server.url, run_id, blocked / "node")
    version, weights = source.fetch()
    assert version == 0 and same_weights(weights, net)
    learner.publish(net, 1)
    assert source.fetch(newer_than=0)[0] == 1
    assert source.fallbacks == 2 and source.from_redis == 2
    assert source.fetch_counts() == {"node_cache": 0, "redis": 0, "redis_fallback": 2}
    warned = [r for r in caplog.records if "weights cache" in r.getMessage()]
    assert len(warned) == 1 and "\n" not in warned[0].getMessage()
