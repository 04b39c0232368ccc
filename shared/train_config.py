"""The run's config sections and ``TrainConfig``, which composes them.

Every side (self-play, learner, evaluator, inference, the driver) imports this module;
it imports nothing from ``actors/``, ``learner/`` or ``deploy/``, so no side pulls in
another. A service receives only its own section(s) plus a ``RunContext``: the few facts
of the run every process needs (id, directory, transport, game, seed, limits).

The search section lives with the search (``shared.search.config``), the network's with
the nets (``zeroforge.shared.nets.model``); the sections below have no shared code of their own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from zeroforge.shared import config as cfg
from zeroforge.shared.board_sizes import SizeMix, check_board_sizes, check_mix, size_mix
from zeroforge.shared.nets import BACKENDS, PRECISIONS, NetConfig, check_precision
from zeroforge.shared.search import SearchConfig


@dataclass(frozen=True)
class SelfPlayConfig:
    """How a self-play worker plays."""

    games_in_parallel: int = 32
    """B: games advanced together; one evaluator call per simulation round covers all B."""
    workers: int = 1
    """Self-play workers in a distributed run (the local run steps one)."""
    moves_per_round: int = 4
    """Local run: moves (for all B games) the worker plays before the learner's turn."""
    record_every: int = 100
    """Keep 1 in this many finished games of each worker as SGF in
    ``RUN_DIR/games/selfplay/`` (0: none); the directory keeps at most the newest 2000."""
    eval_cache_entries: int = 0
    """Positions the worker's evaluation cache holds (``shared.search.eval_cache``: LRU,
    emptied on new weights; a position repeated within a leaf batch, across moves or across
    the B games is evaluated once). 0: no cache. Memory is about (A + 1) x 4 bytes plus
    ~100 bytes of key and bookkeeping per entry (A: the game's actions)."""
    precision: str = "auto"
    """Dtype of a worker's own network, on the CPU (``nets.names.PRECISIONS``;
    inference servers follow ``inference.precision``): ``"auto"`` is float32; ``"fast"``
    is bfloat16 on a CPU with AMX or AVX-512 BF16, where the small net ran 2.0-2.9x (AMX)
    and 1.7x (AVX-512 BF16) faster at batch 128, and float32 elsewhere. Outputs are
    float32 either way."""
    backend: str = "torch"
    """How a worker runs its own network (``zeroforge.shared.nets.backends``; inference servers
    follow ``inference.backend``): ``"torch"`` (in ``selfplay.precision``), or
    ``"onnxruntime"``, ``"openvino"``, ``"openvino-bf16"``, ``"torch-int8"``. The exported
    ones need ``pip install 'zeroforge[backends]'`` and rebuild the model on every weight
    swap (60-70 ms for the small net); ``openvino-bf16`` ran the small net 1.5x torch in
    bfloat16 at batch 256 on an AMX CPU."""
    simulate_from: str = ""
    """Load simulation (``benchmarks/scale_sim.py``): a file of recorded games
    (``actors.replay_worker.save_games``). Each worker then replays them under fresh game
    ids at ``simulate_games_per_min`` instead of playing, and polls the weights as a worker
    does (fetched and verified, not loaded into a net). "" (the default): real self-play."""
    simulate_games_per_min: float = 6.0
    """Games a simulating worker appends per minute (``simulate_from``)."""
    board_sizes: tuple[int, ...] = ()
    """Board sizes self-play plays, e.g. ``[7, 9]`` (Go only; ``shared.board_sizes``):
    each worker keeps ``games_in_parallel`` games of every size (and an evaluation cache
    of ``eval_cache_entries`` per size) and deals its moves out in the sizes' shares
    (``board_size_weights``; one evaluator call is of one size), the learner keeps them
    in one replay window and trains one fully convolutional net (``net.heads: pooled``)
    on batches of one size each. The run's ``game`` stays the evaluation size
    (evaluation, snapshots, checkpoints, ``play``, ``gtp``) and need not be in the list.
    Empty (the default), or the run's own size alone: that size only, exactly as without
    the field."""
    board_size_weights: tuple[float, ...] = ()
    """Share of each of ``board_sizes`` in the self-play positions, hence in the replay
    window and the training batches (one weight > 0 per size, normalised). Empty: equal
    shares."""

    def __post_init__(self) -> None:
        check_board_sizes(self.board_sizes, self.board_size_weights)
        if self.simulate_games_per_min <= 0:
            raise ValueError(f"selfplay.simulate_games_per_min must be > 0, got "
                             f"{self.simulate_games_per_min}")
        if self.backend not in BACKENDS:
            raise ValueError(f"selfplay.backend must be one of {', '.join(BACKENDS)}, "
                             f"not {self.backend!r}")
        check_precision("selfplay.precision", self.precision)
        if self.eval_cache_entries < 0:
            raise ValueError(f"eval_cache_entries must be >= 0, got {self.eval_cache_entries}")
        if self.games_in_parallel < 1:
            raise ValueError(f"games_in_parallel must be >= 1, got {self.games_in_parallel}")
        if self.workers < 0 or self.moves_per_round < 1:
            raise ValueError("workers must be >= 0 and moves_per_round >= 1")
        if self.record_every < 0:
            raise ValueError(f"record_every must be >= 0, got {self.record_every}")


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
    """``constant``, ``cosine`` (to 10% of lr over ``total_steps``) or ``step`` (x0.1 at 50%
    and 75% of ``total_steps``)."""
    warmup_steps: int = 0
    """Linear warm-up steps at the start."""
    total_steps: int = 100_000
    """Length of the schedule (steps past it stay at the final rate)."""
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


