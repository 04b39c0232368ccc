"""A run's config: the run-wide sections, ``TrainConfig``, and the one path that loads it.

Each section lives beside the side that reads it: ``learner.config.LearnerConfig``,
``actors.config`` (``SelfPlayConfig``, ``EvaluationConfig``, ``InferenceServerConfig``),
the search's and the net's in ``shared`` (they have code of their own there), and here
the driver's own: ``RunConfig`` and ``DistributedConfig``. ``TrainConfig`` composes them;
a service receives only its own section(s) plus a ``shared.run_context.RunContext``
(``TrainConfig.context``).

The loading path, all of it in this file (``load_train_config``)::

    FILE or preset name (deploy/configs/NAME.yaml)   -> a nested dict  (cfg.read_file)
    --set section.key=value, then the CLI's flags     -> applied to that dict in order
      (``flag_overrides``: --workers is selfplay.workers=N, --steps run.max_learner_steps...)
    keys of the old layout                            -> moved (LEGACY_KEYS, one note each)
    net: PRESET                                       -> the preset's fields
    one cfg.from_dict(TrainConfig, data)              -> the frozen dataclasses, or one
                                                         ConfigError naming FILE and key

The dict crosses into dataclasses once; later crossings are process boundaries only (the
run record ``RUN_DIR/config.yaml`` and Ray actors get ``cfg.to_dict`` of it and rebuild it
with ``cfg.from_dict``, so no class of ours is pickled).
"""

from __future__ import annotations

import dataclasses
import re
import sys
import typing
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zeroforge.actors.config import EvaluationConfig, InferenceServerConfig, SelfPlayConfig
from zeroforge.learner.config import LearnerConfig
from zeroforge.shared import config as cfg
from zeroforge.shared.board_sizes import check_mix
from zeroforge.shared.nets import NetConfig
from zeroforge.shared.run_context import RunContext
from zeroforge.shared.search import SearchConfig

CONFIG_DIR = Path(__file__).parent / "configs"

__all__ = ["CONFIG_DIR", "LEGACY_KEYS", "PRETRAIN_FLAGS", "TRAIN_FLAGS", "DistributedConfig",
           "RunConfig", "TrainConfig", "flag_overrides", "load_train_config",
           "migrate_legacy_keys", "preset_path"]


# --- the driver's sections -----------------------------------------------------------------

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
    """CPUs Ray reserves per self-play actor (a host of ``workers_per_host`` workers); with
    ``workers_per_host`` 0, per worker (a node host books its workers' CPUs)."""
    workers_per_host: int = 0
    """Self-play workers one actor hosts (threads sharing its CPUs and its one stats
    report, or child processes: ``host_workers``): the controller then deals with workers
    / this many actors. Actor ``h`` hosts workers ``w{h*K}`` .. ``w{h*K+K-1}`` (K = this);
    a scale resizes the newest actors first; 1: an actor (a process, its own connections)
    a worker, the controller's cost growing with the workers. 0, the default: **node
    hosts**: each host holds as many workers as the free CPUs of one node fit when it is
    made (``worker_cpus`` each, booked), so the controller deals with about one actor a
    node, whatever the workers; a scale fills the hosts up to what they booked, then adds
    hosts sized to the nodes' free CPUs (docs/architecture.md, "The control plane at ten
    thousand workers"). Workers searching with their own net run as child processes of
    their host (``host_workers``), so a worker still has a core and a process of its own;
    workers fed by inference servers, which a child process cannot reach, are an actor
    each instead (``TrainConfig.placed``) unless ``host_workers`` is thread."""
    host_workers: str = "auto"
    """How an actor hosts its workers (K > 1 or node hosts): ``thread``: threads of the
    actor's process, sharing the GIL, for workers that mostly wait (inference servers,
    replaying ones); ``process``: a child process each (``actors/process_worker.py``), so
    workers searching on the CPU with their own net use a core each instead of taking
    turns at one GIL. ``process`` runs each worker's own net: it needs ``inference`` local
    (a child is no Ray process and cannot reach the inference servers). ``auto``:
    ``process`` for workers that search with their own net, ``thread`` for the others
    (inference servers, ``selfplay.simulate_from``). A server-fed worker still searches on
    its CPU, and at large B that is real work (about half a core a worker at B=128 on Go):
    threads of one host then share one core's worth of search (370 against 1,198
    positions/s on an H200, docs/lab/gpu.md), so under auto the default node hosts give
    server-fed workers an actor each (``TrainConfig.placed``); thread keeps them hosts."""
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
    used before the started ones. Without a password in them: each process connects as
    its role with the password file in ``$ZEROFORGE_REDIS_AUTH_DIR``, else with
    ``$ZEROFORGE_REDIS_PASSWORD``, as for ``--redis-url`` (a config file is saved with the
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
        if self.workers_per_host < 0:
            raise ValueError(f"distributed.workers_per_host must be >= 1, or 0 for a host "
                             f"a node, got {self.workers_per_host}")
        if self.host_workers not in ("auto", "thread", "process"):
            raise ValueError(f"distributed.host_workers must be auto, thread or process, "
                             f"got {self.host_workers!r}")
        if self.host_workers == "process" and self.inference == "server" \
                and self.workers_per_host != 1:
            raise ValueError("distributed.host_workers=process needs distributed.inference "
                             "local or auto (a worker's process cannot reach the inference "
                             "servers), got server")
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
                                 f"without credentials (they come from the role password "
                                 f"files in $ZEROFORGE_REDIS_AUTH_DIR or from "
                                 f"$ZEROFORGE_REDIS_PASSWORD)")


