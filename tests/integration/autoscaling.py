"""A Ray cluster that really autoscales, on one machine: Ray's own autoscaler (v1, the one
KubeRay's in-tree autoscaling runs) with its fake multi-node provider.

``ray start --head --autoscaling-config=CONFIG`` with ``provider: {type: fake_multinode}``
and ``RAY_FAKE_CLUSTER=1`` runs the autoscaler's monitor on the head; when actors wait for
resources the monitor's provider starts a new local raylet of the asked node type (a
"node": same machine, own node id, own resources), and terminates it after it has been
idle for ``idle_timeout_minutes``. Everything else (pending demand, bin packing, limits,
idle detection) is Ray's own autoscaler code.

``AutoscalingCluster`` starts such a head on loopback, on free ports, with its own temp
dir, in a process session of its own, and at the end kills that session and any process
still naming its temp dir (never ``ray stop``: other tests' clusters may be running).
``watch()`` asks a ``tests.integration.ray_watch`` process what the cluster holds.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import yaml

from tests.integration.ray_watch import MARK
from tests.processes import end_session
from zeroforge.deploy.ray.cluster import private_token
from zeroforge.deploy.ray.private_api import NICENESS_ENV, WORKER_NICENESS

HEAD_NODE_ID = "f" * 51 + "00000"
"""The node id the fake provider gives the head (its workers get ...00001, ...00002):
the autoscaler matches nodes to load reports by these ids (``use_node_id_as_ip``)."""

RAY = str(Path(sys.executable).with_name("ray"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def autoscaling_config(worker_type: str, cpus: float, max_nodes: int,
                       idle_timeout_s: float, gcs_address: str) -> dict:
    """The autoscaler config: a head with no CPUs, so every actor of the run needs a
    worker node (on KubeRay the head holds the learner and the evaluator, which this test
    does not need), and one worker type, ``min_workers`` 0."""
    return {
        "cluster_name": "zeroforge-autoscaling-test",
        "max_workers": max_nodes,
        "upscaling_speed": 1.0,
        "idle_timeout_minutes": idle_timeout_s / 60.0,
        "provider": {"type": "fake_multinode", "gcs_address": gcs_address,
                     "use_node_id_as_ip": True, "disable_node_updaters": True,
                     "disable_launch_config_check": True},
        "head_node_type": "ray.head.default",
        "available_node_types": {
            "ray.head.default": {"resources": {"CPU": 0}, "node_config": {},
                                 "max_workers": 0},
            worker_type: {"resources": {"CPU": cpus, "object_store_memory": 100 * 2**20},
                          "node_config": {}, "min_workers": 0, "max_workers": max_nodes},
        },
        "auth": {}, "docker": {}, "file_mounts": {}, "cluster_synced_files": [],
        "file_mounts_sync_continuously": False, "rsync_exclude": [], "rsync_filter": [],
        "initialization_commands": [], "setup_commands": [], "head_setup_commands": [],
        "worker_setup_commands": [], "head_start_ray_commands": [],
        "worker_start_ray_commands": [],
    }


class AutoscalingCluster:
    """``with AutoscalingCluster(...) as cluster``: a head with the fake provider;
    ``cluster.address`` is its GCS address (for ``--address``)."""

    def __init__(self, worker_type: str, cpus: float, max_nodes: int,
                 idle_timeout_s: float) -> None:
        # short: Ray's unix socket paths under it must stay below 108 characters
        self.dir = Path(tempfile.mkdtemp(prefix="zfas-", dir="/tmp"))
        port = free_port()
        self.address = f"127.0.0.1:{port}"
        config = self.dir / "autoscaling.yaml"
        config.write_text(yaml.safe_dump(autoscaling_config(
            worker_type, cpus, max_nodes, idle_timeout_s, self.address)))
        private_token()  # the head and the CLI share ~/.ray/auth_token (0600)
        env = dict(os.environ, RAY_FAKE_CLUSTER="1", AUTOSCALER_UPDATE_INTERVAL_S="1",
                   RAY_AUTH_MODE="token", RAY_OVERRIDE_NODE_ID_FOR_TESTING=HEAD_NODE_ID,
                   RAY_CLOUD_INSTANCE_ID=HEAD_NODE_ID, RAY_USAGE_STATS_ENABLED="0",
                   # keeps Ray on loopback (deploy/ray/private_api.py, single_node_mode);
                   # the provider's nodes inherit it from the monitor
                   RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0",
                   # as docs/cluster.md asks of a 'ray start' beside other work, whatever
                   # this test process inherited (Ray's default, 15, starves the actors)
                   **{NICENESS_ENV: WORKER_NICENESS})
        cmd = [RAY, "start", "--head", "--block", f"--port={port}",
               "--node-ip-address=127.0.0.1", "--num-cpus=0",
               f"--temp-dir={self.dir / 'ray'}", f"--autoscaling-config={config}",
               "--dashboard-host=127.0.0.1", f"--dashboard-port={free_port()}",
               f"--dashboard-agent-listen-port={free_port()}",
               f"--metrics-export-port={free_port()}",
               f"--object-store-memory={100 * 2**20}"]
        self._log = open(self.dir / "head.log", "w")  # noqa: SIM115 (closed in close)
        self.head = subprocess.Popen(cmd, env=env, stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self._watch: subprocess.Popen | None = None

    # --- looking at it -----------------------------------------------------------------
    def wait_up(self, timeout: float = 120) -> None:
        """Until the head answers (``watch`` joined)."""
        deadline = time.monotonic() + timeout
        while True:
            assert self.head.poll() is None, f"ray start --head ended:\n{self.log()}"
            try:
                self._start_watch()
                return
            except (AssertionError, OSError, ValueError):
                assert time.monotonic() < deadline, f"the head did not come up:\n{self.log()}"
                time.sleep(2)

    def _start_watch(self) -> None:
        self._stop_watch()
        with open(self.dir / "watch.log", "w") as err:
            self._watch = subprocess.Popen(
                [sys.executable, "-m", "tests.integration.ray_watch", self.address],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True,
                start_new_session=True)
        assert self._read().get("ready"), "ray_watch could not join"

    def _read(self) -> dict:
        """The next answer of ``ray_watch`` (other lines skipped)."""
        assert self._watch is not None and self._watch.stdout is not None
        for line in self._watch.stdout:
            if line.startswith(MARK):
                return dict(json.loads(line[len(MARK):]))
        raise AssertionError("ray_watch ended: "
                             + (self.dir / "watch.log").read_text(errors="replace")[-2000:])

    def _stop_watch(self) -> None:
        if self._watch is not None:
            with contextlib.suppress(OSError):
                os.killpg(self._watch.pid, signal.SIGKILL)
            self._watch.wait(timeout=30)
            self._watch = None

    def watch(self) -> dict:
        """``{"nodes": [...], "actors": [...]}`` now (``ray_watch.snapshot``)."""
        assert self._watch is not None and self._watch.stdin is not None
        self._watch.stdin.write("\n")
        self._watch.stdin.flush()
        return self._read()

    def worker_nodes(self, snap: dict | None = None) -> list[str]:
        """Ids of the alive nodes the autoscaler added (every alive node but the head)."""
        snap = snap or self.watch()
        return sorted(n["id"] for n in snap["nodes"] if n["id"] != HEAD_NODE_ID)

    def monitor_log(self) -> str:
        """The autoscaler's own log (its decisions), for failure messages."""
        logs = sorted(self.dir.glob("ray/session_*/logs/monitor.log"))
        return logs[-1].read_text(errors="replace") if logs else ""

    def log(self) -> str:
        self._log.flush()
        return (self.dir / "head.log").read_text(errors="replace")[-3000:]

    # --- the end ------------------------------------------------------------------------
    def _ours(self) -> list[psutil.Process]:
        """Every live process of this cluster: the head's session, and anything naming
        our temp dir (the provider's nodes and their workers)."""
        found = []
        mark = str(self.dir)
        for p in psutil.process_iter(["pid", "cmdline"]):
            with contextlib.suppress(psutil.Error):
                if p.pid == self.head.pid or os.getsid(p.pid) == self.head.pid or any(
                        mark in arg for arg in (p.info["cmdline"] or [])):
                    found.append(p)
        return found

    def close(self) -> None:
        self._stop_watch()
        end_session(self.head, self._ours)
        self._log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> AutoscalingCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
