"""Create / get / delete against a scripted in-memory connector client (the TestEndToEnd cases of
Flyte's connector integration_test.go, and Create / Get / Delete of its plugin.go)."""

from __future__ import annotations

import json

import pytest
from connector_helpers import container_template, int_literals, int_outputs, make_tctx
from flyteidl.admin import agent_pb2
from flyteidl.core import execution_pb2, tasks_pb2
from google.protobuf import json_format, struct_pb2

from taskplug.core import (
    ErrorCode,
    FakeClock,
    LiteralMapOutputReader,
    Phase,
    PluginError,
    StaticTaskExecutionContext,
)
from taskplug.plugins.connector import (
    ConnectorConfig,
    ConnectorPlugin,
    ConnectorResourceMeta,
    ConnectorRpcError,
    FakeConnectorClient,
    ResourceWrapper,
    TaskCategory,
)
from taskplug.webapi import AsyncPlugin, DeleteContext, GetContext, StatusContext

P = execution_pb2.TaskExecution.Phase
DEFAULT = "default:80"


def config(**kwargs: object) -> ConnectorConfig:
    base: dict[str, object] = {"defaultConnector": {"endpoint": DEFAULT}}
    base.update(kwargs)
    return ConnectorConfig.model_validate(base)


async def started(client: FakeConnectorClient, **kwargs: object) -> ConnectorPlugin:
    client.agents.setdefault(DEFAULT, [])
    plugin = ConnectorPlugin(config(**kwargs), client=client, clock=FakeClock())
    await plugin.start()
    return plugin


def get_response(**resource: object) -> agent_pb2.GetTaskResponse:
    return agent_pb2.GetTaskResponse(resource=agent_pb2.Resource(**resource))  # type: ignore[arg-type]


def test_the_plugin_satisfies_the_async_plugin_contract() -> None:
    assert isinstance(ConnectorPlugin(ConnectorConfig(), client=FakeConnectorClient()), AsyncPlugin)


# Flyte's connector integration_test.go TestEndToEnd: "run an async task", on the fake client
# (test_connector_grpc.py runs it over real gRPC).
async def test_async_round_trip_renders_args_and_reaches_success_twice() -> None:
    client = FakeConnectorClient()
    client.answer(DEFAULT, "CreateTask", agent_pb2.CreateTaskResponse(resource_meta=bytes([1, 2, 3, 4])))
    client.answer(DEFAULT, "GetTask", get_response(phase=P.SUCCEEDED))
    plugin = await started(client)
    try:
        for _ in range(2):
            tctx = make_tctx(container_template())
            meta, resource = await plugin.create(tctx)
            assert resource is None
            observed = await plugin.get(GetContext(meta))
            info = await plugin.status(StatusContext(tctx, meta, observed))
            assert info.phase is Phase.SUCCESS
        request = client.calls_to("CreateTask")[0].request
        assert list(request.template.container.args) == [
            "pyflyte-fast-execute",
            "--output-prefix",
            "/tmp/123",
        ]
    finally:
        await plugin.stop()


async def test_create_sends_inputs_output_prefix_and_flytes_metadata_fields() -> None:
    client = FakeConnectorClient()
    client.answer(DEFAULT, "CreateTask", agent_pb2.CreateTaskResponse(resource_meta=b"m"))
    plugin = await started(client)
    tctx = make_tctx(container_template(), int_literals(x=3))
    await plugin.create(tctx)
    request = client.calls_to("CreateTask")[0].request
    assert request.inputs == int_literals(x=3)
    assert request.output_prefix == "/tmp/123"
    md = request.task_execution_metadata
    assert md.task_execution_id == tctx.metadata.task_execution_id.id
    assert (md.namespace, dict(md.labels), dict(md.annotations)) == ("p-d", {"team": "a"}, {"note": "b"})
    assert md.k8s_service_account == "runner"
    assert dict(md.environment_variables) == {"ENV": "1"}
    assert md.identity.k8s_service_account == "sa"
    # Not filled by Flyte.
    assert (md.max_attempts, md.interruptible, md.HasField("overrides")) == (0, False, False)
    await plugin.stop()


