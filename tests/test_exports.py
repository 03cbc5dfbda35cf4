"""Every package's public surface: a sorted ``__all__`` of importable names that lists everything it exports.

As httpx checks its exports: a name a package makes available but does not list, or lists but cannot give,
is a mistake in the surface a user (or a plugin author) reads. Packages that load part of their surface on
first use (PEP 562 ``__getattr__``) are checked through that too.
"""

from __future__ import annotations

import importlib
import pkgutil
import types

import pytest

import taskplug


def _packages() -> list[str]:
    found = ["taskplug"]
    for info in pkgutil.walk_packages(taskplug.__path__, "taskplug."):
        if info.ispkg:
            found.append(info.name)
    return sorted(found)


PACKAGES = [p for p in _packages() if p != "taskplug"]


@pytest.mark.parametrize("name", PACKAGES)
def test_every_package_lists_exactly_what_it_exports_sorted(name: str) -> None:
    package = importlib.import_module(name)
    exported = getattr(package, "__all__", None)
    assert exported is not None, f"{name} has no __all__"
    assert len(set(exported)) == len(exported), f"{name}.__all__ repeats a name"
    key = [(0 if n.isupper() else 1 if n[0].isupper() else 2, n) for n in exported]
    assert key == sorted(key), f"{name}.__all__ is not sorted (constants, classes, functions)"
    for attribute in exported:
        assert getattr(package, attribute, None) is not None, f"{name}.{attribute} is listed but missing"
    public = {
        attribute
        for attribute, value in vars(package).items()
        if not attribute.startswith("_")
        and not isinstance(value, types.ModuleType)
        and attribute not in ("annotations", "TYPE_CHECKING", "importlib", "lazy_exports")
    }
    assert public <= set(exported), f"{name} exports names it does not list: {sorted(public - set(exported))}"
