"""A data-parallel learner: R replicas training one net as a torch.distributed group.

Rank 0 is the run's ``LearnerService``: it alone reads the sample stream, holds the replay
window, checkpoints, publishes and keeps the exactly-once ledger, exactly as a lone
learner does. For every SGD step it samples the global batch of ``learner.batch_size``
positions, keeps the first ``batch_size / R`` and scatters the rest, a shard to each other
replica (``LearnerReplica``, ranks 1..R-1, which keep no replay window). Every replica
runs forward and backward on its shard inside ``DistributedDataParallel``, whose gradient
all-reduce averages the shards' gradients, and takes the same optimizer step. Each
replica's loss is scaled so that the average is the gradient of the *global* batch's loss
(``step_scales``): R replicas at b/R each make the update one learner makes at b, up to
float rounding and batch norm, whose statistics stay per replica (as in plain DDP).

Why one reader and scattered batches, rather than a stream shard and a replay window per
replica: the window, the intake checks, the checkpoint and the ledger keep one owner, so
none of their promises changes; what the group adds is arithmetic. The cost is one
scatter of the batch per step (``b x (C x H x W)`` bytes of observations plus the
targets), small beside the all-reduce of the gradients.

Commands. Rank 0 drives the group with a header broadcast before each collective step:
``STEP`` (then the scatter and the step), ``PING`` (rank 0 has nothing to train for a
while: the replicas' waits must not reach the group timeout) and ``STOP``. A group is
formed once and never repaired: a replica that dies or hangs makes rank 0's next
collective fail within ``learner.replica_timeout_s``; rank 0 raises ``ReplicaGroupError``
naming the replicas whose heartbeats stopped, and the runtime restarts the whole group
from the last checkpoint (what a lone learner's crash does).

Transport between the replicas is torch.distributed's own: a ``TCPStore`` served by rank
0 for the rendezvous and the heartbeats, and gloo (CPU) or NCCL (CUDA) for the tensors.
Nothing is pickled: every message is a tensor.
"""

from __future__ import annotations

import datetime
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from zeroforge.learner.group_seat import GroupAddress
from zeroforge.learner.losses import losses_from_sums, step_scales
from zeroforge.learner.replay import ReplayBatch
from zeroforge.shared.metrics import Recorder

log = logging.getLogger(__name__)

STEP, PING, STOP = 1.0, 2.0, 3.0
"""Header commands (a float64 tensor ``[command, lr, policy_targets, aux_positions, H, W,
A]``, ``_Member.header``)."""
Board = tuple[int, int, int]
"""A step's board height, width and actions (H, W, A)."""
Header = tuple[float, float, float, float, Board]
"""What ``_Member.header`` returns: command, lr, policy targets, aux positions, board."""
HEARTBEAT_S = 1.0
"""Seconds between a replica's heartbeats in the store."""


_LEFT_GROUPS: list = []
"""The process-group and DDP objects of groups this process has left, kept alive until it
exits. Destroying a gloo process group's C++ objects right after the group ended
sometimes blocked that thread for good (seen in about one in five stops under load: the
replica's ``run`` returned into the destructor and never came back, so its actor never
ended and a new group could not form). The process of a group member ends soon after
(Ray kills a finished member's actor), so keeping them costs nothing that lasts."""


class ReplicaGroupError(RuntimeError):
    """The replica group failed: a replica died, hung or could not join."""


def backend_for(device: torch.device) -> str:
    """gloo on the CPU, NCCL on CUDA."""
    return "nccl" if device.type == "cuda" else "gloo"