@dataclass(frozen=True)
class EvaluationConfig:
    """How the evaluator measures the trained weights."""

    every_s: float = 120.0
    """Seconds between evaluations of the newest weights (0: only at the end of a local
    run; a distributed evaluator then checks once a second)."""
    games: int = 20
    """Games per evaluation match against each anchor (colours alternate)."""
    anchors: tuple[str, ...] = ("random", "uct:100", "uct:1000")
    """Fixed opponents, as player specs: ``random``, ``uct:PLAYOUTS`` (pure MCTS),
    ``uctsolver:PLAYOUTS``, ``minimax`` (tic-tac-toe). The evaluator also plays the best
    weights so far (``best``)."""
    simulations: int = 0
    """Simulations a move for the trained agent (0: the search section's number)."""
    best_threshold: float = 0.55
    """Score against the best weights so far above which new weights become the best
    (AlphaGo Zero's 55%)."""

    def __post_init__(self) -> None:
        if self.games < 1:
            raise ValueError(f"games must be >= 1, got {self.games}")
        if self.every_s < 0 or self.simulations < 0:
            raise ValueError("every_s and simulations must be >= 0")
        if not 0.0 <= self.best_threshold <= 1.0:
            raise ValueError(f"best_threshold must be in [0, 1], got {self.best_threshold}")