async def test_create_leaves_the_readers_template_untouched() -> None:
    client = FakeConnectorClient()
    client.answer(DEFAULT, "CreateTask", agent_pb2.CreateTaskResponse(resource_meta=b"m"))
    plugin = await started(client)
    template = container_template()
    await plugin.create(make_tctx(template))
    assert list(template.container.args)[-1] == "{{.outputPrefix}}"
    await plugin.stop()


async def test_resource_meta_is_json_and_round_trips_the_connector_bytes_exactly() -> None:
    raw = bytes(range(256)) + b'{"job_id": "x"}'
    client = FakeConnectorClient()
    client.answer(DEFAULT, "CreateTask", agent_pb2.CreateTaskResponse(resource_meta=raw))
    client.answer(DEFAULT, "GetTask", get_response(phase=P.RUNNING))
    client.answer(DEFAULT, "DeleteTask", agent_pb2.DeleteTaskResponse())
    plugin = await started(client)
    template = container_template("spark")
    template.task_type_version = 3
    meta, _ = await plugin.create(make_tctx(template))
    persisted = json.loads(json.dumps(meta))
    assert ConnectorResourceMeta.from_json(persisted) == ConnectorResourceMeta(
        "/tmp/123", raw, TaskCategory("spark", 3)
    )
    await plugin.get(GetContext(persisted))
    await plugin.delete(DeleteContext(persisted))
    get = client.calls_to("GetTask")[0].request
    assert get.resource_meta == raw
    assert (get.task_type, get.task_category.name, get.task_category.version) == ("spark", "spark", 3)
    assert get.output_prefix == "/tmp/123"
    delete = client.calls_to("DeleteTask")[0].request
    assert delete.resource_meta == raw
    assert (delete.task_type, delete.task_category.name, delete.task_category.version) == (
        "spark",
        "spark",
        3,
    )
    await plugin.stop()


async def test_calls_use_the_deadline_of_their_operation() -> None:
    client = FakeConnectorClient()
    client.answer(DEFAULT, "CreateTask", agent_pb2.CreateTaskResponse(resource_meta=b"m"))
    client.answer(DEFAULT, "GetTask", get_response(phase=P.RUNNING))
    client.answer(DEFAULT, "DeleteTask", agent_pb2.DeleteTaskResponse())
    plugin = await started(
        client, defaultConnector={"endpoint": DEFAULT, "timeouts": {"CreateTask": "1s", "GetTask": "2s"}}
    )
    meta, _ = await plugin.create(make_tctx(container_template()))
    await plugin.get(GetContext(meta))
    await plugin.delete(DeleteContext(meta))
    assert [(c.operation, c.deadline) for c in client.calls if c.operation != "ListAgents"] == [
        ("CreateTask", 1.0),
        ("GetTask", 2.0),
        ("DeleteTask", 10.0),
    ]
    await plugin.stop()


async def test_get_and_delete_route_by_the_stored_task_category() -> None:
    client = FakeConnectorClient(
        agents={"x:80": [agent_pb2.Agent(supported_task_categories=[agent_pb2.TaskCategory(name="bq")])]}
    )
    client.answer("x:80", "CreateTask", agent_pb2.CreateTaskResponse(resource_meta=b"m"))
    client.answer("x:80", "GetTask", get_response(phase=P.RUNNING))
    client.answer("x:80", "DeleteTask", agent_pb2.DeleteTaskResponse())
    plugin = await started(client, connectors={"x": {"endpoint": "x:80", "insecure": True}})
    meta, _ = await plugin.create(make_tctx(container_template("bq")))
    await plugin.get(GetContext(meta))
    await plugin.delete(DeleteContext(meta))
    assert {c.endpoint for c in client.calls if c.operation != "ListAgents"} == {"x:80"}
    await plugin.stop()


async def test_get_keeps_the_connectors_error_code() -> None:
    client = FakeConnectorClient()
    client.answer(
        DEFAULT,
        "GetTask",
        get_response(phase=P.FAILED, message="bad", agent_error=agent_pb2.AgentError(code="QUOTA")),
    )
    plugin = await started(client)
    meta = ConnectorResourceMeta("/o", b"m", TaskCategory("spark")).to_json()
    resource = await plugin.get(GetContext(meta))
    info = await plugin.status(StatusContext(make_tctx(container_template()), meta, resource))
    assert info.err is not None
    assert info.err.code == "QUOTA"
    await plugin.stop()


