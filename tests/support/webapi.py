"""Builders for running web-API (connector) tasks through the executor: specs, config, an executor, waits.

The specs target the test connectors of ``scripted_connectors.py`` (task type ``scripted_job``, sync
``echo_sync``) and flytekit's built-in FileSensor (task type ``sensor``). The config documents use Flyte's
keys: ``plugins.connector-service`` (defaultConnector, webApi), ``propeller.resourcemanager`` and taskplug's
``executor`` section.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from support.waiting import wait_until
from taskplug.core import Clock
from taskplug.executor import Platform, parse_spec
from taskplug.executor._executor import Executor
from taskplug.executor._runtime import open_executor
from taskplug.executor._spec import ExecutionSpec
from taskplug.executor._store import MemoryStateStore
from taskplug.k8s import KubeClient

__all__ = [
    "PROJECT",
    "connector_document",
    "echo_sync_document",
    "events_of",
    "file_sensor_document",
    "finished",
    "phases_of",
    "running_executor",
    "scripted_document",
    "spec",
    "wait_until",
]

PROJECT, DOMAIN = "wa", "dev"

_TASK_ID = {"resourceType": "TASK", "project": PROJECT, "domain": DOMAIN, "name": "t", "version": "v1"}
_INT = {"type": {"simple": "INTEGER"}}


def _execution(name: str) -> dict[str, Any]:
    return {"id": {"project": PROJECT, "domain": DOMAIN, "name": name, "nodeId": "n0"}}


def scripted_document(
    name: str, *script: str, hold: str = "", group: str = "", outputs: bool = True
) -> dict[str, Any]:
    """A ``scripted_job`` task declaring output ``o0`` (the connector answers 42 on SUCCEEDED)."""
    custom: dict[str, Any] = {"script": list(script or ("RUNNING", "SUCCEEDED")), "outputs": outputs}
    if hold:
        custom["hold"] = hold
    if group:
        custom["group"] = group
    return {
        "template": {
            "id": _TASK_ID,
            "type": "scripted_job",
            "custom": custom,
            "interface": {"outputs": {"variables": {"o0": _INT}}},
        },
        "execution": _execution(name),
    }


def echo_sync_document(name: str, x: int) -> dict[str, Any]:
    """An ``echo_sync`` task (ExecuteTaskSync): input ``x`` comes back as output ``x``."""
    return {
        "template": {
            "id": _TASK_ID,
            "type": "echo_sync",
            "interface": {"inputs": {"variables": {"x": _INT}}, "outputs": {"variables": {"x": _INT}}},
        },
        "execution": _execution(name),
        "inputs": {"x": x},
    }


def file_sensor_document(name: str, path: Path) -> dict[str, Any]:
    """flytekit's FileSensor, serialized by flytekit itself (task type ``sensor``, input ``path``)."""
    from flytekit.configuration import Image, ImageConfig, SerializationSettings
    from flytekit.sensor.file_sensor import FileSensor
    from flytekit.tools.translator import get_serializable

    settings = SerializationSettings(
        image_config=ImageConfig(default_image=Image(name="default", fqn="ghcr.io/org/img", tag="v1")),
        project=PROJECT,
        domain=DOMAIN,
        version="v1",
    )
    template = get_serializable(OrderedDict(), settings, FileSensor(name="fs")).template.to_flyte_idl()
    return {
        "template": json_format.MessageToDict(template),
        "execution": _execution(name),
        "inputs": {"path": str(path)},
    }


def spec(document: Mapping[str, Any]) -> ExecutionSpec:
    return parse_spec(document)


def connector_document(
    tmp_path: Path,
    endpoint: str,
    *,
    resync_period: str = "1s",
    quotas: Mapping[str, int] | None = None,
    resource_manager: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Config: the connector service at ``endpoint`` (insecure), its status cache resyncing every 5 s
    (Flyte's smallest), the executor's data and resync period; optional quotas and resource manager."""
    web_api: dict[str, Any] = {"caching": {"resyncInterval": "5s"}}
    if quotas is not None:
        web_api["resourceQuotas"] = dict(quotas)
    document: dict[str, Any] = {
        "executor": {
            "data-root": str(tmp_path / "data"),
            "state-db": str(tmp_path / "state.db"),
            "resync-period": resync_period,
            "workers": 8,
        },
        "plugins": {
            "connector-service": {
                "defaultConnector": {"endpoint": endpoint, "insecure": True, "defaultTimeout": "30s"},
                "webApi": web_api,
            }
        },
    }
    if resource_manager is not None:
        document["propeller"] = {"resourcemanager": dict(resource_manager)}
    return document


@contextlib.asynccontextmanager
async def running_executor(
    document: Mapping[str, Any], *, kube_client: KubeClient, clock: Clock
) -> AsyncIterator[Executor]:
    """An executor over every enabled plugin (web-API tasks need no cluster, but the runtime wants one)."""
    platform = Platform.load(document=document, clock=clock)
    async with open_executor(platform, kube_client=kube_client, store=MemoryStateStore(), clock=clock) as ex:
        yield ex


def events_of(ex: Executor, key: str) -> list[tuple[str, str]]:
    """``(phase, reason)`` of every event of ``key`` so far."""
    return [(e.phase, e.reason) for e in ex.store.events(key)]


def phases_of(ex: Executor, key: str) -> list[str]:
    return [phase for phase, _ in events_of(ex, key)]


async def finished(ex: Executor, keys: Sequence[str], *, within: float = 20.0) -> list[Any]:
    """The results of ``keys``, bounded by ``within`` real seconds."""
    return list(await asyncio.wait_for(asyncio.gather(*(ex.wait(k) for k in keys)), within))
