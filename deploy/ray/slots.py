"""The controller's record of each actor it looks after (``Slot``) and what it learns
from the actors: their metrics snapshots and whereabouts (``probe``), their state
(``slot_state``: pending, starting, restarting, alive, stopping) and their status rows;
and ``adopt``, which rebuilds the slots of a run's live actors for a successor controller.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from zeroforge.deploy.ray import ray_calls
from zeroforge.deploy.ray.naming import NAMESPACE, run_actor_names
from zeroforge.deploy.runtime.status import WORKER_PAGE, page_of

log = logging.getLogger(__name__)

PENDING_STATES = ("PENDING_CREATION", "DEPENDENCIES_UNREADY")
"""GCS actor states of an actor Ray has not scheduled yet (no node has its resources)."""

ROW_COUNTERS = {"games": "selfplay_games_total", "positions": "selfplay_positions_total",
                "steps": "learner_steps_total", "evaluations": "nn_evaluations_total"}
"""Status row key -> the counter of an actor's own snapshot it shows (summed over labels)."""


@dataclass
class Slot:
    """One live actor the controller looks after."""

    kind: str
    index: int
    handle: Any
    run_ref: Any = None
    """ObjectRef of the actor's long-running ``run`` call: it resolving means the actor ended."""
    stopping: bool = False
    last_stats: dict = field(default_factory=dict)
    started: bool = False
    """The actor answered a ``stats`` call: it was scheduled, built its service and its
    ``run`` is going. Until then it is pending (no resources yet) or starting."""
    replacement: bool = False
    """Created to replace a crashed actor of its kind."""
    probe: Any = None
    """The outstanding ``stats`` call (one at a time, so a never-scheduled actor does not
    pile up calls)."""
    probe_sent: float = 0.0
    """When ``probe`` was sent (``time.monotonic``): its age tells a hung actor."""
    hung: str = ""
    """Why the controller killed it as hung ("" : it did not)."""
    where: dict = field(default_factory=dict)
    """``{"pid", "node", "ip"}`` once the actor told (status rows)."""
    where_ref: Any = None
    """The outstanding ``where`` call."""
    workers: int = 1
    """Self-play workers this actor hosts (``distributed.workers_per_host``; 1 otherwise)."""
    first: int = 0
    """The index of its first worker (a host's workers are ``first`` .. on)."""
    booked: int = 1
    """Workers it booked CPUs for when made (a node host never runs more)."""
    cancelled: bool = False
    """Retired while Ray had not scheduled it yet: killed at once (nothing to save), so
    it takes no resources a scale-down frees and no autoscaler node; no crash, no stats."""


def kill(slot: Slot) -> None:
    """End the slot's actor now, whatever it is doing (it may already be gone)."""
    with contextlib.suppress(Exception):
        ray_calls.kill(slot.handle)


def kill_hung(slots: dict[str, list[Slot]], hang_s: float) -> None:
    """Kill the started actors that left a ``stats`` call unanswered for ``hang_s``
    (``distributed.hang_s``; 0: never), saying why in ``Slot.hung``: the reaper then
    replaces them as crashed."""
    if not hang_s:
        return
    now = time.monotonic()
    for kind_slots in slots.values():
        for slot in kind_slots:
            if (not slot.started or slot.stopping or slot.hung or slot.probe is None
                    or now - slot.probe_sent < hang_s):
                continue
            slot.hung = (f"hung: answered no call for {now - slot.probe_sent:.0f} s "
                         f"(distributed.hang_s {hang_s:g}); killed")
            log.warning("%s %d %s, to be replaced", slot.kind, slot.index, slot.hung)
            kill(slot)


def drop_never_scheduled(slots: dict[str, list[Slot]]) -> set[str]:
    """Remove and kill the actors Ray never scheduled (or that were cancelled): they have
    nothing to save. Returns their kinds."""
    kinds = set()
    for kind_slots in slots.values():
        for slot in [s for s in kind_slots
                     if s.cancelled or (not s.started and slot_state(s) == "pending")]:
            kind_slots.remove(slot)
            kinds.add(slot.kind)
            kill(slot)
    return kinds