@dataclass(frozen=True)
class InferenceServerConfig:
    """How an inference server batches requests and runs its network."""

    max_batch: int = 1024
    """Most positions per network call. Requests are never split across two calls; a
    single request larger than this runs alone."""
    max_wait_ms: float = 2.0
    """How long the oldest waiting request may wait for others to join its batch. Requests
    that queue up while a network call runs go out together at once, so this only matters
    when the server is idle and a lone request arrives."""
    device: str = "auto"
    """``"auto"`` (a GPU when the cluster has one, else CPU), ``"cpu"``, ``"cuda"``."""
    weights_poll_s: float = 1.0
    """Longest time between looks for newer weights in the WeightStore; an announcement on
    the store's pub/sub channel is picked up at once."""
    compile: bool = False
    """``torch.compile`` the network (GPUs; slow first calls, pays off for small batches)."""
    precision: str = "auto"
    """Dtype of the server's network (``nets.names.PRECISIONS``): ``"auto"``
    (bfloat16 on a GPU, float32 on the CPU), ``"fast"`` (bfloat16 also on a CPU with AMX
    or AVX-512 BF16),
    ``"float32"``, ``"bfloat16"`` or ``"float16"``; outputs are float32 either way."""
    num_threads: int = 1
    """torch intra-op threads of the server process (0: torch's default). One is fastest
    when the server shares cores with self-play workers."""
    num_cpus: float = 1.0
    """Ray CPUs reserved for each server actor (also when it holds a GPU: the batching loop
    and the transfers need a core)."""
    num_gpus: float = 1.0
    """Share of a GPU Ray reserves for each server actor that runs on one (0 < share <= 1).
    Below 1, Ray packs several servers, and a learner with ``distributed.learner_gpus``,
    onto one GPU (the ``*-gpu`` presets: two servers and the learner share one)."""
    max_concurrency: int = 1000
    """Ray requests in flight per server actor: one per self-play worker is enough, as each
    waits for its answer before sending the next batch."""
    cache_entries: int = 0
    """Positions the server's evaluation cache holds (``shared.search.eval_cache``: LRU,
    emptied on new weights), shared by all the workers it serves: a position any of them
    sent before is answered without the network. 0: no cache."""
    backend: str = "torch"
    """How the server runs its network (``zeroforge.shared.nets.backends``): ``"torch"``
    (TorchEvaluator, any device) or a CPU-only backend: ``"onnxruntime"``,
    ``"openvino"``, ``"openvino-bf16"`` (bfloat16: values of a trained net up to 2e-2
    off; 3-8x torch with AMX, docs/lab/inference-backends.md),
    ``"torch-int8"``. The others need
    ``pip install 'zeroforge[backends]'`` and rebuild the model on every weight swap."""

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"InferenceServerConfig.backend must be one of "
                             f"{', '.join(BACKENDS)}, not {self.backend!r}")
        if self.backend != "torch" and self.device not in ("auto", "cpu"):
            raise ValueError(f"InferenceServerConfig: backend {self.backend!r} runs on the "
                             f"CPU, not on device {self.device!r}")
        check_precision("InferenceServerConfig.precision", self.precision)
        if self.max_batch < 1:
            raise ValueError(f"InferenceServerConfig.max_batch must be >= 1, got {self.max_batch}")
        if self.max_wait_ms < 0 or self.weights_poll_s <= 0:
            raise ValueError("InferenceServerConfig: max_wait_ms must be >= 0 and "
                             "weights_poll_s > 0")
        if self.cache_entries < 0:
            raise ValueError(f"InferenceServerConfig.cache_entries must be >= 0, got "
                             f"{self.cache_entries}")
        if self.num_threads < 0 or self.num_cpus < 0 or self.max_concurrency < 1:
            raise ValueError(f"InferenceServerConfig: bad resources in {self}")
        if not 0 < self.num_gpus <= 1:
            raise ValueError(f"InferenceServerConfig.num_gpus must be in (0, 1] (a share of "
                             f"one GPU), got {self.num_gpus}")


@dataclass(frozen=True)
class RunConfig:
    """The run as a whole: its name, where it writes, how long it lasts, how it reports."""

    run_id: str = ""
    """Name of the run (letters, digits, ``_.-``); empty: generated from the time."""
    run_dir: str = "runs/latest"
    """Directory of the run record: ``config.yaml``, ``checkpoint.pt``, ``eval.jsonl``,
    ``snapshots/`` (see docs/architecture.md, "Run record")."""
    minutes: float = 0.0
    """Stop after this many minutes of wall clock (0: no limit)."""
    max_learner_steps: int = 0
    """Stop after this many learner steps (0: no limit)."""
    max_games: int = 0
    """Stop after this many self-play games reached the learner (0: no limit)."""
    seed: int = 0
    """Seed of everything random in the run."""
    progress_every_s: float = 5.0
    """Seconds between progress lines."""
    torch_threads: int = 1
    """torch intra-op threads of each process (0: torch's default). Small batched convs run
    fastest on one thread, and several threads collapse when cores are shared."""
    metrics_port: int = 0
    """Port of the run's Prometheus endpoint (0: any free one)."""
    metrics_host: str = "127.0.0.1"
    """Address the metrics endpoint binds to (loopback unless told otherwise)."""
    dashboard_port: int = 0
    """Port of the run's dashboard and status server (0: any free one)."""
    dashboard_host: str = "127.0.0.1"
    """Address the dashboard binds to: loopback unless told otherwise; any other address
    requires a token, generated into ``RUN_DIR/dashboard.token`` (0600)."""
    dashboard_interval_s: float = 2.0
    """Seconds between two samples of the run's metric history (the dashboard's charts)."""

    def __post_init__(self) -> None:
        if self.minutes < 0 or self.max_learner_steps < 0 or self.max_games < 0:
            raise ValueError("minutes, max_learner_steps and max_games must be >= 0")
        if self.progress_every_s <= 0:
            raise ValueError(f"progress_every_s must be > 0, got {self.progress_every_s}")
        if self.dashboard_interval_s <= 0:
            raise ValueError(f"dashboard_interval_s must be > 0, got {self.dashboard_interval_s}")