# --- the whole config -----------------------------------------------------------------------

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

    def placed(self, cluster_has_gpus: bool) -> TrainConfig:
        """The config a distributed run places its actors by: ``inference`` auto resolved
        (servers where the cluster has GPUs), and the default node hosts (``workers_per_host``
        0 with ``host_workers`` auto) made an actor a worker when inference servers feed
        the workers. Such a worker still searches on its CPU (about half a core at B=128 on
        Go), and a node host could only run them as threads of one process, sharing one
        core: 370 against 1,198 positions/s for go9-gpu on an H200 (docs/lab/gpu.md). Set
        ``host_workers`` thread to keep node hosts of threads."""
        d = self.distributed
        inference = d.inference
        if inference == "auto":
            inference = "server" if cluster_has_gpus else "local"
        per = d.workers_per_host
        if (inference == "server" and per == 0 and d.host_workers == "auto"
                and not self.selfplay.simulate_from):
            per = 1
        return dataclasses.replace(self, distributed=dataclasses.replace(
            d, inference=inference, workers_per_host=per))


# --- loading: file -> overrides -> dataclasses ----------------------------------------------

TRAIN_FLAGS = (("game", "game"), ("minutes", "run.minutes"), ("steps", "run.max_learner_steps"),
               ("run_dir", "run.run_dir"), ("seed", "run.seed"),
               ("workers", "selfplay.workers"), ("run_id", "run.run_id"),
               ("dashboard_host", "run.dashboard_host"),
               ("dashboard_port", "run.dashboard_port"))
"""``zeroforge train``'s flags that set a config key: (argument name, key). They apply
after the ``--set`` flags, so ``--workers 8`` wins over ``--set selfplay.workers=2``."""
PRETRAIN_FLAGS = (("game", "game"), ("run_dir", "run.run_dir"))
"""``zeroforge pretrain``'s flags that set a config key (an empty one is left out)."""

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


def load_train_config(path: str | None = None, overrides: list[str] | tuple[str, ...] = (),
                      warn: bool = True) -> TrainConfig:
    """TrainConfig from an optional file/preset name and ``section.key=value`` overrides
    (``--set`` flags, then ``flag_overrides`` of the command's own flags).

    Keys of the old layout (``run.eval_games`` ...) are moved to their new sections with a
    one-line note on stderr per key (``warn=False``: silently)."""
    # 1. the file (a preset name is deploy/configs/NAME.yaml), as a plain nested dict
    where = "config"
    data: dict[str, Any] = {}
    if path:
        file = preset_path(path)
        data, where = cfg.read_file(file), str(file)
    # 2. the overrides, in order, on that dict
    for item in overrides:
        if item.strip().startswith("net.") and isinstance(data.get("net"), str):
            # a preset name takes field overrides too: --set net.blocks=2 on ``net: small``
            data = {**data, "net": {"preset": data["net"]}}
        data = cfg.apply_overrides(data, [item])
    # 3. old keys to their new sections
    data, notes = migrate_legacy_keys(data)
    if warn:
        for note in notes:
            print(f"zeroforge: {note} (the old key still works)", file=sys.stderr)
    # 4. ``net: PRESET`` (or ``net: {preset: ..., blocks: 2}``) to the preset's fields
    try:
        data = _expand_net_preset(data)
    except ValueError as err:
        raise cfg.ConfigError(f"{where}: net: {err}") from None
    # 5. the one crossing into dataclasses; each section checks its own values
    try:
        return cfg.from_dict(TrainConfig, data, where)
    except cfg.ConfigError as err:
        # "FILE.learner: lr must be > 0" -> "FILE: learner.lr must be > 0" (the key as
        # --set spells it; the value may have come from a flag, not the file)
        text = str(err)
        m = re.match(rf"^{re.escape(where)}\.(\w+): (\w+) (.*)$", text)
        if m and m[2] in _field_names(m[1]):
            raise cfg.ConfigError(f"{where}: {m[1]}.{m[2]} {m[3]}") from None
        raise


def flag_overrides(args: Any, flags: Iterable[tuple[str, str]], *,
                   skip: tuple[Any, ...] = (None,)) -> list[str]:
    """The ``--set``-style overrides (``selfplay.workers=8``) of the flags given on a
    command line: ``args`` is its argparse namespace, ``flags`` (name, key) pairs; a flag
    whose value is in ``skip`` (None: not given) adds nothing."""
    values = ((key, getattr(args, name, None)) for name, key in flags)
    return [f"{key}={value}" for key, value in values if value not in skip]


def preset_path(name: str) -> Path:
    """``deploy/configs/NAME.yaml`` for a bare preset name, else the path itself."""
    p = Path(name)
    if p.suffix in (".yaml", ".yml", ".toml") or p.exists():
        return p
    candidate = CONFIG_DIR / f"{name}.yaml"
    if not candidate.exists():
        known = ", ".join(sorted(f.stem for f in CONFIG_DIR.glob("*.yaml")))
        raise cfg.ConfigError(f"no config file or preset {name!r} (presets: {known})")
    return candidate


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


def _expand_net_preset(data: dict[str, Any]) -> dict[str, Any]:
    net = data.get("net")
    if isinstance(net, str):
        data = {**data, "net": cfg.to_dict(NetConfig.preset(net))}
    elif isinstance(net, dict) and "preset" in net:
        base = cfg.to_dict(NetConfig.preset(net["preset"]))
        data = {**data, "net": {**base, **{k: v for k, v in net.items() if k != "preset"}}}
    return data


def _field_names(section: str) -> set[str]:
    """Field names of one TrainConfig section (empty for an unknown one)."""
    hint = typing.get_type_hints(TrainConfig).get(section)
    return ({f.name for f in dataclasses.fields(hint)}
            if isinstance(hint, type) and dataclasses.is_dataclass(hint) else set())
