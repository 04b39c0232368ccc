"""The Learner: replay window + SGD on (s, pi, z), with checkpoints of all its state.

It owns weights, optimizer, LR schedule, replay window and counters, and saves them all
in one file, so a crash resumes without losing or double-counting data. It knows nothing
about where samples come from (the local loop or a Redis stream) or where weights go.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import BinaryIO

import numpy as np
import torch
import torch.nn.functional as F

from zeroforge.learner.config import LearnerConfig
from zeroforge.learner.durable_file import Disk, write_durably
from zeroforge.learner.losses import (
    AuxTargets,
    LossScales,
    loss_sums,
    losses_from_sums,
    step_scales,
    total_loss,
)
from zeroforge.learner.lr_schedule import LrSchedule
from zeroforge.learner.replay import ReplayBatch, ReplayWindow
from zeroforge.learner.replay_sizes import MixedReplayWindow
from zeroforge.learner.replica_group import ReplicaGroup
from zeroforge.learner.sample_checks import rejection, size_rejection
from zeroforge.shared.board_sizes import SizeMix
from zeroforge.shared.config import to_dict
from zeroforge.shared.games import Game, make_game
from zeroforge.shared.nets import NetConfig, build_net, resolve_dtype
from zeroforge.shared.samples import GameSamples

CHECKPOINT_FORMAT = "zeroforge-checkpoint-v1"
CHECKPOINT_NAME = "checkpoint.pt"
"""File name of a run's checkpoint in its run directory (local loop and learner service)."""


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


class CheckpointError(ValueError):
    """A checkpoint file that is missing, truncated, corrupt or for another game/net."""


