"""The redis-servers a distributed driver starts for its run, and the endpoint they keep.

Each one's append-only file is in the run directory (``RUN_DIR/redis``,
``RUN_DIR/redis-stream-I``), and beside it ``endpoint.json`` (mode 0600: it holds the
password) says on which port and with which password it served. A driver that continues
the run (``--resume``, ``--resume auto``) starts them on the same port with the same
password: the run's actors that outlived a killed driver hold those URLs, and their
retried appends reach the restarted server with the data its AOF kept.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

from zeroforge.shared.transport import RedisServer, RedisServerConfig

ENDPOINT_FILE = "endpoint.json"
PORT_FREE_WAIT_S = 15.0
"""How long a continuing driver waits for its predecessor's server to let go of the port
(a SIGKILLed driver's server gets SIGTERM and flushes its AOF first)."""


def _endpoint(data_dir: Path) -> tuple[int, str] | None:
    """(port, password) the server of ``data_dir`` served on, if it said so."""
    try:
        doc = json.loads((data_dir / ENDPOINT_FILE).read_text())
        return int(doc["port"]), str(doc["password"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def start_run_redis(data_dir: Path, continuing: bool) -> RedisServer:
    """A supervised redis-server with its AOF in ``data_dir``; ``continuing``: on the
    port and password it served with before, when it recorded them (a port still taken
    after ``PORT_FREE_WAIT_S`` fails the start in one line, naming the port)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    earlier = _endpoint(data_dir) if continuing else None
    config = RedisServerConfig(data_dir=str(data_dir))
    if earlier is not None:
        port, password = earlier
        deadline = time.monotonic() + PORT_FREE_WAIT_S
        while not _port_free(config.host, port) and time.monotonic() < deadline:
            time.sleep(0.2)
        config = RedisServerConfig(data_dir=str(data_dir), port=port, password=password)
    server = RedisServer(config).start()
    path = data_dir / ENDPOINT_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"port": server.port, "password": server.password}, f)
    os.chmod(path, 0o600)
    return server
