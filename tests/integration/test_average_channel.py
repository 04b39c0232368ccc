"""Averaged weights apart from self-play's, against a real redis-server: with
``learner.average_horizon`` (and ``average_selfplay`` false, the default) the learner
publishes its raw weights for self-play and its average, under the same versions and
signed for that channel, for the evaluator; each snapshot is the average with the raw
weights beside it (``snapshots/raw/``); a failed publish of the average is made good by the
next one; the checkpoint's model is the average."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from tests.integration.conftest import renamed, tiny_net_games
from tests.integration.test_learner_service import drain, train_config
from zeroforge.deploy.runtime.builder import build_learner, build_rating_service
from zeroforge.learner.learner import load_checkpoint
from zeroforge.shared.formats import load_weights
from zeroforge.shared.run_files import snapshot_files
from zeroforge.shared.samples import GameSamples
from zeroforge.shared.transport import (
    AVERAGE_CHANNEL,
    SampleStream,
    TransportError,
    WeightSigner,
    WeightStore,
    WeightVerifier,
    connect,
    open_transport,
    signing_key_path,
)

GAME = "tictactoe"


@pytest.fixture(scope="module")
def played() -> list[GameSamples]:
    return tiny_net_games(GAME, 30, simulations=4, parallel=16, worker_id="w0")


def equal(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_self_play_gets_the_raw_weights_and_the_evaluator_the_average(
        redis_server, redis_client, run_id, tmp_path, played):
    run_dir = tmp_path / "run"
    public = WeightSigner.load_or_create(signing_key_path(run_dir)).public_key
    config = train_config({"average_horizon": 64, "publish_every_steps": 1,
                           "snapshot_every_s": 1e-6})
    ctx = dataclasses.replace(config.context(run_id, redis_server.url), run_dir=str(run_dir),
                              weights_public_key=public)
    service = build_learner(config, ctx, open_transport(redis_server.url, run_id), False)
    verifier = WeightVerifier(public)
    play = WeightStore(redis_client, run_id, verifier=verifier)
    average = WeightStore(redis_client, run_id, verifier=verifier, channel=AVERAGE_CHANNEL)
    assert play.latest_version() == average.latest_version() == 0

    SampleStream(redis_client, run_id).append(renamed(played, "avg"))
    drain(service)
    learner = service.learner
    assert learner.steps >= 6 and learner.version >= 2
    version, raw = play.fetch()
    assert version == learner.version and equal(raw, learner.raw_weights())
    version, averaged = average.fetch()
    assert version == learner.version and equal(averaged, learner.weights())
    assert not equal(raw, averaged)
    # the snapshots: the average, and the raw weights under the same names
    snaps, raws = snapshot_files(run_dir), snapshot_files(run_dir, raw=True)
    assert snaps and [s for s, _ in raws] == [s for s, _ in snaps]
    assert equal(load_weights(snaps[-1][1]), averaged)
    assert equal(load_weights(raws[-1][1]), raw)

    # the evaluator the runtime builds judges the average, and says which version
    evaluator = build_rating_service(config, ctx, open_transport(redis_server.url, run_id),
                                     anchors=["random"], games=2, record=None)
    results = evaluator.run_once()
    assert results is not None and results["weights_version"] == learner.version
    fetched = evaluator.store.fetch()
    assert fetched is not None and equal(fetched[1], averaged)

    # the average's publish fails once: self-play's version goes out alone, and the next
    # publish (the failed one is retried as a new version) puts both channels level again
    publish = service.out.average.publish

    def fail(*args: object, **kwargs: object) -> str:
        raise TransportError("injected: the average's publish failed")
    service.out.average.publish = fail  # type: ignore[method-assign]
    learner.step()
    with pytest.raises(TransportError, match="injected"):
        service._publish()
    assert play.latest_version() == average.latest_version() + 1
    service.out.average.publish = publish  # type: ignore[method-assign]
    service.stop()  # the unpublished step goes out, then the final checkpoint
    assert play.latest_version() == average.latest_version() == learner.version
    assert equal(average.fetch()[1], learner.weights())
    blob = load_checkpoint(run_dir / "checkpoint.pt")
    assert equal(blob["model"], learner.weights())
    assert equal(blob["raw_model"], learner.raw_weights())


def test_self_play_plays_the_average_when_told_and_no_second_channel_is_written(
        redis_server, redis_client, run_id, tmp_path, played):
    config = train_config({"average_horizon": 64, "average_selfplay": True,
                           "publish_every_steps": 1, "snapshot_every_s": 1e-6})
    ctx = dataclasses.replace(config.context(run_id, redis_server.url),
                              run_dir=str(tmp_path))
    service = build_learner(config, ctx, open_transport(redis_server.url, run_id), False)
    SampleStream(redis_client, run_id).append(renamed(played, "both"))
    drain(service)
    service.stop()
    version, weights = WeightStore(redis_client, run_id).fetch()
    assert version == service.learner.version >= 2
    assert equal(weights, service.learner.weights())
    assert not equal(weights, service.learner.raw_weights())
    assert WeightStore(redis_client, run_id, channel=AVERAGE_CHANNEL).latest_version() is None
    assert service.out.average is None
    assert not list(connect(redis_server.url).scan_iter(f"zf:{{{run_id}}}:weights:average*"))
    assert snapshot_files(tmp_path) and not snapshot_files(tmp_path, raw=True)
