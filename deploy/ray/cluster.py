"""Starting and joining Ray clusters with the run's token: ``init_local`` (a private
local cluster on loopback), ``join`` (an existing cluster), the token file
(``token_path``, ``private_token``), and the steps ``find_run`` shares (``resolve_address``,
``use_token``, ``connect``). docs/architecture.md, Security, says what each guards against.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import ray

from zeroforge.deploy.ray.naming import NAMESPACE
from zeroforge.deploy.ray.private_api import (
    init_on_node_ip,
    newest_local_cluster_address,
    reload_ray_config,
    reset_auth_token_cache,
    single_node_mode,
)


def default_token_path() -> Path:
    """Where Ray 2.60 reads its token when neither ``RAY_AUTH_TOKEN`` nor
    ``RAY_AUTH_TOKEN_PATH`` is set."""
    return Path.home() / ".ray" / "auth_token"


def token_path() -> Path | None:
    """The token file this process hands to Ray (None: the token is in $RAY_AUTH_TOKEN)."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return None
    return Path(os.environ.get("RAY_AUTH_TOKEN_PATH") or default_token_path())


def private_token() -> Path | None:
    """Make sure the Ray token file exists and is readable by its owner only (0600).

    Ray 2.60 creates ``~/.ray/auth_token`` with the process umask (0644: any user of the
    machine could read the key to the cluster). We create it first, 0600, with a random
    token of the form Ray makes, and tighten an existing file of ours to 0600."""
    path = token_path()
    if path is None or os.environ.get("RAY_AUTH_MODE", "token").lower() != "token":
        return path
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        if path.stat().st_mode & 0o077 and path.stat().st_uid == os.getuid():
            os.chmod(path, 0o600)
    else:
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
    return path


def init_local(num_cpus: int | None = None) -> None:
    """A private local cluster on loopback (see docs/architecture.md, Security, for what
    Ray 2.60 still binds to every interface; ``single_node_mode`` for how it is kept on
    loopback). Logical CPUs are twice the cores: on a laptop the learner, the workers and
    the evaluator take turns on the same cores rather than waiting for a free one."""
    private_token()
    with single_node_mode():
        # address "local": always a new cluster; without it ray.init joins a cluster that
        # `ray start` left on this machine (another run's, another user's)
        init_on_node_ip("127.0.0.1", address="local", namespace=NAMESPACE,
                        include_dashboard=False, logging_level=logging.WARNING, log_to_driver=True,
                        num_cpus=num_cpus or 2 * (os.cpu_count() or 2),
                        dashboard_host="127.0.0.1")
    private_token()


def use_token(address: str, token: str | None = None) -> None:
    """Before ``ray.init(address=...)``: Ray 2.60 turns token authentication on by itself
    only for ``address="auto"``; an explicit address connects without the token (the GCS
    answers ``InvalidAuthToken``) unless RAY_AUTH_MODE says token. Turn it on when a
    token is at hand (``token``: the run's token file)."""
    if token and not os.environ.get("RAY_AUTH_TOKEN"):
        os.environ["RAY_AUTH_TOKEN_PATH"] = token
    if address != "auto" and "RAY_AUTH_MODE" not in os.environ:
        path = token_path()
        if path is None or path.exists():
            os.environ["RAY_AUTH_MODE"] = "token"
    # Ray read both when it was imported: make it read them again
    reload_ray_config()
    reset_auth_token_cache()


def resolve_address(address: str) -> str:
    """``auto``: the address of the newest local cluster (Ray's own lookup), so that a
    loopback one is attached to on loopback (``connect``); anything else as given."""
    if address != "auto":
        return address
    found = newest_local_cluster_address()
    if not found:
        raise ConnectionError("no local Ray cluster found")
    return found


PROBE_TIMEOUT_S = 3.0
"""Longest wait for a TCP connection to a Ray cluster's address."""


def unreachable(address: str, timeout_s: float = PROBE_TIMEOUT_S) -> str:
    """Why nothing answers at a Ray address (``host:port`` or ``ray://host:port``): a TCP
    connect with a short timeout, so a cluster that is not there is one line within
    seconds, not Ray's own half a minute of retries. "" when something answers, or the
    address has no port to probe (``auto``); ValueError for a bad port."""
    parts = urlsplit(address if "://" in address else f"ray://{address}")
    try:
        port = parts.port
    except ValueError:
        raise ValueError("bad port") from None
    if not parts.hostname or port is None:
        return ""
    try:
        with socket.create_connection((parts.hostname, port), timeout=timeout_s):
            return ""
    except OSError as err:
        return err.strerror or (f"no answer within {timeout_s:g} s"
                                if isinstance(err, TimeoutError) else type(err).__name__)


def address_problem(address: str) -> str:
    """Why ``address`` cannot be joined, in words for one error line ("" when something
    answers there, or there is nothing to probe)."""
    try:
        why = unreachable(address)
    except ValueError as err:
        return f"--address {address!r}: {err}"
    return f"no Ray cluster answers at {address} ({why})" if why else ""


def connect(address: str, **kwargs: Any) -> None:
    """``ray.init(address=...)``; a cluster on loopback is joined on loopback (Ray 2.60
    would otherwise rewrite 127.0.0.1 to the machine's outward address and miss it)."""
    host = address.rsplit(":", 1)[0].strip("[]")
    if "://" in address or host not in ("127.0.0.1", "localhost", "::1"):
        ray.init(address=address, **kwargs)
        return
    with single_node_mode():
        init_on_node_ip("127.0.0.1", address=address, **kwargs)


def join(address: str) -> None:
    """Join an existing Ray cluster (``ray://`` client or ``host:port``)."""
    address = resolve_address(address)
    use_token(address)
    connect(address, namespace=NAMESPACE, include_dashboard=False,
            logging_level=logging.WARNING, log_to_driver=True)


def cluster_address() -> str:
    """The GCS address (host:port) of the cluster this driver is connected to."""
    return str(ray.get_runtime_context().gcs_address)


def disconnect() -> None:
    with contextlib.suppress(Exception):
        ray.shutdown()