# -- errors --------------------------------------------------------------------------------------------------


async def test_create_wraps_a_connector_error_in_flytes_message() -> None:
    client = FakeConnectorClient()
    client.answer(
        DEFAULT, "CreateTask", ConnectorRpcError("NotFound", "Cannot find connector for task type: nope.")
    )
    plugin = await started(client)
    with pytest.raises(PluginError) as e:
        await plugin.create(make_tctx(container_template("nope")))
    assert e.value.message == (
        "failed to create task from connector with rpc error: code = NotFound "
        "desc = Cannot find connector for task type: nope."
    )
    assert isinstance(e.value.__cause__, ConnectorRpcError)
    await plugin.stop()


async def test_get_and_delete_wrap_connector_errors() -> None:
    client = FakeConnectorClient()
    client.answer(DEFAULT, "GetTask", ConnectorRpcError("Internal", "boom"))
    client.answer(DEFAULT, "DeleteTask", ConnectorRpcError("Unavailable", "gone"))
    plugin = await started(client)
    meta = ConnectorResourceMeta("/o", b"m", TaskCategory("spark")).to_json()
    with pytest.raises(PluginError) as e:
        await plugin.get(GetContext(meta))
    assert e.value.message == "failed to get task from connector with rpc error: code = Internal desc = boom"
    with pytest.raises(PluginError) as e:
        await plugin.delete(DeleteContext(meta))
    # An unreachable endpoint: Flyte's message, then which deployment (and protocol) it is.
    assert e.value.message == (
        "failed to delete task from connector with rpc error: code = Unavailable desc = gone "
        "(connector deployment [defaultConnector] at [default:80], protocol flyteidl: unreachable; is the "
        "connector running there, and is `insecure` right?)"
    )
    await plugin.stop()


# Flyte's connector integration_test.go TestEndToEnd: "failed to create a job".
async def test_create_without_a_reachable_connector_fails_and_abort_then_deletes_nothing() -> None:
    client = FakeConnectorClient()  # nothing answers at the default endpoint
    plugin = await started(client)
    with pytest.raises(
        PluginError, match="failed to create task from connector with rpc error: code = Unavailable"
    ):
        await plugin.create(make_tctx(container_template()))
    await plugin.delete(DeleteContext(None))
    assert client.calls_to("DeleteTask") == []
    await plugin.stop()


class _BrokenReader:
    path = ""

    def read(self) -> tasks_pb2.TaskTemplate:
        raise OSError("no such object")


class _BrokenInputs:
    input_prefix = ""
    input_path = ""

    def get(self) -> None:
        raise OSError("inputs unreadable")


# Flyte's connector integration_test.go TestEndToEnd: "failed to read task template".
async def test_a_template_read_failure_fails_create() -> None:
    plugin = await started(FakeConnectorClient())
    tctx = make_tctx(container_template())
    tctx.task_reader = _BrokenReader()
    with pytest.raises(PluginError, match="failed to read task template with error: no such object"):
        await plugin.create(tctx)
    await plugin.stop()


# Flyte's connector integration_test.go TestEndToEnd: "failed to read inputs".
async def test_an_input_read_failure_fails_create() -> None:
    plugin = await started(FakeConnectorClient())
    tctx = make_tctx(container_template())
    tctx.input_reader = _BrokenInputs()
    with pytest.raises(PluginError, match="failed to read inputs with error: inputs unreadable"):
        await plugin.create(tctx)
    await plugin.stop()


async def test_an_arg_render_failure_fails_create() -> None:
    plugin = await started(FakeConnectorClient())
    tctx = make_tctx(container_template(args=["echo", "{{.Inputs.missing}}"]), int_literals(x=1))
    with pytest.raises(PluginError, match=r"failed to render args with error: .*missing"):
        await plugin.create(tctx)
    await plugin.stop()


