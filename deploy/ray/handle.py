"""A run seen from the driver and the CLI: ``start_run`` creates a run's controller and
returns its ``RunHandle`` (which replaces the controller if it dies), ``find_run``
attaches to the right cluster and finds a running run; ``RunNotFound`` and
``ControllerLost`` are how they fail.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import re
import threading
import time
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

from zeroforge.deploy.config import TrainConfig
from zeroforge.deploy.ray.cluster import address_problem, connect, resolve_address, use_token
from zeroforge.deploy.ray.failures import error_line
from zeroforge.deploy.ray.naming import (
    NAMESPACE,
    controller_name,
    kill_run_actors,
    run_actor_names,
)
from zeroforge.deploy.runtime import run_registry
from zeroforge.deploy.runtime.status import RunStatus
from zeroforge.shared import config as cfg
from zeroforge.shared.run_context import RunContext

log = logging.getLogger(__name__)


class RunNotFound(ValueError):
    """No run (or more than one, without --run-id) on the cluster."""


class ControllerSilent(RunNotFound):
    """The run's controller did not answer a CLI call within ``CLI_CALL_TIMEOUT_S``."""


CLI_CALL_TIMEOUT_S = 60.0
"""Longest wait of ``zeroforge status`` / ``scale`` / ``stop`` for the controller's answer
(``stop`` waits for the run's end instead): a starved or hung controller is one line,
never a command that hangs."""


class ControllerLost(RuntimeError):
    """The run's controller died more often than its handle replaces it
    (``RunHandle.max_controller_deaths`` within ``CONTROLLER_DEATH_WINDOW_S``)."""


CONTROLLER_DEATH_WINDOW_S = 300.0
"""The window of the controller's crash-loop limit, in seconds."""


