"""The task node's handler: one round of a task through its plugin, for a single task and for every element
of a map task alike.

Follows flytepropeller/pkg/controller/nodes/task/handler.go (``Handle``: call the plugin, keep its state, cap its
phase versions, and on success validate what the task produced — the error document first, then the outputs;
``Abort``, ``Finalize``) and pluginmachinery/ioutils (the error document read by the plugin's error
aggregation strategy: ``error.pb``, or the earliest of ``error*.pb``).

What a success produced, in order: an error document (flytekit catches the task's exception, writes it and
exits 0, so a pod that succeeded may be a task that failed); a ``futures.pb`` (a ``@dynamic`` task's
sub-workflow, which a workflow's task node goes on to run, see _dynamic.py); the outputs, every declared one
present. In-memory outputs (web-API plugins, echo) are written to the data store, so a task's outputs are
always where Flyte keeps them.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from flyteidl.core import dynamic_job_pb2, literals_pb2, tasks_pb2
from google.protobuf.message import DecodeError

from taskplug.core import (
    ErrorCode,
    ErrorKind,
    ExecutionError,
    Phase,
    PhaseInfo,
    Plugin,
    StaticTaskExecutionContext,
)
from taskplug.executor._datastore import DataStore
from taskplug.executor.nodes._deadlines import EXECUTION_DEADLINE_CODE
from taskplug.executor.nodes._step import HandlerResult, NodeState

__all__ = [
    "FUTURES_FILE",
    "TaskHandler",
    "dynamic_workflow_error",
    "needs_template_file",
    "outputs_declared",
]

log = logging.getLogger(__name__)

FUTURES_FILE = "futures.pb"
"""What a flytekit ``@dynamic`` task writes in its output prefix instead of ``outputs.pb``: the sub-workflow
(a ``flyteidl.core.DynamicJobSpec``) propeller's dynamic node handler would run next."""


def outputs_declared(template: tasks_pb2.TaskTemplate) -> list[str]:
    """The outputs a task's interface declares."""
    return list(template.interface.outputs.variables) if template.HasField("interface") else []


def needs_template_file(template: tasks_pb2.TaskTemplate) -> bool:
    """Only a task whose command line asks for ``{{.TaskTemplatePath}}`` needs its template in the store."""
    text = str(template.container) + str(template.k8s_pod) if template.WhichOneof("target") else ""
    return "tasktemplatepath" in text.lower()


def dynamic_workflow_error(data: bytes, path: str) -> ExecutionError:
    """The permanent failure of a task that produced a dynamic workflow, saying what it produced.

    Deviation: flyteadmin launches a single task as a one-node workflow, so propeller runs the sub-workflow
    of a ``@dynamic`` task launched alone (nodes/dynamic/handler.go). taskplug runs a task execution (a spec
    with a task template) as one task node, outside the workflow machinery, so it ends here, saying how to
    run it as a workflow's node, rather than with a misleading OutputsNotFound. A task node of a workflow
    (and ``taskplug run module.py DYNAMIC_TASK``, which makes it one) runs the sub-workflow.
    """
    spec = dynamic_job_pb2.DynamicJobSpec()
    try:
        spec.ParseFromString(data)
    except DecodeError:
        produced = "a file that is not a DynamicJobSpec"
    else:
        tasks = sorted({t.id.name for t in spec.tasks if t.id.name})
        produced = (
            f"a dynamic workflow of {len(spec.nodes)} node(s)"
            + (f" running task(s) {', '.join(tasks)}" if tasks else "")
            + (f" and {len(spec.subworkflows)} sub-workflow(s)" if spec.subworkflows else "")
        )
    return ExecutionError(
        "DynamicWorkflowNotSupported",
        f"the task is a dynamic workflow (flytekit @dynamic): it wrote {produced} to {path} instead of "
        "outputs, and a task execution runs one task; run it as a node of a workflow (`taskplug run "
        "module.py TASK` makes a @dynamic task one, as does a spec whose template is a workflow)",
        ErrorKind.SYSTEM,
    )


