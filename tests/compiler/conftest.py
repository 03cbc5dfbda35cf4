"""The flytekit workflows of ``support.flytekit_workflows``, serialized once per test session."""

from __future__ import annotations

import pytest

from support.flytekit_workflows import DEMO, REMOTE, TWO, Serialized, serialize


@pytest.fixture(scope="session")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Serialized:
    return serialize(tmp_path_factory.mktemp("demo"), "loader_demo", DEMO)


@pytest.fixture(scope="session")
def two(tmp_path_factory: pytest.TempPathFactory) -> Serialized:
    return serialize(tmp_path_factory.mktemp("two"), "loader_two", TWO)


@pytest.fixture(scope="session")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Serialized:
    return serialize(tmp_path_factory.mktemp("remote"), "loader_remote", REMOTE)