@dataclass(frozen=True)
class DistributedConfig:
    """How a distributed run places its actors (ignored by ``train --local``)."""

    inference: str = "auto"
    """``local``: each self-play worker runs its own network; ``server``: workers send leaf
    batches to inference servers; ``auto``: servers when the cluster has GPUs."""
    inference_servers: int = 1
    """Inference servers to keep alive when inference is ``server``."""
    worker_cpus: float = 1.0
    """CPUs Ray reserves per self-play actor (a host of ``workers_per_host`` workers)."""
    workers_per_host: int = 1
    """Self-play workers one actor process hosts (threads sharing its CPUs and its one
    stats report): with many light workers (inference servers, or the load simulator's
    replaying ones) the controller then deals with workers / this many actors. Actor ``h``
    hosts workers ``w{h*K}`` .. ``w{h*K+K-1}`` (K = this); a scale resizes the newest
    actors first."""
    learner_cpus: float = 1.0
    """CPUs Ray reserves for the learner (each replica, with ``learner.replicas`` > 1)."""
    learner_gpus: float = 0.0
    """GPUs Ray reserves for the learner (set 1 on GPU clusters; each replica)."""
    learner_resource: str = ""
    """A custom Ray resource each learner replica takes one unit of (the nodes meant for
    training declare it); "" for none."""
    learner_spread: bool = False
    """Place the learner replicas with Ray's SPREAD strategy (one per node where they fit),
    for failure isolation; the default packs them, which keeps a multi-GPU node's
    replicas on its fast links."""
    evaluator: bool = True
    """Run an evaluator actor that plays new weights against the anchors."""
    evaluator_cpus: float = 0.5
    """CPUs Ray reserves for the evaluator."""
    monitor_interval_s: float = 1.0
    """How often the controller checks actors, replaces dead ones and gathers metrics."""
    lease_s: float = 120.0
    """Seconds a run's actor goes on without any call from a controller before it ends
    itself (a worker after its last appends, the learner after its checkpoint): a driver
    killed on a cluster it joined leaves nothing running past this, and a new driver that
    comes within it re-attaches to the run as it was. Longer than a head restart plus a
    job resubmission on clusters that do those (docs/cluster.md); 0: actors never end
    on their own."""
    hang_s: float = 300.0
    """Seconds a started actor may leave the controller's calls unanswered before it is
    taken for hung (a SIGSTOPped process, one wedged in native code): it is killed and
    replaced like a crashed one, the learner from its checkpoint. Its calls run on their
    own threads, so a busy actor (a long training step, a large checkpoint) still answers;
    0: never."""
    worker_resource: str = ""
    """A custom Ray resource each self-play worker also takes one unit of ("" : none). Start
    the machines meant for self-play with ``ray start --resources '{"NAME": N}'`` and the
    workers go only there, at most N per machine (docs/cluster.md, bare machines)."""
    worker_spread: bool = False
    """Place self-play workers with Ray's SPREAD strategy (across nodes) instead of packing
    them onto the fewest nodes."""
    stream_shards: int = 1
    """Sample streams the run's games are spread over, by game id
    (``shared.transport.shards``): more than one lets several Redis servers take the intake
    (``stream_servers``). A run may grow it on ``--resume``, never shrink it."""
    stream_servers: int = 0
    """Redis servers zeroforge starts for the stream shards besides the run's own (shard K
    on server K mod N; each supervised, its AOF in ``RUN_DIR/redis-stream-I``); 0: the
    shards live in the run's Redis (or on ``stream_redis``)."""
    stream_redis: tuple[str, ...] = ()
    """URLs of Redis servers a cluster runs for the stream shards (KubeRay: one per pod),
    used before the started ones. Without a password in them: it comes from
    ``ZEROFORGE_REDIS_PASSWORD``, as for ``--redis`` (a config file is saved with the
    run)."""
    weights_per_node: bool = True
    """Workers read published weights through a cache per node
    (``shared.transport.node_cache``, in ``/dev/shm``): the run's Redis sends each version
    once per node, not once per worker."""
    run_dir_resource: str = ""
    """A custom Ray resource that marks the machine holding the run directory ("" : none).
    The learner and the evaluator, which write the checkpoint, snapshots, ladder and game
    records there, each take one unit of it, so they run on that machine (on KubeRay: the
    head pod, whose PVC holds RUN_DIR; k8s/base/raycluster.yaml gives it 2 units)."""

    def __post_init__(self) -> None:
        if self.workers_per_host < 1:
            raise ValueError(f"distributed.workers_per_host must be >= 1, got "
                             f"{self.workers_per_host}")
        for name in ("worker_resource", "run_dir_resource"):
            value = getattr(self, name)
            if value and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
                raise ValueError(f"{name} must be a Ray resource name (letters, digits, _), "
                                 f"got {value!r}")
        if self.inference not in ("auto", "local", "server"):
            raise ValueError(f"inference must be auto, local or server, got {self.inference!r}")
        if self.inference_servers < 0 or self.monitor_interval_s <= 0:
            raise ValueError("inference_servers must be >= 0 and monitor_interval_s > 0")
        if self.lease_s and self.lease_s < 5 * self.monitor_interval_s:
            raise ValueError(f"distributed.lease_s must be 0 (no lease) or at least 5 "
                             f"monitor intervals ({5 * self.monitor_interval_s:g} s), got "
                             f"{self.lease_s:g}")
        if self.hang_s < 0 or (self.hang_s and self.hang_s < 5 * self.monitor_interval_s):
            raise ValueError(f"distributed.hang_s must be 0 (never) or at least 5 monitor "
                             f"intervals ({5 * self.monitor_interval_s:g} s), got "
                             f"{self.hang_s:g}")
        if self.stream_shards < 1 or self.stream_servers < 0:
            raise ValueError(f"stream_shards must be >= 1 and stream_servers >= 0, got "
                             f"{self.stream_shards} and {self.stream_servers}")
        for url in self.stream_redis:
            if not url.startswith(("redis://", "rediss://")) or "@" in url.split("/")[2]:
                raise ValueError(f"stream_redis: {url!r} must be a redis:// or rediss:// URL "
                                 f"without credentials (the password comes from "
                                 f"ZEROFORGE_REDIS_PASSWORD)")