class RunHandle:
    """A run's controller, seen from the driver or the CLI.

    The driver's handle (from ``start_run``) can replace a dead controller: it keeps the
    controller's last ``controller_state()`` (``keep_alive``, every half second or so) and,
    when a call finds the controller dead, starts a successor under the same name that
    adopts the run's live actors. The CLI's handle (``find_run``) waits for that successor
    instead and retries its call once."""

    def __init__(self, run_id: str, actor: Any, spawn: dict | None = None) -> None:
        self.run_id = run_id
        self.actor = actor
        self._spawn = spawn
        """Controller arguments (config, ctx, resume, max_crashes): the handle that started
        the run may start a successor."""
        self._state: dict = {}
        """The controller's last ``controller_state()``."""
        self._state_from: Any = None
        """The controller ``_state`` came from (its ``seq`` counts that one's replies)."""
        self.controller_restarts = 0
        """Successors this handle started."""
        self.takeovers: list[str] = []
        """One line per takeover (what died, what was adopted), for the driver to print."""
        self._replacing = threading.Lock()
        """Several threads of the driver call the controller; one replaces it."""
        self.max_controller_deaths = 5
        """Controller deaths within ``CONTROLLER_DEATH_WINDOW_S`` that are replaced; one
        more raises ``ControllerLost`` (a controller that cannot live is not restarted
        forever)."""
        self._deaths: collections.deque[float] = collections.deque()

    def _call(self, method: str, *args: Any, timeout: float | None = None) -> Any:
        """``ray.get(controller.method.remote(*args))``; a dead controller is replaced (or,
        without ``_spawn``, its successor is waited for) and the call made once more."""
        actor = self.actor
        if timeout is None and self._spawn is None and method != "stop":
            timeout = CLI_CALL_TIMEOUT_S
        try:
            try:
                return ray.get(getattr(actor, method).remote(*args), timeout=timeout)
            except RayActorError as err:
                self._replace(err, actor)
            return ray.get(getattr(self.actor, method).remote(*args), timeout=timeout)
        except GetTimeoutError:
            raise ControllerSilent(
                f"the controller of run {self.run_id} did not answer `{method}` within "
                f"{timeout:.0f} s (its node may be overloaded); try again") from None

    def keep_alive(self, timeout: float = 10.0) -> bool:
        """Fetch the controller's state to hand to a successor; replace it if it is dead.
        Returns True when a successor took over."""
        actor = self.actor
        try:
            state = ray.get(actor.controller_state.remote(), timeout=timeout)
        except GetTimeoutError:
            return False  # busy, not dead: the next call will tell
        except RayActorError as err:
            return self._replace(err, actor)
        with self._replacing:
            # not a dead predecessor's late answer, nor one overtaken by a newer state that
            # another thread of the driver fetched meanwhile
            if actor is self.actor and (self._state_from is not actor
                                        or state["seq"] > self._state["seq"]):
                self._state, self._state_from = state, actor
        return False

    def _replace(self, err: BaseException, dead: Any) -> bool:
        """The controller ``dead`` died: start a successor (driver) or find it (CLI).
        False when another thread already did."""
        with self._replacing:
            if dead is not self.actor:
                return False
            self._replace_locked(err)
            return True

    def _replace_locked(self, err: BaseException) -> None:
        if self._spawn is None:
            deadline = time.monotonic() + 30.0
            while True:
                with contextlib.suppress(ValueError):
                    actor = ray.get_actor(controller_name(self.run_id), namespace=NAMESPACE)
                    if actor != self.actor:  # handles compare by actor id
                        self.actor = actor
                        return
                if time.monotonic() > deadline:
                    raise RunNotFound(f"the controller of run {self.run_id} died and no "
                                      "successor came up within 30 s") from None
                time.sleep(0.5)
        began = time.monotonic()
        self._deaths.append(began)
        while began - self._deaths[0] > CONTROLLER_DEATH_WINDOW_S:
            self._deaths.popleft()
        if len(self._deaths) > self.max_controller_deaths:
            raise ControllerLost(
                f"the controller of run {self.run_id} died {len(self._deaths)} times within "
                f"{CONTROLLER_DEATH_WINDOW_S:.0f} s; giving up. Last error: {error_line(err)}")
        with contextlib.suppress(Exception):
            ray.kill(self.actor, no_restart=True)
        deadline = time.monotonic() + 30.0
        while True:  # the dead one's name is freed once Ray has marked it dead
            try:
                successor = _controller_actor(self.run_id, self._spawn, self._state)
                break
            except ValueError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        # other threads' calls wait on the lock until it has adopted the actors
        report = ray.get(successor.start.remote())
        self.actor = successor
        self.controller_restarts += 1
        line = (f"the controller of run {self.run_id} died ({error_line(err)}); successor "
                f"{self.controller_restarts} adopted {report['adopted']} live actors in "
                f"{time.monotonic() - began:.1f} s")
        log.info("%s", line)  # the driver prints ``takeovers`` as its warning lines
        self.takeovers.append(line)

    warning = ""
    """Set by ``start`` and ``scale``: one line when the cluster cannot hold the actors."""
    adopted = 0
    """Live actors the controller adopted at ``start`` (a re-attaching driver's)."""
    reattached = ""
    """Set by ``start_run`` when it re-attached to a run whose driver died: one line
    saying what it adopted and how old the state it restored was."""

    def start(self) -> str:
        """Create the run's actors; returns the metrics URL (``warning`` says when the
        cluster's free resources cannot hold them)."""
        report = ray.get(self.actor.start.remote())
        self.warning = report["warning"]
        self.adopted = int(report.get("adopted", 0))
        self.keep_alive()
        return report["metrics_url"]

    def status(self) -> RunStatus:
        return RunStatus.from_json(self.status_json())

    def status_json(self) -> dict:
        """``status`` as the controller sends it (plain data)."""
        return self._served(self._call("status"))

    def scale(self, workers: int | None = None, inference_servers: int | None = None,
              learners: int | None = None) -> dict[str, int]:
        """New desired counts; a refused change raises ValueError with the reason."""
        try:
            report = self._call("scale_report", workers, inference_servers, learners)
            self.warning = report["warning"]
            return report["desired"]
        except RayTaskError as err:
            raise ValueError(str(err.cause) if err.cause else str(err).splitlines()[0]
                             ) from None

    def worker_rows(self, page: int = 0) -> dict:
        """Page ``page`` of the run's self-play workers, a row each
        (``Controller.worker_rows``)."""
        return dict(self._call("worker_rows", page))

    def stop(self, by: str = "command") -> RunStatus:
        """Stop the run in order (``Controller.stop``); ``by``: what asked."""
        return RunStatus.from_json(self._call("stop", by))

    def shutdown(self) -> None:
        """Stop, kill every actor of the run (they are detached: also those a dead
        controller left) and the controller itself."""
        with contextlib.suppress(Exception):
            ray.get(self.actor.shutdown.remote())
        with contextlib.suppress(Exception):
            kill_run_actors(self.run_id)
        with contextlib.suppress(Exception):
            ray.kill(self.actor)

    def metrics_snapshot(self) -> dict:
        return self._served(self._call("metrics_snapshot"))

    def status_and_metrics(self) -> tuple[RunStatus, dict]:
        """``status()`` and ``metrics_snapshot()`` together, the state taken once after
        both (the driver's mirror fetches the two each second)."""
        status = RunStatus.from_json(self._call("status"))
        return status, self._served(self._call("metrics_snapshot"))

    def _served(self, answer: Any) -> Any:
        """``answer`` (counters the controller served), after the driver's handle took the
        controller's state anew. A successor starts from the last state taken: had it been
        taken before the answer, the successor could serve counters below the answer's
        (a monitor tick's worth, more on a loaded machine). Taken after, the window is the
        time between the two replies."""
        if self._spawn is not None:
            self.keep_alive()
        return answer

    def actor_handles(self, kind: str) -> list:
        return self._call("actor_handles", kind)

    def controller_pid(self) -> int:
        return int(self._call("pid"))

    def game_ids(self, kind: str) -> list[list[str]]:
        """Game ids held by each live actor of ``kind`` (exactly-once checks)."""
        return ray.get([h.game_ids.remote() for h in self.actor_handles(kind)])


