"""The plugin against a real flytekit connector server (``pyflyte serve connector``) on 127.0.0.1.

The plugin's create / get / status / delete are driven directly with a StaticTaskExecutionContext, as the
web-API adapter will drive them. The server runs the built-in FileSensor and the scripted connectors of
``scripted_connectors.py``.
"""

from __future__ import annotations

import base64
import json
from collections import OrderedDict
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from conftest import ConnectorServer
from connector_helpers import container_template, int_literals, int_outputs, make_tctx, string_literals
from flyteidl.core import tasks_pb2
from google.protobuf import struct_pb2

from taskplug.core import (
    FakeClock,
    LiteralMapOutputReader,
    Phase,
    PhaseInfo,
    PluginError,
    StaticTaskExecutionContext,
    TaskLog,
)
from taskplug.plugins.connector import ConnectorConfig, ConnectorPlugin
from taskplug.webapi import DeleteContext, GetContext, StatusContext

pytestmark = pytest.mark.integration


@pytest.fixture
async def plugin(connector_server: ConnectorServer) -> AsyncIterator[ConnectorPlugin]:
    cfg = ConnectorConfig.model_validate(
        {"defaultConnector": {"endpoint": connector_server.endpoint, "defaultTimeout": "30s"}}
    )
    async with ConnectorPlugin(cfg, clock=FakeClock()) as p:
        yield p


def file_sensor_template() -> tasks_pb2.TaskTemplate:
    from flytekit.configuration import Image, ImageConfig, SerializationSettings
    from flytekit.sensor.file_sensor import FileSensor
    from flytekit.tools.translator import get_serializable

    settings = SerializationSettings(
        image_config=ImageConfig(default_image=Image(name="default", fqn="ghcr.io/org/img", tag="v1")),
        project="p",
        domain="d",
        version="v1",
    )
    sensor = FileSensor(name="fs")
    template: tasks_pb2.TaskTemplate = get_serializable(
        OrderedDict(), settings, sensor
    ).template.to_flyte_idl()
    return template


def scripted_template(*script: str, outputs: bool = True) -> tasks_pb2.TaskTemplate:
    template = container_template("scripted_job", args=["run", "--out", "{{.outputPrefix}}"])
    custom = struct_pb2.Struct()
    custom.update({"script": list(script), "outputs": outputs})
    template.custom.CopyFrom(custom)
    template.interface.CopyFrom(int_outputs("o0"))
    return template


async def poll(plugin: ConnectorPlugin, tctx: StaticTaskExecutionContext, meta: object) -> PhaseInfo:
    resource = await plugin.get(GetContext(json.loads(json.dumps(meta))))
    return await plugin.status(StatusContext(tctx, meta, resource))


def job_id(meta: dict[str, object]) -> str:
    raw = base64.b64decode(str(meta["connectorResourceMeta"]))
    return str(json.loads(raw)["job_id"])


async def test_discovery_finds_the_servers_connectors(
    plugin: ConnectorPlugin, connector_server: ConnectorServer
) -> None:
    routes = plugin.registry.routes
    assert {"sensor", "scripted_job", "echo_sync", "webhook"} <= plugin.task_types
    assert routes["echo_sync"][0].is_sync is True
    assert routes["sensor"][0].is_sync is False
    assert routes["sensor"][0].deployment.endpoint == connector_server.endpoint
    assert plugin.handles_task_type("sensor")
    assert not plugin.handles_task_type("nope")


async def test_file_sensor_runs_until_the_file_appears_then_succeeds(
    plugin: ConnectorPlugin, tmp_path: Path
) -> None:
    flag = tmp_path / "flagfile"
    template = file_sensor_template()
    assert template.type == "sensor"
    tctx = make_tctx(template, string_literals(path=str(flag)))
    meta, resource = await plugin.create(tctx)
    assert resource is None
    assert meta is not None

    for _ in range(3):
        assert (await poll(plugin, tctx, meta)).phase is Phase.RUNNING
    flag.touch()
    info = await poll(plugin, tctx, meta)
    assert info.phase is Phase.SUCCESS
    assert tctx.output_writer.was_put is False  # the sensor declares no outputs
    await plugin.delete(DeleteContext(meta))


async def test_scripted_job_walks_its_phases_and_returns_outputs_logs_and_custom_info(
    plugin: ConnectorPlugin, connector_server: ConnectorServer
) -> None:
    tctx = make_tctx(scripted_template("QUEUED", "RUNNING", "SUCCEEDED"), output_prefix="s3://bucket/out")
    meta, _ = await plugin.create(tctx)
    assert meta is not None
    received = json.loads((connector_server.state_dir / f"{job_id(meta)}.request.json").read_text())
    assert received["args"] == ["run", "--out", "s3://bucket/out"]
    assert received["output_prefix"] == "s3://bucket/out"
    assert (received["namespace"], received["labels"], received["service_account"]) == (
        "p-d",
        {"team": "a"},
        "runner",
    )

    queued = await poll(plugin, tctx, meta)
    assert (queued.phase, queued.reason) == (Phase.QUEUED, "poll 1 -> QUEUED")
    assert (await poll(plugin, tctx, meta)).phase is Phase.RUNNING
    done = await poll(plugin, tctx, meta)
    assert done.phase is Phase.SUCCESS
    assert done.info is not None
    assert done.info.logs == (TaskLog(uri=f"http://127.0.0.1/logs/{job_id(meta)}", name="Scripted Log"),)
    assert done.info.custom_info == {"job_id": job_id(meta), "poll": 3.0}
    reader = tctx.output_writer.reader
    assert isinstance(reader, LiteralMapOutputReader)
    assert await reader.read() == int_literals(o0=42)