def unscheduled(slot: Slot) -> bool:
    """Ray has not scheduled the slot's actor yet (it waits for resources)."""
    return ray_calls.actor_state(slot.handle) in PENDING_STATES


def slot_state(slot: Slot) -> str:
    """pending, starting, restarting, alive or stopping (status and ``actor_states``)."""
    if slot.stopping:
        return "stopping"
    if slot.started:
        return "alive"
    if unscheduled(slot):
        return "pending"
    return "restarting" if slot.replacement else "starting"


def probe(slots: dict[str, list[Slot]], timeout_s: float = 2.0) -> None:
    """Ask every actor for its metrics snapshot, one outstanding call per actor; wait
    up to ``timeout_s`` for the started ones (a pending actor is not waited for)."""
    started: dict[Any, Slot] = {}
    fresh: dict[Any, Slot] = {}
    for kind_slots in slots.values():
        for slot in kind_slots:
            if slot.probe is None:
                slot.probe = slot.handle.stats.remote()
                slot.probe_sent = time.monotonic()
            (started if slot.started else fresh)[slot.probe] = slot
    for refs, timeout in ((started, timeout_s), (fresh, 0)):
        if not refs:
            continue
        ready, _ = ray_calls.wait(list(refs), timeout=timeout)
        for ref in ready:
            slot = refs[ref]
            slot.probe = None
            # an actor that died between wait and get is the reaper's business
            with contextlib.suppress(Exception):
                slot.last_stats = ray_calls.get(ref)
                slot.started = True
    _locate(slots)


def _locate(slots: dict[str, list[Slot]]) -> None:
    """Learn each started actor's pid and node once (status rows), without waiting."""
    asked = {}
    for kind_slots in slots.values():
        for slot in kind_slots:
            if slot.started and not slot.where:
                if slot.where_ref is None:
                    slot.where_ref = slot.handle.where.remote()
                asked[slot.where_ref] = slot
    if asked:
        ready, _ = ray_calls.wait(list(asked), timeout=0)
        for ref in ready:
            slot = asked[ref]
            slot.where_ref = None
            with contextlib.suppress(Exception):
                slot.where = dict(ray_calls.get(ref))


def _own_total(snapshot: dict, name: str) -> float:
    """One counter of an actor's own (unmerged) snapshot, summed over its series."""
    return float(sum(v for _, v in (snapshot or {}).get("values", {}).get(name, [])))


def rows(slots: dict[str, list[Slot]]) -> list[dict]:
    """One row per live actor (``RunStatus.actors``): a self-play host is one row, its
    ``workers`` and their counters summed (``worker_rows`` pages through the workers), so
    status grows with the hosts of a run, not its workers."""
    out = []
    for name, kind_slots in slots.items():
        for slot in sorted(kind_slots, key=lambda s: s.index):
            row = {"kind": name, "index": slot.index, "state": slot_state(slot),
                   "node": str(slot.where.get("node", "")),
                   "ip": str(slot.where.get("ip", "")),
                   "pid": int(slot.where.get("pid", 0)), "workers": slot.workers}
            for key, metric in ROW_COUNTERS.items():
                row[key] = _own_total(slot.last_stats, metric)
            out.append(row)
    return out