class TaskHandler:
    """One round of one task node: its plugin, this round's context, the data store, and ``prepare`` (what
    must be in the store before the plugin is called: inputs, the template file)."""

    def __init__(
        self,
        *,
        plugin: Plugin,
        tctx: StaticTaskExecutionContext,
        data: DataStore,
        max_plugin_phase_versions: int,
        prepare: Callable[[NodeState], Awaitable[None]] | None = None,
        allow_dynamic: bool = False,
    ) -> None:
        self.plugin = plugin
        self.tctx = tctx
        self.data = data
        self.max_plugin_phase_versions = max_plugin_phase_versions
        self.prepare = prepare
        # A workflow's task node runs through propeller's dynamic handler: a futures.pb is the workflow it runs
        # next, not a failure (the task's own outputs are then not checked: it has none yet).
        self.allow_dynamic = allow_dynamic
        # Whether a success was checked, and the futures.pb it found (a @dynamic task's; None: none).
        self.futures_known = False
        self.futures: bytes | None = None

    async def handle(self, node: NodeState) -> HandlerResult:
        if self.prepare is not None:
            # Part of the round: a data store that refuses the write errors the round, as an API that cannot
            # be reached does, within the same bound.
            await self.prepare(node)
        transition = await self.plugin.handle(self.tctx)
        info = transition.info
        changed, version, state = self.tctx.plugin_state.written
        if changed:
            node.state_version, node.plugin_state = version, dict(state) if state is not None else None
        if info.phase == Phase(node.task_phase) and info.version > self.max_plugin_phase_versions:
            info = PhaseInfo.system_failure(
                ErrorCode.TOO_MANY_PLUGIN_PHASE_VERSIONS,
                f"plugin phase version {info.version} exceeds tasks.max-plugin-phase-versions "
                f"({self.max_plugin_phase_versions})",
            )
        outputs: literals_pb2.LiteralMap | None = None
        if info.phase is Phase.SUCCESS:
            info, outputs = await self._check_success(info)
        elif info.phase.is_failure:
            info = await self._with_error_document(info)
        return HandlerResult(info, outputs, changed)

    async def abort(self) -> None:
        await self.plugin.abort(self.tctx)

    async def finalize(self) -> None:
        await self.plugin.finalize(self.tctx)

    # -- what the task produced -----------------------------------------------------------------------------
    async def _read_error(self) -> tuple[ExecutionError, bool] | None:
        """The task's error document, as the plugin's error aggregation strategy reads it: ``error.pb``, or
        the earliest of ``error*.pb`` (propeller hands the plugin's strategy to the output reader)."""
        prefix = self.tctx.output_writer.output_prefix
        if self.plugin.get_properties().earliest_error_aggregation:
            return await self.data.read_earliest_error_recoverable(prefix)
        return await self.data.read_error_recoverable(f"{prefix}/error.pb")

    async def _check_success(self, info: PhaseInfo) -> tuple[PhaseInfo, literals_pb2.LiteralMap | None]:
        found = await self._read_error()
        if found is not None:
            error, recoverable = found
            phase = Phase.RETRYABLE_FAILURE if recoverable else Phase.PERMANENT_FAILURE
            return PhaseInfo(phase, 0, info.info, error), None
        prefix = self.tctx.output_writer.output_prefix
        futures_path = f"{prefix}/{FUTURES_FILE}"
        futures = await self.data.read(futures_path)
        self.futures_known, self.futures = True, futures
        if futures is not None and self.allow_dynamic:
            return info, literals_pb2.LiteralMap()
        if futures is not None:
            error = dynamic_workflow_error(futures, futures_path)
            return PhaseInfo(Phase.PERMANENT_FAILURE, 0, info.info, error), None
        outputs_path = f"{prefix}/outputs.pb"
        writer = self.tctx.output_writer
        try:
            if writer.reader is not None:
                outputs = await writer.reader.read()
                if outputs is not None:
                    await self.data.write(outputs_path, outputs.SerializeToString())
            else:
                outputs = await self.data.read_outputs(outputs_path)
        except ValueError as e:
            return PhaseInfo.failure("OutputsNotFound", str(e), info.info), None
        declared = outputs_declared(self.tctx.task_reader.read())
        if declared:
            if outputs is None:
                return PhaseInfo.failure(
                    "OutputsNotFound",
                    f"Outputs not generated by task execution (expected {outputs_path})",
                    info.info,
                ), None
            missing = sorted(set(declared) - set(outputs.literals))
            if missing:
                return PhaseInfo.failure(
                    "OutputsNotFound", f"the task wrote {outputs_path} without output(s) {missing}", info.info
                ), None
        return info, outputs if outputs is not None else literals_pb2.LiteralMap()

    async def _with_error_document(self, info: PhaseInfo) -> PhaseInfo:
        """A user failure with the task's own error document, which says more than the pod's exit code."""
        err = info.err
        if err is None or err.kind is not ErrorKind.USER or err.code == EXECUTION_DEADLINE_CODE:
            return info
        try:
            found = await self._read_error()
        except Exception as e:  # the failure is decided; the document would only say more about it
            log.warning(
                "cannot read the error document under %s: %s", self.tctx.output_writer.output_prefix, e
            )
            return info
        if found is None:
            return info
        document = found[0]
        better = ExecutionError(document.code or err.code, document.message, document.kind)
        return PhaseInfo(info.phase, info.version, info.info, better, info.reason, info.cleanup_on_failure)
