"""Loading a run's config: presets in ``deploy/configs``, files and ``--set`` flags.

``zeroforge train --config FILE --set section.key=value`` maps onto
``shared.train_config.TrainConfig``; the sections themselves live in ``shared`` so every
side can import them without importing another side.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from zeroforge.shared import config as cfg
from zeroforge.shared.nets import NetConfig
from zeroforge.shared.train_config import TrainConfig, migrate_legacy_keys

CONFIG_DIR = Path(__file__).parent / "configs"

__all__ = ["CONFIG_DIR", "TrainConfig", "load_train_config", "preset_path"]


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
    import dataclasses
    import typing

    hint = typing.get_type_hints(TrainConfig).get(section)
    return ({f.name for f in dataclasses.fields(hint)}
            if isinstance(hint, type) and dataclasses.is_dataclass(hint) else set())


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


def load_train_config(path: str | None = None, overrides: list[str] | tuple[str, ...] = (),
                      warn: bool = True) -> TrainConfig:
    """TrainConfig from an optional file/preset name and ``section.key=value`` overrides.

    Keys of the old layout (``run.eval_games`` ...) are moved to their new sections with a
    one-line note on stderr per key (``warn=False``: silently)."""
    where = "config"
    data: dict[str, Any] = {}
    if path:
        file = preset_path(path)
        data, where = cfg.read_file(file), str(file)
    for item in overrides:
        if item.strip().startswith("net.") and isinstance(data.get("net"), str):
            # a preset name takes field overrides too: --set net.blocks=2 on ``net: small``
            data = {**data, "net": {"preset": data["net"]}}
        data = cfg.apply_overrides(data, [item])
    data, notes = migrate_legacy_keys(data)
    if warn:
        for note in notes:
            print(f"zeroforge: {note} (the old key still works)", file=sys.stderr)
    try:
        data = _expand_net_preset(data)
    except ValueError as err:
        raise cfg.ConfigError(f"{where}: net: {err}") from None
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
