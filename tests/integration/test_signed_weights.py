"""Weights signed by the learner, against a real redis-server: a forger with write access to
the run's Redis (a worker holding an old shared password, a Redis administrator) stores
weights with a valid sha256, signed with another key, unsigned, or an old version's record
copied under a newer number. No verifying reader loads them: the weight store and the
node cache refuse them, an inference server, a self-play worker and the evaluator keep
their weights, log one line per version and count it, and take the learner's next
version."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable

import pytest
import torch

from tests.integration.test_learner_service import train_config
from zeroforge.actors.inference import InferenceServer, InferenceServerConfig
from zeroforge.deploy.runtime.builder import build_learner, build_rating_service, build_selfplay
from zeroforge.shared.games import make_game
from zeroforge.shared.nets import NetConfig, build_net
from zeroforge.shared.run_context import RunContext
from zeroforge.shared.transport import (
    NodeCachedWeights,
    SigningKeyError,
    WeightSigner,
    WeightsSignatureError,
    WeightStore,
    WeightVerifier,
    connect,
    open_transport,
    signing_key_path,
)

GAME = "tictactoe"
NET = NetConfig.preset("tiny")


def make_net(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return build_net(NET, make_game(GAME).spec)


def rejected(snapshot: dict) -> dict[tuple[str, str], float]:
    """``weights_rejected_total`` of a recorder snapshot, by (component, reason)."""
    return {(dict(labels)["component"], dict(labels)["reason"]): value
            for labels, value in snapshot["values"].get("weights_rejected_total", [])}


def refusals(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno == logging.WARNING and "not applied" in r.getMessage()]


@pytest.fixture
def key() -> WeightSigner:
    return WeightSigner.generate()


@pytest.fixture
def forger(redis_server, run_id) -> WeightStore:
    """Write access to the run's Redis, and a key of its own."""
    return WeightStore(connect(redis_server.url), run_id, signer=WeightSigner.generate())


def test_the_store_refuses_forged_versions_without_reading_their_blob(redis_server, run_id,
                                                                        key, forger):
    learner = WeightStore(connect(redis_server.url), run_id, signer=key)
    client = connect(redis_server.url)
    reader = WeightStore(client, run_id, verifier=WeightVerifier(key.public_key))
    big = build_net(NetConfig.preset("small"), make_game("gomoku:size=8,k=5").spec)
    learner.publish(big, 1)
    assert reader.fetch()[0] == 1
    forger.publish(big, 2)  # a valid sha256, signed with another key
    before = int(client.info("stats")["total_net_output_bytes"])
    with pytest.raises(WeightsSignatureError, match="version 2 of run .*another key"):
        reader.fetch(newer_than=1)
    sent = int(client.info("stats")["total_net_output_bytes"]) - before
    assert sent < learner.info(2).size / 10  # the record was refused, the blob never sent
    unsigned = WeightStore(connect(redis_server.url), run_id)
    unsigned.publish(big, 3)
    with pytest.raises(WeightsSignatureError, match="version 3 .*unsigned"):
        reader.fetch(newer_than=1)
    # an old version's record and blob, signature and all, copied under a newer number:
    # the signature binds the version, so it is no newer version of the learner's
    for suffix in ("", ":meta"):
        client.copy(learner.key(1) + suffix, learner.key(9) + suffix, replace=True)
    client.set(f"{learner.prefix}latest", 9)
    with pytest.raises(WeightsSignatureError, match="version 9 .*another version"):
        reader.fetch(newer_than=1)
    client.set(f"{learner.prefix}latest", 3)
    learner.publish(big, 10)
    assert reader.fetch(newer_than=1)[0] == 10


def test_a_blob_swapped_under_a_signed_record_fails_its_sha256(redis_server, run_id, key):
    learner = WeightStore(connect(redis_server.url), run_id, signer=key)
    client = connect(redis_server.url)
    reader = WeightStore(client, run_id, verifier=WeightVerifier(key.public_key))
    learner.publish(make_net(1), 1)
    client.set(learner.key(1), learner.redis.get(learner.key(1))[:-1] + b"\0")
    with pytest.raises(Exception, match="fail their sha256 check"):
        reader.fetch()


def test_the_node_cache_refuses_a_forged_version_and_its_planted_file(redis_server, run_id,
                                                                       key, forger, tmp_path):
    learner = WeightStore(connect(redis_server.url), run_id, signer=key)
    cache = NodeCachedWeights(WeightStore(connect(redis_server.url), run_id,
                                          verifier=WeightVerifier(key.public_key)), tmp_path)
    learner.publish(make_net(1), 1)
    assert cache.fetch()[0] == 1
    forged = make_net(2)
    forger.publish(forged, 2)
    # the forger's blob in the node's cache too, matching its recorded sha256
    (tmp_path / "2.blob").write_bytes(forger.redis.get(forger.key(2)))
    with pytest.raises(WeightsSignatureError, match="version 2"):
        cache.fetch(newer_than=1)
    learner.publish(make_net(3), 3)
    version, got = cache.fetch(newer_than=1)
    assert version == 3 and all(torch.equal(got[k], v)
                                for k, v in make_net(3).state_dict().items())
    cache.close()


