"""The learner's config section (``learner:`` in a run's config file).

Read by the learner alone; ``deploy.config.TrainConfig`` composes it with the other
sections, and the learner receives only this section plus a ``shared.run_context.RunContext``.
"""

from __future__ import annotations

from dataclasses import dataclass

from zeroforge.shared.nets import PRECISIONS, check_precision


@dataclass(frozen=True)
class LearnerConfig:
    """How the learner trains, publishes and checkpoints."""

    batch_size: int = 256
    """Positions per SGD step."""
    optimizer: str = "sgd"
    """``sgd`` (with momentum, as AlphaZero) or ``adamw``."""
    lr: float = 0.02
    """Peak learning rate."""
    momentum: float = 0.9
    """SGD momentum (ignored by AdamW)."""
    weight_decay: float = 1e-4
    """L2 penalty (SGD) / decoupled weight decay (AdamW)."""
    lr_schedule: str = "constant"
    """``constant``, ``cosine`` (to 10% of lr over the budget) or ``step`` (x0.1 at 50%
    and 75% of the budget); the budget: ``total_steps``, else the run's
    (``run.max_learner_steps``, else ``run.minutes``); none: constant (said in the log)."""
    warmup_steps: int = 0
    """Linear warm-up steps at the start."""
    total_steps: int = 0
    """Length of the schedule in steps (steps past it stay at the final rate); 0: the
    run's budget (``lr_schedule``)."""
    average_horizon: int = 0
    """Positions trained over which the weights that the evaluator judges, that are
    snapshotted (``best.safetensors`` among them) and kept as the checkpoint's model (what
    ``play`` loads) are averaged: an exponential moving average of the weights after each
    step with this time constant (early in a run, over about the last tenth of the steps
    taken); 0: the raw weights everywhere. The raw weights and optimizer stay in the
    checkpoint for resuming. Self-play plays them too with ``average_selfplay``."""
    average_selfplay: bool = False
    """With ``average_horizon``: self-play plays the averaged weights as well (true), or the
    raw ones the learner trains (false: the average is published on its own weights
    channel, ``AVERAGE_CHANNEL``, which the evaluator reads). False by the gomoku screen:
    self-play on the average learned slower, and raw self-play learns exactly as a run
    without averaging does."""
    replay_capacity: int = 100_000
    """Positions kept in the replay window."""
    min_replay: int = 1_000
    """No training until the window holds this many positions."""
    samples_per_insert: float = 4.0
    """Positions trained per position inserted (reuse ratio); 0 means no limit. The learner
    waits for data rather than overfitting a small window, and self-play waits for the
    learner when the ratio falls below ``samples_per_insert_tolerance``."""
    samples_per_insert_tolerance: float = 0.25
    """How far below ``samples_per_insert``, as a fraction of it, the learner's ratio may
    fall before self-play workers pause (in [0, 1)): with target T and tolerance f, once
    the learner can train (window at ``min_replay``) and its ratio is below T x (1 - f),
    distributed workers append the games they hold and wait until it is back at or above
    T x (1 - f). Above T the learner waits for data. So the ratio stays between the two
    whichever side is slower; 0 holds it at T (workers stop and start most often). No
    effect with ``samples_per_insert`` 0 or in the local loop, which alternates the two."""
    value_loss_weight: float = 1.0
    """Weight of the value MSE relative to the policy cross-entropy."""
    ownership_loss_weight: float = 1.5
    """Weight of the ownership loss (mean binary cross-entropy per board point; KataGo's
    1.5); used only by a net with an ownership head, on games that carry the target."""
    score_loss_weight: float = 0.02
    """Weight of the score loss (Huber, in points of final margin); used only by a net
    with a score head, on games that carry the target."""
    train_fast_positions: bool = True
    """Under playout-cap randomisation (``search.full_search_prob`` < 1): whether the fast
    moves' positions enter the replay window as value-only samples (True), or are left out
    so that only fully searched positions are trained, as KataGo does (False). Either way
    the whole game is checked on intake; left-out positions do not count as inserted for
    ``samples_per_insert``."""
    augment: bool = True
    """Map each sampled position through a random symmetry of the game."""
    device: str = "auto"
    """``auto`` (CUDA when present), ``cpu`` or ``cuda``."""
    precision: str = "float32"
    """Dtype of the forward pass in training (``nets.names.PRECISIONS``): under
    ``"bfloat16"`` it runs in bfloat16 autocast (weights, optimizer state and the losses
    stay float32); ``"fast"`` is bfloat16 where the device runs it natively (CUDA, or a
    CPU with AMX or AVX-512 BF16, where a step of the small net took 0.44-0.57x the time)
    and float32
    elsewhere; ``"auto"`` is float32. ``"float16"`` is not offered (it needs loss scaling)."""
    seed: int = 0
    """Seed of the sampling RNG and of the initial weights."""
    train_steps_per_round: int = 50
    """Most SGD steps per learner turn (the samples-per-insert ratio also limits)."""
    publish_every_steps: int = 50
    """Publish new weights to self-play every this many learner steps."""
    checkpoint_every_s: float = 60.0
    """Seconds between checkpoints (and one at the end)."""
    snapshot_every_s: float = 0.0
    """Seconds between weight snapshots ``snapshots/weights-<seconds>s.safetensors`` kept for
    learning curves (0: none)."""
    replicas: int = 1
    """Learner processes training as one data-parallel group (distributed runs;
    ``zeroforge.learner.replica_group``): rank 0 reads the stream, keeps the replay window,
    checkpoints and publishes; each replica trains ``batch_size / replicas`` positions of
    every step (gloo on the CPU, NCCL on CUDA). ``batch_size`` must divide evenly. Each
    replica gets ``distributed.learner_cpus`` / ``learner_gpus``."""
    replica_timeout_s: float = 60.0
    """How long a collective of the replica group may wait for a replica before the group
    fails (one line naming the silent replica) and is restarted from the checkpoint: the
    detection time of a hung (SIGSTOPped) replica."""

    @property
    def separate_average(self) -> bool:
        """Whether the averaged weights go out apart from self-play's, on their own
        channel: averaging is on and self-play plays the raw weights."""
        return bool(self.average_horizon) and not self.average_selfplay

    def __post_init__(self) -> None:
        if self.replicas < 1:
            raise ValueError(f"learner.replicas must be >= 1, got {self.replicas}")
        if self.batch_size % self.replicas:
            raise ValueError(f"learner.batch_size {self.batch_size} must be divisible by "
                             f"learner.replicas {self.replicas} (each replica trains an "
                             "equal share of a step)")
        if self.replica_timeout_s <= 0:
            raise ValueError(f"learner.replica_timeout_s must be > 0, got "
                             f"{self.replica_timeout_s}")
        check_precision("learner.precision", self.precision,
                        tuple(p for p in PRECISIONS if p != "float16"))
        if self.batch_size < 1 or self.replay_capacity < 1:
            raise ValueError("batch_size and replay_capacity must be >= 1")
        if self.lr <= 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        for name in ("value_loss_weight", "ownership_loss_weight", "score_loss_weight"):
            if getattr(self, name) < 0:
                raise ValueError(f"learner.{name} must be >= 0, got {getattr(self, name)}")
        if self.train_steps_per_round < 1 or self.publish_every_steps < 1:
            raise ValueError("train_steps_per_round and publish_every_steps must be >= 1")
        if self.checkpoint_every_s < 0 or self.snapshot_every_s < 0:
            raise ValueError("checkpoint_every_s and snapshot_every_s must be >= 0")
        if not 0.0 <= self.samples_per_insert_tolerance < 1.0:
            raise ValueError(f"samples_per_insert_tolerance must be in [0, 1), got "
                             f"{self.samples_per_insert_tolerance}")
        if self.lr_schedule not in ("constant", "cosine", "step"):
            raise ValueError(f"learner.lr_schedule must be constant, cosine or step, got "
                             f"{self.lr_schedule!r}")
        if self.warmup_steps < 0 or self.total_steps < 0 or self.average_horizon < 0:
            raise ValueError("learner.warmup_steps, total_steps and average_horizon must be "
                             ">= 0")
