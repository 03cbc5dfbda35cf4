"""Names a package exports but loads on first use (PEP 562), so that importing the package stays cheap.

Every command discovers the plugins, which imports each plugin package; a package whose operator for the
embedded cluster, gRPC client or engine is heavy exports those names through :func:`lazy_exports` and
imports them under ``TYPE_CHECKING`` for the type checker. ``tests/test_exports.py`` checks that every
listed name really loads.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping

__all__ = ["lazy_exports"]


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], object]:
    """A module ``__getattr__`` for ``package``: ``exports`` maps a name to the module that defines it."""

    def __getattr__(name: str) -> object:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__