async def test_a_corrupted_resource_meta_is_a_corrupted_state_error() -> None:
    plugin = await started(FakeConnectorClient())
    with pytest.raises(PluginError) as e:
        await plugin.get(GetContext({"outputPrefix": "/o"}))
    assert e.value.code == ErrorCode.CORRUPTED_PLUGIN_STATE
    await plugin.stop()


# -- k8s_pod -------------------------------------------------------------------------------------------------


def pod_template() -> tasks_pb2.TaskTemplate:
    spec = struct_pb2.Struct()
    spec.update(
        {
            "containers": [
                {"name": "primary", "image": "img", "args": ["pyflyte-execute", "--inputs", "{{.input}}"]},
                {"name": "side", "image": "busybox"},
            ],
            "nodeSelector": {"pool": "a"},
        }
    )
    return tasks_pb2.TaskTemplate(
        type="sidecar", task_type_version=2, k8s_pod=tasks_pb2.K8sPod(pod_spec=spec)
    )


# Flyte's connector integration_test.go TestEndToEnd: "run a k8s_pod task with rendered template args".
async def test_a_k8s_pod_task_sends_its_pod_spec_with_rendered_args() -> None:
    client = FakeConnectorClient()
    client.answer(DEFAULT, "CreateTask", agent_pb2.CreateTaskResponse(resource_meta=b"m"))
    plugin = await started(client)
    await plugin.create(make_tctx(pod_template()))
    spec = json_format.MessageToDict(client.calls_to("CreateTask")[0].request.template.k8s_pod.pod_spec)
    assert spec["containers"][0]["args"] == ["pyflyte-execute", "--inputs", "/in/inputs.pb"]
    assert "{{" not in json.dumps(spec)
    assert spec["containers"][1] == {"name": "side", "image": "busybox"}
    assert spec["nodeSelector"] == {"pool": "a"}
    await plugin.stop()


async def test_the_pod_spec_builder_hook_replaces_the_pass_through() -> None:
    client = FakeConnectorClient(agents={DEFAULT: []})
    client.answer(DEFAULT, "CreateTask", agent_pb2.CreateTaskResponse(resource_meta=b"m"))
    seen: list[str] = []

    def builder(tctx: StaticTaskExecutionContext, template: tasks_pb2.TaskTemplate) -> struct_pb2.Struct:
        seen.append(template.type)
        out = struct_pb2.Struct()
        out.update({"containers": [{"name": "built"}]})
        return out

    plugin = ConnectorPlugin(config(), client=client, pod_spec_builder=builder)  # type: ignore[arg-type]
    await plugin.create(make_tctx(pod_template()))
    spec = json_format.MessageToDict(client.calls_to("CreateTask")[0].request.template.k8s_pod.pod_spec)
    assert (seen, spec) == (["sidecar"], {"containers": [{"name": "built"}]})


# -- the sync path -------------------------------------------------------------------------------------------


def sync_client(response: object) -> FakeConnectorClient:
    client = FakeConnectorClient(
        agents={
            DEFAULT: [
                agent_pb2.Agent(
                    is_sync=True, supported_task_categories=[agent_pb2.TaskCategory(name="openai")]
                )
            ]
        }
    )
    client.answer(DEFAULT, "ExecuteTaskSync", response)
    return client


def sync_response(**resource: object) -> agent_pb2.ExecuteTaskSyncResponse:
    return agent_pb2.ExecuteTaskSyncResponse(
        header=agent_pb2.ExecuteTaskSyncResponseHeader(resource=agent_pb2.Resource(**resource))  # type: ignore[arg-type]
    )


# Flyte's connector integration_test.go TestEndToEnd: "run a sync task".
async def test_a_sync_connector_answers_create_with_the_finished_resource_and_outputs() -> None:
    client = sync_client(sync_response(phase=P.SUCCEEDED, outputs=int_literals(x=1)))
    plugin = await started(client)
    template = container_template("openai")
    template.interface.CopyFrom(int_outputs("x"))
    tctx = make_tctx(template, int_literals(y=2))
    meta, resource = await plugin.create(tctx)
    assert meta is None
    assert isinstance(resource, ResourceWrapper)
    info = await plugin.status(StatusContext(tctx, meta, resource))
    assert info.phase is Phase.SUCCESS
    reader = tctx.output_writer.reader
    assert isinstance(reader, LiteralMapOutputReader)
    assert await reader.read() == int_literals(x=1)
    header, inputs = client.calls_to("ExecuteTaskSync")[0].request
    assert header.template.type == "openai"
    assert header.output_prefix == "/tmp/123"
    assert header.task_execution_metadata.namespace == "p-d"
    assert inputs.inputs == int_literals(y=2)
    assert client.calls_to("CreateTask") == []
    await plugin.stop()