@dataclass(frozen=True)
class TrainConfig:
    """Everything a training run needs: one section per component."""

    game: str = "tictactoe"
    """Game spec string or preset (see ``zeroforge games``)."""
    net: NetConfig = field(default_factory=lambda: NetConfig.preset("tiny"))
    """Network; in files either a preset name (``net: small``) or a mapping of fields."""
    search: SearchConfig = field(default_factory=SearchConfig)
    """Self-play search (the evaluator's agent uses it without noise)."""
    selfplay: SelfPlayConfig = field(default_factory=SelfPlayConfig)
    learner: LearnerConfig = field(default_factory=LearnerConfig)
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)
    run: RunConfig = field(default_factory=RunConfig)
    distributed: DistributedConfig = field(default_factory=DistributedConfig)
    inference: InferenceServerConfig = field(default_factory=InferenceServerConfig)
    """Inference servers (used when ``distributed.inference`` is ``server``)."""

    def __post_init__(self) -> None:
        if self.selfplay.board_sizes:
            # a worker's own net follows selfplay.backend; inference servers
            # inference.backend (used by distributed runs on GPUs)
            check_mix(self.game, self.selfplay.board_sizes, self.selfplay.board_size_weights,
                      self.net.heads, {"selfplay.backend": self.selfplay.backend,
                                       "inference.backend": self.inference.backend})

    def context(self, run_id: str = "", transport: str = "memory://") -> RunContext:
        """The run context handed to each service of this config."""
        r = self.run
        return RunContext(run_id=run_id or r.run_id or "local", run_dir=r.run_dir,
                          transport=transport, game=self.game, seed=r.seed,
                          torch_threads=r.torch_threads, minutes=r.minutes,
                          max_learner_steps=r.max_learner_steps, max_games=r.max_games,
                          stream_shards=self.distributed.stream_shards,
                          weights_cache="auto" if self.distributed.weights_per_node else "",
                          board_sizes=self.selfplay.board_sizes,
                          board_size_weights=self.selfplay.board_size_weights)


