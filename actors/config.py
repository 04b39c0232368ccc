"""The actors' config sections: ``selfplay:``, ``evaluation:`` and ``inference:``.

Read by the self-play workers, the rating service and the inference servers alone;
``deploy.config.TrainConfig`` composes them with the other sections, and each service
receives only its own section(s) plus a ``shared.run_context.RunContext``.
"""

from __future__ import annotations

from dataclasses import dataclass

from zeroforge.shared.board_sizes import check_board_sizes
from zeroforge.shared.nets import BACKENDS, check_precision


@dataclass(frozen=True)
class SelfPlayConfig:
    """How a self-play worker plays."""

    games_in_parallel: int = 32
    """B: games advanced together; one evaluator call per simulation round covers all B."""
    batches_in_flight: int = 1
    """Leaf batches a worker behind inference servers keeps in flight: its B games are
    searched in this many groups (B/G games each, a thread each), one group's request
    out while another searches (``actors.selfplay_groups``); same games, same results as
    one group. 1: one batch, the worker waits out every round trip. A worker running its
    own network (no inference servers) always uses 1: its evaluation is its own core's
    work, which no overlap can hide. At most ``games_in_parallel``."""
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
    simulate_deliveries_dir: str = ""
    """A directory where each simulating worker appends a line per weights version it
    takes (``WALL_TIME VERSION SECONDS``: the delivery time exactly, where the metric has
    its histogram's buckets), to ``WORKER.tsv``; "" (the default): none written."""
    cpu_share: float = 0.0
    """Share of one core a distributed worker's search may use on average (in (0, 1];
    0: all it can): the worker sleeps between moves to keep to it (``actors.cpu_share``).
    Ray's ``distributed.worker_cpus`` only books CPUs and never limits them; this holds a
    worker to, say, a quarter of a core on a node it shares. The local run ignores it."""
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
        if not 1 <= self.batches_in_flight <= self.games_in_parallel:
            raise ValueError(f"selfplay.batches_in_flight must be between 1 and "
                             f"games_in_parallel ({self.games_in_parallel}), got "
                             f"{self.batches_in_flight}")
        if self.workers < 0 or self.moves_per_round < 1:
            raise ValueError("workers must be >= 0 and moves_per_round >= 1")
        if not 0.0 <= self.cpu_share <= 1.0:
            raise ValueError(f"selfplay.cpu_share must be in [0, 1], got {self.cpu_share}")
        if self.record_every < 0:
            raise ValueError(f"record_every must be >= 0, got {self.record_every}")


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
