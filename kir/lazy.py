"""Packages whose public names load on first use, so that importing one light submodule (the launcher's
`physical.launch_expr`, say) does not import the whole package (networkx, the passes, the emitter)."""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Mapping


class LazyPackage(types.ModuleType):
    """A package module whose `exports` (name -> (submodule, attribute; "" for the submodule itself)) are
    imported when first read, after the submodules of the exports listed before it.

    Loading a submodule sets the package attribute of the same name to that submodule; where a public
    name is a function named like its submodule (`physical.construct`, `emit_triton.emit`), the function
    must win, as it did when the package imported everything eagerly, so such assignments are dropped.
    """

    _lazy_exports: Mapping[str, tuple[str, str]]

    def __getattr__(self, name: str) -> object:
        exports = self.__dict__.get("_lazy_exports", {})
        target = exports.get(name)
        if target is None:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        # The submodules of the exports listed before this one load first, in the order the eager package
        # imported them (some packages rely on it to break an import cycle).
        for submodule, _ in exports.values():
            module = importlib.import_module(submodule, self.__name__)
            if submodule == target[0]:
                break
        value = getattr(module, target[1]) if target[1] else module
        types.ModuleType.__setattr__(self, name, value)
        return value

    def __setattr__(self, name: str, value: object) -> None:
        exports = self.__dict__.get("_lazy_exports", {})
        if name in exports and exports[name][1] != "" and value is sys.modules.get(f"{self.__name__}.{name}"):
            return  # the import system binding a just-loaded submodule over the public name
        types.ModuleType.__setattr__(self, name, value)

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self.__dict__.get("_lazy_exports", {})))


def make_lazy(package: str, exports: Mapping[str, tuple[str, str]]) -> None:
    """Turn the package module `package` (call from its `__init__`) into a `LazyPackage`."""
    module = sys.modules[package]
    module.__class__ = LazyPackage
    types.ModuleType.__setattr__(module, "_lazy_exports", dict(exports))
