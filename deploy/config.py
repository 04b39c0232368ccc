"""The run's config: one section per component, from presets, files and flags.

``zeroforge train --config FILE --set section.key=value`` maps onto ``TrainConfig``; each
component receives only its own section.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from actors.inference import InferenceServerConfig
from actors.selfplay import SelfPlayConfig
from learner.learner import LearnerConfig
from shared import config as cfg
from shared.nets import NetConfig
from shared.search.config import SearchConfig

CONFIG_DIR = Path(__file__).parent / "configs"


@dataclass(frozen=True)
class RunConfig:
    """The run as a whole: where it writes, how long it lasts, how it reports."""

    run_id: str = ""
    """Name of the run (letters, digits, ``_.-``); empty: generated from the time."""
    run_dir: str = "runs/latest"
    """Directory for checkpoints, config copy, SGF samples and the progress log."""
    minutes: float = 0.0
    """Stop after this many minutes of wall clock (0: no limit)."""
    max_learner_steps: int = 0
    """Stop after this many learner steps (0: no limit)."""
    max_games: int = 0
    """Stop after this many self-play games (0: no limit)."""
    seed: int = 0
    """Seed of everything random in the run."""
    moves_per_round: int = 4
    """Local loop: self-play moves (for all B games) between learner turns."""
    train_steps_per_round: int = 50
    """Local loop: most learner steps per turn (the samples-per-insert ratio also limits)."""
    publish_every_steps: int = 50
    """Publish new weights to self-play every this many learner steps."""
    checkpoint_every_s: float = 60.0
    """Seconds between checkpoints (and one at the end)."""
    snapshot_every_s: float = 0.0
    """Seconds between weight snapshots ``snapshots/weights-<seconds>s.pt`` kept for
    learning curves (0: none)."""
    eval_every_s: float = 120.0
    """Seconds between evaluation matches (0: only at the end)."""
    eval_games: int = 20
    """Games per evaluation match against each anchor."""
    eval_anchors: tuple[str, ...] = ("random", "uct:100", "uct:1000")
    """Fixed opponents: ``random``, ``uct:PLAYOUTS`` (pure MCTS), ``uctsolver:PLAYOUTS``,
    ``minimax`` (tic-tac-toe). The distributed evaluator also plays the previous best."""
    eval_simulations: int = 0
    """Simulations a move for the trained agent in evaluation (0: the search's number)."""
    progress_every_s: float = 5.0
    """Seconds between progress lines."""
    torch_threads: int = 1
    """torch intra-op threads of this process (0: torch's default). Small batched convs run
    fastest on one thread, and several threads collapse when cores are shared."""


@dataclass(frozen=True)
class DistributedConfig:
    """How a distributed run places its actors (ignored by ``train --local``)."""

    inference: str = "auto"
    """``local``: each self-play worker runs its own network; ``server``: workers send leaf
    batches to inference servers; ``auto``: servers when the cluster has GPUs."""
    inference_servers: int = 1
    """Inference servers to keep alive when inference is ``server``."""
    worker_cpus: float = 1.0
    """CPUs Ray reserves per self-play worker."""
    learner_cpus: float = 1.0
    """CPUs Ray reserves for the learner."""
    learner_gpus: float = 0.0
    """GPUs Ray reserves for the learner (set 1 on GPU clusters)."""
    evaluator: bool = True
    """Run an evaluator actor that plays new weights against the anchors."""
    evaluator_cpus: float = 0.5
    """CPUs Ray reserves for the evaluator."""
    monitor_interval_s: float = 1.0
    """How often the controller checks actors, replaces dead ones and gathers metrics."""
    metrics_port: int = 0
    """Port of the run's Prometheus endpoint on the controller's host (0: any free one)."""
    metrics_host: str = "127.0.0.1"
    """Address the metrics endpoint binds to (loopback unless told otherwise)."""


@dataclass(frozen=True)
class TrainConfig:
    """Everything a training run needs."""

    game: str = "tictactoe"
    """Game spec string or preset (see ``zeroforge games``)."""
    net: NetConfig = field(default_factory=lambda: NetConfig.preset("tiny"))
    """Network; in files either a preset name (``net: small``) or a mapping of fields."""
    search: SearchConfig = field(default_factory=SearchConfig)
    selfplay: SelfPlayConfig = field(default_factory=SelfPlayConfig)
    learner: LearnerConfig = field(default_factory=LearnerConfig)
    run: RunConfig = field(default_factory=RunConfig)
    distributed: DistributedConfig = field(default_factory=DistributedConfig)
    inference: InferenceServerConfig = field(default_factory=InferenceServerConfig)
    """Inference servers (used when ``distributed.inference`` is ``server``)."""


def _expand_net_preset(data: dict[str, Any]) -> dict[str, Any]:
    net = data.get("net")
    if isinstance(net, str):
        data = {**data, "net": cfg.to_dict(NetConfig.preset(net))}
    elif isinstance(net, dict) and "preset" in net:
        base = cfg.to_dict(NetConfig.preset(net["preset"]))
        data = {**data, "net": {**base, **{k: v for k, v in net.items() if k != "preset"}}}
    return data


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


def load_train_config(path: str | None = None, overrides: list[str] | tuple[str, ...] = ()
                      ) -> TrainConfig:
    """TrainConfig from an optional file/preset name and ``section.key=value`` overrides."""
    where = "config"
    data: dict[str, Any] = {}
    if path:
        file = preset_path(path)
        data, where = cfg.read_file(file), str(file)
    data = cfg.apply_overrides(data, overrides)
    try:
        data = _expand_net_preset(data)
    except ValueError as err:
        raise cfg.ConfigError(f"{where}: net: {err}") from None
    return cfg.from_dict(TrainConfig, data, where)