class _Heartbeats:
    """A thread that stamps ``alive/<rank>`` in rank 0's store every ``HEARTBEAT_S`` seconds,
    so that rank 0 can say *which* replica stopped answering when a collective fails.

    It has a store client of its own with a short timeout: a write to a store whose
    process has gone (rank 0 ended, or died) gives up within seconds. With the group's
    client (the join timeout, minutes) such a write held this process for that long, and
    a replica that had already left the group could not return from its ``run``."""

    def __init__(self, address: GroupAddress, rank: int) -> None:
        self._address, self._rank = address, rank
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True,
                                        name=f"replica-{rank}-heartbeat")
        self._thread.start()

    def _beat(self) -> None:
        try:
            store = dist.TCPStore(self._address.host, self._address.port, None, False,
                                  timeout=datetime.timedelta(seconds=3 * HEARTBEAT_S))
            while not self._stop.is_set():
                store.set(f"alive/{self._rank}", repr(time.time()))
                self._stop.wait(HEARTBEAT_S)
        except Exception:  # the store (rank 0) is gone: the group is ending anyway
            return

    def stop(self) -> None:
        """End the beats and wait for the thread (a write in flight ends within seconds)."""
        self._stop.set()
        self._thread.join(timeout=10 * HEARTBEAT_S)


class _Member:
    """What every rank shares: the process group, the DDP-wrapped net and the step."""

    def __init__(self, learner, rank: int, replicas: int, store: dist.Store,
                 timeout_s: float, host: str = "127.0.0.1",
                 store_address: GroupAddress | None = None) -> None:
        """``host``: this process's address for the other replicas (gloo binds to it);
        ``store_address``: rank 0's store, where ranks 1.. send their heartbeats."""
        self.learner = learner
        self.rank = rank
        self.replicas = replicas
        self.device = learner.device
        self.timeout_s = timeout_s
        self.store = store
        cfg = learner.config
        if cfg.batch_size % replicas:
            raise ReplicaGroupError(f"learner.batch_size {cfg.batch_size} is not divisible "
                                    f"by learner.replicas {replicas}")
        self.shard = cfg.batch_size // replicas
        if backend_for(self.device) == "gloo":
            _bind_gloo_to(host)
        dist.init_process_group(backend_for(self.device), store=store, rank=rank,
                                world_size=replicas,
                                timeout=datetime.timedelta(seconds=timeout_s))
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
        # DDP broadcasts rank 0's parameters and buffers here: every replica starts from
        # the leader's (restored) weights.
        self.ddp = DistributedDataParallel(
            learner.net, device_ids=[self.device.index] if self.device.type == "cuda" else None)
        self._sync_optimizer_state()
        self.heartbeats = (_Heartbeats(store_address, rank)
                           if rank and store_address is not None else None)

    # --- collectives ---------------------------------------------------------------------
    def _broadcast(self, tensor: torch.Tensor) -> torch.Tensor:
        """Broadcast from rank 0 through the backend's device; returns the tensor there."""
        on = tensor.to(self._comm_device())
        dist.broadcast(on, src=0)
        return on

    def _comm_device(self) -> torch.device:
        return self.device if self.device.type == "cuda" else torch.device("cpu")

    def header(self, command: float = 0.0, lr: float = 0.0, targets: float = 0.0,
               aux_positions: float = 0.0, board: Board = (0, 0, 0)) -> Header:
        """Rank 0 sends ``[command, lr, policy_targets, aux_positions, H, W, A]`` (H x W
        and A: the board and actions of the step's batch, which vary in a run with
        several board sizes); every rank returns it."""
        t = self._broadcast(torch.tensor([command, lr, targets, aux_positions, *board],
                                         dtype=torch.float64))
        c, lr_, tg, aux, h, w, a = t.cpu().tolist()
        return c, lr_, tg, aux, (int(h), int(w), int(a))

    def scatter_batch(self, batch: ReplayBatch | None, board: Board) -> ReplayBatch:
        """Rank 0 splits the global ``batch`` (of ``board``: H, W, A) into R shards;
        every rank returns its own (as tensors, which ``Learner.train_on`` takes as it
        takes arrays)."""
        n = self.shard
        h, w, a = board
        obs_shape = (self.learner.game.spec.obs_shape[0], h, w)

        def part(name: str, shape: tuple[int, ...], dtype: torch.dtype) -> Any:
            full = None if batch is None else getattr(batch, name)
            if name == "has_aux" and full is not None:
                full = full.astype(np.uint8)  # gloo has no bool
            return self.scatter(full, (n, *shape), dtype)

        out = ReplayBatch(part("obs", obs_shape, torch.uint8),
                          part("policy", (a,), torch.float32),
                          part("value", (), torch.float32))
        if self.learner.aux:
            out.ownership = part("ownership", (h, w), torch.int8)
            out.score = part("score", (), torch.float32)
            out.has_aux = part("has_aux", (), torch.uint8).bool()
        return out

    def scatter(self, full: np.ndarray | None, shape: tuple[int, ...], dtype: torch.dtype
                ) -> torch.Tensor:
        """Rank 0 splits ``full`` (the global batch, first axis) into R shards; every rank
        returns its own (``shape`` is a shard's)."""
        dev = self._comm_device()
        out = torch.empty(shape, dtype=dtype, device=dev)
        parts = None
        if self.rank == 0:
            assert full is not None
            whole = torch.from_numpy(np.ascontiguousarray(full)).to(dev)
            parts = list(whole.split(self.shard))
        dist.scatter(out, parts, src=0)
        return out

    def _sync_optimizer_state(self) -> None:
        """Give every replica rank 0's optimizer state (momentum, Adam moments).

        After that the state stays equal by construction (same gradients, same steps). The
        tensors' shapes follow from the parameters, so only tensors cross: a per-parameter
        flag says which parameters have state yet (none before the first step)."""
        opt = self.learner.optimizer
        params = [p for group in opt.param_groups for p in group["params"]]
        keys = _state_keys(opt)
        have = torch.tensor([int(bool(opt.state.get(p))) for p in params], dtype=torch.int64)
        have = self._broadcast(have).cpu()
        for p, flag in zip(params, have.tolist(), strict=True):
            if not flag:
                continue
            state = opt.state[p]
            for key in keys:
                local = state.get(key) if self.rank == 0 else None
                template = (local if local is not None
                            else _state_template(key, p))
                received = self._broadcast(template.detach().clone())
                state[key] = received.to(template.device, template.dtype)

    def train(self, shard: ReplayBatch, lr: float, targets: float, aux_positions: float
              ) -> dict[str, float]:
        """One synchronous step on this replica's shard; the global batch's losses."""
        learner, batch = self.learner, self.learner.config.batch_size
        # the ownership loss is a mean per point of the step's board (its size may vary)
        points = shard.board_points()
        scales = step_scales(self.replicas, batch, targets, aux_positions, points)
        sums = learner.train_on(shard, lr, scales, module=self.ddp)
        totals = sums.to(self._comm_device())
        dist.all_reduce(totals)
        return losses_from_sums(totals.cpu().tolist(), targets, batch, points, lr,
                                learner.config)

    def close(self) -> None:
        if self.heartbeats is not None:
            self.heartbeats.stop()
        if dist.is_initialized():
            # unregistered (a later group in this process can form), but not destroyed
            _LEFT_GROUPS.append((dist.group.WORLD, self.ddp, self.store))
            try:
                dist.destroy_process_group()
            except Exception as err:  # a broken group may not tear down cleanly
                log.debug("destroying the replica group: %s", err)