def worker_rows(hosts: list[Slot], per_actor: int, page: int = 0,
                page_size: int = WORKER_PAGE) -> dict:
    """Page ``page`` (from 0) of the self-play workers, one row each (``index``, its host,
    state, node, games, positions), in index order: ``{"rows", "page", "pages",
    "workers"}``. A host of several workers tells its workers' counters in its report
    (``WorkerHost.stats``'s ``workers``); before its first report they read 0."""
    listed: list[tuple[int, Slot, float, float]] = []
    for slot in hosts:
        if per_actor == 1:
            listed.append((slot.index, slot, _own_total(slot.last_stats, ROW_COUNTERS["games"]),
                           _own_total(slot.last_stats, ROW_COUNTERS["positions"])))
            continue
        hosted = (slot.last_stats or {}).get("workers") or [
            [slot.first + j, 0.0, 0.0] for j in range(slot.workers)]
        listed += [(int(i), slot, float(g), float(p)) for i, g, p in hosted]
    listed.sort(key=lambda item: item[0])
    # rows for the page's workers only: a state may ask the GCS (a host not started yet)
    chosen, pages = page_of(listed, page, page_size)
    return {"rows": [{"index": i, "host": slot.index, "state": slot_state(slot),
                      "node": str(slot.where.get("node", "")), "games": games,
                      "positions": positions} for i, slot, games, positions in chosen],
            "page": page, "pages": pages, "workers": len(listed)}


COUNTED_KINDS = ("selfplay",)
"""Kinds whose slots carry only their row's counters in the controller's state (there may
be thousands of them); the others (a learner, an evaluator, a few inference servers) carry
their last snapshot."""


def slot_record(slot: Slot) -> dict:
    """What the controller's state keeps of one slot: plain data of a size independent of
    the workers it hosts. A self-play host's snapshot is not kept (its next report brings
    it); its games and positions are, in case it dies while no controller watches."""
    record = {"kind": slot.kind, "index": slot.index, "stopping": slot.stopping,
              "started": slot.started, "replacement": slot.replacement,
              "where": slot.where, "workers": slot.workers, "first": slot.first,
              "booked": slot.booked}
    if slot.kind in COUNTED_KINDS:
        record["counters"] = [_own_total(slot.last_stats, ROW_COUNTERS[key])
                              for key in ("games", "positions")]
    else:
        record["last_stats"] = {k: v for k, v in slot.last_stats.items() if k != "workers"}
    return record


def recorded_stats(record: dict) -> dict:
    """The last snapshot a ``slot_record`` keeps: its own, or for a counted kind its games
    and positions under ``worker="ended"`` (what still counts of a host that died while no
    controller watched)."""
    if "counters" not in record:
        return dict(record.get("last_stats") or {})
    games, positions = (list(record["counters"]) + [0.0, 0.0])[:2]
    labels = [["worker", "ended"], ["worker_kind", record["kind"]]]
    return {"values": {ROW_COUNTERS["games"]: [[labels, float(games)]],
                       ROW_COUNTERS["positions"]: [[labels, float(positions)]]},
            "hists": {}}


def adopt(run_id: str, known: dict[tuple[str, int], dict]) -> tuple[list[Slot], int]:
    """Slots for the live named actors of ``run_id``, each ``run`` called again (a second
    call joins the first: see ``ServiceHost``), filled in from the dead controller's
    records in ``known`` (``(kind, index)`` -> its ``controller_state()`` slot). Adopted
    records are popped from ``known``: what stays there died while no controller watched.
    Returns the slots and how many named actors were listed."""
    found = run_actor_names(run_id)
    adopted: list[Slot] = []
    for kind, index, name in found:
        try:
            handle = ray_calls.get_actor(name, NAMESPACE)
        except ValueError:  # died between the listing and now
            continue
        was = known.pop((kind, index), {})
        slot = Slot(kind, index, handle, run_ref=handle.run.remote(),
                    stopping=bool(was.get("stopping")), started=bool(was.get("started")),
                    replacement=bool(was.get("replacement")),
                    last_stats=dict(was.get("last_stats") or {}),  # counted kinds: none
                    where=dict(was.get("where") or {}), workers=int(was.get("workers", 1)),
                    first=int(was.get("first", index)), booked=int(was.get("booked", 1)))
        adopted.append(slot)
        if slot.stopping:
            with contextlib.suppress(Exception):
                handle.stop.remote()
    return adopted, len(found)
