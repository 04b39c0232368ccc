"""What a run's actors reserve on the cluster (``needs``) and whether its free resources
hold them: the one-line warnings of ``start`` and ``scale`` (``shortfall``) and why a
pending actor waits (``waiting_line``).
"""

from __future__ import annotations

import collections

from zeroforge.deploy.config import TrainConfig
from zeroforge.deploy.ray import ray_calls
from zeroforge.deploy.ray.kinds import KINDS, actors_wanted
from zeroforge.deploy.ray.slots import Slot, slot_state


def needs(config: TrainConfig, name: str) -> dict[str, float]:
    """Resources one actor of kind ``name`` reserves."""
    if KINDS[name].is_server:
        c = config.inference
        gpu = c.device.startswith("cuda") or (
            c.device == "auto" and ray_calls.cluster_resources().get("GPU", 0) >= 1)
        return {"CPU": c.num_cpus, "GPU": c.num_gpus if gpu else 0.0}
    o = KINDS[name].options(config)
    custom = {r: float(v) for r, v in o.get("resources", {}).items()}
    return {"CPU": float(o.get("num_cpus") or 0), "GPU": float(o.get("num_gpus") or 0),
            **custom}


def shortfall(config: TrainConfig, slots: dict[str, list[Slot]], desired: dict[str, int]
              ) -> str:
    """One line when the actors a fill up to ``desired`` is about to create (plus those
    still pending) need more CPUs/GPUs than the cluster has free; "" when they fit."""
    free = ray_calls.available_resources()
    need: dict[str, float] = collections.defaultdict(float, unplaced_needs(config, slots))
    new = []
    for name in KINDS:
        live = [s for s in slots[name] if not s.stopping]
        # node hosts book each worker's share: count workers, not hosts
        count = max(desired[name] - _units(config, name, live) if _node_hosts(config, name)
                    else actors_wanted(config, name, desired[name]) - len(live), 0)
        if count:
            new.append(f"{count} {name}")
            for res, amount in needs(config, name).items():
                need[res] += amount * count
    short = [f"{need[r]:g} {r} (free: {free.get(r, 0.0):g})" for r in need
             if need[r] > free.get(r, 0.0) + 1e-9]
    if not short or not new:
        return ""
    return (f"the cluster cannot hold all the asked actors ({', '.join(new)}) now: they "
            f"need {' and '.join(short)}; the rest stay pending until resources free up "
            "(see `zeroforge status`)")


def _node_hosts(config: TrainConfig, name: str) -> bool:
    """Whether the actors of kind ``name`` are node hosts (``per_actor`` 0)."""
    return not KINDS[name].per_actor(config)


def _units(config: TrainConfig, name: str, slots: list[Slot]) -> int:
    """How many times ``needs`` the ``slots`` of kind ``name`` reserve: once each, or a
    node host once for each worker it booked."""
    return sum(s.booked for s in slots) if _node_hosts(config, name) else len(slots)


def unplaced_needs(config: TrainConfig, slots: dict[str, list[Slot]]) -> dict[str, float]:
    """What the run's actors that have not answered yet (made, maybe not placed) reserve
    between them: Ray's free figures may not count them yet."""
    total: dict[str, float] = collections.defaultdict(float)
    for name, kind_slots in slots.items():
        units = _units(config, name, [s for s in kind_slots
                                      if not s.started and not s.stopping])
        if units:
            for res, amount in needs(config, name).items():
                total[res] += amount * units
    return dict(total)


def check_scale(config: TrainConfig, inference: str, workers: int | None,
                inference_servers: int | None, learners: int | None) -> None:
    """ValueError, in one line, for a scale a run cannot take (None: that count unchanged)."""
    if workers is not None and workers < 0:
        raise ValueError(f"workers must be >= 0, got {workers}")
    if inference_servers is not None:
        if inference != "server":
            raise ValueError("this run evaluates in-process (inference=local); "
                             "it has no inference servers to scale")
        if inference_servers < 1:
            raise ValueError("a run with inference=server needs at least 1 server")
    batch = config.learner.batch_size
    if learners is not None and (learners < 1 or batch % learners):
        raise ValueError(f"learners must be >= 1 and divide learner.batch_size {batch}, "
                         f"got {learners}")


def waiting_line(config: TrainConfig, name: str, pending: int, free: dict) -> str:
    """Why ``pending`` actors of kind ``name`` wait: what each needs, what is ``free``
    (``ray.available_resources()``)."""
    each = needs(config, name)
    wanted = " + ".join(f"{v:g} {r}" for r, v in each.items() if v)
    have = ", ".join(f"{free.get(r, 0.0):g} {r}" for r, v in each.items() if v)
    return f"{pending} waiting for {wanted or 'resources'} each (free: {have or 'n/a'})"


def learner_group_misfit(config: TrainConfig) -> str:
    """One line when the cluster, counting all of its resources (free or not), can never
    hold ``learner.replicas`` learner replicas at once; "" when it can. A group waits for
    all its members, so a member that can never be placed would leave the run without a
    learner: this is checked before the run starts."""
    replicas = config.learner.replicas
    if replicas < 2:
        return ""
    total = ray_calls.cluster_resources()
    need: dict[str, float] = collections.defaultdict(float)
    for rank in range(replicas):
        kind = KINDS["learner"]
        options = (kind.replica_options(config) if rank and kind.replica_options
                   else kind.options(config))
        need["CPU"] += float(options.get("num_cpus") or 0)
        need["GPU"] += float(options.get("num_gpus") or 0)
    short = [f"{need[r]:g} {r} (the cluster has {total.get(r, 0.0):g} in all)" for r in need
             if need[r] > total.get(r, 0.0) + 1e-9]
    if not short:
        return ""
    return (f"learner.replicas={replicas} needs {' and '.join(short)} for the learner "
            "replicas alone (distributed.learner_cpus / learner_gpus each): lower "
            "learner.replicas or add nodes")


def actor_states(slots: dict[str, list[Slot]], config: TrainConfig, failed: dict[str, int]
                 ) -> tuple[dict[str, dict[str, int]], dict[str, str]]:
    """Per kind, how many actors are pending / starting / restarting / alive / stopping
    (and ``failed``: the crashes of each kind in ``failed``, given once the run gave up),
    and why pending ones wait (``waiting_line``)."""
    states: dict[str, dict[str, int]] = {}
    waiting: dict[str, str] = {}
    free = None
    for name in KINDS:
        counts: collections.Counter[str] = collections.Counter()
        for slot in slots[name]:
            counts[slot_state(slot)] += slot.workers
        if failed.get(name):
            counts["failed"] = failed[name]
        states[name] = dict(counts)
        if counts["pending"]:
            if free is None:
                free = ray_calls.available_resources()
            waiting[name] = waiting_line(config, name, counts["pending"], free)
    return states, waiting