async def test_a_sync_failure_keeps_the_connectors_error_code() -> None:
    client = sync_client(
        sync_response(phase=P.FAILED, message="no", agent_error=agent_pb2.AgentError(code="E1"))
    )
    plugin = await started(client)
    tctx = make_tctx(container_template("openai"))
    meta, resource = await plugin.create(tctx)
    info = await plugin.status(StatusContext(tctx, meta, resource))
    assert info.phase is Phase.PERMANENT_FAILURE
    assert info.err is not None
    assert (info.err.code, info.err.message) == ("E1", "failed to run the job: no")
    await plugin.stop()


async def test_a_sync_answer_without_a_header_is_an_error() -> None:
    plugin = await started(sync_client(agent_pb2.ExecuteTaskSyncResponse(outputs=int_literals(x=1))))
    with pytest.raises(PluginError) as e:
        await plugin.create(make_tctx(container_template("openai")))
    assert e.value.message == "expected header in the response, but got none"
    await plugin.stop()


async def test_a_non_terminal_sync_answer_is_an_error() -> None:
    plugin = await started(sync_client(sync_response(phase=P.RUNNING)))
    with pytest.raises(PluginError, match=r"non-terminal phase \[RUNNING\]"):
        await plugin.create(make_tctx(container_template("openai")))
    await plugin.stop()


@pytest.mark.parametrize(
    ("stage", "prefix"),
    [
        ("open", "failed to execute task from connector with rpc error"),
        ("send", "failed to send headerProto with error: rpc error"),
        ("receive", "failed to receive stream from server rpc error"),
    ],
)
async def test_sync_stream_errors_are_wrapped_by_stage(stage: str, prefix: str) -> None:
    plugin = await started(sync_client(ConnectorRpcError("Internal", "x", stage=stage)))  # type: ignore[arg-type]
    with pytest.raises(PluginError) as e:
        await plugin.create(make_tctx(container_template("openai")))
    assert e.value.message == f"{prefix}: code = Internal desc = x"
    await plugin.stop()


async def test_the_loaders_pod_spec_is_built_by_the_full_pod_pipeline() -> None:
    from taskplug.k8s import K8S_SECTION
    from taskplug.k8s._pod_builder import PlatformPodConfig
    from taskplug.plugins.connector import pipeline_pod_spec

    k8s = K8S_SECTION.model.model_validate(
        {
            "default-tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
            "interruptible-tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
        }
    )
    template = pod_template()
    template.config["primary_container_name"] = "primary"
    client = FakeConnectorClient()
    client.answer(DEFAULT, "CreateTask", agent_pb2.CreateTaskResponse(resource_meta=b"m"))
    plugin = ConnectorPlugin(
        config(), client=client, pod_spec_builder=pipeline_pod_spec(PlatformPodConfig(k8s, environ={}))
    )
    await plugin.start()
    await plugin.create(make_tctx(template))
    spec = json_format.MessageToDict(client.calls_to("CreateTask")[0].request.template.k8s_pod.pod_spec)
    primary, side = spec["containers"]
    assert spec["restartPolicy"] == "Never"
    assert [t["key"] for t in spec["tolerations"]] == ["spot", "dedicated"]  # interruptible, then default
    assert primary["args"] == ["pyflyte-execute", "--inputs", "/in/inputs.pb"]
    assert primary["resources"]["requests"] == {"cpu": "1", "memory": "1Gi"}  # platform defaults applied
    assert side["resources"]["limits"] == {"cpu": "0", "memory": "0"}  # ensure-in-range writes zeros
    assert any(e["name"] == "FLYTE_INTERNAL_EXECUTION_ID" for e in primary["env"])
    await plugin.stop()
