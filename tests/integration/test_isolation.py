"""A local run stays on this machine and private to its user (docs/architecture.md,
Security): the bundled Redis and every process of the local Ray cluster (GCS, raylet,
runtime-env agent, autoscaler monitor, the driver's and every actor's gRPC server) listen
on 127.0.0.1 only, and Ray's token file is readable by its owner only (0600).

Ray 2.60 rewrites a loopback node address to the machine's outward one unless told that
multi-node clusters are off (``deploy/ray/private_api.py``, ``single_node_mode``); without that,
every one of them listened on 0.0.0.0, ``::`` or the machine's address.
"""

from __future__ import annotations

import os
import stat

import psutil
import ray

from tests.processes import naming
from zeroforge.deploy.ray.cluster import disconnect, init_local, token_path
from zeroforge.deploy.ray.private_api import session_dir
from zeroforge.shared.transport import RedisServer

LOOPBACK = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}


def _component(proc: psutil.Process, driver_pid: int) -> str:
    name = proc.name()
    cmd = " ".join(proc.cmdline())
    if name in ("gcs_server", "raylet", "redis-server"):
        return name
    if proc.pid == driver_pid or name.startswith("ray::"):
        return "core_worker"
    for part in ("dashboard/agent.py", "runtime_env/agent", "autoscaler/_private/monitor.py",
                 "log_monitor.py", "dashboard.py"):
        if part in cmd:
            return part
    return f"{name}: {cmd[:120]}"


def _listeners(pids: set[int]) -> list[tuple[str, str, int]]:
    """(component, ip, port) of every TCP socket in LISTEN held by these processes."""
    found = []
    for conn in psutil.net_connections(kind="tcp"):
        if conn.status == psutil.CONN_LISTEN and conn.pid in pids:
            found.append((_component(psutil.Process(conn.pid), os.getpid()), conn.laddr.ip,
                          conn.laddr.port))
    return found


@ray.remote(num_cpus=0)
class _Probe:
    def pid(self) -> int:
        return os.getpid()


def test_local_run_listens_on_loopback_and_keeps_its_token_private():
    me = psutil.Process()
    # this run's processes: started by this test (a test process that ran others before
    # may still have their processes winding down among its children)
    before = {p.pid for p in me.children(recursive=True)}
    # and sockets this test process opened before (a parallel suite runs other tests here
    # first: a learner group's store, say), which are not the run's
    opened_before = set(_listeners({me.pid}))
    with RedisServer() as redis_server:
        init_local(num_cpus=2)
        try:
            probe = _Probe.remote()
            ray.get(probe.pid.remote())
            session = session_dir()
            pids = {p.pid for p in me.children(recursive=True)} - before | {me.pid}
            pids |= {p.pid for p in naming(session)}
            assert redis_server.pid in pids
            listeners = [x for x in _listeners(pids) if x not in opened_before]
        finally:
            disconnect()
    token = token_path()
    assert token is not None and token.exists()
    assert stat.S_IMODE(token.stat().st_mode) == 0o600, oct(token.stat().st_mode)
    assert stat.S_IMODE(token.parent.stat().st_mode) & 0o022 == 0
    assert ("redis-server", "127.0.0.1", redis_server.port) in listeners, listeners
    assert {"gcs_server", "raylet", "core_worker"} <= {c for c, _, _ in listeners}
    assert [x for x in listeners if x[1] not in LOOPBACK] == [], listeners
