"""A Ray cluster started apart from any driver (``ray start --head``), as on a real
cluster that ``zeroforge train --address`` joins: the run's actors live in it, not in the
driver's process tree, so a killed driver leaves them running."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from tests.processes import end_session
from zeroforge.deploy.ray.cluster import private_token
from zeroforge.deploy.ray.private_api import NICENESS_ENV, WORKER_NICENESS
from zeroforge.shared.transport import free_port

RAY = str(Path(sys.executable).parent / "ray")


class RayHead:
    """``ray start --head --block`` on loopback with its own temp dir and ``cpus`` CPUs."""

    def __init__(self, cpus: int = 2) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="zfhead-", dir="/tmp"))
        port = free_port()
        self.address = f"127.0.0.1:{port}"
        private_token()  # the head and the drivers share ~/.ray/auth_token (0600)
        env = dict(os.environ, RAY_AUTH_MODE="token", RAY_USAGE_STATS_ENABLED="0",
                   RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0",
                   # as docs/cluster.md asks of a 'ray start' beside other work (Ray's
                   # default, 15, lets a busy suite starve the run's actors)
                   **{NICENESS_ENV: WORKER_NICENESS})
        cmd = [RAY, "start", "--head", "--block", f"--port={port}",
               "--node-ip-address=127.0.0.1", f"--num-cpus={cpus}",
               f"--temp-dir={self.dir / 'ray'}", "--include-dashboard=false",
               f"--metrics-export-port={free_port()}",
               f"--object-store-memory={200 * 2**20}"]
        self._log = open(self.dir / "head.log", "w")  # noqa: SIM115 (closed in close)
        self.head = subprocess.Popen(cmd, env=env, stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True)

    def wait_up(self, timeout: float = 90) -> None:
        """Until the GCS port accepts connections."""
        host, port = self.address.split(":")
        deadline = time.monotonic() + timeout
        while True:
            assert self.head.poll() is None, f"ray start --head ended:\n{self.log()}"
            with contextlib.suppress(OSError):
                import socket

                socket.create_connection((host, int(port)), timeout=1).close()
                return
            assert time.monotonic() < deadline, f"the head did not come up:\n{self.log()}"
            time.sleep(0.5)

    def actor_processes(self, run_id: str) -> list[str]:
        """This cluster's live actor processes of run ``run_id`` (Ray titles them
        ``ray::ServiceHost...`` / ``ray::InferenceServerActor...``; their workers log in
        our temp dir)."""
        found = []
        for p in self._ours():
            with contextlib.suppress(psutil.Error):
                title = " ".join(p.cmdline())
                if title.startswith(("ray::ServiceHost", "ray::InferenceServerActor")):
                    found.append(f"{p.pid} {title}")
        del run_id  # one run per head in these tests: every actor process is the run's
        return found

    def _ours(self) -> list[psutil.Process]:
        found = []
        for p in psutil.process_iter(["pid"]):
            with contextlib.suppress(psutil.Error, OSError):
                if p.pid == self.head.pid or os.getsid(p.pid) == self.head.pid:
                    found.append(p)
        return found

    def log(self) -> str:
        self._log.flush()
        return (self.dir / "head.log").read_text(errors="replace")[-3000:]

    def close(self) -> None:
        end_session(self.head, self._ours)
        self._log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> RayHead:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
