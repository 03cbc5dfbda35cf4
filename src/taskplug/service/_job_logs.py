"""A web-API task's logs on the service: what its job's service answers (a connector's ``GetTaskLogs``).

A connector task has no pod, so neither the replicas' kept copies nor the cluster hold its log: its
connector does, for the job the attempt's resource meta names (kept in the attempt's record,
``plugin_state["resourceMeta"]``). With the platform config (``taskplug serve --config``), a log read asks
the connector through the platform's web-API plugins (:func:`~taskplug.executor.web_api_log_lines`, as
``taskplug logs`` does) and shows the answer as one more container log (pod ``job``, container
``connector``). Loading the plugins runs a connector's discovery, so an answer is remembered: a followed pane
asks again at most every ``refresh`` seconds, and never again once the execution has ended.

Not in Flyte's propeller, which only reports the log links a connector's ``GetTask`` gives; ``GetTaskLogs``
is there for a client to call, and here the service is that client for its API and web view.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

from taskplug.core import PluginError
from taskplug.executor import Platform, web_api_log_lines, web_api_resource_meta

__all__ = ["JOB_CONTAINER", "JOB_POD", "JobLogs"]

JOB_POD: Final = "job"
"""The pod name a web-API job's log is shown under (it has no pod)."""
JOB_CONTAINER: Final = "connector"
"""The container name a web-API job's log is shown under."""

_MAX_JOBS: Final = 1000
"""Jobs whose last answer is remembered (the least recently asked are forgotten first)."""
_MAX_BYTES: Final = 8 * 1024 * 1024
"""The most of one job's log held (its end)."""


@dataclass
class _Answer:
    data: bytes
    asked_at: float
    final: bool


class JobLogs:
    """Web-API jobs' logs for ``taskplug serve`` (see the module docstring)."""

    def __init__(
        self, platform: Platform, *, refresh: float = 5.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.platform = platform
        self.refresh = refresh
        self.clock = clock
        self._answers: OrderedDict[bytes, _Answer] = OrderedDict()
        self._lock = asyncio.Lock()  # one question to the services at a time: each loads the plugins

    async def text(self, plugin_state: Mapping[str, Any] | None, *, ended: bool) -> bytes | None:
        """The log of the job ``plugin_state`` names (None: it names none); ``ended``: the execution has
        ended, so the answer is final."""
        meta = web_api_resource_meta(plugin_state)
        if meta is None:
            return None
        ident = orjson.dumps(meta, option=orjson.OPT_SORT_KEYS)
        async with self._lock:
            known = self._answers.get(ident)
            if known is not None and (known.final or self.clock() - known.asked_at < self.refresh):
                self._answers.move_to_end(ident)
                return known.data
            try:
                lines = [line async for line in web_api_log_lines(self.platform, plugin_state)]
                data = "".join(line if line.endswith("\n") else line + "\n" for line in lines).encode()
            except PluginError as e:
                data = f"[the job's logs cannot be read: {e}]\n".encode()
                ended = False  # asked again later: a connector that was down may answer then
            if len(data) > _MAX_BYTES:
                data = data[-_MAX_BYTES:]
            self._answers[ident] = _Answer(data, self.clock(), ended)
            self._answers.move_to_end(ident)
            while len(self._answers) > _MAX_JOBS:
                self._answers.popitem(last=False)
            return data