def _controller_actor(run_id: str, spawn: dict, takeover: dict | None) -> Any:
    """A run's controller actor, named after the run; owned by its creator (the driver),
    so it ends with the driver. It runs on the driver's node: its metrics endpoint
    (``run.metrics_host``, loopback by default) is then on the machine the user started the
    run from, not on whichever node Ray picks for a 0-CPU actor. Hard affinity: Ray 2.60
    placed soft-affine 0-CPU actors on other nodes about half the time (netns test bed);
    the driver's own node is alive while the driver is, and the actor needs no resources."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    # imported here: the controller's modules import torch; the CLI's handle (`status`,
    # `scale`, `stop`) never needs it, and on a busy machine it costs seconds to import
    from zeroforge.deploy.ray.controller import Controller

    options: dict[str, Any] = {}
    with contextlib.suppress(Exception):  # a driver without a node of its own: Ray's choice
        options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(
            ray.get_runtime_context().get_node_id(), soft=False)
    return ray.remote(Controller).options(
        name=controller_name(run_id), namespace=NAMESPACE, max_concurrency=16,
        num_cpus=0, **options).remote(
            spawn["config"], spawn["ctx"], spawn["resume"], spawn["max_crashes"], takeover)


DRIVER_GONE_WAIT_S = 20.0
"""How long a re-attaching driver waits for a killed driver's controller to be gone (Ray
ends an owner-dead actor within seconds) before it says the run has a live driver."""


def start_run(config: TrainConfig, ctx: RunContext, resume: bool = False,
              max_crashes: dict[str, int] | None = None, max_controller_deaths: int = 5,
              reattach: bool = False) -> RunHandle:
    """Create the run's controller as a named actor (``ray.init`` must have run) and start
    its actors. The handle replaces the controller if it dies (``RunHandle.keep_alive``).
    ``max_crashes``: see ``Controller``; ``max_controller_deaths``: see ``RunHandle``.

    ``reattach``: when actors of this run still live on the cluster (their driver was
    killed; their leases have not run out), the new controller adopts them, starting
    from the state the last one saved in the run's store (``saved_state``), instead of
    killing them and starting afresh. A run whose controller is alive has a driver:
    that is refused (``ValueError``), never a second run."""
    spawn = {"config": cfg.to_dict(config), "ctx": ctx.to_dict(), "resume": resume,
             "max_crashes": max_crashes}
    takeover, line = (_reattach_state(ctx) if reattach and run_actor_names(ctx.run_id)
                      else (None, ""))
    handle = RunHandle(ctx.run_id, _controller_actor(ctx.run_id, spawn, takeover), spawn)
    handle.max_controller_deaths = max_controller_deaths
    handle.start()
    if takeover is not None:
        handle.reattached = f"re-attached: adopted {handle.adopted} live actors, {line}"
        log.info("run %s: %s", ctx.run_id, handle.reattached)
    return handle


def _reattach_state(ctx: RunContext) -> tuple[dict, str]:
    """The saved state a re-attaching controller starts from (``{}``: none; it adopts
    the live actors anyway), and a few words on it. Waits for a killed driver's controller
    to be gone first."""
    from zeroforge.deploy.ray.saved_state import load_saved_state

    deadline = time.monotonic() + DRIVER_GONE_WAIT_S
    while _controller_alive(ctx.run_id):
        if time.monotonic() > deadline:
            raise ValueError(f"run {ctx.run_id} has a live controller (another driver runs "
                             "it); use `zeroforge status` / `stop` with --run-id "
                             f"{ctx.run_id}")
        time.sleep(0.5)
    saved = load_saved_state(ctx)
    if saved is None:
        return {}, "no saved controller state (counters start from the actors' reports)"
    return saved.state, f"controller state saved {saved.age_s:.1f} s before"


def _controller_alive(run_id: str) -> bool:
    """The run's named controller exists and answers."""
    try:
        actor = ray.get_actor(controller_name(run_id), namespace=NAMESPACE)
    except ValueError:
        return False
    try:
        ray.get(actor.pid.remote(), timeout=5)
    except RayActorError:
        return False
    except GetTimeoutError:
        return True  # busy is alive
    return True


