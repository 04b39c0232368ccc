"""Autoscaling with Ray's own autoscaler: ``zeroforge scale`` asks for more self-play
workers than the cluster holds, the workers wait as pending actors, the autoscaler adds
nodes for them and they run there; scaled down, the emptied nodes go after the idle
timeout, and the run goes on throughout.

The cluster (``tests/integration/autoscaling.py``) runs Ray's autoscaler (v1, as KubeRay's
in-tree autoscaling does) with Ray's fake multi-node provider, whose "nodes" are local
raylets. It mirrors ``k8s/base/raycluster.yaml``: a head with no CPUs for the run's actors
and a ``selfplay-cpu`` node type with the CPUs the manifest requests per pod (4),
``min_workers`` 0; ``max_workers`` is 3 here (16 in the manifest) and the idle timeout
15 s (120 s there) to keep the test short. ``zeroforge train --address`` runs the job
from outside, as a RayJob's entrypoint does.

With 2 CPUs a worker and 1 for the learner: the learner and worker 0's host take the first
node (3 of 4 CPUs); scaled to 6 workers, the 5 no node holds wait in node-sized hosts
(node hosts, the default: 2 workers a host), the autoscaler adds two nodes, and 4 workers
run there (2 a node, whichever way Ray placed the waiting hosts: a host of 1 that took
half a new node is followed by the controller making a waiting host of 2 anew as one
that fits the other half); the sixth stays pending because the node limit is reached.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import yaml

from tests.e2e.runs import TrainProcess
from tests.e2e.test_cli import zf
from tests.integration.autoscaling import AutoscalingCluster

ROOT = Path(__file__).resolve().parents[2]
GROUP = "selfplay-cpu"
MAX_NODES = 3
IDLE_TIMEOUT_S = 15.0


def _manifest_group() -> tuple[dict, dict]:
    """(head group, self-play worker group) of the KubeRay manifest."""
    spec = yaml.safe_load((ROOT / "k8s/base/raycluster.yaml").read_text())["spec"]
    group = next(g for g in spec["workerGroupSpecs"] if g["groupName"] == GROUP)
    return spec["headGroupSpec"], group


def _node_cpus() -> float:
    head, group = _manifest_group()
    # Self-play workers never go to the head: only worker pods advertise zf_selfplay (the
    # head holds the learner and evaluator, which this test's head-without-CPUs leaves to
    # the added nodes, so that the first worker node comes up at once).
    assert "zf_selfplay" not in head["rayStartParams"].get("resources", "")
    assert "zf_selfplay" in group["rayStartParams"]["resources"]
    assert group["minReplicas"] == 0 and group["maxReplicas"] >= MAX_NODES
    (container,) = group["template"]["spec"]["containers"]
    return float(container["resources"]["requests"]["cpu"])


def _workers(snap: dict, run_id: str) -> dict[int, dict]:
    """The run's self-play actors Ray has alive, by index (GCS view: node id, pid)."""
    found = {}
    for a in snap["actors"]:
        m = re.fullmatch(rf"actor-{re.escape(run_id)}-selfplay-(\d+)", a["name"])
        if m and a["state"] == "ALIVE":
            found[int(m.group(1))] = a
    return found


def _actor_node(snap: dict, name: str) -> str:
    return next(a["node"] for a in snap["actors"] if a["name"] == name)


def _until(check, timeout: float, what: str, detail=lambda: ""):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what} within {timeout:.0f} s\n{detail()}"
        time.sleep(2)