def _bind_gloo_to(host: str) -> None:
    """Make gloo listen on the interface that holds ``host``. By default it resolves the
    machine's hostname, which on a multi-homed node (or a network namespace) may give an
    address the other replicas cannot reach, or only loopback. An interface the operator
    chose (``GLOO_SOCKET_IFNAME``) wins; loopback needs nothing."""
    if os.environ.get("GLOO_SOCKET_IFNAME") or host.startswith("127.") or host == "localhost":
        return
    import psutil

    for name, addresses in psutil.net_if_addrs().items():
        if any(a.address == host for a in addresses):
            os.environ["GLOO_SOCKET_IFNAME"] = name
            return
    log.warning("no network interface holds %s: gloo picks one from the hostname", host)


def _state_keys(opt: torch.optim.Optimizer) -> tuple[str, ...]:
    """The per-parameter state tensors of the optimizers ``Learner`` builds."""
    if isinstance(opt, torch.optim.SGD):
        return ("momentum_buffer",)
    if isinstance(opt, torch.optim.AdamW):
        return ("step", "exp_avg", "exp_avg_sq")
    raise ReplicaGroupError(f"no replica-group support for {type(opt).__name__}")


def _state_template(key: str, param: torch.Tensor) -> torch.Tensor:
    """An empty tensor of the shape ``key``'s state has for ``param``."""
    if key == "step":
        return torch.zeros((), dtype=torch.float32)
    return torch.zeros_like(param, memory_format=torch.preserve_format)


