"""The redis-servers a distributed driver starts for its run, and the endpoint they keep.

Each one's append-only file is in the run directory (``RUN_DIR/redis``,
``RUN_DIR/redis-stream-I``), and beside it ``endpoint.json`` (mode 0600: it holds the
password) says on which port and with which passwords it served. A driver that continues
the run (``--resume``, ``--resume auto``) starts them on the same port with the same
passwords: the run's actors that outlived a killed driver hold those endpoints, and their
retried appends reach the restarted server with the data its AOF kept.

Users: one a role (``shared.transport.acl``), the same passwords on each of the run's
servers, written for the run's processes to ``RUN_DIR/redis-auth/ROLE`` (0600); the
actors get the endpoint (``redis://HOST:PORT/0``, no password) and that directory's path.

Size: each server is sized for the run (``shared.transport.sizing``: maxclients,
maxmemory with noeviction, client output buffers), as ``zeroforge plan`` computes it
(``deploy.plan.sizing_for_run``); the driver passes the figures.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

from zeroforge.shared.transport import RedisServer, RedisServerConfig, RedisSizing, acl

ENDPOINT_FILE = "endpoint.json"
AUTH_DIR = "redis-auth"
"""``RUN_DIR/AUTH_DIR``: the role password files of the run's servers."""
PORT_FREE_WAIT_S = 15.0
"""How long a continuing driver waits for its predecessor's server to let go of the port
(a SIGKILLed driver's server gets SIGTERM and flushes its AOF first)."""


def _endpoint(data_dir: Path) -> tuple[int, str] | None:
    """(port, password) the server of ``data_dir`` served on, if it said so (with role
    users, the password is its owner's, ``zf-admin``'s)."""
    try:
        doc = json.loads((data_dir / ENDPOINT_FILE).read_text())
        return int(doc["port"]), str(doc["password"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def run_passwords(run_dir: Path, continuing: bool) -> dict[str, str]:
    """The role passwords of the run's servers: those in ``RUN_DIR/redis-auth`` when
    continuing a run that has them all, else new ones; written there (0600) either way."""
    auth_dir = run_dir / AUTH_DIR
    kept = acl.read_credentials(auth_dir) if continuing else {}
    passwords = kept if set(kept) == set(acl.ROLES) else acl.new_passwords()
    acl.write_credentials(auth_dir, passwords)
    return passwords


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def start_run_redis(data_dir: Path, continuing: bool,
                    role_passwords: dict[str, str] | None = None,
                    sizing: RedisSizing | None = None) -> RedisServer:
    """A supervised redis-server with its AOF in ``data_dir`` and, with
    ``role_passwords``, a user a role (``acl.py``); ``continuing``: on the port and admin
    password it served with before, when it recorded them (a port still taken after
    ``PORT_FREE_WAIT_S`` fails the start in one line, naming the port). ``sizing``: its
    maxclients, maxmemory and output buffers for the run (None: Redis's defaults)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    earlier = _endpoint(data_dir) if continuing else None
    roles = tuple(sorted((role_passwords or {}).items()))
    config = RedisServerConfig(data_dir=str(data_dir), role_passwords=roles, sizing=sizing)
    if earlier is not None:
        port, password = earlier
        deadline = time.monotonic() + PORT_FREE_WAIT_S
        while not _port_free(config.host, port) and time.monotonic() < deadline:
            time.sleep(0.2)
        config = RedisServerConfig(data_dir=str(data_dir), port=port, password=password,
                                   role_passwords=roles, sizing=sizing)
    server = RedisServer(config).start()
    path = data_dir / ENDPOINT_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"port": server.port, "password": server.password}, f)
    os.chmod(path, 0o600)
    return server