async def test_create_get_delete_round_trip_reaches_the_servers_delete(
    plugin: ConnectorPlugin, connector_server: ConnectorServer
) -> None:
    tctx = make_tctx(scripted_template("RUNNING"))
    meta, _ = await plugin.create(tctx)
    assert meta is not None
    assert (await poll(plugin, tctx, meta)).phase is Phase.RUNNING
    marker = connector_server.state_dir / f"{job_id(meta)}.deleted"
    assert not marker.exists()
    await plugin.delete(DeleteContext(json.loads(json.dumps(meta))))
    assert marker.exists()


async def test_success_without_outputs_in_the_resource_leaves_outputs_pb_to_the_connector(
    plugin: ConnectorPlugin,
) -> None:
    tctx = make_tctx(scripted_template("SUCCEEDED", outputs=False))
    meta, _ = await plugin.create(tctx)
    assert (await poll(plugin, tctx, meta)).phase is Phase.SUCCESS
    assert tctx.output_writer.was_put is True
    assert tctx.output_writer.reader is None


@pytest.mark.parametrize(
    ("script", "phase"),
    [(("FAILED",), Phase.PERMANENT_FAILURE), (("RETRYABLE_FAILED",), Phase.RETRYABLE_FAILURE)],
)
async def test_connector_failures_become_failure_phases(
    plugin: ConnectorPlugin, script: tuple[str, ...], phase: Phase
) -> None:
    tctx = make_tctx(scripted_template(*script))
    meta, _ = await plugin.create(tctx)
    info = await poll(plugin, tctx, meta)
    assert info.phase is phase
    assert info.err is not None
    assert (info.err.code, info.err.message) == (
        "TaskFailedWithError",
        f"failed to run the job: poll 1 -> {script[0]}",
    )


async def test_a_raising_get_surfaces_as_an_internal_error(plugin: ConnectorPlugin) -> None:
    tctx = make_tctx(scripted_template("RUNNING", "RAISE"))
    meta, _ = await plugin.create(tctx)
    assert (await poll(plugin, tctx, meta)).phase is Phase.RUNNING
    with pytest.raises(PluginError) as e:
        await plugin.get(GetContext(meta))
    assert e.value.message.startswith("failed to get task from connector with rpc error: code = Internal")
    assert "scripted failure at poll 2" in e.value.message


async def test_sync_connector_answers_through_execute_task_sync_with_outputs(plugin: ConnectorPlugin) -> None:
    template = container_template("echo_sync")
    template.interface.CopyFrom(int_outputs("x"))
    tctx = make_tctx(template, int_literals(x=7))
    meta, resource = await plugin.create(tctx)
    assert meta is None
    assert resource is not None
    info = await plugin.status(StatusContext(tctx, meta, resource))
    assert (info.phase, resource.message) == (Phase.SUCCESS, "echoed")
    reader = tctx.output_writer.reader
    assert isinstance(reader, LiteralMapOutputReader)
    assert await reader.read() == int_literals(x=7)
    await plugin.delete(DeleteContext(meta))  # nothing was created: a no-op


async def test_an_unknown_task_type_is_a_clear_not_found_error(plugin: ConnectorPlugin) -> None:
    with pytest.raises(PluginError) as e:
        await plugin.create(make_tctx(container_template("nope")))
    assert e.value.message == (
        "failed to create task from connector with rpc error: code = NotFound "
        "desc = Cannot find connector for task type: nope."
    )


async def test_a_sync_call_for_an_unknown_type_fails_with_not_found(
    connector_server: ConnectorServer,
) -> None:
    from flyteidl.admin import agent_pb2

    from taskplug.plugins.connector import ConnectorRpcError, Deployment, GrpcConnectorClient

    client = GrpcConnectorClient()
    header = agent_pb2.CreateRequestHeader(template=container_template("nope"), output_prefix="/o")
    inputs = agent_pb2.ExecuteTaskSyncRequest(inputs=int_literals(x=1))
    try:
        # The server rejects the call after the header while the inputs are still in flight; now and then
        # gRPC core then ends the call with a transport-level INTERNAL of its own ("Internal error from Core":
        # grpc.aio sets it when the send of the inputs fails before the server's status is read) instead of
        # the server's status — 6 calls in 300 on an idle machine, far more on a loaded one. Only an INTERNAL
        # is tried again: the server itself answers NotFound.
        for _ in range(30):
            with pytest.raises(ConnectorRpcError) as e:
                await client.execute_task_sync(
                    Deployment(endpoint=connector_server.endpoint, insecure=True), header, inputs, 30
                )
            if e.value.status != "Internal":
                break
    finally:
        await client.close()
    assert e.value.status == "NotFound"
    assert e.value.details == "Cannot find connector for task type: nope."