def bound_listener(host: str) -> tuple[int, int]:
    """(file descriptor, port) of a TCP socket listening on ``host`` (an IPv4 or IPv6
    address) on a free port; the descriptor is the caller's (the store's) to close."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, 0))
        listener.listen(128)
    except OSError as err:
        listener.close()
        raise ReplicaGroupError(f"learner replica group: cannot listen on {host}: "
                                f"{err.strerror or err}") from None
    port = int(listener.getsockname()[1])
    return listener.detach(), port


class ReplicaGroup:
    """Rank 0's side: serves the store, forms the group, drives the steps.

    ``host`` is the address the other replicas reach this process at (the node's IP in a
    cluster, loopback on one machine). The store listens as soon as this object exists,
    so ``address`` can be handed out before ``form`` blocks waiting for the replicas.
    """

    def __init__(self, replicas: int, host: str = "127.0.0.1", timeout_s: float = 60.0,
                 join_timeout_s: float = 300.0) -> None:
        if replicas < 2:
            raise ValueError(f"a replica group needs at least 2 replicas, got {replicas}")
        self.replicas = replicas
        self.timeout_s = timeout_s
        self.join_timeout_s = join_timeout_s
        # The store listens on ``host`` only: given a port alone, torch's TCPStore binds
        # every interface of the machine; a socket bound here and handed over keeps the
        # rendezvous to the address the replicas use (the pod network on Kubernetes, where
        # a NetworkPolicy closes the Ray pods' ports to other pods: k8s/base).
        listen_fd, port = bound_listener(host)
        self.store = dist.TCPStore(host, port, replicas, True,
                                   timeout=datetime.timedelta(seconds=join_timeout_s),
                                   wait_for_workers=False, master_listen_fd=listen_fd)
        self.address = GroupAddress(host, int(self.store.port))
        self.member: _Member | None = None
        self._last_command = time.monotonic()
        self.steps = 0

    def form(self, learner) -> None:
        """Wait for the R-1 replicas (``join_timeout_s``), then share rank 0's weights and
        optimizer state with them. Raises ``ReplicaGroupError`` if they do not come."""
        try:
            self.member = _Member(learner, 0, self.replicas, self.store, self.timeout_s,
                                  self.address.host)
        except ReplicaGroupError:
            raise
        except Exception as err:
            raise ReplicaGroupError(
                f"learner replica group: could not form with {self.replicas - 1} other "
                f"replica(s) at {self.address.host}:{self.address.port} (join timeout "
                f"{self.join_timeout_s:g} s): {_first_line(err)}") from None
        self._last_command = time.monotonic()
        log.info("learner replica group formed: %d replicas, %s", self.replicas,
                 backend_for(learner.device))

    def step(self, batch: ReplayBatch, lr: float) -> dict[str, float]:
        """One group step on the global ``batch``; returns the global batch's losses."""
        m = self._formed()
        targets, aux_positions = batch.target_counts()
        board = (int(batch.obs.shape[2]), int(batch.obs.shape[3]), int(batch.policy.shape[1]))
        try:
            m.header(STEP, lr, targets, aux_positions, board)
            losses = m.train(m.scatter_batch(batch, board), lr, targets, aux_positions)
        except ReplicaGroupError:
            raise
        except Exception as err:
            raise self._failure("a training step", err) from None
        self._last_command = time.monotonic()
        self.steps += 1
        return losses

    def keep_alive(self) -> None:
        """Rank 0 is idle (no data it may train on): ping the replicas before their wait
        for the next command reaches the group timeout."""
        m = self._formed()
        if time.monotonic() - self._last_command < self.timeout_s / 4:
            return
        try:
            m.header(PING)
        except Exception as err:
            raise self._failure("a keep-alive", err) from None
        self._last_command = time.monotonic()

    def stop(self) -> None:
        """Tell the replicas to end (their ``run`` returns) and leave the group."""
        m = self.member
        if m is None:
            return
        try:
            m.header(STOP)
        except Exception as err:  # they may be gone already: nothing to tell
            log.warning("learner replica group: stop not delivered (%s)", _first_line(err))
        m.close()
        self.member = None

    def _formed(self) -> _Member:
        if self.member is None:
            raise ReplicaGroupError("the learner replica group is not formed")
        return self.member

    def silent_replicas(self, older_than_s: float | None = None) -> list[str]:
        """Replicas whose last heartbeat is older than ``older_than_s`` (default: three
        beats), as ``"replica R (last heard N s ago)"``."""
        limit = older_than_s if older_than_s is not None else 3 * HEARTBEAT_S
        now, out = time.time(), []
        for rank in range(1, self.replicas):
            try:
                seen = float(self.store.get(f"alive/{rank}").decode()) \
                    if self.store.check([f"alive/{rank}"]) else None
            except Exception:
                seen = None
            if seen is None:
                out.append(f"replica {rank} (never heard)")
            elif now - seen > limit:
                out.append(f"replica {rank} (last heard {now - seen:.0f} s ago)")
        return out

    def _failure(self, what: str, err: BaseException) -> ReplicaGroupError:
        """The one-line error for a failed collective; the group is left (it is never
        repaired: the runtime forms a new one)."""
        silent = self.silent_replicas()
        if self.member is not None:
            self.member.close()
            self.member = None
        who = ", ".join(silent) if silent else "no replica's heartbeat stopped"
        return ReplicaGroupError(f"learner replica group failed during {what}: {who}: "
                                 f"{_first_line(err)}")


