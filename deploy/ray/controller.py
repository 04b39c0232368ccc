"""The controller: one named Ray actor per run (``controller-<run>``) that keeps the
desired actors of each kind alive, replaces crashed ones (up to a crash-loop limit),
scales, stops in order, and gathers the actors' metrics into a ``RunStatus``.

Its helpers hold the parts with seams of their own: ``slots`` (its record of each actor
and what it learns from them), ``resources`` (what the actors need against what the
cluster has free), ``run_metrics`` (merging and serving the metrics) and ``failures``
(crash windows, error lines, a stop's losses). A controller that dies is succeeded by one
that adopts the run's live actors from its last ``controller_state()`` (``RunHandle``);
the state is also saved in the run's store (``saved_state``) for a new driver when the
driver itself died.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import logging
import os
import threading
import time

from zeroforge.deploy.config import TrainConfig
from zeroforge.deploy.ray import ray_calls
from zeroforge.deploy.ray.failures import CrashWindows, drop_errors, error_line, stop_problems
from zeroforge.deploy.ray.hosts import ServiceHost, make_inference_actor
from zeroforge.deploy.ray.kinds import KINDS
from zeroforge.deploy.ray.naming import NAMESPACE, actor_name, kill_run_actors
from zeroforge.deploy.ray.node_hosts import WaitingHosts, booked_options, plan_sizes
from zeroforge.deploy.ray.resources import actor_states, check_scale, shortfall, unplaced_needs
from zeroforge.deploy.ray.run_limits import RunLimits
from zeroforge.deploy.ray.run_metrics import RunMetrics, open_endpoint
from zeroforge.deploy.ray.saved_state import StateSaver
from zeroforge.deploy.ray.slots import (
    WORKER_PAGE,
    Slot,
    adopt,
    drop_never_scheduled,
    kill,
    kill_hung,
    probe,
    recorded_stats,
    rows,
    slot_record,
    unscheduled,
    worker_rows,
)
from zeroforge.deploy.runtime.status import RunStatus
from zeroforge.shared import config as cfg
from zeroforge.shared.run_context import RunContext

log = logging.getLogger(__name__)


class Controller:
    """Owns one run (a named Ray actor). The CLI calls ``status``, ``scale`` and ``stop``
    through a ``RunHandle``."""

    def __init__(self, config: dict, ctx: dict, resume: bool = False,
                 max_crashes: dict[str, int] | None = None,
                 takeover: dict | None = None, watch: bool = True) -> None:
        """``max_crashes``: per kind, a crash-loop limit other than ``ActorKind.max_crashes``
        (chaos tests kill actors on purpose, more often than a crash loop).

        ``takeover``: the last ``controller_state()`` the driver got from the controller this
        one succeeds (``{}``: none); ``start`` then adopts the run's live actors.

        ``watch``: start the monitor thread (False: the caller calls ``tick``)."""
        loaded = cfg.from_dict(TrainConfig, config, "config")
        # Ray is asked for the cluster's GPUs only where inference is auto
        self.config = loaded.placed(cluster_has_gpus=loaded.distributed.inference == "auto"
                                    and ray_calls.cluster_resources().get("GPU", 0) > 0)
        """The run's config as placed (``TrainConfig.placed``): inference resolved."""
        self.crashes = CrashWindows(max_crashes)
        self.ctx = RunContext.from_dict(ctx)
        self.run_id = self.ctx.run_id
        self.resume = resume
        self.inference = self.config.distributed.inference
        self.desired = {k: kind.desired(self.config, self.inference) for k, kind in KINDS.items()}
        self.slots: dict[str, list[Slot]] = {k: [] for k in KINDS}
        self._per_actor = {k: kind.per_actor(self.config) for k, kind in KINDS.items()}
        """Units (workers) one actor of each kind holds at most."""
        self.restarts = dict.fromkeys(KINDS, 0)
        self.metrics = RunMetrics()
        self.error = ""
        """Why the run failed (crash loop) or what its stop lost; "" when neither."""
        self._failed = False
        self.lost: dict[str, float] = {}
        """What the final stop could not save (``unacked``, ``unpublished_steps``...)."""
        self._final_reports: dict[str, dict] = {}
        """The last dict a kind's ``run`` returned (the learner's final ``status()``)."""
        self._next_index = dict.fromkeys(KINDS, 0)
        self._next_worker = 0
        """The first worker index of the next node host (their workers' ids stay unique)."""
        self._waiting = WaitingHosts()
        self._formed = dict.fromkeys(KINDS, 0)
        """Gangs (``ActorKind.gang``) formed by this controller: a second one resumes."""
        self._lock = threading.RLock()
        self._state = "starting"
        self._stopped_by = ""
        self._started = time.monotonic()
        self.limits = RunLimits(self.config.run, self.run_id, self._started)
        self.takeover = takeover
        self.generation = 0
        """Controllers of this run before this one (restarts after a controller died)."""
        self._known: list[dict] = []
        """The slots of the predecessor's last state (``_adopt`` counts the missing ones)."""
        self._state_seq = 0
        """``controller_state()`` replies so far: the driver keeps the newest it got."""
        self._resumed_state = ""
        """The predecessor's run state (a stopping run goes on stopping)."""
        self._ready = threading.Event()
        """``start`` has run (a successor: adopted the actors). Until then the monitor only
        collects, and ``stop`` / ``scale`` wait, so nothing is created or stopped twice."""
        if takeover is not None:
            self._load_state(takeover)
        r = self.config.run
        self._endpoint = open_endpoint(lambda: self.metrics.merged, r.metrics_host,
                                       r.metrics_port, (takeover or {}).get("metrics_port", 0))
        self.metrics_url = self._endpoint.url
        self.saver = StateSaver(self.ctx)
        """Saves ``controller_state()`` in the run's store for a re-attaching driver."""
        self._monitor = threading.Thread(target=self._monitor_loop, daemon=True)
        if watch:
            self._monitor.start()

    # --- actor creation ------------------------------------------------------------------
    def _servers(self) -> list:
        return [s.handle for s in self.slots["inference"] if not s.stopping]

    def _set_replicas(self, replicas: int) -> None:
        """Learner replicas wanted from now on; the members of the next group read the
        count from the config they are built with."""
        self.config = dataclasses.replace(self.config, learner=dataclasses.replace(
            self.config.learner, replicas=replicas))
        self.desired["learner"] = replicas

    def _create(self, name: str, rank: int = 0, leader=None, count: int = 1) -> Slot:
        """A new actor of kind ``name``; ``rank`` / ``leader`` seat it in a gang; ``count``:
        the workers a self-play host starts with (a node host books them: ``node_hosts``)."""
        kind = KINDS[name]
        index = self._next_index[name]
        self._next_index[name] += 1
        c = self.config
        per = self._per_actor[name]
        first = index * per if per else self._next_worker
        self._next_worker += 0 if per else count
        # Detached and named by run, kind and index: the actor outlives this controller
        # (a kill -9 of it), and its successor finds and adopts it (``_adopt``).
        named = actor_name(self.run_id, name, index)
        if kind.is_server:
            mix = self.ctx.size_mix()
            handle = make_inference_actor(c.game, c.net, c.inference, self.ctx.transport,
                                          self.run_id, index=index, name=named,
                                          detached=True, lease_s=c.distributed.lease_s,
                                          size_specs=mix.specs if mix is not None else (),
                                          redis_auth_dir=self.ctx.redis_auth_dir,
                                          weights_public_key=self.ctx.weights_public_key)
        else:
            # a replacement learner resumes from the checkpoint its predecessor wrote, and
            # so does a learner group formed anew at another size
            resume = self.resume or self.restarts[name] > 0 or self._formed[name] > 0
            servers = self._servers() if self.inference == "server" else None
            options = (kind.replica_options(c) if rank and kind.replica_options
                       else kind.options(c))
            # each adopting controller leaves one ``run`` call waiting in the actor
            options["max_concurrency"] = options.get("max_concurrency", 1) + 32
            if not per:
                options = booked_options(c, options, count)
            handle = ray_calls.create(
                ServiceHost, {**options, "name": named, "namespace": NAMESPACE,
                              "lifetime": "detached"},
                name, cfg.to_dict(c), self.ctx.to_dict(), index, resume, servers, rank,
                leader, count, None if per else first)
        return Slot(name, index, handle, run_ref=handle.run.remote(),
                    replacement=self.restarts[name] > 0, workers=count, first=first,
                    booked=count)

    def _fill(self) -> None:
        """Create actors up to the desired counts; stop extra ones (newest first)."""
        if self._failed:
            return
        for slot in self._waiting.to_replace(self.config, self.slots):
            self._retire(slot)  # waits for a whole node while some have room: planned anew
        for name, kind in KINDS.items():
            if kind.gang:
                self._fill_gang(name)
                continue
            live = sorted((s for s in self.slots[name] if not s.stopping),
                          key=lambda s: s.index)
            sizes, new = plan_sizes(self.config, name, live, self.desired[name],
                                    lambda: unplaced_needs(self.config, self.slots))
            for slot, size in zip(live, sizes, strict=True):
                if not size:  # the newest go first
                    self._retire(slot)
                elif slot.workers != size:  # a host of several workers: resize it
                    slot.workers = size
                    slot.handle.resize.remote(size)
            for size in new:
                self.slots[name].append(self._create(name, count=size))
                if kind.is_server:
                    self._push_servers()

    def _fill_gang(self, name: str) -> None:
        """A gang is all or nothing: at the desired size it is left alone; at another size
        every member is stopped cleanly (rank 0 writes its final checkpoint) and, once all
        have ended, a new gang is formed, rank 0 first, the others told where it is."""
        live = [s for s in self.slots[name] if not s.stopping]
        want = self.desired[name]
        if len(live) == want:
            return
        if live:
            log.info("%s group: %d members, %d wanted: stopping the group to form it anew",
                     name, len(live), want)
            for slot in live:
                self._retire(slot)
            return
        if self.slots[name] or not want:
            return  # the old group is still ending: form the new one after it
        leader = self._create(name)
        members = [leader] + [self._create(name, rank, leader.handle) for rank in range(1, want)]
        self.slots[name].extend(members)
        self._formed[name] += 1

    def _retire(self, slot: Slot) -> None:
        slot.stopping = True
        if not slot.started and unscheduled(slot):
            # A pending actor left to stop itself would first be scheduled (on resources
            # the scale-down frees, or on a node the autoscaler adds for it), build its
            # service and only then see the stop. It has played nothing: kill it.
            slot.cancelled = True
            kill(slot)
        else:
            try:
                slot.handle.stop.remote()
            except Exception as err:  # the actor may already be gone
                log.warning("stopping %s %d: %s", slot.kind, slot.index, err)
        if KINDS[slot.kind].is_server:
            self._push_servers()

    def _push_servers(self) -> None:
        servers = self._servers()
        for w in self.slots["selfplay"]:
            w.handle.set_servers.remote(servers)

    # --- the monitor loop ------------------------------------------------------------------
    def _monitor_loop(self) -> None:
        while self._state != "stopped":
            try:
                self.tick()
            except Exception as err:  # keep watching whatever happened
                log.exception("controller monitor: %s", err)
            time.sleep(self.config.distributed.monitor_interval_s)

    def tick(self) -> None:
        """One round of the monitor: reap ended actors, fill up to the desired counts,
        check the run's limits, collect the metrics, kill hung actors, save the state."""
        with self._lock:
            if self._state == "running" and self._ready.is_set():
                self._reap()
                self._fill()
                self._check_limits()
            self._collect()
            if self._state == "running":
                kill_hung(self.slots, self.config.distributed.hang_s)
        if self._ready.is_set() and self._state in ("running", "stopping"):
            self.saver.tick(self.controller_state)

    def _reap(self) -> None:
        """Find actors whose ``run`` ended: planned (retired) or not (crashed: replaced)."""
        # one ray.wait over every actor's run: liveness as Ray tracks it, one call a tick
        refs = {s.run_ref: s for slots in self.slots.values() for s in slots}
        ended, _ = ray_calls.wait(list(refs), timeout=0)
        order = list(KINDS)
        for slot in sorted((refs[r] for r in ended),
                           key=lambda s: (order.index(s.kind), s.index)):
            name, slots, kind = slot.kind, self.slots[slot.kind], KINDS[slot.kind]
            if slot not in slots:
                continue  # a gang member killed with a crashed one (below)
            slots.remove(slot)
            if slot.cancelled:  # killed before it ran (``_retire``): no crash
                continue
            try:
                result = ray_calls.get(slot.run_ref)
                crashed = False
                if isinstance(result, dict):
                    self._final_reports[name] = result
                # its final counters, after its last games went out
                with contextlib.suppress(Exception):
                    slot.last_stats = ray_calls.get(slot.handle.stats.remote(), timeout=10)
            except Exception as err:
                crashed = True
                self.crashes.last_error[name] = slot.hung or error_line(err)
                log.warning("%s %d died: %s", name, slot.index,
                            self.crashes.last_error[name])
                # Its ``run`` raised, but the (detached) actor may live on: end it now, or
                # it holds its CPUs beside its successor until its lease runs out.
                kill(slot)
            self.metrics.ended(name, slot.index, slot.last_stats)
            if slot.stopping:
                # retired by scale-down: its games are in; free its CPUs for others
                kill(slot)
                continue
            if kind.clean_end_ends_run and not crashed:
                # A run limit was reached. No successor: the _fill after this reap must
                # not start a fresh one (it would overwrite the final checkpoint).
                self.desired[name] = 0
                threading.Thread(target=self.stop, daemon=True).start()
                continue
            if kind.gang:
                self._break_gang(name)
            if self._crash_loop(name):
                continue
            self.restarts[name] += 1  # the next _fill replaces it
            if kind.is_server:
                self._push_servers()

    def _break_gang(self, name: str) -> None:
        """A gang member ended without being asked: the group cannot go on without it
        (its collectives would fail or hang), so kill the others now; the next ``_fill``
        forms a new group, which resumes from rank 0's last checkpoint."""
        stopped = list(self.slots[name])
        if not stopped:
            return  # a group of one: nothing else to stop (its crash was logged already)
        for slot in stopped:
            self.slots[name].remove(slot)
            kill(slot)
            self.metrics.ended(name, slot.index, slot.last_stats)
        # Their ``run`` ends in an error that says only "a peer went away" (already said
        # below); taking it keeps Ray from printing each as an unhandled error.
        threading.Thread(target=drop_errors, args=([s.run_ref for s in stopped],),
                         daemon=True).start()
        log.warning("%s group broken: its other members were stopped; forming it anew "
                    "from the checkpoint", name)

    def _crash_loop(self, name: str) -> bool:
        """Count a crash of ``name``; past the kind's limit fail the run (and say so)."""
        if not self.crashes.record(name, time.monotonic(), self.desired[name]) or self._failed:
            return False
        self._failed = True
        self.error = self.crashes.give_up_line(name)
        log.error("run %s failed: %s", self.run_id, self.error)
        threading.Thread(target=self.stop, kwargs={"by": "failure"}, daemon=True).start()
        return True

    def _check_limits(self) -> None:
        """At a run limit (``RunLimits``) stop the run, in order."""
        can_play = bool(self._alive("learner") and (self._alive("selfplay")
                                                    or not self.desired["selfplay"]))
        if self.limits.check(self.metrics.merged, can_play):
            threading.Thread(target=self.stop, kwargs={"by": "limit"}, daemon=True).start()

    def _collect(self) -> None:
        """Gather every live actor's metrics snapshot (bounded wait)."""
        probe(self.slots)
        self.metrics.collect(self.slots, self.desired, {k: self._alive(k) for k in KINDS},
                             self.restarts)

    # --- public, called through Ray -------------------------------------------------------
    def start(self) -> dict:
        """Create the actors; returns the metrics URL and a one-line warning ("" if none)
        when the cluster's free resources cannot hold them all.

        A successor (``takeover``) first adopts the run's live actors, counts those of its
        predecessor's that died meanwhile as crashes, then fills up as usual; a run that
        was stopping goes on stopping. A fresh run kills leftovers of its run id first."""
        adopted = 0
        with self._lock:
            if self.takeover is None:
                if kill_run_actors(self.run_id):
                    log.warning("run %s: killed actors left by an earlier run of this id",
                                self.run_id)
            else:
                adopted = self._adopt()
            ending = self._resumed_state in ("stopping", "stopped", "failed")
            warning = "" if ending else shortfall(self.config, self.slots, self.desired)
            self._state = "running"  # when ending, stop() below takes it from here
            if not ending:
                self._fill()
            self._collect()
            self._ready.set()
        if ending:  # the predecessor's stop, for the same reason
            threading.Thread(target=self.stop, kwargs={"by": self._stopped_by or "command"},
                             daemon=True).start()
        return {"metrics_url": self.metrics_url, "warning": warning, "adopted": adopted}

    # --- surviving a controller's death ---------------------------------------------------
    def controller_state(self) -> dict:
        """The small plain-data state a successor needs to take the run over (the driver
        asks for it every half second and keeps the last): desired counts, restarts, crash
        windows, errors, the counters' floors (``RestoredCounters``, ``MonotonicGuard``,
        ended actors' snapshots) and each live actor's last report. Wall-clock times, as
        the successor may run on another node."""
        with self._lock:
            now, wall = time.monotonic(), time.time()
            self._state_seq += 1
            state = {
                "seq": self._state_seq,
                "state": self._state, "stopped_by": self._stopped_by,
                "started_wall": wall - (now - self._started),
                **self.limits.state(now, wall),
                "generation": self.generation, "desired": self.desired,
                "restarts": self.restarts, "next_index": self._next_index,
                "next_worker": self._next_worker,
                **self.crashes.state(now, wall),
                "error": self.error, "failed": self._failed,
                "lost": self.lost, "final_reports": self._final_reports,
                "inference": self.inference,
                **self.metrics.state(),
                "metrics_port": int(self.metrics_url.rsplit(":", 1)[1].split("/")[0]),
                "slots": [slot_record(s) for slots in self.slots.values() for s in slots],
            }
            # a deep copy now: Ray serialises the reply after the lock is released
            return copy.deepcopy(state)

    def _load_state(self, st: dict) -> None:
        """Take over a dead predecessor's ``controller_state()`` (see ``start``)."""
        if not st:
            return
        now, wall = time.monotonic(), time.time()
        self._started = now - (wall - st["started_wall"])
        self.generation = int(st["generation"]) + 1
        self.desired.update(st["desired"])
        if self.desired["learner"] and self.desired["learner"] != self.config.learner.replicas:
            self._set_replicas(self.desired["learner"])  # scaled by the predecessor
        self.restarts.update(st["restarts"])
        self._next_index.update(st["next_index"])
        self._next_worker = int(st.get("next_worker", 0))
        self.crashes.load(st, now, wall)
        self.error, self._failed, self.lost = st["error"], st["failed"], st["lost"]
        self._stopped_by = st.get("stopped_by", "")
        self._final_reports.update(st["final_reports"])
        self.limits.started = self._started
        self.limits.load(st, now, wall)
        self.inference = st["inference"]
        self.metrics.load(st)
        self._known = list(st["slots"])
        # status shows the run's state at once; the monitor waits for start() (_ready)
        self._state = self._resumed_state = st["state"]

    def _adopt(self) -> int:
        """Adopt the run's live named actors (``run`` again: see ``ServiceHost``); a slot
        of the predecessor's state that is gone died while no controller watched (a crash,
        unless it was being retired). Returns how many were adopted."""
        known = {(s["kind"], s["index"]): s for s in self._known}
        adopted, found = adopt(self.run_id, known)
        for slot in adopted:
            self.slots[slot.kind].append(slot)
            self._next_index[slot.kind] = max(self._next_index[slot.kind], slot.index + 1)
        for (kind, index), was in known.items():
            self.metrics.ended(kind, index, recorded_stats(was))
            if was.get("stopping"):
                continue
            self.crashes.last_error[kind] = "died while the run had no controller"
            log.warning("%s %d died while the run had no controller", kind, index)
            if not self._crash_loop(kind):
                self.restarts[kind] += 1
        self._known = []
        if self.slots["inference"]:
            self._push_servers()
        return found

    def pid(self) -> int:
        """The controller's process id (chaos tests kill it with SIGKILL)."""
        return os.getpid()

    def scale(self, workers: int | None = None, inference_servers: int | None = None,
              learners: int | None = None) -> dict:
        """Change the desired counts; the monitor loop creates or retires actors."""
        return self.scale_report(workers, inference_servers, learners)["desired"]

    def scale_report(self, workers: int | None = None, inference_servers: int | None = None,
                     learners: int | None = None) -> dict:
        """``scale``, returning ``{"desired": counts, "warning": line}``: the warning says
        when the cluster's free resources cannot hold the new actors ("" if they fit)."""
        warning = ""
        self._ready.wait(120)
        check_scale(self.config, self.inference, workers, inference_servers, learners)
        with self._lock:
            if workers is not None:
                self.desired["selfplay"] = workers
            if inference_servers is not None:
                self.desired["inference"] = inference_servers
            if learners is not None:  # the group re-forms at a checkpoint (``_fill_gang``)
                self._set_replicas(learners)
            if self._state == "running":
                warning = shortfall(self.config, self.slots, self.desired)
                self._fill()
        return {"desired": dict(self.desired), "warning": warning}

    def stop(self, by: str = "command", timeout_s: float = 60.0) -> dict:
        """Stop the actors phase by phase (``ActorKind.stop_phase``): workers and the
        evaluator (their finished games are appended), then the learner (final
        checkpoint), then the inference servers. ``by``: what asked (``RunStatus.stopped_by``:
        ``command`` for ``zeroforge stop``, ``interrupt``, ``limit``, ``failure``)."""
        self._ready.wait(120)
        with self._lock:
            if self._state in ("stopping", "stopped", "failed"):
                return self.status()
            self._state, self._stopped_by = "stopping", by
            # an actor Ray never scheduled (no resources) has nothing to save: kill it now.
            # One starting (a replacement learner resuming from the checkpoint) is stopped
            # like the others: its ``run`` begins, sees the stop and drains.
            with contextlib.suppress(Exception):
                probe(self.slots, timeout_s=1.0)
            never_ran = drop_never_scheduled(self.slots)
            # a replacement learner still waiting for CPUs: no learner drains at this stop
            undrained = "learner" in never_ran and not self.slots["learner"]
        unfinished = []
        for phase in sorted({k.stop_phase for k in KINDS.values()}):
            refs = {}
            for name, kind in KINDS.items():
                if kind.stop_phase != phase:
                    continue
                self.desired[name] = 0
                for slot in self.slots[name]:
                    self._retire(slot)
                    refs[slot.run_ref] = slot
            ready, late = ray_calls.wait(list(refs), timeout=timeout_s)
            for ref in ready:
                self._final_report(refs[ref])
            for ref in late:  # a late worker is killed: none of its games lands after the drain
                if refs[ref].kind == "selfplay":
                    kill(refs[ref])
            unfinished += [f"{refs[r].kind} {refs[r].index}" for r in late]
        with self._lock:
            self._collect()
            amounts, problems = stop_problems(
                self._final_reports.get("learner", {}), self.lost,
                self.crashes.last_error.get("learner", "?"), undrained, unfinished, timeout_s)
            self.lost.update(amounts)
            if problems and not self.error:
                self.error = "the stop lost data: " + "; ".join(problems)
            self._state = "failed" if self._failed else "stopped"
        return self.status()

    def _final_report(self, slot: Slot) -> None:
        """Keep what a stopped actor's ``run`` returned, or why it failed."""
        try:
            result = ray_calls.get(slot.run_ref)
        except Exception as err:
            self.crashes.last_error[slot.kind] = error_line(err)
            if KINDS[slot.kind].clean_end_ends_run:
                self.lost["crashed_while_stopping"] = 1
            return
        if isinstance(result, dict):
            self._final_reports[slot.kind] = result

    def shutdown(self) -> None:
        """Stop (if not yet) and kill every actor of the run, freeing their resources."""
        self.stop()
        with self._lock:
            for slots in self.slots.values():
                for slot in slots:
                    kill(slot)
                slots.clear()
            # detached actors: also any this controller never knew of (a predecessor made
            # them just before it died)
            with contextlib.suppress(Exception):
                kill_run_actors(self.run_id)
        self.saver.clear()
        with contextlib.suppress(Exception):
            self._endpoint.close()

    def _alive(self, name: str) -> int:
        """Live units of ``name``: actors, or the workers of self-play hosts."""
        return sum(s.workers for s in self.slots[name] if s.started and not s.stopping)

    def status(self) -> dict:
        """``RunStatus.to_json()`` (plain data crosses Ray)."""
        alive = {k: self._alive(k) for k in KINDS}
        failed = ({k: len(t) for k, t in self.crashes.times.items() if t} if self._failed
                  else {})
        states, waiting = actor_states(self.slots, self.config, failed)
        return RunStatus.from_metrics(
            self.metrics.merged, received_before=self.metrics.received_before(self.resume),
            run_id=self.run_id, state=self._state, stopped_by=self._stopped_by,
            elapsed_s=round(time.monotonic() - self._started, 1), inference=self.inference,
            desired=dict(self.desired), alive=alive, restarts=dict(self.restarts),
            metrics_url=self.metrics_url, actor_states=states, waiting=waiting,
            error=self.error, lost=dict(self.lost),
            actors=rows(self.slots)).to_json()

    def worker_rows(self, page: int = 0, page_size: int = WORKER_PAGE) -> dict:
        """Page ``page`` of the self-play workers, a row each (``slots.worker_rows``):
        the detail ``status`` leaves out (it has a row per host)."""
        with self._lock:
            return worker_rows(self.slots["selfplay"], self._per_actor["selfplay"], page,
                               page_size)

    def metrics_snapshot(self) -> dict:
        """The merged snapshot, as plain data (for tests, tools and the driver's dashboard
        history, which needs the histograms too)."""
        return self.metrics.plain()

    def actor_handles(self, kind: str) -> list:
        """Live actor handles of one kind (for tests that kill one)."""
        return [s.handle for s in self.slots[kind] if not s.stopping]