def test_scale_adds_nodes_for_pending_workers_and_idle_nodes_go(tmp_path):
    cpus = _node_cpus()
    assert cpus == 4  # the arithmetic in the module docstring
    run_id = "autoscale"
    run_dir = tmp_path / "run"
    with AutoscalingCluster(GROUP, cpus, MAX_NODES, IDLE_TIMEOUT_S) as cluster:
        cluster.wait_up()
        assert cluster.worker_nodes() == []  # min 0: nothing before the run asks

        def why() -> str:
            return (f"train output:\n{train.output[-2000:]}\nautoscaler:\n"
                    + "\n".join(cluster.monitor_log().splitlines()[-40:]))

        with TrainProcess(run_dir, run_id, "--address", cluster.address,
                          "--set", "distributed.worker_cpus=2",
                          "--set", "distributed.learner_cpus=1",
                          "--set", "selfplay.workers=1") as train:
            train.wait_for("metrics at http://", timeout=240)
            # the head has no CPUs: even the first actors wait for a node the autoscaler adds
            st = train.status_when(lambda s: s["alive"]["learner"] == 1
                                   and s["alive"]["selfplay"] == 1, timeout=240)
            assert st["alive"]["learner"] == 1 and st["alive"]["selfplay"] == 1, why()
            snap = cluster.watch()
            (first,) = cluster.worker_nodes(snap)
            assert _actor_node(snap, f"actor-{run_id}-learner-0") == first
            assert _workers(snap, run_id)[0]["node"] == first

            # more workers than fit: pending, shown so, and the run goes on
            r = zf("scale", "--workers", "6", "--run-dir", str(run_dir))
            assert r.returncode == 0, r.stderr
            assert "cannot hold all the asked actors" in r.stderr
            st = train.status_when(
                lambda s: s["actor_states"]["selfplay"].get("pending", 0) >= 1, timeout=60)
            assert st["actor_states"]["selfplay"].get("pending", 0) >= 1, st
            assert "waiting for 2 CPU each" in st["waiting"]["selfplay"]

            # the autoscaler adds nodes (up to its limit) and the workers run on them
            st = train.status_when(
                lambda s: s["actor_states"]["selfplay"] == {"alive": 5, "pending": 1}
                and all(r["pid"] for r in s["actors"] if r["state"] == "alive"), timeout=240)
            assert st["actor_states"]["selfplay"] == {"alive": 5, "pending": 1}, why()
            snap = cluster.watch()
            nodes = cluster.worker_nodes(snap)
            assert len(nodes) == MAX_NODES and first in nodes, snap["nodes"]
            added = set(nodes) - {first}
            hosts = _workers(snap, run_id)
            assert hosts[0]["node"] == first, hosts
            rows = {r["index"]: r for r in st["actors"] if r["kind"] == "selfplay"}
            per_node: dict[str, int] = {}
            for i, row in rows.items():  # zeroforge status: which host waits, which runs
                if i in hosts:
                    assert row["state"] == "alive" and row["pid"] == hosts[i]["pid"], rows
                    per_node[hosts[i]["node"]] = per_node.get(hosts[i]["node"], 0) \
                        + row["workers"]
                else:
                    assert row["state"] == "pending" and row["pid"] == 0, rows
            # two workers on each added node, worker 0 still on the first
            assert per_node == {first: 1, **dict.fromkeys(added, 2)}, (per_node, rows)
            # the limit holds: the sixth stays pending, no node beyond max_workers
            time.sleep(5)
            assert len(cluster.worker_nodes()) == MAX_NODES
            games = train.status()["games"]
            st = train.status_when(lambda s: s["games"] > games, timeout=60)
            assert st["games"] > games and st["state"] == "running", st
            assert st["actor_states"]["selfplay"] == {"alive": 5, "pending": 1}
            assert set(st["restarts"].values()) == {0} and st["error"] == "", st

            # scaled down, the added nodes empty out and the autoscaler removes them
            r = zf("scale", "--workers", "1", "--run-dir", str(run_dir))
            assert r.returncode == 0, r.stderr
            st = train.status_when(
                lambda s: s["actor_states"]["selfplay"] == {"alive": 1}, timeout=60)
            assert st["actor_states"]["selfplay"] == {"alive": 1}, st
            _until(lambda: cluster.worker_nodes() == [first], 180,
                   "the idle nodes were not removed", why)
            log = cluster.monitor_log()
            for node in added:  # removed by the autoscaler, for being idle
                assert re.search(rf"Terminating the node with id {node}\b.*\(idle\)", log), \
                    f"no idle termination of {node} in the autoscaler's log"

            # the run lost nothing: same learner and worker 0, on the first node
            snap = cluster.watch()
            assert _actor_node(snap, f"actor-{run_id}-learner-0") == first
            assert sorted(_workers(snap, run_id)) == [0]
            games = train.status()["games"]
            st = train.status_when(lambda s: s["games"] > games, timeout=60)
            assert st["games"] > games and st["state"] == "running", st
            assert set(st["restarts"].values()) == {0} and st["error"] == "", st
            r = zf("stop", "--run-dir", str(run_dir))
            assert r.returncode == 0 and f"run {run_id}: stopped" in r.stdout, r.stderr
            assert train.wait(timeout=120) == 0, train.output[-3000:]
