"""Loading a trained network for play: a learner checkpoint or a weights file.

``read_checkpoint`` reads a learner checkpoint (a ``torch.save`` zip with a ``model``
state dict) without its replay window; ``load_net`` builds the net of a checkpoint or of a
weights file (any format ``load_weights`` reads, the legacy one included), finding the
net's shape in the checkpoint, the caller's net config or the run's ``config.yaml``. One
module for it because players, engines and the rating tools all load nets the same way.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from zeroforge.shared.games import Game

if TYPE_CHECKING:
    from torch import nn

    from zeroforge.shared.nets import NetConfig

__all__ = ["load_net", "plays_game", "read_checkpoint"]


def load_net(path: str | Path, game: Game, net_config: NetConfig | str | None = None,
             *, raw: bool = False) -> nn.Module:
    """The network (eval mode, CPU) of a learner checkpoint or a weights file for ``game``.

    A checkpoint names its game and net config; a weights file (``save_weights``, any
    format ``load_weights`` reads) needs ``net_config``, or is a run's snapshot
    (``RUN_DIR/snapshots/``) whose run config says it. With ``raw``, a checkpoint gives its
    raw weights (``raw_model``, kept beside the average when the learner averaged) instead
    of its ``model``. ValueError in one line if the file is missing or unreadable, is for
    another game, does not fit the net, or (``raw``) is a checkpoint without raw weights.
    """
    from zeroforge.shared.config import ConfigError, from_dict
    from zeroforge.shared.formats import load_weights
    from zeroforge.shared.nets import NetConfig, build_net

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such checkpoint or weights file")
    checkpoint = read_checkpoint(path)
    if checkpoint is not None:
        if isinstance(checkpoint.get("net_config"), dict):
            try:
                net_config = from_dict(NetConfig, checkpoint["net_config"], f"{path}: net")
            except ConfigError as err:
                raise ValueError(str(err)) from None
        trained = checkpoint.get("game")
        if trained is not None and not plays_game(trained, game, net_config):
            raise ValueError(f"{path}: a checkpoint of game {trained!r}, "
                             f"not {game.spec.spec_string!r}")
        if raw and "raw_model" not in checkpoint:
            raise ValueError(f"{path}: no raw weights (raw_model) in this checkpoint: its "
                             "learner did not average (learner.average_horizon 0)")
        state_dict = checkpoint["raw_model" if raw else "model"]
    else:
        state_dict = load_weights(path)
        if net_config is None:
            net_config = _run_net_config(path, game)
    if net_config is None:
        raise ValueError(f"{path}: a weights file does not say its net's shape; give the "
                         "net config (or use a checkpoint, which does)")
    net = build_net(net_config, game.spec)
    try:
        net.load_state_dict(state_dict)
    except RuntimeError as err:
        raise ValueError(f"{path}: weights do not fit this net "
                         f"({str(err).strip().splitlines()[0]})") from None
    return net.eval()


def _run_net_config(path: Path, game: Game) -> NetConfig | None:
    """The net config of the run a weight snapshot belongs to
    (``RUN_DIR/snapshots/weights-*`` or ``RUN_DIR/snapshots/raw/weights-*`` beside
    ``RUN_DIR/config.yaml``), None if it is not in a run directory. ValueError in one line
    if that run played another game."""
    import yaml

    from zeroforge.shared.config import ConfigError, from_dict
    from zeroforge.shared.games import make_game
    from zeroforge.shared.nets import NetConfig
    from zeroforge.shared.run_files import CONFIG_NAME, RAW_SNAPSHOT_DIR, SNAPSHOT_DIR

    folder = path.parent
    if folder.name == RAW_SNAPSHOT_DIR and folder.parent.name == SNAPSHOT_DIR:
        folder = folder.parent  # a raw snapshot: RUN_DIR/snapshots/raw/weights-*
    config_path = folder.parent / CONFIG_NAME
    if folder.name != SNAPSHOT_DIR or not config_path.is_file():
        return None
    try:
        data = yaml.safe_load(config_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise ValueError(f"{config_path}: unreadable run config ({type(err).__name__})"
                         ) from None
    if not isinstance(data, dict):
        return None
    net = data.get("net")
    net_config = None
    try:
        if isinstance(net, str):
            net_config = NetConfig.preset(net)
        elif isinstance(net, dict):
            net_config = from_dict(NetConfig, net, f"{config_path}: net")
    except (ConfigError, ValueError, KeyError) as err:
        raise ValueError(str(err).splitlines()[0]) from None
    if isinstance(data.get("game"), str):
        played = make_game(data["game"]).spec.spec_string
        if not plays_game(played, game, net_config):
            raise ValueError(f"{path}: a snapshot of game {played!r}, "
                             f"not {game.spec.spec_string!r}")
    return net_config


def plays_game(trained: str, game: Game, net_config: NetConfig | str | None) -> bool:
    """Whether a net trained on the game ``trained`` (a spec string) plays ``game``, by the
    engines' rule (``board_sizes.net_plays``): another komi or rule variant with the same
    inputs, and, for a fully convolutional net (``heads: pooled``), another board size of
    Go, as a ``selfplay.board_sizes`` run trains it to."""
    from zeroforge.shared.board_sizes import net_plays
    from zeroforge.shared.games import make_game

    if isinstance(net_config, str):
        from zeroforge.shared.nets import NetConfig

        net_config = NetConfig.preset(net_config)
    pooled = net_config is not None and net_config.heads == "pooled"
    return net_plays(game, make_game(trained), any_size=pooled)


def read_checkpoint(path: Path) -> dict | None:
    """The dict of a learner checkpoint (``torch.save`` with a ``model`` state dict) or
    None for any other file; read with ``weights_only=True`` and memory-mapped, so the
    replay window it also holds is not read."""
    import torch

    from zeroforge.shared.formats import ZIP_MAGIC

    with open(path, "rb") as f:
        if f.read(len(ZIP_MAGIC)) != ZIP_MAGIC:
            return None
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as err:  # torch raises many types for truncated or foreign files
        raise ValueError(f"{path}: corrupt checkpoint or weights file ({type(err).__name__})"
                         ) from None
    if isinstance(blob, dict) and isinstance(blob.get("model"), dict):
        return blob
    return None
