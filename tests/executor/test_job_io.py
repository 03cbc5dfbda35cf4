"""A web-API job's logs and metrics through the platform's plugins (``web_api_log_lines``, ``web_api_metrics``):
the plugin that reads the job answers, one that does not know the job is passed over, every plugin loaded for
it is closed, and an attempt without a job or without a plugin that reads it is a clear error."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from taskplug.core import ErrorCode, PluginError, PluginRegistry, SetupContext
from taskplug.executor import Platform, web_api_log_lines, web_api_metrics
from taskplug.webapi import WebApiPluginEntry

CLOSED: list[str] = []


class Reader:
    """A web-API plugin (only what these helpers use) that reads the jobs whose meta names it as ``owner``."""

    def __init__(self, name: str) -> None:
        self.name = name

    def _check(self, meta: Any) -> None:
        if meta.get("owner") != self.name:
            raise PluginError(ErrorCode.CORRUPTED_PLUGIN_STATE, f"not a job of {self.name}")

    async def task_log_lines(self, meta: Any) -> AsyncIterator[str]:
        self._check(meta)
        for i in range(3):
            yield f"{self.name} {meta['job']} line {i}"

    async def task_metrics(self, meta: Any, queries: Sequence[str], **window: Any) -> Any:
        self._check(meta)
        return {"queries": list(queries), "window": window}

    async def stop(self) -> None:
        CLOSED.append(self.name)


class Blind:
    """A web-API plugin that reads no job's logs."""

    async def stop(self) -> None:
        CLOSED.append("blind")


def entry(plugin_id: str, make: Any) -> WebApiPluginEntry:
    def load(setup: SetupContext) -> Any:
        return make()

    return WebApiPluginEntry(id=plugin_id, supported_task_types=(f"{plugin_id}-type",), plugin_loader=load)


@pytest.fixture
def platform() -> Platform:
    CLOSED.clear()
    registry = PluginRegistry()
    registry.register(entry("blind", Blind))
    registry.register(entry("other", lambda: Reader("other")))
    registry.register(entry("mine", lambda: Reader("mine")))
    return Platform.load(registry=registry, document={"tasks": {"task-plugins": {"enabled-plugins": []}}})


def state(**meta: Any) -> dict[str, Any]:
    return {"phase": 2, "resourceMeta": meta}


async def test_the_plugin_that_reads_the_job_gives_its_lines_and_every_loaded_plugin_is_closed(
    platform: Platform,
) -> None:
    lines = [line async for line in web_api_log_lines(platform, state(owner="mine", job="j1"))]

    assert lines == ["mine j1 line 0", "mine j1 line 1", "mine j1 line 2"]
    assert CLOSED == ["blind", "other", "mine"]


async def test_metrics_come_from_the_plugin_that_reads_the_job(platform: Platform) -> None:
    answer = await web_api_metrics(platform, state(owner="mine", job="j1"), ["cpu"], step=None)

    assert answer == {"queries": ["cpu"], "window": {"start": None, "end": None, "step": None}}
    assert CLOSED == ["blind", "other", "mine"]


async def test_an_attempt_without_a_job_or_without_a_reader_is_a_clear_error(platform: Platform) -> None:
    with pytest.raises(PluginError) as none:
        _ = [line async for line in web_api_log_lines(platform, {"phase": 0})]
    assert "has no job" in none.value.message
    with pytest.raises(PluginError) as nobody:
        _ = [line async for line in web_api_log_lines(platform, state(owner="nobody"))]
    assert nobody.value.code == ErrorCode.UNSUPPORTED_TASK_TYPE
    assert "no enabled web-API plugin reads this job's logs" in nobody.value.message
