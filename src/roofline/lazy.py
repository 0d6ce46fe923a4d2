"""Packages whose public names load on first use, so that a command imports only its path:
``roofline --version`` loads no numpy, ``roofline layer`` no serving simulator.

A package declares which module holds each of its names and calls ``lazy_package`` once:

    lazy_package(__name__, {"roofline.plan.memory": ("kv_bytes_per_token", ...), ...})

``from roofline.plan import kv_bytes_per_token`` then imports roofline.plan.memory at that moment,
and ``dir()`` lists the names as before. A submodule that shares a name with one of the package's
names (roofline.plan.model_ops and its function model_ops) does not displace that name when it is
imported: the package hands out the function, as it did when it imported everything up front.
A submodule not listed (``roofline.units`` after ``import roofline``) loads on attribute access too.

The package's module gets the class LazyPackage rather than a module-level ``__getattr__`` (PEP 562)
because keeping a listed name against its same-named submodule needs ``__setattr__`` as well.
"""

from __future__ import annotations

import importlib
import sys
import types


class LazyPackage(types.ModuleType):
    """A package module whose listed names are looked up in their modules on first access."""

    def __getattr__(self, name: str):
        where = self.__dict__.get("_lazy_names", {}).get(name)
        if where is not None:
            value = getattr(importlib.import_module(where), name)
        elif not name.startswith("__"):
            try:  # a submodule, as `import roofline; roofline.units` found it when roofline imported everything
                value = importlib.import_module(f"{self.__name__}.{name}")
            except ModuleNotFoundError as exc:
                if exc.name != f"{self.__name__}.{name}":
                    raise
                raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}") from None
        else:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        self.__dict__[name] = value
        return value

    def __setattr__(self, name: str, value) -> None:
        # the import system sets a package's attribute to each submodule it loads: a listed name of the
        # same spelling (the function model_ops, not the module) keeps its place
        listed = name in self.__dict__.get("_lazy_names", {})
        if listed and isinstance(value, types.ModuleType) and value.__name__ == f"{self.__name__}.{name}":
            return
        super().__setattr__(name, value)

    def __dir__(self):
        return sorted(set(self.__dict__) | set(self.__dict__.get("_lazy_names", {})))


def lazy_package(package: str, names: dict[str, tuple[str, ...]]) -> list[str]:
    """Make the package ``package`` (its ``__name__``) load each listed name from its module on first
    access; ``names`` maps a module to the names it holds. Returns the names, sorted (its ``__all__``)."""
    where = {name: module for module, listed in names.items() for name in listed}
    module = sys.modules[package]
    module.__class__ = LazyPackage
    module.__dict__["_lazy_names"] = where
    return sorted(where)
