"""Front doors that load on first use: one ``__getattr__`` for a package's ``__init__``.

A package lists its heavy names by module (``{"model": ("build_net", ...)}``); the names
are imported only when first asked for, so ``from zeroforge.shared.nets import NetConfig``
does not pull in torch.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(package: str, modules: Mapping[str, tuple[str, ...]],
                 renamed: Mapping[str, tuple[str, str]] | None = None
                 ) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: a name of ``modules[m]`` comes from
    ``package.m`` on first use; ``renamed`` maps an exported name to (module, its name
    there)."""
    where = {name: (f"{package}.{module}", name)
             for module, names in modules.items() for name in names}
    for name, (module, attribute) in (renamed or {}).items():
        where[name] = (f"{package}.{module}", attribute)

    def __getattr__(name: str) -> Any:
        if name in where:
            module, attribute = where[name]
            return getattr(importlib.import_module(module), attribute)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
