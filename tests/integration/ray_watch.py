"""What a Ray cluster holds, as JSON lines, for tests that watch a cluster from outside.

``python -m tests.integration.ray_watch ADDRESS`` joins the cluster at ADDRESS the way the
CLI does (``zeroforge.deploy.ray.cluster.join``: loopback, Ray's token) and answers each line on
stdin with one line on stdout, ``MARK`` and JSON ``{"nodes": [...], "actors": [...]}``
read from the GCS (no dashboard needed). It runs in its own process so that the test's process never
joins (or changes the Ray settings of) a cluster other tests do not expect.
"""

from __future__ import annotations

import json
import sys

import ray

from zeroforge.deploy.ray.cluster import connect, use_token
from zeroforge.deploy.ray.naming import NAMESPACE
from zeroforge.deploy.ray.private_api import gcs_actor_table

MARK = "ray_watch: "
"""Prefix of the answer lines (Ray may print other lines on stdout)."""


def snapshot() -> dict:
    """Alive nodes (id, CPUs, node type) and every named actor (name, state, node id)."""
    nodes = [{"id": n["NodeID"], "cpus": float(n.get("Resources", {}).get("CPU", 0.0)),
              "type": str(n.get("Labels", {}).get("ray.io/node-type-name", "")),
              "ip": n.get("NodeManagerAddress", "")}
             for n in ray.nodes() if n.get("Alive")]
    actors = []
    for info in gcs_actor_table().values():
        if not info.get("Name"):
            continue
        actors.append({"name": info["Name"], "state": info.get("State", ""),
                       "node": (info.get("Address") or {}).get("NodeID", ""),
                       "pid": int(info.get("Pid") or 0)})
    return {"nodes": nodes, "actors": actors}


def main(address: str) -> None:
    # as ``zeroforge.deploy.ray.cluster.join`` (token, loopback), without the actors' log lines
    use_token(address)
    connect(address, namespace=NAMESPACE, include_dashboard=False, logging_level="ERROR",
            log_to_driver=False)
    print(MARK + json.dumps({"ready": True}), flush=True)
    for _ in sys.stdin:
        print(MARK + json.dumps(snapshot()), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
