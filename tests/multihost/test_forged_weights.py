"""Forged weights on the bed: what a worker's credentials can do to the weights, and what
the workers do with a blob that someone with write access to the run's Redis (not the
learner's signing key) publishes.

The run's Redis has a user a role (``shared/transport/acl.py``); the learner signs each
version (``shared/transport/signing.py``). From ``node1``, with the worker password a
self-play node holds, a publish is refused by Redis (NOPERM). Then a forger with every
right on Redis (``zf-admin``: a leaked admin password, a compromised Redis host) publishes
the current weights as the next version, signed with a key of its own: no worker loads
it, each says why once, the learner publishes past it, and the workers go on with the
learner's next version; no game is lost or doubled.
"""

from __future__ import annotations

import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.multihost.bed_run import BedRun, assert_exactly_once
from tests.multihost.test_multihost import _get, _steady
from tests.netbed import Bed
from zeroforge.shared.transport import (
    RoleRefused,
    WeightSigner,
    WeightStore,
    connect,
    open_transport,
)


def _publish_as_worker(bed: Bed, run_id: str) -> str:
    """On ``node1``, with the worker's password: publish the latest blob (a worker may
    read it) as the next version; the refusal's text."""
    def attempt() -> str:
        worker = open_transport(f"redis://{bed.ip('redis')}:{bed.config.redis_port}/0",
                                run_id, role="worker", auth_dir=str(bed.auth_dir))
        try:
            store = worker.weights()
            latest, blob = store.fetch_bytes()
            store.publish(blob, latest + 1)
        except RoleRefused as err:
            return str(err)
        finally:
            worker.close()
        return "published"
    return bed.call_in("node1", attempt)


def _forge(bed: Bed, run_id: str) -> int:
    """As ``zf-admin``, without the learner's key: the latest blob again as the next
    version, signed with another key; returns the forged version."""
    def forge() -> int:
        client = connect(bed.admin_url())
        try:
            reader = WeightStore(client, run_id)
            latest, blob = reader.fetch_bytes()
            forger = WeightStore(client, run_id, signer=WeightSigner.generate())
            forger.publish(blob, latest + 1)
            return latest + 1
        finally:
            client.close()
    return bed.call_in("redis", forge)


@pytest.mark.timeout(900)
def test_a_forged_blob_is_refused_by_every_worker_and_the_run_goes_on(bed, start_run):
    # a publish every 400 steps (some seconds): the forged version stays the latest long
    # enough for both workers to meet it before the learner publishes past it
    run: BedRun = start_run("selfplay.workers=2", "learner.publish_every_steps=400")
    st = _steady(run, bed, 2, {"node1", "node2"})
    st = run.status_when(lambda s: s["weights_version"] >= 1, 180, "a published version")

    refused = _publish_as_worker(bed, run.run_id)
    assert "refused user zf-worker" in refused, refused

    forged = _forge(bed, run.run_id)
    # the learner publishes past the forged version (it meets it as STALE), and both
    # workers end up playing with a version above it: the run went on
    run.status_when(lambda s: s["weights_version"] > forged, 180, "the learner past it")
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and not (
            len(run.auditor.weights_by_worker) >= 2
            and min(run.auditor.weights_by_worker.values()) > forged):
        time.sleep(1)
    assert min(run.auditor.weights_by_worker.values()) > forged, run.auditor.weights_by_worker
    # each worker refused it once (counted once per reader and version), and said why
    refusals = _refusals(bed, st["metrics_url"])
    run.stop()
    assert_exactly_once(run)
    assert refusals == {"bad_signature": 2.0}, refusals
    # (the learner's own line about it says it moved past a version already taken; Ray
    # may fold the two workers' lines into one "[repeated 2x across cluster]")
    said = [line for line in run.lines
            if f"weights version {forged} of run {run.run_id}" in line
            and "keeping weights version" in line]
    assert said and all("signed by another key" in line and "not applied" in line
                        for line in said), said
    assert f"cannot publish weights version {forged} of run {run.run_id}" in run.output


def _refusals(bed: Bed, url: str) -> dict[str, float]:
    """The self-play workers' ``zeroforge_weights_rejected_total`` by reason, summed, as
    the run's endpoint (on head) serves it."""
    text = bed.call_in("head", lambda: _get(url))
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if (sample.name == "zeroforge_weights_rejected_total"
                    and sample.labels.get("component") == "selfplay"):
                reason = sample.labels["reason"]
                found[reason] = found.get(reason, 0.0) + sample.value
    return found
