"""Every private Ray API zeroforge uses, one function each (written against Ray 2.60).

Nothing else in zeroforge touches ``ray._private``, ``ray._raylet``, an underscore
attribute of a Ray object or an underscore keyword of ``ray.init``: a Ray upgrade that
moves one of them breaks this module only, and ``tests/unit/test_ray_private_api.py``
says which (``PRIVATE_NAMES`` and ``INIT_KEYWORDS`` are what it checks).
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Iterator
from typing import Any

import ray

PRIVATE_NAMES = {
    "ray.actor.ActorHandle._actor_id": "actor_id_hex",
    "ray._private.state.actors": "gcs_actor_table",
    "ray._private.state.available_resources_per_node": "node_resources",
    "ray._private.state.total_resources_per_node": "node_resources",
    "ray._private.worker._global_node": "session_dir",
    "ray._private.node.Node.get_session_dir_path": "session_dir",
    "ray._private.ray_constants.ENABLE_RAY_CLUSTER": "single_node_mode",
    "ray._private.ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR": "single_node_mode",
    "ray._private.services.get_ray_address_from_environment": "newest_local_cluster_address",
    "ray._raylet.Config.initialize": "reload_ray_config",
    "ray._raylet.AuthenticationTokenLoader.instance": "reset_auth_token_cache",
}
"""Dotted path (a module, then attributes) of each private name used below -> the
function that uses it."""

INIT_KEYWORDS = {"_node_ip_address": "init_on_node_ip"}
"""Private keywords of ``ray.init`` used below -> the function that passes it."""

SINGLE_NODE_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
"""The variable Ray reads ``ray_constants.ENABLE_RAY_CLUSTER`` from (at import)."""


def actor_id_hex(handle: Any) -> str:
    """The hex id of the actor behind ``handle``.

    Private because: an ``ActorHandle`` has no public accessor for its actor's id (only
    ``ray.get_runtime_context().get_actor_id()``, which is the caller's own id)."""
    return str(handle._actor_id.hex())


def gcs_actor_table(actor_id: str | None = None) -> Any:
    """The GCS actor table: every actor's entry by hex id, or (``actor_id``) the entry of
    that actor, each a dict with ``Name``, ``State``, ``Address``, ``Pid``...

    Private because: the public state API (``ray.util.state.list_actors`` /
    ``get_actor``) asks the dashboard's state server, which zeroforge's clusters run
    without (``include_dashboard=False``); ``ray._private.state.actors`` reads the GCS."""
    from ray._private import state as ray_state

    return ray_state.actors(actor_id=actor_id)


CREATING = "CREATING"
"""zeroforge's name for a ``PENDING_CREATION`` actor that Ray has given a worker process
(its ``Pid`` is set: placed, its constructor running), as against one still waiting for
resources (no process yet)."""


def gcs_actor_state(handle: Any) -> str:
    """Ray's own view of an actor (``PENDING_CREATION``, ``ALIVE``, ``RESTARTING``...),
    from the GCS actor table, with ``CREATING`` for a pending one that has its process;
    "" when Ray does not say (never raises: status and scale-down must not break on a
    private API)."""
    try:
        info = gcs_actor_table(actor_id_hex(handle))
        if not isinstance(info, dict):
            return ""
        state = str(info.get("State", ""))
        return CREATING if state == "PENDING_CREATION" and info.get("Pid") else state
    except Exception:
        return ""


def node_resources() -> dict[str, dict[str, dict[str, float]]]:
    """Each live node's resources: ``{node id: {"total": {...}, "free": {...}}}``, from the
    GCS (two queries).

    Private because: the public ``ray.available_resources()`` sums the cluster, and the
    per-node view of the public state API asks the dashboard's state server, which
    zeroforge's clusters run without."""
    from ray._private import state as ray_state

    free = ray_state.available_resources_per_node()
    total = ray_state.total_resources_per_node()
    return {str(node): {"total": dict(total.get(node, {})), "free": dict(free.get(node, {}))}
            for node in total}


def session_dir() -> str:
    """The session directory of the Ray node this process started or joined (its
    processes carry it on their command lines).

    Private because: Ray has no public accessor for it; ``/tmp/ray/session_latest`` is the
    newest session of the machine, not necessarily this one."""
    from ray._private import worker

    node = worker._global_node
    if node is None:
        raise RuntimeError("this process has not started or joined a Ray node")
    return str(node.get_session_dir_path())