@dataclass(frozen=True)
class RunContext:
    """What every service of a run needs besides its own section."""

    run_id: str
    """The run's name: every transport key of the run is under it."""
    run_dir: str
    """The run record's directory (checkpoints, snapshots, eval.jsonl)."""
    transport: str
    """``redis://`` / ``rediss://`` URL of the run's Redis, or ``memory://`` (one process)."""
    game: str
    """Game spec string."""
    seed: int = 0
    """The run's seed; services derive their own from it."""
    torch_threads: int = 1
    """torch intra-op threads per process (0: torch's default)."""
    minutes: float = 0.0
    """Wall-clock limit of the run (0: none); the learner ends its loop there."""
    max_learner_steps: int = 0
    """Learner step limit (0: none)."""
    max_games: int = 0
    """Limit on games received by the learner (0: none)."""
    stream_shards: int = 1
    """Streams the sample stream is spread over (``distributed.stream_shards``)."""
    stream_urls: tuple[str, ...] = ()
    """Redis servers of the stream shards (shard K on the K mod N-th); empty: the run's."""
    weights_cache: str = ""
    """Root of the per-node weight caches (``auto``: ``/dev/shm`` where there is one); ""
    reads weights straight from Redis."""
    board_sizes: tuple[int, ...] = ()
    """``selfplay.board_sizes``: the sizes self-play plays and the learner trains."""
    board_size_weights: tuple[float, ...] = ()
    """``selfplay.board_size_weights``: their shares (empty: equal)."""

    def size_mix(self) -> SizeMix | None:
        """The run's sizes and their games (None: the game's own size only)."""
        return size_mix(self.game, self.board_sizes, self.board_size_weights)

    def to_dict(self) -> dict[str, Any]:
        """Plain data, to cross a process boundary without pickling our classes."""
        return cfg.to_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunContext:
        return cfg.from_dict(cls, data, "context")


LEGACY_KEYS = {
    "run.eval_every_s": "evaluation.every_s",
    "run.eval_games": "evaluation.games",
    "run.eval_anchors": "evaluation.anchors",
    "run.eval_simulations": "evaluation.simulations",
    "run.publish_every_steps": "learner.publish_every_steps",
    "run.checkpoint_every_s": "learner.checkpoint_every_s",
    "run.snapshot_every_s": "learner.snapshot_every_s",
    "run.train_steps_per_round": "learner.train_steps_per_round",
    "run.moves_per_round": "selfplay.moves_per_round",
    "distributed.metrics_port": "run.metrics_port",
    "distributed.metrics_host": "run.metrics_host",
}
"""Keys that moved to the section of the component that uses them (0.1 layout -> now).
Files and ``--set`` flags with the old names still load (see ``migrate_legacy_keys``)."""


def migrate_legacy_keys(data: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Move old-layout keys to their new sections; returns the new dict and one note per
    moved key (``run.eval_games is now evaluation.games``). A key given both ways keeps
    the new one."""
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in data.items()}
    notes = []
    for old, new in LEGACY_KEYS.items():
        old_section, old_key = old.split(".")
        section = out.get(old_section)
        if not isinstance(section, dict) or old_key not in section:
            continue
        value = section.pop(old_key)
        new_section, new_key = new.split(".")
        target = out.setdefault(new_section, {})
        if isinstance(target, dict):
            target.setdefault(new_key, value)
        notes.append(f"{old} is now {new}")
    return out, notes