class LearnerReplica:
    """A replica of rank 1..R-1 as a service (``shared.service.Service``): it joins rank 0's
    group and follows its commands until ``STOP``. It keeps no replay window and writes
    nothing; its ``stats`` count its own steps (``learner_replica_steps_total``)."""

    def __init__(self, learner, rank: int, replicas: int,
                 address: Callable[[], GroupAddress], timeout_s: float = 60.0,
                 join_timeout_s: float = 300.0, *, torch_threads: int = 0,
                 host: str = "127.0.0.1") -> None:
        """``host``: this process's address for the other replicas (its node's IP)."""
        if torch_threads:
            # Process-wide; a replica owns its process in a distributed run.
            torch.set_num_threads(torch_threads)
        if not 1 <= rank < replicas:
            raise ValueError(f"replica rank {rank} outside 1..{replicas - 1}")
        self.learner = learner
        self.rank = rank
        self.replicas = replicas
        self._address = address
        self.host = host
        self.timeout_s = timeout_s
        self.join_timeout_s = join_timeout_s
        self.steps = 0
        self.recorder = Recorder()
        self.recorder.inc("learner_replica_steps_total", 0, replica=str(rank))

    def run(self, stop: threading.Event | None = None) -> int:
        """Join the group and follow rank 0 until it says ``STOP`` (or the group fails:
        ``ReplicaGroupError``); returns the steps taken. ``stop`` is not consulted: a
        replica ends with its group, when rank 0 has written its final checkpoint. (An
        int, not a dict: the runtime keeps a learner's dict as the run's final report.)"""
        address = self._address()
        try:
            store = dist.TCPStore(address.host, address.port, self.replicas, False,
                                  timeout=datetime.timedelta(seconds=self.join_timeout_s))
            member = _Member(self.learner, self.rank, self.replicas, store, self.timeout_s,
                             self.host, address)
        except Exception as err:
            raise ReplicaGroupError(
                f"learner replica {self.rank}: cannot join the group at {address.host}:"
                f"{address.port} ({_first_line(err)})") from None
        try:
            while True:
                command, lr, targets, aux_positions, board = member.header()
                if command == STOP:
                    return self.steps
                if command != STEP:
                    continue
                member.train(member.scatter_batch(None, board), lr, targets, aux_positions)
                self.steps += 1
                self.recorder.inc("learner_replica_steps_total", replica=str(self.rank))
        except ReplicaGroupError:
            raise
        except Exception as err:
            raise ReplicaGroupError(f"learner replica {self.rank}: the group failed "
                                    f"({_first_line(err)})") from None
        finally:
            member.close()

    def stats(self) -> dict:
        return self.recorder.snapshot()

    def game_ids(self) -> list[str]:
        return []


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0][:240] if text else ''}"
