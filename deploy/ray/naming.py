"""The Ray names of a run's actors: the namespace, the controller's name, the service
actors' names (detached, so a new controller finds and adopts them by name), and listing
or killing a run's named actors.
"""

from __future__ import annotations

import contextlib
import re

from zeroforge.deploy.ray import ray_calls

NAMESPACE = "zeroforge"
"""Ray namespace of every zeroforge actor."""


def controller_name(run_id: str) -> str:
    return f"controller-{run_id}"


def actor_name(run_id: str, kind: str, index: int) -> str:
    """The Ray name of one of a run's service actors (detached, in ``NAMESPACE``): a new
    controller finds the actors of its run by these names and adopts them."""
    return f"actor-{run_id}-{kind}-{index}"


def _parse_actor_name(name: str) -> tuple[str, str, int] | None:
    """(run id, kind, index) of an ``actor_name``; None for any other name."""
    # imported here: the kinds' builders import torch, which `zeroforge status` never needs
    from zeroforge.deploy.ray.kinds import KINDS

    m = re.fullmatch(r"actor-(.+)-([a-z]+)-(\d+)", name)
    if m is None or m.group(2) not in KINDS:
        return None
    return m.group(1), m.group(2), int(m.group(3))


def run_actor_names(run_id: str) -> list[tuple[str, int, str]]:
    """(kind, index, name) of every live named service actor of ``run_id``."""
    found = []
    for entry in ray_calls.named_actors():
        if entry.get("namespace") != NAMESPACE:
            continue
        parsed = _parse_actor_name(str(entry.get("name", "")))
        if parsed is not None and parsed[0] == run_id:
            found.append((parsed[1], parsed[2], str(entry["name"])))
    return sorted(found)


def kill_run_actors(run_id: str) -> int:
    """Kill every named service actor of ``run_id`` (they are detached: nothing else ends
    them); returns how many were killed."""
    killed = 0
    for _, _, name in run_actor_names(run_id):
        with contextlib.suppress(Exception):
            ray_calls.kill(ray_calls.get_actor(name, NAMESPACE))
            killed += 1
    return killed
