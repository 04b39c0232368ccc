"""InferenceServer: one network shared by many self-play workers, their leaf batches merged.

Each self-play worker sends one leaf batch per simulation round. A server gathers the
batches that arrive within ``max_wait_ms`` of the first waiting one (up to ``max_batch``
positions), runs the network once on all of them and hands each caller its own rows, so
a GPU sees batches of thousands of positions while each worker searches only B games.

``InferenceServer`` is a plain asyncio class (unit-tested without Ray). It is meant to
live in an *async* Ray actor, where every ``evaluate`` call in flight is a coroutine on
one event loop; the network runs in a one-thread executor so the loop keeps accepting
requests meanwhile. New weights come from the ``WeightStore`` (pub/sub announcement or
a periodic look) and are swapped in on that same network thread, hence always *between*
two network calls: a batch is never computed with mixed weights and every answer carries
the version that computed it. Its Ray side (the actor, and the ``RemoteEvaluator`` a
self-play worker holds) lives in ``deploy/ray/hosts.py``.

Torch is imported only where a network is built, so a self-play process that merely holds
a ``RemoteEvaluator`` does not pay for it.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from zeroforge.actors.config import InferenceServerConfig
from zeroforge.shared.games import make_game
from zeroforge.shared.metrics import Recorder
from zeroforge.shared.search import CachedEvaluator, Evaluation, cache_counts

if TYPE_CHECKING:
    from zeroforge.shared.nets import NetConfig
    from zeroforge.shared.transport import WeightSink

__all__ = ["InferenceServer", "InferenceServerConfig"]

log = logging.getLogger(__name__)

Answer = tuple[np.ndarray, np.ndarray, int]
"""What ``InferenceServer.evaluate`` returns: (logits [b, A] float32, value [b] float32,
weights version)."""


@dataclass(eq=False)
class _Request:
    """One caller's leaf batch waiting in the queue."""

    obs: np.ndarray
    """[b, C, H, W] as the caller sent it."""
    legal: np.ndarray
    """[b, A] bool."""
    future: asyncio.Future[Answer]
    """Resolved with this request's rows, or with the error that concerns it alone."""
    arrived: float
    """Event-loop time of arrival (starts the ``max_wait_ms`` clock)."""

    @property
    def size(self) -> int:
        return int(self.obs.shape[0])