def find_run(address: str | None, run_id: str | None, run_dir: str | None = None
             ) -> RunHandle:
    """Attach to the right cluster and find the run.

    ``run_dir``: the run recorded in ``RUN_DIR/run.json``; ``run_id`` without an address:
    the live run of that id in the per-user index (``deploy/runtime/run_registry.py``); an
    ``address`` (or $RAY_ADDRESS): that cluster, and the run on it (the only one, or
    ``run_id``). With none of these: the only live run in the index; several live runs
    are refused (listed in one line) rather than guessed; none: the newest local cluster.
    """
    entry = None
    try:
        if run_dir:
            entry = run_registry.from_run_dir(run_dir)
        elif not address and run_id:
            entry = run_registry.lookup(run_id)
        elif not address and not os.environ.get("RAY_ADDRESS"):
            live = run_registry.live_runs()
            if len(live) > 1:
                raise RunNotFound("several runs are live: "
                                  + ", ".join(e.describe() for e in live)
                                  + "; pass --run-dir or --run-id")
            entry = live[0] if live else None
    except run_registry.RegistryError as err:
        raise RunNotFound(str(err)) from None
    if entry is not None:
        address, run_id = entry.address, entry.run_id
    target = address or os.environ.get("RAY_ADDRESS") or "auto"
    problem = address_problem(target)
    if problem:
        raise RunNotFound(f"{problem}; is the run's cluster up, and is this its head's "
                          "address?")
    try:
        target = resolve_address(target)
        use_token(target, entry.token_path if entry is not None else None)
        connect(target, namespace=NAMESPACE, logging_level=logging.ERROR,
                log_to_driver=False)
    except ConnectionError as err:
        raise RunNotFound(f"no Ray cluster to attach to ({str(err).splitlines()[0]}); "
                          "is `zeroforge train` running?") from None
    names = [n for n in ray.util.list_named_actors() if n.startswith("controller-")]
    runs = sorted(re.sub(r"^controller-", "", n) for n in names)
    if run_id:
        if run_id not in runs:
            raise RunNotFound(f"no run {run_id!r} (running: {', '.join(runs) or 'none'})")
    elif len(runs) != 1:
        raise RunNotFound("no run is going" if not runs else
                          f"several runs ({', '.join(runs)}): pass --run-id")
    else:
        run_id = runs[0]
    return RunHandle(run_id, ray.get_actor(controller_name(run_id), namespace=NAMESPACE))
