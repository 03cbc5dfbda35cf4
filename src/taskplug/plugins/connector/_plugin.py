"""The ``connector-service`` web-API plugin: runs tasks on Flyte connectors over gRPC.

Follows flyteplugins/go/tasks/plugins/webapi/connector/plugin.go (Flyte 1, ``master``; Flyte 2, ``main``): create
renders the template and calls ``CreateTask`` (or ``ExecuteTaskSync`` for a synchronous connector), get / delete
call ``GetTask`` / ``DeleteTask`` on the connector chosen again from the stored task category, and status maps
the connector's phase (then its deprecated state) to a :class:`PhaseInfo`, writing outputs on success.
The registry of connectors is rebuilt every ``pollInterval`` by a background task the plugin owns.

A deployment with ``protocol: flyteidl2`` is a Flyte 2 connector: the same calls on flyteidl2's services, each
create, get and delete carrying the template's ``connection`` (``_connection.py``). For both protocols,
:meth:`ConnectorPlugin.task_log_lines` and :meth:`ConnectorPlugin.task_metrics` read a job's logs and metrics
(``GetTaskLogs``, ``GetTaskMetrics``) from the resource meta an execution keeps in its plugin state.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from flyteidl.admin import agent_pb2
from flyteidl.core import execution_pb2, literals_pb2, tasks_pb2
from google.protobuf import json_format, struct_pb2

from taskplug.core import (
    Clock,
    ErrorCode,
    LiteralMapOutputReader,
    Phase,
    PhaseInfo,
    PluginError,
    ResourceConstraintsSpec,
    SecretManager,
    SystemClock,
    TaskExecutionContext,
    TaskExecutionMetadata,
    TaskInfo,
    TaskLog,
    TemplateParameters,
    render_command,
)
from taskplug.plugins.connector._client import (
    Connection,
    ConnectorClient,
    ConnectorRpcError,
    GrpcConnectorClient,
)
from taskplug.plugins.connector._config import FLYTEIDL2, ConnectorConfig, Deployment
from taskplug.plugins.connector._connection import EnvSecretManager, connection_of, resolve_connection
from taskplug.plugins.connector._id import ID
from taskplug.plugins.connector._registry import Connector, ConnectorRegistry, build_registry, discover
from taskplug.webapi import DeleteContext, GetContext, PluginConfig, StatusContext

__all__ = [
    "ConnectorPlugin",
    "ConnectorResourceMeta",
    "PodSpecBuilder",
    "ResourceWrapper",
    "TaskCategory",
    "passthrough_pod_spec",
    "resource_phase_info",
]

log = logging.getLogger(__name__)

QUOTA_NAMESPACE: Final = "default"

_P = execution_pb2.TaskExecution.Phase
_S = agent_pb2.State


# -- values -------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TaskCategory:
    name: str
    version: int = 0

    def to_proto(self) -> agent_pb2.TaskCategory:
        return agent_pb2.TaskCategory(name=self.name, version=self.version)


@dataclass(frozen=True, slots=True)
class ConnectorResourceMeta:
    """What identifies a job on a connector (Flyte's ResourceMetaWrapper).

    ``connector_resource_meta`` is the connector's opaque bytes; in the JSON form they are base64 so that
    they come back byte for byte after the plugin state is persisted.
    """

    output_prefix: str
    connector_resource_meta: bytes
    task_category: TaskCategory
    connection: Connection | None = None
    """A Flyte 2 job's connection, its secrets named, not resolved (None for a Flyte 1 job).

    Deviation: Flyte 2 keeps the connection with the secrets' values in its plugin state; here the values are
    looked up again for each call, so that no secret is written to the state store."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "outputPrefix": self.output_prefix,
            "connectorResourceMeta": base64.b64encode(self.connector_resource_meta).decode("ascii"),
            "taskCategory": {"name": self.task_category.name, "version": self.task_category.version},
        }
        if self.connection is not None:
            out["connection"] = {
                "taskType": self.connection.task_type,
                "secrets": dict(self.connection.secrets),
                "configs": dict(self.connection.configs),
            }
        return out

    @classmethod
    def from_json(cls, value: Any) -> ConnectorResourceMeta:
        if isinstance(value, ConnectorResourceMeta):
            return value
        if not isinstance(value, Mapping):
            raise PluginError(
                ErrorCode.CORRUPTED_PLUGIN_STATE, f"connector resource meta must be a mapping, got {value!r}"
            )
        try:
            category = value["taskCategory"]
            connection = value.get("connection")
            return cls(
                output_prefix=str(value.get("outputPrefix", "")),
                connector_resource_meta=base64.b64decode(value["connectorResourceMeta"], validate=True),
                task_category=TaskCategory(str(category["name"]), int(category.get("version", 0))),
                connection=None
                if connection is None
                else Connection(
                    task_type=str(connection.get("taskType", "")),
                    secrets={str(k): str(v) for k, v in (connection.get("secrets") or {}).items()},
                    configs={str(k): str(v) for k, v in (connection.get("configs") or {}).items()},
                ),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise PluginError(
                ErrorCode.CORRUPTED_PLUGIN_STATE, f"invalid connector resource meta {dict(value)!r}: {e}"
            ) from e


# Deviation: RETRYABLE_FAILED is terminal here (as on Flyte's main branch and in flytekit's
# is_terminal_phase); on master the status cache kept polling a job whose task had already failed.
_TERMINAL_PHASES: Final = frozenset({_P.SUCCEEDED, _P.FAILED, _P.ABORTED, _P.RETRYABLE_FAILED})


@dataclass(frozen=True, slots=True)
class ResourceWrapper:
    """The last observed status of a connector job (Flyte's ResourceWrapper); lives only in the cache."""

    phase: int = _P.UNDEFINED
    state: int = _S.RETRYABLE_FAILURE
    outputs: literals_pb2.LiteralMap | None = None
    message: str = ""
    log_links: tuple[TaskLog, ...] = ()
    custom_info: Mapping[str, Any] | None = None
    error_code: str = ""
    """The connector's ``agent_error.code`` (empty when it sent none)."""

    @classmethod
    def from_proto(cls, resource: agent_pb2.Resource) -> ResourceWrapper:
        return cls(
            phase=resource.phase,
            state=resource.state,
            outputs=resource.outputs if resource.HasField("outputs") else None,
            message=resource.message,
            log_links=tuple(_task_log(link) for link in resource.log_links),
            # A plain dict (not a read-only proxy) so the status cache can copy or pickle the resource.
            custom_info=json_format.MessageToDict(resource.custom_info)
            if resource.HasField("custom_info")
            else None,
            error_code=resource.agent_error.code if resource.HasField("agent_error") else "",
        )

    def is_terminal(self) -> bool:
        """Whether the status cache can stop polling this job (only ``phase`` counts, as in Flyte)."""
        return self.phase in _TERMINAL_PHASES


def _task_log(link: Any) -> TaskLog:
    return TaskLog(
        uri=link.uri,
        name=link.name,
        message_format=execution_pb2.TaskLog.MessageFormat.Name(link.message_format),
        show_while_pending=link.ShowWhilePending,
        hide_once_finished=link.HideOnceFinished,
    )


# -- status mapping (pure) ----------------------------------------------------------------------------------


def resource_phase_info(resource: ResourceWrapper, info: TaskInfo) -> PhaseInfo:
    """Flyte's connector Status table: ``phase`` first, the deprecated ``state`` when phase is UNDEFINED.

    A success is returned as ``PhaseInfo.success``; the caller writes the outputs before reporting it.
    Raises PluginError (code SystemError) for a phase or state it does not know.
    """
    code = resource.error_code or ErrorCode.TASK_FAILED_WITH_ERROR
    phase = resource.phase
    if phase == _P.QUEUED:
        return PhaseInfo.queued_with_task_info(0, resource.message, info)
    if phase == _P.WAITING_FOR_RESOURCES:
        return PhaseInfo.waiting_for_resources(0, resource.message, info)
    if phase == _P.INITIALIZING:
        return PhaseInfo.initializing(0, resource.message, info)
    if phase == _P.RUNNING:
        return PhaseInfo.running(0, info)
    if phase == _P.SUCCEEDED:
        return PhaseInfo.success(info)
    if phase == _P.ABORTED:
        return PhaseInfo.failure(code, "failed to run the job with aborted phase.", info)
    if phase == _P.FAILED:
        return PhaseInfo.failure(code, f"failed to run the job: {resource.message}", info)
    if phase == _P.RETRYABLE_FAILED:
        return PhaseInfo.retryable_failure(code, f"failed to run the job: {resource.message}", info)
    if phase != _P.UNDEFINED:
        raise PluginError(ErrorCode.SYSTEM_ERROR, f"unknown execution phase [{phase}].")

    state = resource.state
    if state == _S.PENDING:
        return PhaseInfo.initializing(0, resource.message, info)
    if state == _S.RUNNING:
        return PhaseInfo.running(0, info)
    if state == _S.PERMANENT_FAILURE:
        return PhaseInfo.failure(
            ErrorCode.TASK_FAILED_WITH_ERROR, f"failed to run the job.\n{resource.message}", info
        )
    if state == _S.RETRYABLE_FAILURE:
        # The proto default: a connector that sets neither phase nor state lands here.
        return PhaseInfo.retryable_failure(
            ErrorCode.TASK_FAILED_WITH_ERROR, f"failed to run the job.\n{resource.message}", info
        )
    if state == _S.SUCCEEDED:
        return PhaseInfo.success(info)
    raise PluginError(ErrorCode.SYSTEM_ERROR, f"unknown execution state [{state}].")


def _sync_result_is_terminal(resource: ResourceWrapper) -> bool:
    if resource.phase != _P.UNDEFINED:
        return resource.phase in _TERMINAL_PHASES
    return resource.state in (_S.SUCCEEDED, _S.PERMANENT_FAILURE, _S.RETRYABLE_FAILURE)


# -- the pod-spec hook --------------------------------------------------------------------------------------

PodSpecBuilder = Callable[[TaskExecutionContext, tasks_pb2.TaskTemplate], struct_pb2.Struct]
"""Builds the pod spec sent to a connector for a ``k8s_pod`` task (Flyte: flytek8s.ToK8sPodSpec)."""


def passthrough_pod_spec(tctx: TaskExecutionContext, template: tasks_pb2.TaskTemplate) -> struct_pb2.Struct:
    """Stand-in for the full pod pipeline: the template's pod spec with every container's command and args
    rendered. Platform defaults, resources and pod templates are not applied; pass the pod plugin's builder
    as ``pod_spec_builder`` for that.
    """
    spec = json_format.MessageToDict(template.k8s_pod.pod_spec)
    params = _template_parameters(tctx)
    for key in ("initContainers", "containers"):
        for container in spec.get(key) or ():
            for field_name in ("command", "args"):
                if container.get(field_name):
                    container[field_name] = render_command([str(a) for a in container[field_name]], params)
    out = struct_pb2.Struct()
    out.update(spec)
    return out


def _template_parameters(tctx: TaskExecutionContext) -> TemplateParameters:
    return TemplateParameters(
        metadata=tctx.metadata,
        inputs=tctx.input_reader,
        output_paths=tctx.output_writer,
        task=tctx.task_reader,
    )


def task_execution_metadata(metadata: TaskExecutionMetadata) -> agent_pb2.TaskExecutionMetadata:
    """The fields Flyte fills (max attempts, interruptible and overrides are not sent)."""
    out = agent_pb2.TaskExecutionMetadata(
        task_execution_id=metadata.task_execution_id.id,
        namespace=metadata.namespace,
        labels=dict(metadata.labels),
        annotations=dict(metadata.annotations),
        k8s_service_account=metadata.k8s_service_account,
        environment_variables=dict(metadata.environment_variables),
    )
    if metadata.security_context.HasField("run_as"):
        out.identity.CopyFrom(metadata.security_context.run_as)
    return out


# -- the plugin ---------------------------------------------------------------------------------------------


class ConnectorPlugin:
    """An AsyncPlugin over Flyte connectors. Call :meth:`start` before use and :meth:`stop` at shutdown
    (or use it as an async context manager)."""

    def __init__(
        self,
        config: ConnectorConfig,
        *,
        client: ConnectorClient | None = None,
        clock: Clock | None = None,
        pod_spec_builder: PodSpecBuilder = passthrough_pod_spec,
        secret_manager: SecretManager | None = None,
    ) -> None:
        self._config = config
        self._client: ConnectorClient = client if client is not None else GrpcConnectorClient()
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._pod_spec_builder = pod_spec_builder
        self._secrets: SecretManager = secret_manager if secret_manager is not None else EnvSecretManager()
        # Until the first discovery, only the configured routes are known.
        self._registry = build_registry(config, ())
        self._poller: asyncio.Task[None] | None = None
        self._discoveries = 0

    @property
    def id(self) -> str:
        return ID

    @property
    def config(self) -> ConnectorConfig:
        return self._config

    @property
    def registry(self) -> ConnectorRegistry:
        """The registry from the latest discovery."""
        return self._registry

    @property
    def discoveries(self) -> int:
        """How many discoveries have completed (the first one runs in :meth:`start`)."""
        return self._discoveries

    @property
    def task_types(self) -> frozenset[str]:
        return self._registry.task_types

    def handles_task_type(self, task_type: str) -> bool:
        """Whether ``task_type`` is in the live registry (Flyte's resolution falls back to this plugin)."""
        return task_type in self._registry.routes

    # -- lifecycle ------------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Run the first discovery, then keep rediscovering every ``pollInterval`` in the background."""
        if self._poller is not None:
            return
        await self.refresh()
        self._poller = asyncio.create_task(self._poll(), name=f"{ID}-discovery")
        # Let the poller reach its first sleep, so the interval counts from the end of start().
        await asyncio.sleep(0)

    async def stop(self) -> None:
        """Stop rediscovering and close every channel."""
        poller, self._poller = self._poller, None
        if poller is not None:
            poller.cancel()
            await asyncio.wait([poller])
        await self._client.close()

    async def __aenter__(self) -> ConnectorPlugin:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def refresh(self) -> ConnectorRegistry:
        """Run one discovery now and make its registry the live one."""
        self._registry = await discover(self._config, self._client)
        self._discoveries += 1
        return self._registry

    async def _poll(self) -> None:
        interval = self._config.poll_interval.total_seconds()
        while True:
            await self._clock.sleep(interval)
            try:
                await self.refresh()
            except Exception:
                # discover() already skips failing deployments; anything else must not end the loop.
                log.exception("connector discovery failed; keeping the previous registry")

    # -- AsyncPlugin ----------------------------------------------------------------------------------------

    def get_config(self) -> PluginConfig:
        return self._config.web_api

    async def resource_requirements(self, tctx: TaskExecutionContext) -> tuple[str, ResourceConstraintsSpec]:
        return QUOTA_NAMESPACE, self._config.resource_constraints.to_spec()

    def _select(self, category: TaskCategory) -> Connector:
        return self._registry.select(category.name, category.version, self._config.default_connector)

    async def create(
        self, tctx: TaskExecutionContext
    ) -> tuple[dict[str, Any] | None, ResourceWrapper | None]:
        """Start the job. An async connector yields (meta, None); a sync one (None, its terminal resource)."""
        try:
            template = tctx.task_reader.read()
        except Exception as e:
            raise PluginError(
                ErrorCode.METADATA_ACCESS_FAILED, f"failed to read task template with error: {e}"
            ) from e
        try:
            inputs = tctx.input_reader.get()
        except Exception as e:
            raise PluginError(
                ErrorCode.METADATA_ACCESS_FAILED, f"failed to read inputs with error: {e}"
            ) from e
        template = self._prepared_template(tctx, template)

        output_prefix = tctx.output_writer.output_prefix
        category = TaskCategory(template.type, template.task_type_version)
        metadata = task_execution_metadata(tctx.metadata)
        connector = self._select(category)
        if connector.is_sync:
            return None, await self._execute_sync(connector, template, inputs, output_prefix, metadata)

        request = agent_pb2.CreateTaskRequest(
            template=template, output_prefix=output_prefix, task_execution_metadata=metadata
        )
        if inputs is not None:
            request.inputs.CopyFrom(inputs)
        deployment = connector.deployment
        connection = connection_of(template) if deployment.protocol == FLYTEIDL2 else None
        try:
            response = await self._client.create_task(
                deployment,
                request,
                deployment.timeout_for("CreateTask"),
                connection=await self._resolved(connection),
            )
        except ConnectorRpcError as e:
            raise self._failure("failed to create task from connector with", deployment, e) from e
        meta = ConnectorResourceMeta(output_prefix, response.resource_meta, category, connection)
        return meta.to_json(), None

    async def _resolved(self, connection: Connection | None) -> Connection | None:
        return None if connection is None else await resolve_connection(connection, self._secrets)

    def deployment_name(self, deployment: Deployment) -> str:
        """The deployment's id in ``connectors`` (``defaultConnector`` for that one)."""
        if deployment is self._config.default_connector:
            return "defaultConnector"
        for name, candidate in self._config.connectors.items():
            if candidate is deployment:
                return name
        return deployment.endpoint

    def _failure(self, prefix: str, deployment: Deployment, error: ConnectorRpcError) -> PluginError:
        """Flyte's message for a failed call; for the answers an unreachable endpoint or a wrong ``protocol``
        gives, followed by which deployment and protocol the call went to and what that means.

        Deviation: Flyte's message names neither (a Flyte release speaks one protocol, and its logs name the
        endpoint); here one config holds deployments of both, so the message says which one failed how."""
        where = (
            f"connector deployment [{self.deployment_name(deployment)}] at [{deployment.endpoint}], "
            f"protocol {deployment.protocol}"
        )
        if error.status == "Unimplemented":
            other = "flyteidl" if deployment.protocol == FLYTEIDL2 else FLYTEIDL2
            flyte = "1" if other == "flyteidl" else "2"
            hint = (
                f" ({where}: it does not serve this call of {deployment.protocol}'s connector services; "
                f"a Flyte {flyte} connector wants protocol: {other})"
            )
        elif error.status in ("Unavailable", "DeadlineExceeded") and deployment.endpoint:
            hint = f" ({where}: unreachable; is the connector running there, and is `insecure` right?)"
        else:
            hint = ""
        return PluginError(error.code, f"{prefix} {error}{hint}")

    def _prepared_template(
        self, tctx: TaskExecutionContext, original: tasks_pb2.TaskTemplate
    ) -> tasks_pb2.TaskTemplate:
        # A copy, so the reader's template is never changed (Flyte mutates and restores it).
        template = tasks_pb2.TaskTemplate()
        template.CopyFrom(original)
        if template.HasField("container"):
            try:
                args = render_command(list(template.container.args), _template_parameters(tctx))
            except Exception as e:
                raise PluginError(
                    ErrorCode.BAD_TASK_SPECIFICATION, f"failed to render args with error: {e}"
                ) from e
            del template.container.args[:]
            template.container.args.extend(args)
        elif template.HasField("k8s_pod"):
            try:
                pod_spec = self._pod_spec_builder(tctx, template)
            except Exception as e:
                raise PluginError(
                    ErrorCode.BAD_TASK_SPECIFICATION, f"failed to build pod spec with error: {e}"
                ) from e
            template.k8s_pod.pod_spec.CopyFrom(pod_spec)
        return template

    async def _execute_sync(
        self,
        connector: Connector,
        template: tasks_pb2.TaskTemplate,
        inputs: literals_pb2.LiteralMap | None,
        output_prefix: str,
        metadata: agent_pb2.TaskExecutionMetadata,
    ) -> ResourceWrapper:
        header = agent_pb2.CreateRequestHeader(
            template=template, output_prefix=output_prefix, task_execution_metadata=metadata
        )
        inputs_part = agent_pb2.ExecuteTaskSyncRequest(inputs=inputs or literals_pb2.LiteralMap())
        deployment = connector.deployment
        try:
            response = await self._client.execute_task_sync(
                deployment, header, inputs_part, deployment.timeout_for("ExecuteTaskSync")
            )
        except ConnectorRpcError as e:
            prefix = {
                "open": "failed to execute task from connector with",
                "send": "failed to send headerProto with error:",
                "receive": "failed to receive stream from server",
            }[e.stage]
            raise self._failure(prefix, deployment, e) from e
        if not response.HasField("header"):
            raise PluginError(
                ErrorCode.DOWNSTREAM_SYSTEM_ERROR, "expected header in the response, but got none"
            )
        resource = ResourceWrapper.from_proto(response.header.resource)
        if not _sync_result_is_terminal(resource):
            # Deviation: Flyte caches a nil meta for a non-terminal sync result and its next Get panics.
            raise PluginError(
                ErrorCode.DOWNSTREAM_SYSTEM_ERROR,
                f"synchronous connector for task type [{template.type}] returned the non-terminal phase "
                f"[{execution_pb2.TaskExecution.Phase.Name(resource.phase)}]",
            )
        return resource

    async def get(self, ctx: GetContext) -> ResourceWrapper:
        meta = ConnectorResourceMeta.from_json(ctx.resource_meta)
        request = agent_pb2.GetTaskRequest(
            task_type=meta.task_category.name,
            task_category=meta.task_category.to_proto(),
            resource_meta=meta.connector_resource_meta,
            output_prefix=meta.output_prefix,
        )
        deployment = self._select(meta.task_category).deployment
        try:
            response = await self._client.get_task(
                deployment,
                request,
                deployment.timeout_for("GetTask"),
                connection=await self._resolved(meta.connection),
            )
        except ConnectorRpcError as e:
            raise self._failure("failed to get task from connector with", deployment, e) from e
        # Deviation: agent_error is kept on this path too (Flyte drops it, so async failures always got
        # TaskFailedWithError instead of the connector's code).
        return ResourceWrapper.from_proto(response.resource)

    async def delete(self, ctx: DeleteContext) -> None:
        if ctx.resource_meta is None:
            return  # nothing was created (a sync task, or Create never succeeded)
        meta = ConnectorResourceMeta.from_json(ctx.resource_meta)
        request = agent_pb2.DeleteTaskRequest(
            task_type=meta.task_category.name,
            task_category=meta.task_category.to_proto(),
            resource_meta=meta.connector_resource_meta,
        )
        deployment = self._select(meta.task_category).deployment
        try:
            await self._client.delete_task(
                deployment,
                request,
                deployment.timeout_for("DeleteTask"),
                connection=await self._resolved(meta.connection),
            )
        except ConnectorRpcError as e:
            raise self._failure("failed to delete task from connector with", deployment, e) from e

    async def status(self, ctx: StatusContext) -> PhaseInfo:
        resource = ctx.resource
        if not isinstance(resource, ResourceWrapper):
            raise PluginError(
                ErrorCode.SYSTEM_ERROR, f"expected a connector ResourceWrapper, got {type(resource).__name__}"
            )
        info = TaskInfo(
            logs=resource.log_links, custom_info=resource.custom_info, occurred_at=self._clock.now()
        )
        phase_info = resource_phase_info(resource, info)
        if phase_info.phase is Phase.SUCCESS:
            try:
                _write_outputs(ctx.tctx, resource.outputs)
            except Exception as e:
                raise PluginError(ErrorCode.RUNTIME_FAILURE, f"failed to write output with err {e}") from e
        return phase_info

    # -- a job's logs and metrics (not part of Flyte's plugin: Flyte's UI asks the connector) -----------------

    async def task_log_lines(self, resource_meta: Any) -> AsyncIterator[str]:
        """The log lines the connector gives for the job ``resource_meta`` names (what an execution keeps in
        its plugin state), page after page: each ``GetTaskLogs`` call's stream of bodies, in order, then the
        next page for the token its last header gave, until a header gives no token (or one already asked
        for). A body's structured lines are given by their message; its plain ``results`` when it has none."""
        meta = ConnectorResourceMeta.from_json(resource_meta)
        deployment = self._select(meta.task_category).deployment
        token = ""
        asked: set[str] = set()
        while True:
            asked.add(token)
            request = agent_pb2.GetTaskLogsRequest(
                task_type=meta.task_category.name,
                task_category=meta.task_category.to_proto(),
                resource_meta=meta.connector_resource_meta,
                token=token,
            )
            try:
                # One call's whole stream first: a caller that stops reading leaves no call open.
                page = [
                    message
                    async for message in self._client.get_task_logs(
                        deployment, request, deployment.timeout_for("GetTaskLogs")
                    )
                ]
            except ConnectorRpcError as e:
                raise self._failure("failed to get task logs from connector with", deployment, e) from e
            next_token = ""
            for message in page:
                if message.HasField("header"):
                    next_token = message.header.token
                elif message.HasField("body"):
                    body = message.body
                    for line in body.structured_lines or body.results:
                        yield line if isinstance(line, str) else line.message
            if not next_token or next_token in asked:
                return
            token = next_token

    async def task_metrics(
        self,
        resource_meta: Any,
        queries: Sequence[str],
        *,
        start: datetime | None = None,
        end: datetime | None = None,
        step: timedelta | None = None,
    ) -> agent_pb2.GetTaskMetricsResponse:
        """The connector's ``GetTaskMetrics`` answer for the job ``resource_meta`` names."""
        meta = ConnectorResourceMeta.from_json(resource_meta)
        deployment = self._select(meta.task_category).deployment
        request = agent_pb2.GetTaskMetricsRequest(
            task_type=meta.task_category.name,
            task_category=meta.task_category.to_proto(),
            resource_meta=meta.connector_resource_meta,
            queries=list(queries),
        )
        if start is not None:
            request.start_time.FromDatetime(start)
        if end is not None:
            request.end_time.FromDatetime(end)
        if step is not None:
            request.step.FromTimedelta(step)
        try:
            return await self._client.get_task_metrics(
                deployment, request, deployment.timeout_for("GetTaskMetrics")
            )
        except ConnectorRpcError as e:
            raise self._failure("failed to get task metrics from connector with", deployment, e) from e


def _write_outputs(tctx: TaskExecutionContext, outputs: literals_pb2.LiteralMap | None) -> None:
    template = tctx.task_reader.read()
    if not template.interface.outputs.variables:
        return  # the task declares no outputs
    # No outputs in the resource: the connector wrote outputs.pb under the output prefix itself.
    tctx.output_writer.put(LiteralMapOutputReader(outputs) if outputs is not None else None)