def test_an_inference_server_keeps_its_weights_logs_once_and_takes_the_next(
        redis_server, run_id, key, forger, caplog):
    learner = WeightStore(connect(redis_server.url), run_id, signer=key)
    learner.publish(make_net(1), 1)
    config = InferenceServerConfig(device="cpu", max_wait_ms=1, weights_poll_s=0.05)
    server = InferenceServer(GAME, NET, config, redis_server.url, run_id,
                             weights_public_key=key.public_key)
    assert server.weights_version == 1

    async def scenario() -> None:
        await server.ready()
        forger.publish(make_net(2), 2)
        await asyncio.sleep(1.0)  # about 20 polls, each finding version 2 still the latest
        assert server.weights_version == 1
        learner.publish(make_net(3), 3)
        await until(lambda: server.weights_version == 3)

    caplog.set_level(logging.WARNING)
    try:
        asyncio.run(scenario())
    finally:
        server._io_thread.submit(lambda: None).result()  # its last poll done: then close
        server.close()
    lines = refusals(caplog)
    assert len(lines) == 1 and "\n" not in lines[0], lines
    assert "version 2" in lines[0] and "keeping weights version 1" in lines[0]
    assert rejected(server.stats()) == {("inference", "bad_signature"): 1.0}

    # a server started while the latest version is forged serves on, and says so once
    forger.publish(make_net(4), 4)
    late = InferenceServer(GAME, NET, config, redis_server.url, run_id,
                           weights_public_key=key.public_key)
    late.close()
    assert late.weights_version != 4
    assert rejected(late.stats()) == {("inference", "bad_signature"): 1.0}


async def until(done: Callable[[], bool], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


def signed_ctx(run_id: str, url: str, run_dir: str, key: str) -> RunContext:
    return dataclasses.replace(train_config().context(run_id, url), run_dir=run_dir,
                               weights_public_key=key)


def test_a_selfplay_worker_keeps_its_weights_and_counts_each_forged_version_once(
        redis_server, run_id, key, forger, tmp_path, caplog):
    learner = WeightStore(connect(redis_server.url), run_id, signer=key)
    learner.publish(make_net(1), 1)
    ctx = signed_ctx(run_id, redis_server.url, str(tmp_path), key.public_key)
    worker = build_selfplay(train_config(), ctx, open_transport(redis_server.url, run_id), 0)
    own = worker._own_evaluator
    assert own is not None and own.weights_version == 1
    caplog.set_level(logging.WARNING)
    forger.publish(make_net(2), 2)
    for _ in range(5):
        worker.refresh_weights()
    WeightStore(connect(redis_server.url), run_id).publish(make_net(3), 3)  # unsigned
    for _ in range(5):
        worker.refresh_weights()
    assert own.weights_version == 1
    lines = refusals(caplog)
    assert len(lines) == 2 and "version 2" in lines[0] and "version 3" in lines[1]
    assert rejected(worker.recorder.snapshot()) == {("selfplay", "bad_signature"): 1.0,
                                                    ("selfplay", "unsigned"): 1.0}
    learner.publish(make_net(4), 4)
    worker.refresh_weights()
    assert own.weights_version == 4 and worker.errors == 0


def test_the_evaluator_skips_a_forged_version_once(redis_server, run_id, key, forger, caplog):
    ctx = signed_ctx(run_id, redis_server.url, "", key.public_key)
    config = train_config()
    evaluator = build_rating_service(config, ctx, open_transport(redis_server.url, run_id),
                                     anchors=["random"], games=2, record=None)
    caplog.set_level(logging.WARNING)
    forger.publish(make_net(2), 2)
    assert evaluator.run_once() is None and evaluator.run_once() is None
    assert len(refusals(caplog)) == 1
    assert rejected(evaluator.stats()) == {("evaluator", "bad_signature"): 1.0}


def test_the_learner_signs_with_the_run_s_key_and_refuses_another(redis_server, run_id,
                                                                  tmp_path):
    run_dir = tmp_path / "run"
    public = WeightSigner.load_or_create(signing_key_path(run_dir)).public_key
    config = train_config()
    ctx = signed_ctx(run_id, redis_server.url, str(run_dir), public)
    learner = build_learner(config, ctx, open_transport(redis_server.url, run_id), False)
    try:
        reader = WeightStore(connect(redis_server.url), run_id,
                             verifier=WeightVerifier(public))
        assert reader.fetch()[0] == 0  # the initial publish, signed
    finally:
        learner.close()
    # a learner whose run directory holds another key (or none) publishes nothing at all
    other = dataclasses.replace(ctx, weights_public_key=WeightSigner.generate().public_key)
    with pytest.raises(SigningKeyError, match="is not the run's"):
        build_learner(config, other, open_transport(redis_server.url, run_id), True)
