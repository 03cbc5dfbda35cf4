"""The public surface of taskplug.webapi: a sorted ``__all__`` of importable names, and the layer rule."""

from __future__ import annotations

import ast
from pathlib import Path

import taskplug.webapi

WEBAPI = Path(taskplug.webapi.__file__).parent


def test_every_exported_name_exists() -> None:
    for name in taskplug.webapi.__all__:
        assert hasattr(taskplug.webapi, name), name


def test_the_exports_are_sorted_constants_then_classes_then_functions() -> None:
    names = taskplug.webapi.__all__
    key = [(0 if n.isupper() else 1 if n[0].isupper() else 2, n) for n in names]
    assert key == sorted(key)
    assert len(set(names)) == len(names)


def test_webapi_imports_no_higher_layer_and_not_k8s() -> None:
    forbidden = ("taskplug.k8s", "taskplug.plugins", "taskplug.executor", "taskplug.cli", "lightkube")
    for path in WEBAPI.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith(forbidden), (path.name, node.module)
            if isinstance(node, ast.Import):
                for alias in node.names:
                    assert not alias.name.startswith(forbidden), (path.name, alias.name)
