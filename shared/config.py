"""Frozen config dataclasses from YAML/TOML files and ``section.key=value`` overrides.

A file or flag maps onto the same nested dataclasses; a wrong key or a value of the wrong
type is a ``ConfigError`` whose one-line message names it (and the file).
"""

from __future__ import annotations

import dataclasses
import tomllib
import types
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import yaml

if TYPE_CHECKING:
    # The protocol that every dataclass satisfies; typeshed only, so not importable at run time.
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")


class ConfigError(ValueError):
    """A bad config file, key or value; the message names it."""


def _convert(value: Any, hint: Any, where: str) -> Any:
    origin = typing.get_origin(hint)
    # A hint is a class, never a dataclass instance: the isinstance narrows it to one.
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: expected a section (mapping), got {value!r}")
        return from_dict(hint, value, where)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _convert(value, arg, where)
            except ConfigError as err:
                errors.append(str(err))
        raise ConfigError(errors[0] if errors else f"{where}: bad value {value!r}")
    if origin is tuple:
        if isinstance(value, str):
            value = [v for v in value.split(",") if v.strip()]
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        inner = typing.get_args(hint)[0]
        return tuple(_convert(v, inner, where) for v in value)
    if hint is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "1", "0"):
            return value.lower() in ("true", "yes", "1")
        raise ConfigError(f"{where}: expected true or false, got {value!r}")
    if hint is int:
        if isinstance(value, bool):
            raise ConfigError(f"{where}: expected an integer, got {value!r}")
        try:
            if isinstance(value, float) and not value.is_integer():
                raise ValueError
            return int(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{where}: expected an integer, got {value!r}") from None
    if hint is float:
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{where}: expected a number, got {value!r}") from None
    if hint is str:
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise ConfigError(f"{where}: expected a string, got {value!r}")
        return str(value)
    return value


def from_dict(cls: type[T], data: Mapping[str, Any], where: str = "config") -> T:
    """Build dataclass ``cls`` from a mapping; unknown keys and bad values are ConfigErrors."""
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        known = ", ".join(sorted(names))
        raise ConfigError(f"{where}: unknown key {unknown[0]!r} (known: {known})")
    kwargs = {k: _convert(v, hints[k], f"{where}.{k}") for k, v in data.items()}
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"{where}: {err}") from None


def to_dict(obj: Any) -> dict[str, Any]:
    """Plain nested dict of a config dataclass (tuples as lists), e.g. to save beside a run."""
    def plain(v: Any) -> Any:
        if dataclasses.is_dataclass(v):
            return {f.name: plain(getattr(v, f.name)) for f in dataclasses.fields(v)}
        if isinstance(v, tuple | list):
            return [plain(x) for x in v]
        return v
    return plain(obj)


def read_file(path: str | Path) -> dict[str, Any]:
    """Parse a YAML (.yaml/.yml) or TOML (.toml) config file into a dict."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"{path}: cannot read config file ({err.strerror})") from None
    try:
        data = tomllib.loads(text) if path.suffix == ".toml" else yaml.safe_load(text)
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        kind = path.suffix.lstrip(".") or "yaml"
        raise ConfigError(f"{path}: not valid {kind}: {first}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping of sections")
    return data


def apply_overrides(data: dict[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """Apply ``section.key=value`` strings (values parsed as YAML scalars) to a nested dict."""
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in data.items()}
    for item in overrides:
        key, eq, raw = item.partition("=")
        if not eq or not key.strip():
            raise ConfigError(f"override {item!r}: expected section.key=value")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        parts = key.strip().split(".")
        node = out
        for p in parts[:-1]:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {item!r}: {p!r} is not a section")
        node[parts[-1]] = value
    return out


def load(cls: type[T], path: str | Path | None = None, overrides: Iterable[str] = ()) -> T:
    """Config of type ``cls`` from an optional file plus overrides."""
    data = read_file(path) if path else {}
    where = str(path) if path else "config"
    return from_dict(cls, apply_overrides(data, overrides), where)