@contextlib.contextmanager
def single_node_mode() -> Iterator[None]:
    """Make Ray keep a new local node on 127.0.0.1 while the block runs.

    ``ray.init(_node_ip_address="127.0.0.1")`` alone is not enough: Ray rewrites a
    loopback node address to the machine's outward address
    (``services.resolve_ip_for_localhost``), so the GCS address, the autoscaler monitor's
    metrics port and the runtime-env agent end up on the network. Ray keeps loopback only
    where it believes multi-node clusters are off (``ray_constants.ENABLE_RAY_CLUSTER``,
    from $RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER): switch that off while the node starts (the
    processes it spawns inherit the variable), and put both back afterwards so a later
    ``join`` in this process resolves addresses as usual.

    Private because: Ray has no public switch that keeps a node on loopback; the constant
    is read when ``ray_constants`` is imported, so setting the variable alone does not
    reach this process."""
    from ray._private import ray_constants

    before = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        with environment(SINGLE_NODE_ENV, "0"):
            yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = before


@contextlib.contextmanager
def environment(name: str, value: str, *, keep_set: bool = False) -> Iterator[None]:
    """$name set to ``value`` while the block runs (processes started in it inherit it),
    then put back as it was. ``keep_set``: a value the process already has wins."""
    before = os.environ.get(name)
    if before is None or not keep_set:
        os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


NICENESS_ENV = "RAY_worker_niceness"
"""The variable Ray's raylet reads its workers' niceness from when it starts."""

WORKER_NICENESS = "0"
"""Niceness of the Ray workers (the run's actors) of a cluster zeroforge starts. Ray's
default, 15, lets any ordinary process beside the run take the CPU from them: with two
CPU-bound jobs on a 2-core machine the learner took minutes to start and to train (the
Ray system processes and the driver run at 0 either way). The same variable in the
environment of ``ray start`` does it for a cluster started by hand (docs/cluster.md)."""


def init_on_node_ip(node_ip: str, **kwargs: Any) -> None:
    """``ray.init(**kwargs)`` with this node's address set to ``node_ip``.

    Private because: ``ray.init`` takes the node address only as the hidden keyword
    ``_node_ip_address`` (``ray start`` has ``--node-ip-address``, the driver has none).

    A cluster started here runs its workers at niceness 0 (``WORKER_NICENESS``) unless
    ``RAY_worker_niceness`` says otherwise. The variable is set only while the cluster
    starts (its raylet reads it then): left in this process's environment, it reached every
    later ``ray.init`` or ``ray.cluster_utils.Cluster`` of the process, so a test's Ray got
    niceness 0 or 15 by which tests had run before it."""
    with environment(NICENESS_ENV, WORKER_NICENESS, keep_set=True):
        ray.init(_node_ip_address=node_ip, **kwargs)


def newest_local_cluster_address() -> str | None:
    """The address ``ray.init(address="auto")`` would attach to ($RAY_ADDRESS, else the
    newest local cluster); None when there is none.

    Private because: Ray resolves ``"auto"`` only inside ``ray.init``, and the caller needs
    the address before (to join a loopback cluster on loopback)."""
    from ray._private import services

    found = services.get_ray_address_from_environment("auto", None)
    return str(found) if found else None


def _raylet() -> Any:
    # ``ray/_raylet.pyi`` declares only the id classes and ObjectRef: the extension's
    # other names are untyped (Any) for mypy
    return importlib.import_module("ray._raylet")


def reload_ray_config() -> None:
    """Make Ray read its configuration ($RAY_AUTH_MODE among it) from the environment
    again.

    Private because: Ray reads it once, when ``ray`` is imported; there is no public way
    to re-read it after the process changed the variables (``use_token``)."""
    _raylet().Config.initialize("")


def reset_auth_token_cache() -> None:
    """Forget the authentication token Ray loaded, so the next connection reads
    $RAY_AUTH_TOKEN / $RAY_AUTH_TOKEN_PATH again.

    Private because: Ray caches the token the first time it is needed and offers no
    public way to load another."""
    _raylet().AuthenticationTokenLoader.instance().reset_cache()