class InferenceServer:
    """Batches concurrent ``evaluate`` calls into few network calls (see module docstring).

    All coroutines must run on one event loop (Ray's, in an async actor); the background
    tasks start with the first ``evaluate``, ``ready`` or ``run`` call. ``run``/``stop``
    /``stats`` are what a supervising controller calls.
    """

    def __init__(self, game_spec: str, net_config: NetConfig, config: InferenceServerConfig,
                 redis_url: str | None, run_id: str, server: str = "0",
                 size_specs: tuple[str, ...] = (), redis_auth_dir: str = "",
                 weights_public_key: str = "") -> None:
        """``server``: the ``server`` label of this server's metrics (its index);
        ``weights_public_key``: the run's learner's (``RunContext.weights_public_key``):
        weights it did not sign are refused, the weights held kept ("": unsigned run);
        ``redis_auth_dir``: where its Redis role's (worker's) password file is
        (``RunContext.redis_auth_dir``; "" the URL's password);
        ``size_specs``: the games of the run's other board sizes (``selfplay.board_sizes``,
        a fully convolutional net), whose requests it takes too, each network call of
        one board shape."""
        from zeroforge.shared.nets import InferenceConfig, build_net, make_evaluator

        self.config = config
        spec = make_game(game_spec).spec
        self.obs_shape: tuple[int, ...] = tuple(spec.obs_shape)
        self.num_actions = int(spec.num_actions)
        self.shapes: dict[tuple[int, ...], int] = {self.obs_shape: self.num_actions}
        """Observation shape -> actions, of every board size served."""
        for other in (make_game(s).spec for s in size_specs):
            self.shapes[tuple(other.obs_shape)] = int(other.num_actions)
        # inference.backend: "torch" unless a CPU backend is asked for (off by default).
        self._evaluator = make_evaluator(
            build_net(net_config, spec), config.backend,
            threads=config.num_threads or None,
            config=InferenceConfig(device=config.device, compile=config.compile,
                                   precision=config.precision))
        self.device = str(self._evaluator.device)
        # One cache for every worker's requests (one per board shape: a table holds one
        # game's positions); used on the network thread only, like the network, so a
        # weights swap and the cache's invalidation follow the same order.
        self._caches = ({shape: CachedEvaluator(self._evaluator, config.cache_entries)
                         for shape in self.shapes} if config.cache_entries else {})
        self.recorder = Recorder()
        self._server = server
        """The ``server`` label of this server's metrics."""
        self.recorder.set("weights_version", self.weights_version, component="inference")
        # Every torch call (forward passes and weight swaps) runs on this one thread, in
        # submission order: that is what keeps a swap from landing inside a batch.
        self._net_thread = ThreadPoolExecutor(1, thread_name_prefix="inference-net")
        # Redis waits and blob decoding get their own thread so they never delay a batch.
        self._io_thread = ThreadPoolExecutor(1, thread_name_prefix="inference-weights")
        self._queue: deque[_Request] = deque()
        self._arrived = asyncio.Event()  # set on each arrival; binds to a loop on first use
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._stopped = asyncio.Event()
        self._served = 0
        self._net_freed = float("-inf")
        """Event-loop time the last network call's answers went out: a request that
        arrived before it waited behind that call and goes at once (``_next_batch``)."""
        self._store: WeightSink | None = None
        self._subscription: Any = None
        self._newest_seen = -1
        """Newest version loaded from any source; the store is asked only for newer ones.
        -1, not 0: a learner's initial publish as version 0 must still replace the random
        initialisation this server starts with."""
        from zeroforge.shared.transport import RefusedVersions

        self._refused = RefusedVersions("inference server", self.recorder, "inference")
        """Versions refused (unsigned, another key's, corrupt): logged and counted once."""
        if redis_url is not None:
            from zeroforge.shared.transport import (
                WeightsIntegrityError,
                open_transport,
                verifier_for,
            )

            self._store = open_transport(redis_url, run_id, role="worker",
                                         auth_dir=redis_auth_dir or None).weights(
                verifier=verifier_for(weights_public_key))
            # Subscribed before the first fetch, so no announcement falls in between; the
            # subscription is read only by the weights thread from then on.
            self._subscription = self._store.subscribe()
            # Start with the run's current weights rather than answer with random ones.
            try:
                got = self._store.fetch(newer_than=-1)
            except WeightsIntegrityError as err:  # serve on; the next good version comes
                self._refused.note(err, self.weights_version)
                got = None
            if got is not None:
                self._install(got[1], got[0])

    # -- public API ------------------------------------------------------------------------
    @property
    def weights_version(self) -> int:
        """Version of the weights the next batch will be computed with."""
        return int(self._evaluator.weights_version)

    async def ready(self) -> int:
        """Start the background tasks if needed; returns the weights version held (a Ray
        caller awaits this to know the actor is constructed and serving)."""
        self._start()
        return self.weights_version

    async def evaluate(self, obs: np.ndarray, legal: np.ndarray) -> Answer:
        """Evaluate obs [b, C, H, W] (uint8 planes) with legal [b, A] bool.

        Returns (policy_logits [b, A] float32, value [b] float32, weights_version) computed
        in one network call, possibly together with other callers' positions. A malformed
        request raises ValueError here, for its caller only.
        """
        obs, legal = self._checked(obs, legal)
        self._start()
        if obs.shape[0] == 0:
            return (np.zeros((0, self.num_actions), np.float32), np.zeros(0, np.float32),
                    self.weights_version)
        loop = asyncio.get_running_loop()
        request = _Request(obs, legal, loop.create_future(), loop.time())
        self._queue.append(request)
        self._arrived.set()
        return await request.future

    async def load_weights(self, state_dict_bytes: bytes, version: int) -> int:
        """Swap in ``weight_blob.weights_to_bytes`` weights as ``version`` (between two
        network calls, like the store's); returns the version now held."""
        from zeroforge.shared.formats import weights_from_bytes

        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise ValueError(f"load_weights: version must be an integer >= 0, got {version!r}")
        loop = asyncio.get_running_loop()
        state_dict = await loop.run_in_executor(self._io_thread, weights_from_bytes,
                                                state_dict_bytes)
        await loop.run_in_executor(self._net_thread, self._install, state_dict, version)
        return self.weights_version

    async def run(self) -> int:
        """Serve until ``stop``; returns the requests served. A supervisor (the controller)
        keeps this call open: its result arriving means the server stopped or died."""
        self._start()
        await self._stopped.wait()
        return self._served

    def stop(self) -> None:
        """End ``run``. Requests keep being answered until the actor is killed, so workers
        still holding this server finish their calls while they switch to others. Call it
        on the event loop's thread (Ray does, for an async actor)."""
        self._stopped.set()

    def stats(self) -> dict:
        """The recorder's snapshot (see ``shared.metrics``)."""
        return self.recorder.snapshot()

    def close(self) -> None:
        """Stop the background tasks and threads (a Ray actor just dies instead)."""
        for task in self._tasks.values():
            task.cancel()
        for request in self._queue:
            if not request.future.done():
                request.future.set_exception(RuntimeError("InferenceServer closed"))
        self._queue.clear()
        self._net_thread.shutdown(wait=False, cancel_futures=True)
        self._io_thread.shutdown(wait=False, cancel_futures=True)
        if self._subscription is not None:
            self._subscription.close()
            self._subscription = None

    # -- requests --------------------------------------------------------------------------
    def _checked(self, obs: np.ndarray, legal: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        obs, legal = np.asarray(obs), np.asarray(legal)
        if obs.ndim != 4 or obs.shape[1:] not in self.shapes:
            raise ValueError(f"InferenceServer: observations of shape {obs.shape}, expected "
                             f"[b, {', '.join(map(str, self.obs_shape))}]"
                             + (f" or another of {list(self.shapes)[1:]}"
                                if len(self.shapes) > 1 else ""))
        actions = self.shapes[obs.shape[1:]]
        if obs.dtype.kind not in "biuf":
            raise ValueError(f"InferenceServer: observations of dtype {obs.dtype}, expected "
                             "uint8 planes (or bool/float)")
        if legal.shape != (obs.shape[0], actions):
            raise ValueError(f"InferenceServer: legal masks of shape {legal.shape} for "
                             f"{obs.shape[0]} observations, expected "
                             f"[{obs.shape[0]}, {actions}]")
        return obs, legal

    def _start(self) -> None:
        """Create the background tasks on the running loop (once; again if one died)."""
        loop = asyncio.get_running_loop()
        wanted = {"inference-batcher": self._batch_loop}
        if self._store is not None:
            wanted["inference-weights"] = self._weights_loop
        for name, body in wanted.items():
            task = self._tasks.get(name)
            if task is None or task.done():
                self._tasks[name] = task = loop.create_task(body(), name=name)
                task.add_done_callback(_log_crash)

    async def _next_batch(self) -> list[_Request]:
        """Wait for a request, then gather queued ones up to ``max_batch`` positions.

        The wait policy: requests that queued while the last network call ran go out at
        once, with whatever else is queued: they have waited a call already, and with
        several workers each keeping batches in flight (``selfplay.batches_in_flight``)
        the queue refills during every call, so a fixed wait would only idle the
        network. Only a request meeting an idle network waits, up to ``max_wait_ms``
        from its arrival (or until the batch is full), for others to join it."""
        loop = asyncio.get_running_loop()
        while not self._queue:
            self._arrived.clear()
            await self._arrived.wait()
        first = self._queue[0]
        waited_behind_a_call = first.arrived < self._net_freed
        deadline = first.arrived + self.config.max_wait_ms / 1000
        batch: list[_Request] = []
        size, limit = 0, self.config.max_batch
        while True:
            size, full = self._gather(batch, size, limit)
            # full, or the next request would not fit (it leads the next batch), or
            # these requests have waited out a network call already
            if size >= limit or full or waited_behind_a_call:
                break
            left = deadline - loop.time()
            if left <= 0:
                break
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), left)
            except TimeoutError:
                break
        # the batch's requests and those left queued for the next
        self.recorder.observe("inference_queue_depth", len(batch) + len(self._queue),
                              server=self._server)
        return batch

    def _gather(self, batch: list[_Request], size: int, limit: int) -> tuple[int, bool]:
        """Move queued requests into ``batch`` while they fit ``limit`` positions; returns
        the batch's positions and whether a request of its shape did not fit. One
        network call is of one board shape: requests of another (a run with several
        board sizes) keep their places in the queue for a later batch."""
        others: list[_Request] = []
        full = False
        while self._queue:
            request = self._queue.popleft()
            if request.future.done():
                continue  # its caller was cancelled while it waited
            if batch and request.obs.shape[1:] != batch[0].obs.shape[1:]:
                others.append(request)
                continue
            if batch and size + request.size > limit:
                others.append(request)
                full = True
                break
            batch.append(request)
            size += request.size
        self._queue.extendleft(reversed(others))
        return size, full

    async def _batch_loop(self) -> None:
        while True:
            batch = await self._next_batch()
            try:
                await self._run(batch)
            except Exception as err:  # a bug here must not leave callers waiting forever
                log.exception("inference batch failed")
                for request in batch:
                    if not request.future.done():
                        request.future.set_exception(err)

    async def _run(self, batch: list[_Request]) -> None:
        """One network call for ``batch``; each request's future gets its rows."""
        batch = [r for r in batch if not r.future.done()]  # drop callers cancelled meanwhile
        if not batch:
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        before = cache_counts(self._caches.values())
        try:
            ev = await loop.run_in_executor(self._net_thread, self._forward,
                                            [r.obs for r in batch], [r.legal for r in batch])
        except Exception as err:
            if len(batch) == 1:
                if not batch[0].future.done():
                    batch[0].future.set_exception(err)
                return
            # Something in the merged call failed (one odd request, or a batch too large
            # for the device): run each alone so the error reaches only whom it concerns.
            log.warning("inference batch of %d requests failed (%s: %s); retrying them one "
                        "by one", len(batch), type(err).__name__, err)
            for request in batch:
                await self._run([request])
            return
        size = sum(r.size for r in batch)
        rec, server = self.recorder, self._server
        after = cache_counts(self._caches.values())
        if after is not None and before is not None:
            rec.inc("eval_cache_lookups_total", after[0] - before[0], source="server")
            rec.inc("eval_cache_hits_total", after[1] - before[1], source="server")
            rec.inc("nn_evaluations_total", after[2] - before[2], source="server")
        else:
            rec.inc("nn_evaluations_total", size, source="server")
        rec.inc("inference_requests_total", len(batch), server=server)
        self._served += len(batch)
        rec.observe("inference_batch_size", size, server=server)
        rec.observe("inference_batch_fill_ratio", size / self.config.max_batch, server=server)
        answered = loop.time()
        for request in batch:
            rec.observe("inference_queue_wait_seconds", max(now - request.arrived, 0.0),
                        server=server)
            # arrival to answer: queue wait + the network call (its results are set next)
            rec.observe("inference_request_latency_seconds",
                        max(answered - request.arrived, 0.0), server=server)
        start = 0
        for request in batch:
            end = start + request.size
            if not request.future.done():
                # Copies: a caller in this process must not hold a view of everyone's rows.
                request.future.set_result((ev.policy_logits[start:end].copy(),
                                           ev.value[start:end].copy(), ev.weights_version))
            start = end
        self._net_freed = loop.time()

    def _forward(self, obs: list[np.ndarray], legal: list[np.ndarray]) -> Evaluation:
        """On the network thread: concatenate and evaluate (one board shape: ``_gather``).
        The concatenation also copies Ray's read-only argument buffers into one writable
        array torch can take."""
        cache = self._caches.get(obs[0].shape[1:])
        evaluator = cache if cache is not None else self._evaluator
        return evaluator.evaluate(np.concatenate(obs), np.concatenate(legal))

    # -- weights ---------------------------------------------------------------------------
    def _install(self, state_dict: dict, version: int, only_if_newer: bool = False) -> bool:
        """On the network thread (or before serving): load the weights; returns whether
        it did. The store's weights pass ``only_if_newer``, checked here, in the thread's
        order, so a fetch racing a direct push never takes the server back a version."""
        if only_if_newer and version <= self._newest_seen:
            return False
        self._evaluator.load_state_dict(state_dict, version)
        self._newest_seen = max(self._newest_seen, version)
        self.recorder.set("weights_version", self.weights_version, component="inference")
        return True

    async def _weights_loop(self) -> None:
        from zeroforge.shared.transport import WeightsIntegrityError, publish_age_s

        loop = asyncio.get_running_loop()
        while True:
            try:
                got = await loop.run_in_executor(self._io_thread, self._wait_for_weights)
                if got is not None and await loop.run_in_executor(
                        self._net_thread, self._install, got[1], got[0], True):
                    log.info("inference server now on weights version %d", got[0])
                    age = await loop.run_in_executor(self._io_thread, publish_age_s,
                                                     self._store, got[0])
                    if age is not None:
                        self.recorder.observe("weights_delivery_seconds", age)
            except asyncio.CancelledError:
                raise
            except WeightsIntegrityError as err:
                # the same refused version comes back each poll until the learner publishes
                # past it: one line and one count per version, not one a poll
                self._refused.note(err, self.weights_version)
            except Exception as err:  # Redis down: keep serving, try again
                log.warning("inference server: no new weights (%s: %s); keeping version %d",
                            type(err).__name__, err, self.weights_version)
                await asyncio.sleep(self.config.weights_poll_s)

    def _wait_for_weights(self) -> tuple[int, dict] | None:
        """On the I/O thread: wait up to ``weights_poll_s`` for an announcement, then fetch
        anything newer. Fetching after every wait, announced or not, covers announcements
        missed while the subscription was down."""
        assert self._store is not None
        if self._subscription is None:
            self._subscription = self._store.subscribe()
        try:
            self._subscription.poll(self.config.weights_poll_s)
        except Exception:
            self._subscription.close()
            self._subscription = None
            raise
        return self._store.fetch(newer_than=self._newest_seen)


def _log_crash(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("inference server task %s crashed: %r (restarted on the next request)",
                  task.get_name(), task.exception())
