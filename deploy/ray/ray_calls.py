"""Every Ray call the controller makes, behind one seam.

The controller and its helpers (``slots``, ``resources``, ``naming``) call Ray only
through the module functions here, which forward to the ``RayCalls`` in use: the real one
(``RayCalls``, a thin layer over ``ray``) or, in ``benchmarks/control_plane.py`` and the
control-plane tests, an in-process fake cluster of thousands of simulated actors. So the
benchmark runs the controller's real code and counts what it asks of Ray: calls to
actors, waits and gets, and queries of the GCS (the cluster's one central table, whose
load must not grow with the workers of a run).

Calls on an actor handle (``handle.stats.remote()``) are not wrapped: a fake handle
answers them itself, and they are counted there.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import ray

from zeroforge.deploy.ray import private_api


class RayCalls:
    """The real calls (``ray``). A fake implements the same methods."""

    def create(self, cls: type, options: dict, *args: Any) -> Any:
        """A new actor of ``cls`` with Ray ``options``, built with ``args``."""
        return ray.remote(cls).options(**options).remote(*args)

    def wait(self, refs: Sequence[Any], num_returns: int, timeout: float | None
             ) -> tuple[list, list]:
        return ray.wait(list(refs), num_returns=num_returns, timeout=timeout)

    def get(self, ref: Any, timeout: float | None = None) -> Any:
        return ray.get(ref, timeout=timeout)

    def kill(self, handle: Any) -> None:
        ray.kill(handle, no_restart=True)

    def actor_state(self, handle: Any) -> str:
        """Ray's state of one actor (a GCS query; "" when Ray does not say)."""
        return private_api.gcs_actor_state(handle)

    def cluster_resources(self) -> dict:
        return dict(ray.cluster_resources())

    def available_resources(self) -> dict:
        return dict(ray.available_resources())

    def node_resources(self) -> dict[str, dict[str, dict[str, float]]]:
        """Each live node's ``{"total": {...}, "free": {...}}`` resources (GCS queries)."""
        return private_api.node_resources()

    def named_actors(self) -> list[dict]:
        """Every named actor of every namespace: ``{"name", "namespace"}`` each."""
        return list(ray.util.list_named_actors(all_namespaces=True))

    def get_actor(self, name: str, namespace: str) -> Any:
        """The handle of a named actor; ValueError when there is none."""
        return ray.get_actor(name, namespace=namespace)


_current: RayCalls = RayCalls()


@contextlib.contextmanager
def using(calls: RayCalls) -> Iterator[RayCalls]:
    """Route the controller's Ray calls to ``calls`` (a fake cluster) within the block."""
    global _current
    before, _current = _current, calls
    try:
        yield calls
    finally:
        _current = before


def create(cls: type, options: dict, *args: Any) -> Any:
    return _current.create(cls, options, *args)


def wait(refs: Sequence[Any], num_returns: int | None = None, timeout: float | None = None
         ) -> tuple[list, list]:
    """``ray.wait`` over ``refs`` (all of them by default); ``([], [])`` for none."""
    if not refs:
        return [], []
    return _current.wait(refs, len(refs) if num_returns is None else num_returns, timeout)


def get(ref: Any, timeout: float | None = None) -> Any:
    return _current.get(ref, timeout)


def kill(handle: Any) -> None:
    _current.kill(handle)


def actor_state(handle: Any) -> str:
    return _current.actor_state(handle)


def cluster_resources() -> dict:
    return _current.cluster_resources()


def available_resources() -> dict:
    return _current.available_resources()


def node_resources() -> dict[str, dict[str, dict[str, float]]]:
    return _current.node_resources()


def named_actors() -> list[dict]:
    return _current.named_actors()


def get_actor(name: str, namespace: str) -> Any:
    return _current.get_actor(name, namespace)
