"""A package face whose names load on first use, so importing the package stays cheap."""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module


def lazy_names(package: str, homes: dict[str, str]) -> Callable[[str], object]:
    """The face's module `__getattr__`: a name in `homes` is taken from its module of `package`
    (`homes[name]`) when first asked for; any other name is an AttributeError."""

    def __getattr__(name: str) -> object:
        if name in homes:
            return getattr(import_module(f"{package}.{homes[name]}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