class Learner:
    """Trains a policy-value net for one game from finished self-play games."""

    def __init__(self, config: LearnerConfig, game_spec: str, net_config: NetConfig,
                 sizes: SizeMix | None = None) -> None:
        """``sizes``: the board sizes the run trains (``selfplay.board_sizes``); None: the
        game's own only. The net is built once, for ``game_spec`` (the evaluation size),
        and trains on every size's batches (a fully convolutional net)."""
        self.config = config
        self.game = make_game(game_spec)
        self.sizes = sizes
        self.games: dict[str, Game] = {self.game.spec.spec_string: self.game}
        """The games this learner takes samples of, by spec string (one per size)."""
        if sizes is not None:
            self.games = {spec: (self.game if spec == self.game.spec.spec_string
                                 else make_game(spec)) for spec in sizes.specs}
        self.net_config = net_config
        self.disk = Disk()
        """The file-system calls ``save`` makes (a seam: tests record their order)."""
        self.device = pick_device(config.device)
        torch.manual_seed(config.seed)
        self.net = build_net(net_config, self.game.spec).to(self.device)
        self.dtype = resolve_dtype(config.precision, self.device)
        """The forward pass's dtype: bfloat16 runs it under autocast."""
        self._channels_last = self.device.type == "cpu"
        if self._channels_last:
            # oneDNN's convolutions are faster in NHWC: a small-net step took 0.78-0.83x
            # the time of NCHW in float32, 0.44-0.54x in bfloat16 (bench_learner.py).
            self.net = self.net.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
        self.optimizer = self._make_optimizer()
        self.aux = net_config.ownership_head or net_config.score_head
        """The net has an auxiliary head: the window keeps ownership and score targets."""
        self.replay: ReplayWindow | MixedReplayWindow
        if sizes is None:
            self.replay = ReplayWindow(config.replay_capacity, self.game.spec.obs_shape,
                                       self.game.spec.num_actions, self.game.symmetries(),
                                       aux=self.aux)
        else:
            self.replay = MixedReplayWindow(config.replay_capacity, sizes.specs,
                                            sizes.shares, self.game.spec.board_shape[0],
                                            aux=self.aux)
        self.batches_by_size: dict[int, int] = {}
        """Training batches taken per board size (a run with several sizes; run totals,
        checkpointed)."""
        self._batches_reported: dict[int, int] = {}
        self.rng = np.random.default_rng(config.seed)
        self.steps = 0
        self.samples_trained = 0
        self.games_seen = 0
        self.version = 0
        """Weights version: bumped by ``publish``; 0 is the random initialisation."""
        self.schedule = LrSchedule(config)
        """The learning rate's schedule (the service gives it the run's budget)."""
        self.run_seconds = 0.0
        """Seconds of the run so far, as its driver counts them (``LearnerService``: from
        the first game); checkpointed: a schedule over ``run.minutes`` goes on from here."""
        self.average: dict[str, torch.Tensor] | None = None
        """The averaged weights (``average_horizon``), on the device; None until the first
        step, and always without averaging."""
        self.averaged_steps = 0
        """Steps in ``average`` (checkpointed)."""
        self.group: ReplicaGroup | None = None
        """The data-parallel group this learner leads (``join_group``), or None."""

    # --- data in ---------------------------------------------------------------------------
    def add(self, games: list[GameSamples]) -> None:
        for g in games:
            if g.policy_recorded is None:
                self.replay.add(g)
            elif not self.config.train_fast_positions:
                # KataGo's playout cap: only the fully searched positions are trained.
                keep = g.policy_mask
                if keep.any():
                    self.replay.add(g, keep)
            else:
                # Positions without a policy target (playout-cap fast moves) enter the
                # window with an all-zero policy row, which ``step`` leaves out of the
                # policy loss; whatever their ``policy`` rows held is ignored.
                policy = np.where(g.policy_mask[:, None], g.policy, 0.0).astype(np.float32)
                self.replay.add(dataclasses.replace(g, policy=policy))
        self.games_seen += len(games)

    def rejection(self, samples: GameSamples) -> tuple[str, str | None]:
        """``(reason, why)`` if ``samples`` must not enter the replay window (the intake
        checks of ``sample_checks``, against the game of the samples' board size in a run
        of several), else ``("", None)``."""
        if self.sizes is None:
            return rejection(self.game, samples)
        return size_rejection(self.games, self.game, samples)

    # --- training --------------------------------------------------------------------------
    def new_batches_by_size(self) -> dict[int, int]:
        """Batches per board size taken since the last call (for a counter's
        increments; the restored totals count as reported)."""
        new = {k: v - self._batches_reported.get(k, 0) for k, v in self.batches_by_size.items()}
        self._batches_reported = dict(self.batches_by_size)
        return {k: v for k, v in new.items() if v}

    def can_train(self) -> bool:
        """Enough data, and the samples-per-insert budget is not used up."""
        if len(self.replay) < max(self.config.min_replay, 1):
            return False
        spi = self.config.samples_per_insert
        budget = spi * self.replay.inserted
        return spi <= 0 or self.samples_trained + self.config.batch_size <= budget

    def lr_at(self, step: int) -> float:
        """The learning rate of step ``step`` now (``schedule``)."""
        return self.schedule.lr(step, self.run_seconds)

    def step(self) -> dict[str, float]:
        """One SGD step on a batch from the replay window; returns its losses. With a
        replica group (``join_group``) the group trains the batch, a shard per replica."""
        batch = self.replay.sample_batch(self.config.batch_size, self.rng,
                                         augment=self.config.augment)
        lr = self.lr_at(self.steps)
        if self.sizes is not None:
            size = int(batch.obs.shape[2])
            self.batches_by_size[size] = self.batches_by_size.get(size, 0) + 1
        if self.group is not None:
            losses = self.group.step(batch, lr)
        else:
            targets, aux_n = batch.target_counts()
            # the ownership loss is a mean per point of the batch's own board
            points = batch.board_points()
            sums = self.train_on(batch, lr, step_scales(1, self.config.batch_size, targets,
                                                        aux_n, points))
            losses = losses_from_sums(sums.tolist(), targets, self.config.batch_size,
                                      points, lr, self.config)
        self.steps += 1
        self.samples_trained += self.config.batch_size
        self._update_average()
        return losses

    def _update_average(self) -> None:
        """Fold the weights after a step into ``average``: an exponential moving average
        with a time constant of ``average_horizon`` positions, but early in the run one
        over about the last tenth of the steps taken (the older weights keep a share of
        (1 + n) / (10 + n) after n steps, TensorFlow's ``num_updates`` rule), so neither the
        random initialisation nor the first minutes' weak nets linger in it. With a plain
        mean of the steps (the rule before) the averaged gomoku6 runs scored 23-27% against
        uct:1000 at half a minute where the raw ones scored 53-63% (seeds 100-101)."""
        horizon = self.config.average_horizon
        if not horizon:
            return
        current = self.net.state_dict()
        if self.average is None or self.averaged_steps == 0:
            self.average = {k: v.detach().clone() for k, v in current.items()}
        else:
            n = self.averaged_steps
            keep = min(math.exp(-self.config.batch_size / horizon), (1 + n) / (10 + n))
            with torch.no_grad():
                for name, value in current.items():
                    held = self.average[name]
                    if held.is_floating_point():
                        held.lerp_(value.detach(), 1.0 - keep)
                    else:  # counters (BatchNorm's num_batches_tracked): the current one
                        held.copy_(value)
        self.averaged_steps += 1

    def train_on(self, batch: ReplayBatch, lr: float, scales: LossScales,
                 module: torch.nn.Module | None = None) -> torch.Tensor:
        """Forward, backward and an optimizer step on ``batch`` (numpy arrays, see
        ``ReplayBatch``: obs [n, C, H, W] uint8, policy [n, A], value [n], and the auxiliary
        targets of a window that keeps them); returns the detached sums of the loss's parts
        (``losses.SUMS`` order: float64, CPU).

        The loss minimised is each part's sum times its scale and weight
        (``losses.total_loss``): ``step_scales(1, ...)`` gives the means of one learner; a
        replica of a group gets the scales that make the replicas' mean the global
        batch's loss. ``module`` is what runs forward (the DDP wrapper of ``self.net`` in
        a group)."""
        x = torch.as_tensor(batch.obs).to(self.device, torch.float32)
        if self._channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        pi = torch.as_tensor(batch.policy).to(self.device, torch.float32)
        z = torch.as_tensor(batch.value).to(self.device, torch.float32)
        aux = None
        if self.aux and batch.has_aux is not None:
            aux = AuxTargets(torch.as_tensor(batch.ownership).to(self.device),
                             torch.as_tensor(batch.score).to(self.device, torch.float32),
                             torch.as_tensor(batch.has_aux).to(self.device))
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        net = module if module is not None else self.net
        net.train()
        with torch.autocast(self.device.type, dtype=torch.bfloat16,
                            enabled=self.dtype == torch.bfloat16):
            if self.aux:
                out = net(x, all_heads=True)
                logits, v, ownership, score = out.policy, out.value, out.ownership, out.score
            else:
                logits, v = net(x)
                ownership = score = None
        # A position with an all-zero policy row (a playout-cap fast move, see ``add``)
        # trains the value only: it adds nothing to the policy sum or to the target count.
        sums = loss_sums(F.log_softmax(logits.float(), dim=1), v.float(), pi, z,
                         ownership, score, aux)
        self.optimizer.zero_grad(set_to_none=True)
        total_loss(sums, scales, self.config).backward()
        self.optimizer.step()
        return sums.detach().to("cpu", torch.float64)

    def join_group(self, group: ReplicaGroup) -> None:
        """Train from now on as rank 0 of ``group`` (formed here: blocks until the other
        replicas join, then shares this learner's weights and optimizer state)."""
        group.form(self)
        self.group = group

    def train_available(self, max_steps: int,
                        after_step: Callable[[], object] | None = None
                        ) -> list[dict[str, float]]:
        """Up to ``max_steps`` steps, as far as the samples-per-insert ratio allows, calling
        ``after_step`` after each (a group's replicas are pinged when there is nothing to
        train)."""
        out: list[dict[str, float]] = []
        while len(out) < max_steps and self.can_train():
            out.append(self.step())
            if after_step is not None:
                after_step()
        if not out and self.group is not None:
            self.group.keep_alive()
        return out

    def weights(self) -> dict[str, torch.Tensor]:
        """A CPU copy of the weights the run publishes, snapshots and plays: the averaged
        ones with ``average_horizon`` (once a step was taken), else the current ones."""
        return _cpu_copy(self.average if self.average is not None
                         else self.net.state_dict())

    def selfplay_weights(self) -> dict[str, torch.Tensor]:
        """A CPU copy of the weights self-play plays: ``weights`` with
        ``average_selfplay``, else the raw ones (``separate_average``)."""
        return self.raw_weights() if self.separate_average else self.weights()

    @property
    def separate_average(self) -> bool:
        """``LearnerConfig.separate_average``."""
        return self.config.separate_average

    def raw_weights(self) -> dict[str, torch.Tensor]:
        """A CPU copy of the weights as trained (what a resumed learner trains on from)."""
        return _cpu_copy(self.net.state_dict())

    def publish(self) -> int:
        """Mark the current weights as a new version and return it."""
        self.version += 1
        return self.version

    # --- checkpoints -----------------------------------------------------------------------
    def save(self, path: str | os.PathLike, extra: dict | None = None,
             guard: Callable[[], AbstractContextManager[None]] | None = None) -> Path:
        """Write everything to ``path`` atomically and durably (``write_durably``: temp
        file, fsync, rename, directory fsync, through ``self.disk``); ``guard`` is held
        around the rename (the run directory's fence, ``run_dir_fence``).

        ``extra`` is state of whoever drives the learner (e.g. the learner service's stream
        cursor), saved in the same file so that it can never disagree with the replay window;
        it must hold only what ``torch.load(weights_only=True)`` reads back (str, int, float,
        bool, None, lists, dicts, tensors). ``restore`` returns it."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        replay = {k: torch.from_numpy(np.ascontiguousarray(v))
                  for k, v in self.replay.state_arrays().items()}
        blob = {
            "format": CHECKPOINT_FORMAT,
            "game": self.game.spec.spec_string,
            "game_version": self.game.spec.version,
            "net_config": to_dict(self.net_config),
            "learner_config": dataclasses.asdict(self.config),
            # the model players load; with averaging, the raw weights beside it resume
            "model": self.weights(),
            **({"raw_model": self.raw_weights()} if self.average is not None else {}),
            "optimizer": self.optimizer.state_dict(),
            "replay": replay,
            "counters": {"steps": self.steps, "samples_trained": self.samples_trained,
                         "games_seen": self.games_seen, "version": self.version,
                         "run_seconds": self.run_seconds,
                         "averaged_steps": self.averaged_steps,
                         # only with several sizes: a one-size checkpoint stays as it was
                         **({"batches_by_size": {str(k): v for k, v in
                                                 self.batches_by_size.items()}}
                            if self.sizes is not None else {})},
            "rng": torch.from_numpy(_rng_state(self.rng)),
            "saved_at": time.time(),
            "extra": dict(extra or {}),
        }
        # on disk, data and name, when this returns: the caller acks what it holds next
        write_durably(path, lambda f: _torch_save(blob, f), self.disk, guard)
        return path

    def restore(self, path: str | os.PathLike) -> dict:
        """Load everything ``save`` wrote and return its ``extra`` ({} if none);
        CheckpointError says what is wrong."""
        blob = load_checkpoint(path)
        if blob["game"] != self.game.spec.spec_string:
            raise CheckpointError(f"{path}: checkpoint is for game {blob['game']!r}, "
                                  f"not {self.game.spec.spec_string!r}")
        try:
            self.net.load_state_dict(blob.get("raw_model", blob["model"]))
            self.optimizer.load_state_dict(blob["optimizer"])
            self._restore_average(blob)
        except (RuntimeError, ValueError, KeyError) as err:
            raise CheckpointError(f"{path}: weights do not fit this net ({err})") from None
        self.replay.load_arrays({k: v.numpy() for k, v in blob["replay"].items()})
        c = blob["counters"]
        self.steps, self.samples_trained = int(c["steps"]), int(c["samples_trained"])
        self.games_seen, self.version = int(c["games_seen"]), int(c["version"])
        self.run_seconds = float(c.get("run_seconds", 0.0))
        if self.sizes is not None:
            self.batches_by_size = {int(k): int(v)
                                    for k, v in dict(c.get("batches_by_size", {})).items()}
            self._batches_reported = dict(self.batches_by_size)
        self.rng = _rng_from_state(blob["rng"].numpy())
        extra = blob.get("extra", {})
        if not isinstance(extra, dict):
            raise CheckpointError(f"{path}: 'extra' is a {type(extra).__name__}, not a dict")
        return extra

    def _restore_average(self, blob: dict) -> None:
        """The average a checkpoint kept (its model, beside the raw weights); from one
        written without averaging, a new average starts at the next step."""
        self.average, self.averaged_steps = None, 0
        if not self.config.average_horizon or "raw_model" not in blob:
            return
        self.average = {k: v.detach().clone() for k, v in self.net.state_dict().items()}
        for name, value in blob["model"].items():
            self.average[name].copy_(value)  # KeyError: a model of another net
        self.averaged_steps = int(blob["counters"].get("averaged_steps", 1))

    def _make_optimizer(self) -> torch.optim.Optimizer:
        c = self.config
        if c.optimizer == "sgd":
            return torch.optim.SGD(self.net.parameters(), lr=c.lr, momentum=c.momentum,
                                   weight_decay=c.weight_decay)
        if c.optimizer == "adamw":
            return torch.optim.AdamW(self.net.parameters(), lr=c.lr, weight_decay=c.weight_decay)
        raise ValueError(f"learner.optimizer must be 'sgd' or 'adamw', not {c.optimizer!r}")


def _cpu_copy(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    # contiguous: a channels-last tensor cannot go into safetensors as it is
    return {k: v.detach().to("cpu", copy=True).contiguous() for k, v in state.items()}


def _torch_save(blob: dict, f: BinaryIO) -> None:
    """``torch.save(blob)`` into the open file ``f``.

    A failed write raises the OSError that says why (``[Errno 28] No space left on
    device``): torch reports a short write only as ``unexpected pos N vs M`` (a
    RuntimeError) and carries the OS's reason as its context, which is raised instead."""
    try:
        torch.save(blob, f)
    except RuntimeError as err:
        if isinstance(err.__context__, OSError):
            raise err.__context__ from None
        raise


