"""A run on a simulated multi-node cluster (ray.cluster_utils.Cluster): workers spread over
the nodes and the run works the same."""

from __future__ import annotations

import dataclasses
import os

import ray
from ray.cluster_utils import Cluster

from tests.integration.test_distributed import SETTINGS, status, wait_for
from zeroforge.deploy.config import load_train_config
from zeroforge.deploy.ray.handle import start_run
from zeroforge.deploy.ray.naming import NAMESPACE
from zeroforge.deploy.ray.private_api import NICENESS_ENV, WORKER_NICENESS


def test_workers_spread_over_two_nodes(redis_server, run_id, tmp_path, monkeypatch):
    # as a cluster zeroforge starts (deploy/ray/private_api.py): at Ray's default
    # niceness, 15, the run's actors beside a busy suite took minutes to import torch
    monkeypatch.setenv(NICENESS_ENV, WORKER_NICENESS)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    cluster.add_node(num_cpus=1)
    cluster.add_node(num_cpus=1)
    try:
        ray.init(address=cluster.address, namespace=NAMESPACE, logging_level="ERROR")
        cluster.wait_for_nodes()
        # one worker per node's CPU: the scheduler must use several nodes
        config = load_train_config(None, [*SETTINGS, "selfplay.workers=2",
                                          "distributed.worker_cpus=1",
                                          "distributed.learner_cpus=0.5"])
        ctx = dataclasses.replace(config.context(run_id, redis_server.url),
                                  run_dir=str(tmp_path))
        controller = start_run(config, ctx).actor
        wait_for(lambda: status(controller)["alive"]["selfplay"] == 2
                 and status(controller)["games_received"] >= 5, timeout=240)
        workers = ray.get(controller.actor_handles.remote("selfplay"))
        nodes = set(ray.get([w.node_id.remote() for w in workers]))
        assert len(nodes) == 2
        pids = ray.get([w.pid.remote() for w in workers])
        assert [os.getpriority(os.PRIO_PROCESS, pid) for pid in pids] == [0, 0]
        final = ray.get(controller.stop.remote())
        assert final["games_received"] == final["games"] > 0
    finally:
        ray.shutdown()
        cluster.shutdown()
