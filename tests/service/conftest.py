from collections.abc import Generator
from typing import Any

import pytest

from service.replica_helpers import CALL_FAILED, empty_database_fixture
from support.postgres_server import postgres_dsn_fixture, postgres_server_fixture

__all__ = ["empty_database_fixture", "postgres_dsn_fixture", "postgres_server_fixture"]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Generator[None, Any, Any]:
    report = yield
    if report.when == "call":
        item.stash[CALL_FAILED] = report.failed
    return report