def load_checkpoint(path: str | os.PathLike) -> dict:
    """Read a checkpoint with ``weights_only=True``; CheckpointError if unusable."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint file")
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises many types for truncated or foreign files
        # Not torch's own message: for a file holding objects it suggests loading it with
        # weights_only=False, which would run whatever the file holds.
        raise CheckpointError(f"{path}: corrupt or not a checkpoint ({type(err).__name__}); "
                              f"nothing of it was loaded: restore a good copy, or start "
                              f"again without it") from None
    if not isinstance(blob, dict) or blob.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{path}: not a {CHECKPOINT_FORMAT} file")
    return blob


def _rng_state(rng: np.random.Generator) -> np.ndarray:
    """PCG64 state as 4 uint64 halves + has_uint32 + uinteger, for a tensor checkpoint."""
    st = rng.bit_generator.state
    s, inc = st["state"]["state"], st["state"]["inc"]
    words = [s >> 64, s & (2**64 - 1), inc >> 64, inc & (2**64 - 1),
             st["has_uint32"], st["uinteger"]]
    return np.array(words, dtype=np.uint64).view(np.int64)


def _rng_from_state(arr: np.ndarray) -> np.random.Generator:
    w = [int(x) for x in arr.view(np.uint64)]
    rng = np.random.default_rng()
    rng.bit_generator.state = {
        "bit_generator": "PCG64",
        "state": {"state": (w[0] << 64) | w[1], "inc": (w[2] << 64) | w[3]},
        "has_uint32": w[4], "uinteger": w[5],
    }
    return rng
