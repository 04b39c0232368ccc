"""Node hosts (``distributed.workers_per_host = 0``): self-play hosts sized to the nodes.

With one worker an actor the controller calls, waits on, merges, saves and lists every
worker; with K an actor it deals with N / K actors, but K is one number for every node.
Node hosts make the controller's view about one actor a node: when workers are wanted
beyond what the live hosts booked, each new host takes as many workers as one node's
free CPUs (and free ``worker_resource`` units) hold at that moment, largest node first,
and books them (``worker_cpus`` x its workers). So Ray's accounting stays exact (a host
never runs more workers than it booked), and what no node holds now goes to hosts of the
largest node's size, which wait for resources, as pending actors always did: the
autoscaler's demand, in node-sized pieces.

A scale fills the live hosts up to their booking, oldest first, and shrinks the newest
first; a host left with no worker is retired (its node's CPUs freed). Each host's workers
have indexes ``first`` .. ``first + booked - 1``, from the controller's running count, so
worker ids stay unique across hosts and controllers.

Waiting hosts are made anew when the room changes (``WaitingHosts``): a host sized for a
whole node waits until a node is that free, even when nodes now have room for some of its
workers (an autoscaler's new node that a smaller host took half of; a neighbour's actors
gone). Every ``REFIT_EVERY_S`` while hosts wait, the nodes are asked once; a host that has
waited for resources (no process yet: Ray's ``PENDING_CREATION`` without a pid) at two
checks in a row and is larger than the most any node holds now, when that is at least one
worker, is killed (it has played nothing) and its workers planned again like any new ones:
a host that fits now, the rest waiting in node-sized hosts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from zeroforge.deploy.config import TrainConfig
from zeroforge.deploy.ray import ray_calls
from zeroforge.deploy.ray.kinds import KINDS, actor_sizes
from zeroforge.deploy.ray.resources import unplaced_needs
from zeroforge.deploy.ray.slots import Slot, unscheduled

REFIT_EVERY_S = 5.0
"""How often, while node hosts wait for resources, the nodes are asked whether the waiting
ones should be made anew to fit (``WaitingHosts``): one query pair of the GCS each time."""


def node_room(node: Mapping[str, Mapping[str, float]], worker_cpus: float,
              resource: str, kind: str = "free") -> int:
    """Workers the ``kind`` ("free" or "total") resources of one node hold: its CPUs over
    ``worker_cpus``, and its units of ``resource`` when workers need one."""
    have = node.get(kind, {})
    room = int(float(have.get("CPU", 0.0)) // worker_cpus + 1e-9) if worker_cpus > 0 \
        else 1 << 30
    if resource:
        room = min(room, int(float(have.get(resource, 0.0)) + 1e-9))
    return max(room, 0)


def new_host_sizes(workers: int, nodes: Mapping[str, Mapping[str, Mapping[str, float]]],
                   worker_cpus: float, resource: str,
                   unplaced: Mapping[str, float] | None = None,
                   spread: bool = False) -> list[int]:
    """Sizes of the new hosts that hold ``workers`` more workers: one per node with free
    room, largest first, each as many as that node holds; the rest in hosts of the
    largest node's whole size (they wait for resources: a node freeing up, or the
    autoscaler adding one), or of 1 where no node could ever hold a worker yet (an
    autoscaling group at zero nodes: any node of it holds one).

    ``unplaced``: resources of the run's actors made but not placed yet (Ray's free
    figures do not count them yet): taken from the largest free node first, where Ray
    is likeliest to put them, so a new host does not book CPUs they are about to take.

    ``spread`` (``distributed.worker_spread``): the workers that fit are dealt out over the
    nodes with room one at a time, a host a node (placed with Ray's SPREAD), instead of
    filling the largest node first."""
    sizes: list[int] = []
    rooms = _less_unplaced(nodes, unplaced or {})
    free = sorted((node_room(n, worker_cpus, resource) for n in rooms), reverse=True)
    if spread:
        dealt = [0] * len(free)
        while workers > 0 and any(d < r for d, r in zip(dealt, free, strict=True)):
            for i, room in enumerate(free):
                if workers > 0 and dealt[i] < room:
                    dealt[i] += 1
                    workers -= 1
        sizes = [d for d in dealt if d]
        free = []
    for room in free:
        if workers <= 0 or room <= 0:
            break
        take = min(room, workers)
        sizes.append(take)
        workers -= take
    if workers > 0:
        whole = max((node_room(n, worker_cpus, resource, "total") for n in nodes.values()),
                    default=0) or 1
        full, rest = divmod(workers, whole)
        sizes += [whole] * full + ([rest] if rest else [])
    return sizes


def _less_unplaced(nodes: Mapping[str, Mapping[str, Mapping[str, float]]],
                   unplaced: Mapping[str, float]) -> list[dict]:
    """The nodes, the ``unplaced`` resources taken out of the most free ones first."""
    out = [{"free": dict(n.get("free", {})), "total": dict(n.get("total", {}))}
           for n in nodes.values()]
    for res, amount in unplaced.items():
        for node in sorted(out, key=lambda n: -float(n["free"].get(res, 0.0))):
            if amount <= 0:
                break
            take = min(amount, float(node["free"].get(res, 0.0)))
            node["free"][res] = float(node["free"].get(res, 0.0)) - take
            amount -= take
    return out


def fill_booked(booked: Sequence[int], desired: int) -> tuple[list[int], int]:
    """Workers for each live host (oldest first), up to what it booked, and how many of
    ``desired`` they cannot hold."""
    sizes = []
    left = desired
    for capacity in booked:
        take = min(capacity, max(left, 0))
        sizes.append(take)
        left -= take
    return sizes, max(left, 0)


def plan_sizes(config: TrainConfig, name: str, live: Sequence[Slot], desired: int,
               unplaced: Callable[[], Mapping[str, float]] = dict
               ) -> tuple[list[int], list[int]]:
    """How ``live`` actors of kind ``name`` (oldest first) and new ones hold ``desired``
    units: each live actor's size (0: retire it) and the sizes of the actors to make.
    Hosts of K (``per_actor``): full ones, the remainder in the newest. Node hosts: the
    live ones filled up to their booking, then new ones sized to the nodes' free room, less
    what ``unplaced()`` says the run's unplaced actors take (``new_host_sizes``; asked,
    with one query of the nodes, only when new hosts are needed)."""
    per = KINDS[name].per_actor(config)
    if per:
        sizes = actor_sizes(config, name, desired)
        return sizes[:len(live)] + [0] * max(len(live) - len(sizes), 0), sizes[len(live):]
    kept, left = fill_booked([s.booked for s in live], desired)
    if not left:
        return kept, []
    d = config.distributed
    return kept, new_host_sizes(left, ray_calls.node_resources(), d.worker_cpus,
                                d.worker_resource, unplaced(), spread=d.worker_spread)


def booked_options(config: TrainConfig, options: dict, workers: int) -> dict:
    """A node host's Ray options: its workers' CPUs and ``worker_resource`` units."""
    d = config.distributed
    out = {**options, "num_cpus": d.worker_cpus * workers}
    if d.worker_resource:
        out["resources"] = {**options.get("resources", {}), d.worker_resource: float(workers)}
    return out


def too_big_to_place(waiting: Sequence[int], nodes: Mapping[str, Mapping[str, Mapping[str, float]]],
                     worker_cpus: float, resource: str,
                     unplaced: Mapping[str, float] | None = None) -> list[int]:
    """Positions in ``waiting`` (the workers of each host Ray has not placed) of the hosts
    to make anew: those no node holds now while some node holds at least one worker, once
    the waiting hosts that do fit somewhere (Ray is about to place them) have taken their
    room. ``unplaced``: what the run's other actors, made but not placed, are about to
    take."""
    def best(taken: Mapping[str, float]) -> int:
        return max((node_room(n, worker_cpus, resource) for n in _less_unplaced(nodes, taken)),
                   default=0)

    room = best(unplaced or {})
    too_big = [i for i, size in enumerate(waiting) if size > room]
    fitting = sum(waiting) - sum(waiting[i] for i in too_big)
    taken = _with_workers(unplaced or {}, worker_cpus, resource, fitting)
    return too_big if too_big and best(taken) >= 1 else []


def _with_workers(needs: Mapping[str, float], worker_cpus: float, resource: str,
                  workers: int) -> dict[str, float]:
    """``needs`` plus what ``workers`` workers book (``worker_cpus`` CPUs and a unit of
    ``resource`` each; a negative count takes them out, never below 0)."""
    out = dict(needs)
    out["CPU"] = max(out.get("CPU", 0.0) + worker_cpus * workers, 0.0)
    if resource:
        out[resource] = max(out.get(resource, 0.0) + workers, 0.0)
    return out


class WaitingHosts:
    """The controller's check of its waiting node hosts (module docstring)."""

    def __init__(self, every_s: float = REFIT_EVERY_S) -> None:
        self.every_s = every_s
        self._next = 0.0
        self._seen: set[int] = set()
        """Indexes of the hosts waiting at the last check: only a host that waited at two
        checks in a row is made anew (one Ray is placing now is left to it)."""

    def to_replace(self, config: TrainConfig, slots: dict[str, list[Slot]],
                   now: float | None = None) -> list[Slot]:
        """The self-play hosts to kill and plan again: none unless node hosts wait, and at
        most once every ``every_s``."""
        now = time.monotonic() if now is None else now
        if KINDS["selfplay"].per_actor(config) or now < self._next:
            return []
        self._next = now + self.every_s
        now_waiting = [s for s in slots["selfplay"]
                       if not s.started and not s.stopping and unscheduled(s)]
        waiting = [s for s in now_waiting if s.index in self._seen]
        self._seen = {s.index for s in now_waiting}
        if not waiting:
            return []
        d = config.distributed
        # the others made but not placed may take room first; the waiting ones take none
        others = _with_workers(unplaced_needs(config, slots), d.worker_cpus, d.worker_resource,
                               -sum(s.booked for s in waiting))
        chosen = too_big_to_place([s.booked for s in waiting], ray_calls.node_resources(),
                                  d.worker_cpus, d.worker_resource, others)
        return [waiting[i] for i in chosen]
