"""The k8s array plugin (task type ``container_array``): flytekit's legacy map task, one pod per sub-task.

Follows flyteplugins/go/tasks/plugins/array/k8s/{executor,management,subtask}.go and
array/{catalog,outputs}.go (Flyte 1, ``master``). flytekit 1.16 produces such tasks only from an explicit
``flytekit.core.legacy_map_task.map_task`` (``flytekit.map_task`` is an ArrayNode, run by the executor).

A core plugin: it creates and follows the sub-task pods itself, through the setup context's Kubernetes
client, one step of Flyte's array state machine per round (``taskplug.plugins.array._state``):
Start (size the array from the input lists, check ``maxArrayJobSize``) → PreLaunch → Launch →
CheckingSubTaskExecutions (launch what may run, respecting ``parallelism`` and the allocation-token quota;
follow what runs; retry a failed sub-task as ``{parent}-{i}-{retry}`` while attempts remain; decide with the
minimum successes) → WriteToDiscovery → AssembleFinalOutput (one list per output, in index order, ``none``
for a sub-task without outputs) → Success; or AbortSubTasks → WriteToDiscoveryThenFail → AssembleFinalError
(the sub-tasks' errors grouped by message) → PermanentFailure. Everything is in the plugin state, written
every round; a sub-task's pod name is fixed by its index and attempt and an existing pod counts as created,
so a resumed executor never creates a sub-task twice.

How the pods are followed: Flyte GETs each running sub-task's pod through controller-runtime's client,
whose reads are served by propeller's informer cache (no API call), and is woken by the pod plugin's
informer (the pods carry the workflow's owner reference). Here each round GETs the pods of the running
sub-tasks from the API, concurrently (one call each), and the plugin's own pod watch wakes the map task
when one of them changes (``_watch.PodWakeups``).

Deviation: this plugin does not reach the data catalog (a map task run as an ArrayNode, what flytekit's
``map_task`` serializes, is cached per element by the node executor: ``docs/cache.md``). A discoverable
``container_array`` task given to this plugin runs every sub-task, as Flyte does when its cache lookup fails
("Skipping cache check due to err [...]"), and writes nothing to the catalog.

Deviation: assembling outputs and errors runs in the round (bounded by ``workers`` concurrent reads), not
in Flyte's background work queues; a failed assembly is tried again in later rounds, ``maxRetries`` times,
before the map task fails retryably, as Flyte's queue retries a work item.

Deviation: a sub-task pod that cannot be built (a bad pod template, no primary container) fails that
sub-task permanently (``FailedToBuildResource`` / ``POD_TEMPLATE_FAILED``), as the plugin manager fails any
other task; Flyte panics on a build error (the result is type-asserted before the error is checked) and
silently relaunches every round on a missing primary container.

Deviation: a failed map task whose interface declares no outputs still reports its sub-tasks' errors;
Flyte skips the error assembly then and reports ``ARRAY_JOB_GENERIC_FAILURE`` "Task has no outputs".

Deviation: abort and finalize also reach a sub-task pod created in a round whose state was never saved
(the round stopped with an error after launching it): its state says Undefined, which Flyte skips, leaving
the pod running. And finalize releases the allocation tokens of sub-tasks that never finished (Flyte
releases a token only when its sub-task finishes, so an aborted map task keeps its tokens for ever).

Not supported: ``remoteClusterConfig`` (sub-task pods on another cluster) fails when the plugin loads.
Flyte's raw ``ArraySubtasksAborted`` event on abort is not sent: the executor records the abort itself.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any, Final

from flyteidl.core import literals_pb2, tasks_pb2

from taskplug.core import (
    POD,
    AllocationStatus,
    Clock,
    ErrorCode,
    ErrorKind,
    ExecutionError,
    ExternalResource,
    KubeClient,
    Phase,
    PhaseInfo,
    PluginError,
    PluginProperties,
    ResourceConstraintsSpec,
    SystemClock,
    TaskExecutionContext,
    Transition,
)
from taskplug.k8s import (
    EXECUTION_ID_LABEL,
    PlatformPodConfig,
    is_already_exists,
    is_not_found,
    owner_key,
)
from taskplug.plugins.array._collector import ErrorMessageCollector
from taskplug.plugins.array._config import K8sArrayConfig
from taskplug.plugins.array._id import PLUGIN_ID
from taskplug.plugins.array._state import (
    PLUGIN_STATE_VERSION,
    ArrayPhase,
    ArrayState,
    initial_details,
    summary_to_phase,
    to_array_job,
    to_phase_info,
)
from taskplug.plugins.array._storage import ArrayDataStore, assemble_outputs, subtask_path
from taskplug.plugins.array._subtask import (
    ARRAY_FINALIZER,
    CMD_TEMPLATE_FAILED,
    POD_TEMPLATE_FAILED,
    SubTask,
    build_subtask_pod,
    classify_create_error,
    new_subtask,
    not_found_phase,
    subtask_name,
    subtask_namespace,
    subtask_phase,
    subtask_template,
)
from taskplug.plugins.array._watch import PodWakeups
from taskplug.plugins.pod import PodPlugin

__all__ = ["ArrayPlugin"]

log = logging.getLogger(__name__)

KubeObject = dict[str, Any]

NODE_ID_LABEL: Final = "node-id"
# Sub-task pods read at once in a round.
_GET_CONCURRENCY: Final = 16
# Sub-task phases that (re)launch a pod this round.
_LAUNCHING: Final = frozenset({Phase.UNDEFINED, Phase.WAITING_FOR_RESOURCES, Phase.RETRYABLE_FAILURE})
_TERMINAL_ARRAY_PHASES: Final = frozenset(
    {ArrayPhase.SUCCESS, ArrayPhase.PERMANENT_FAILURE, ArrayPhase.RETRYABLE_FAILURE}
)


class ArrayPlugin:
    """Runs a ``container_array`` task as one pod per element of its input lists (see the module)."""

    def __init__(
        self,
        config: K8sArrayConfig,
        *,
        platform: PlatformPodConfig,
        kube_client: KubeClient,
        enqueue_owner: Callable[[str, str], None],
        clock: Clock | None = None,
        watch_pods: bool = True,
    ) -> None:
        self.config = config
        self.platform = platform
        self._client = kube_client
        self._enqueue_owner = enqueue_owner
        self._clock: Clock = clock or SystemClock()
        self._pod_plugin = PodPlugin(platform)
        self._store = ArrayDataStore()
        self._wakeups = PodWakeups(kube_client, enqueue_owner, clock=self._clock) if watch_pods else None

    @property
    def id(self) -> str:
        return PLUGIN_ID

    def get_properties(self) -> PluginProperties:
        return PluginProperties(disable_node_level_caching=True)

    async def aclose(self) -> None:
        """Stop the pod watch (the engine calls this when it unloads the plugin)."""
        if self._wakeups is not None:
            await self._wakeups.aclose()

    # -- core.Plugin ------------------------------------------------------------------------------------
    async def handle(self, tctx: TaskExecutionContext) -> Transition:
        state = _read_state(tctx)
        template = tctx.task_reader.read()
        self._route(tctx, True)
        phase, version = state.phase, state.phase_version
        externals: list[ExternalResource] = []
        if phase is ArrayPhase.START:
            nxt, externals = self._determine_discoverability(tctx, state, template)
        elif phase is ArrayPhase.PRE_LAUNCH:
            nxt = state.with_phase(ArrayPhase.LAUNCH, version + 1, "Nothing to do in PreLaunch phase.")
        elif phase is ArrayPhase.LAUNCH:
            nxt = state.with_phase(
                ArrayPhase.CHECKING_SUB_TASK_EXECUTIONS, version + 1, "Nothing to do in Launch phase."
            )
        elif phase in (ArrayPhase.WAITING_FOR_RESOURCES, ArrayPhase.CHECKING_SUB_TASK_EXECUTIONS):
            nxt, externals = await self._launch_and_check(tctx, state, template)
        elif phase is ArrayPhase.ABORT_SUB_TASKS:
            externals = await self._terminate(tctx, state, template, self._abort_subtask)
            nxt = state.with_phase(ArrayPhase.WRITE_TO_DISCOVERY_THEN_FAIL, version + 1)
        elif phase is ArrayPhase.ASSEMBLE_FINAL_OUTPUT:
            nxt = await self._assemble_outputs(tctx, state, template, version + 1)
        elif phase is ArrayPhase.WRITE_TO_DISCOVERY_THEN_FAIL:
            nxt = _write_to_discovery(state, template, ArrayPhase.ASSEMBLE_FINAL_ERROR, version + 1)
        elif phase is ArrayPhase.WRITE_TO_DISCOVERY:
            nxt = _write_to_discovery(state, template, ArrayPhase.ASSEMBLE_FINAL_OUTPUT, version + 1)
        elif phase is ArrayPhase.ASSEMBLE_FINAL_ERROR:
            nxt = await self._assemble_errors(tctx, state, version + 1)
        else:
            nxt = state
        tctx.plugin_state_writer.put(PLUGIN_STATE_VERSION, nxt.to_json())
        if (nxt.phase, nxt.phase_version) != (phase, version) and nxt.phase not in _TERMINAL_ARRAY_PHASES:
            # Something moved: the next step is due now, not at the next resync (propeller re-enqueues a
            # workflow whose status changed).
            self._wake(tctx)
        return Transition.to(to_phase_info(nxt, now=self._clock.now(), external_resources=externals))

    async def abort(self, tctx: TaskExecutionContext) -> None:
        state = _read_state(tctx)
        await self._terminate(tctx, state, tctx.task_reader.read(), self._abort_subtask)

    async def finalize(self, tctx: TaskExecutionContext) -> None:
        state = _read_state(tctx)
        try:
            await self._terminate(tctx, state, tctx.task_reader.read(), self._finalize_subtask)
            await self._release_unfinished(tctx, state)
        finally:
            self._route(tctx, False)

    # -- Start ----------------------------------------------------------------------------------------
    def _determine_discoverability(
        self, tctx: TaskExecutionContext, state: ArrayState, template: tasks_pb2.TaskTemplate
    ) -> tuple[ArrayState, list[ExternalResource]]:
        """Flyte's ``DetermineDiscoverability`` (without a catalog): the array's size and minimum
        successes, the size limit, then PreLaunch with every sub-task to run."""
        job = to_array_job(template.custom, template.HasField("custom"), template.task_type_version)
        if template.task_type_version == 0:
            size, min_success = job.size, job.min_successes or 0
        else:
            inputs = tctx.input_reader.get()
            size = -1
            for literal in inputs.literals.values() if inputs is not None else ():
                if literal.HasField("collection"):
                    length = len(literal.collection.literals)
                    if size not in (-1, length):
                        return state.with_phase(
                            ArrayPhase.PERMANENT_FAILURE, 0, "all maptask input lists must be the same length"
                        ), []
                    size = length
            if size < 0:
                raise PluginError(
                    ErrorCode.BAD_TASK_SPECIFICATION, "Unable to determine array size from inputs"
                )
            min_success = job.min_successes_for(size)
        state = replace(state, original_array_size=size, min_success=min_success)
        if size > self.config.max_array_job_size:
            reason = (
                f"array size > max allowed. requested [{size}]. allowed [{self.config.max_array_job_size}]"
            )
            return state.with_phase(ArrayPhase.PERMANENT_FAILURE, 0, reason), []
        reason = (
            "Skipping cache check due to err [taskplug has no data catalog]"
            if template.metadata.discoverable
            else "Task is not discoverable."
        )
        state = replace(state, array_size=size).with_phase(ArrayPhase.PRE_LAUNCH, 0, reason)
        parent = tctx.metadata.task_execution_id.generated_name
        # Flyte's InitializeExternalResources: every sub-task, not started yet.
        externals = [ExternalResource(subtask_name(parent, i, 0), index=i) for i in range(size)]
        return state, externals

    # -- CheckingSubTaskExecutions ---------------------------------------------------------------------
    async def _launch_and_check(
        self, tctx: TaskExecutionContext, state: ArrayState, template: tasks_pb2.TaskTemplate
    ) -> tuple[ArrayState, list[ExternalResource]]:
        """Flyte's ``LaunchAndCheckSubTasksState``: one pass over the sub-tasks in index order."""
        size = state.array_size
        details = state.details or initial_details(size)
        retries = list(state.retry_attempts or (0,) * size)
        system_failures = list(state.system_failures or (0,) * size)
        job = to_array_job(template.custom, template.HasField("custom"), template.task_type_version)
        sub_template = subtask_template(template)
        max_attempts = tctx.metadata.max_attempts
        prefix = tctx.output_writer.output_prefix

        def make(index: int, retry: int) -> SubTask:
            return new_subtask(
                tctx,
                template,
                sub_template,
                execution_index=index,
                original_index=index,
                retry_attempt=retry,
                system_failures=system_failures[index],
                config=self.config,
            )

        # The pods of the sub-tasks that run, read at once before the pass.
        running = {
            i: make(i, retries[i]) for i, p in enumerate(details) if p not in _LAUNCHING and not p.is_terminal
        }
        observed = await self._get_pods(running)

        new_details = list(initial_details(size))
        externals: list[ExternalResource] = []
        parallelism = 0
        for i, existing in enumerate(details):
            retry = retries[i]
            if existing is Phase.RETRYABLE_FAILURE:
                retry = retries[i] = retry + 1
            elif existing.is_terminal:
                new_details[i] = existing
                continue
            if existing in _LAUNCHING:
                sub = make(i, retry)
                info = await self._launch(tctx, sub)
            else:
                sub = running[i]
                info = self._observed_phase(sub, observed[i])
            if info.err is not None:
                await self._ensure_error_document(prefix, sub.original_index, info)
                if info.err.kind is ErrorKind.SYSTEM:
                    system_failures[i] += 1
            actual = info.phase
            if actual is Phase.SUCCESS:
                actual = await self._store.check_task_output(prefix, sub.original_index) or Phase.SUCCESS
            if actual is Phase.RETRYABLE_FAILURE and retry + 1 >= max_attempts:
                actual = Phase.PERMANENT_FAILURE
            new_details[i] = actual
            if actual.is_terminal:
                await self._release(tctx, sub)
                await self._finalize_subtask(sub)
            logs = info.info.logs if info.info is not None else ()
            externals.append(ExternalResource(sub.name, sub.original_index, retry, actual, logs))
            if not actual.is_terminal or actual is Phase.RETRYABLE_FAILURE:
                parallelism += 1
            if job.parallelism and parallelism >= job.parallelism:
                break

        min_successes = state.min_success - state.original_array_size + size
        outcome = summary_to_phase(min_successes, new_details)
        nxt = replace(
            state,
            details=tuple(new_details),
            retry_attempts=tuple(retries),
            system_failures=tuple(system_failures),
        )
        if outcome in (ArrayPhase.CHECKING_SUB_TASK_EXECUTIONS, ArrayPhase.WAITING_FOR_RESOURCES):
            # Flyte compares an FNV hash of the phases; comparing them is the same test without collisions.
            changed = tuple(new_details) != tuple(details)
            version = state.phase_version + (1 if changed else 0)
            return nxt.with_phase(
                ArrayPhase.CHECKING_SUB_TASK_EXECUTIONS, version, "Task is still running"
            ), externals
        return nxt.with_phase(outcome, state.phase_version + 1), externals

    async def _get_pods(self, subs: Mapping[int, SubTask]) -> dict[int, KubeObject | Exception]:
        import asyncio  # here, not at the top: discovery (every command) imports this module

        limit = asyncio.Semaphore(_GET_CONCURRENCY)

        async def one(sub: SubTask) -> KubeObject | Exception:
            async with limit:
                try:
                    return await self._client.get(POD, sub.namespace, sub.name)
                except Exception as e:
                    return e

        results = await asyncio.gather(*(one(sub) for sub in subs.values()))
        return dict(zip(subs, results, strict=True))

    def _observed_phase(self, sub: SubTask, observed: KubeObject | Exception) -> PhaseInfo:
        if isinstance(observed, Exception):
            if is_not_found(observed):
                return not_found_phase(sub, observed)
            raise PluginError(
                ErrorCode.SYSTEM_ERROR,
                f"failed to get sub-task pod [{sub.namespace}/{sub.name}]",
                cause=observed,
            ) from observed
        return subtask_phase(
            observed, sub, k8s=self.platform.k8s, log_config=self.config.logs.config, now=self._clock.now()
        )

    async def _launch(self, tctx: TaskExecutionContext, sub: SubTask) -> PhaseInfo:
        """Allocate the sub-task's token, then create its pod (``launchSubtask``)."""
        status = await self._allocate(tctx, sub)
        if status is not AllocationStatus.GRANTED:
            return PhaseInfo.waiting_for_resources(0, "Exceeded ResourceManager quota")
        try:
            return await self._create(sub)
        except BaseException:
            # Nothing was created: give the token back before the round fails.
            await self._release(tctx, sub)
            raise

    async def _create(self, sub: SubTask) -> PhaseInfo:
        now = self._clock.now()
        try:
            pod = build_subtask_pod(self._pod_plugin, sub, self.config, self.platform.k8s)
        except PluginError as e:
            if e.code in (POD_TEMPLATE_FAILED, CMD_TEMPLATE_FAILED):
                return PhaseInfo.failure(e.code, e.message)
            return PhaseInfo.failure("FailedToBuildResource", f"could not build resource for task: {e}")
        except Exception as e:
            return PhaseInfo.failure("FailedToBuildResource", f"could not build resource for task: {e}")
        try:
            await self._client.create(POD, pod)
        except Exception as e:
            if not is_already_exists(e):
                return classify_create_error(e)
        return PhaseInfo.queued(now, 0, "task submitted to K8s")

    async def _ensure_error_document(self, prefix: str, index: int, info: PhaseInfo) -> None:
        """A sub-task that failed without writing ``error.pb`` gets one from its phase's error, so the
        error summary finds every failure."""
        assert info.err is not None
        path = subtask_path(prefix, index, "error.pb")
        if not await self._store.exists(path):
            await self._store.write_error(
                path, info.err, recoverable=info.phase is not Phase.PERMANENT_FAILURE
            )

    # -- allocation tokens --------------------------------------------------------------------------------
    async def _allocate(self, tctx: TaskExecutionContext, sub: SubTask) -> AllocationStatus:
        quota = self.config.resource_config
        if not quota.is_set:
            return AllocationStatus.GRANTED
        manager = tctx.resource_manager
        if manager is None:
            raise PluginError(
                ErrorCode.RESOURCE_MANAGER_FAILURE,
                "plugins.k8s-array.resourceConfig is set but the task execution has no resource manager",
            )
        return await manager.allocate_resource(quota.primary_label, sub.name, ResourceConstraintsSpec())

    async def _release(self, tctx: TaskExecutionContext, sub: SubTask) -> None:
        quota = self.config.resource_config
        if quota.is_set and tctx.resource_manager is not None:
            await tctx.resource_manager.release_resource(quota.primary_label, sub.name)

    async def _release_unfinished(self, tctx: TaskExecutionContext, state: ArrayState) -> None:
        if not self.config.resource_config.is_set or tctx.resource_manager is None:
            return
        template = tctx.task_reader.read()
        sub_template = subtask_template(template)
        for i, phase in enumerate(state.details):
            if not phase.is_terminal:
                await self._release(tctx, self._subtask(tctx, template, sub_template, state, i))

    # -- the sub-task pods -------------------------------------------------------------------------------
    async def _abort_subtask(self, sub: SubTask) -> None:
        """Delete the pod (the pod plugin has no abort override); gone already is fine."""
        try:
            await self._client.delete(POD, sub.namespace, sub.name)
        except Exception as e:
            if not is_not_found(e):
                raise

    async def _finalize_subtask(self, sub: SubTask) -> None:
        """Drop the array finalizer (when ``inject-finalizer``) and delete the pod (when
        ``delete-resource-on-finalize``); a pod already gone is fine.

        Flyte updates the pod read a moment before; the finalizer list is patched here instead, so a status
        update by the kubelet in between cannot make the update conflict.
        """
        k8s = self.platform.k8s
        problems: list[Exception] = []
        if k8s.inject_finalizer:
            try:
                pod = await self._client.get(POD, sub.namespace, sub.name)
            except Exception as e:
                if is_not_found(e):
                    return
                raise
            finalizers = list((pod.get("metadata") or {}).get("finalizers") or [])
            if ARRAY_FINALIZER in finalizers:
                kept = [f for f in finalizers if f != ARRAY_FINALIZER]
                try:
                    await self._client.patch(POD, sub.namespace, sub.name, {"metadata": {"finalizers": kept}})
                except Exception as e:
                    if not is_not_found(e):
                        problems.append(e)
        if k8s.delete_resource_on_finalize:
            try:
                await self._client.delete(POD, sub.namespace, sub.name)
            except Exception as e:
                if not is_not_found(e):
                    problems.append(e)
        if problems:
            raise problems[0]

    def _subtask(
        self,
        tctx: TaskExecutionContext,
        template: tasks_pb2.TaskTemplate,
        sub_template: tasks_pb2.TaskTemplate,
        state: ArrayState,
        index: int,
        *,
        next_attempt: bool = False,
    ) -> SubTask:
        retry = state.retry_attempts[index] if index < len(state.retry_attempts) else 0
        return new_subtask(
            tctx,
            template,
            sub_template,
            execution_index=index,
            original_index=index,
            retry_attempt=retry + (1 if next_attempt else 0),
            system_failures=0,
            config=self.config,
        )

    async def _terminate(
        self,
        tctx: TaskExecutionContext,
        state: ArrayState,
        template: tasks_pb2.TaskTemplate,
        terminate: Callable[[SubTask], Awaitable[None]],
    ) -> list[ExternalResource]:
        """Flyte's ``TerminateSubTasks``: ``terminate`` every sub-task started and not finished, and every
        pod of a sub-task whose launch the state does not record (see the module's deviation). Errors are
        collected and raised together, after every sub-task was tried."""
        sub_template = subtask_template(template)
        subs = [
            self._subtask(tctx, template, sub_template, state, i)
            for i, phase in enumerate(state.details)
            if not phase.is_terminal and phase is not Phase.UNDEFINED
        ]
        subs += await self._unrecorded(tctx, state, template, sub_template)
        collector = ErrorMessageCollector()
        externals: list[ExternalResource] = []
        for sub in subs:
            try:
                await terminate(sub)
            except Exception as e:
                collector.collect(sub.execution_index, str(e))
            else:
                externals.append(
                    ExternalResource(sub.name, sub.original_index, sub.retry_attempt, Phase.ABORTED)
                )
        if len(collector):
            raise PluginError(ErrorCode.SYSTEM_ERROR, collector.summary(self.config.max_error_length))
        return externals

    async def _unrecorded(
        self,
        tctx: TaskExecutionContext,
        state: ArrayState,
        template: tasks_pb2.TaskTemplate,
        sub_template: tasks_pb2.TaskTemplate,
    ) -> list[SubTask]:
        """Sub-tasks whose next pod exists though the state does not say it was launched: Undefined ones
        (first attempt) and retryable failures (next attempt). One list call finds them."""
        if state.phase is ArrayPhase.START or state.array_size == 0:
            return []
        parent = tctx.metadata.task_execution_id.generated_name
        details = state.details or initial_details(state.array_size)
        candidates: dict[str, SubTask] = {}
        for i, phase in enumerate(details):
            if phase is Phase.UNDEFINED or phase is Phase.RETRYABLE_FAILURE:
                nxt = phase is Phase.RETRYABLE_FAILURE
                retry = (state.retry_attempts[i] if i < len(state.retry_attempts) else 0) + (1 if nxt else 0)
                candidates[subtask_name(parent, i, retry)] = self._subtask(
                    tctx, template, sub_template, state, i, next_attempt=nxt
                )
        if not candidates:
            return []
        namespace = subtask_namespace(self.config.namespace_template, tctx.metadata.namespace)
        pods, _ = await self._client.list(POD, namespace, label_selector=_selector(tctx.metadata.labels))
        names = {str((p.get("metadata") or {}).get("name") or "") for p in pods}
        return [sub for name, sub in candidates.items() if name in names]

    # -- assembly ------------------------------------------------------------------------------------------
    async def _assemble_outputs(
        self, tctx: TaskExecutionContext, state: ArrayState, template: tasks_pb2.TaskTemplate, version: int
    ) -> ArrayState:
        """Flyte's output assembly: ``{prefix}/outputs.pb`` with one list per output variable."""
        names = list(template.interface.outputs.variables) if template.HasField("interface") else []
        if not names:
            return state.with_phase(ArrayPhase.SUCCESS, version, "Task has no outputs")
        prefix = tctx.output_writer.output_prefix
        size = state.original_array_size
        paths = [subtask_path(prefix, i, "outputs.pb") for i in range(size)]
        succeeded = [i < len(state.details) and state.details[i] is Phase.SUCCESS for i in range(size)]
        try:
            wanted = [p for p, ok in zip(paths, succeeded, strict=True) if ok]
            found = iter(await self._store.read_many(wanted, workers=self.config.output_assembler.workers))
            outputs: list[literals_pb2.LiteralMap | None] = []
            for path, ok in zip(paths, succeeded, strict=True):
                if not ok:
                    outputs.append(None)
                    continue
                data = next(found)
                if data is None:
                    # Flyte's remote output reader fails on a missing outputs.pb; the work item is retried.
                    raise FileNotFoundError(f"failed to read data from dataDir [{path}]: not found")
                outputs.append(self._store.parse_outputs(path, data))
            final = assemble_outputs(names, outputs)
            await self._store.write(f"{prefix.rstrip('/')}/outputs.pb", final.SerializeToString())
        except (OSError, ValueError) as e:
            return self._assembly_failed(state, e, self.config.output_assembler.max_retries)
        tctx.output_writer.put(None)  # the executor reads {prefix}/outputs.pb
        return replace(state, assembly_failures=0).with_phase(
            ArrayPhase.SUCCESS, version, "Assembled outputs"
        )

    async def _assemble_errors(
        self, tctx: TaskExecutionContext, state: ArrayState, version: int
    ) -> ArrayState:
        """Flyte's error assembly: every failed sub-task's error (its ``error.pb``, else ``Job Failed.``)
        grouped by message into ``{prefix}/error.pb``; the map task fails permanently with it."""
        prefix = tctx.output_writer.output_prefix
        failed = [i for i, phase in enumerate(state.details) if phase.is_failure]
        try:
            documents = await self._store.read_many(
                [subtask_path(prefix, i, "error.pb") for i in failed],
                workers=self.config.error_assembler.workers,
            )
            collector = ErrorMessageCollector()
            for index, data in zip(failed, documents, strict=True):
                found = self._store.parse_error(data)
                collector.collect(index, str(found[0]) if found is not None else "Job Failed.")
            if len(collector):
                message = collector.summary(self.config.max_error_length)
            else:
                # Deviation: aborted with no sub-task failed (more successes required than there are
                # sub-tasks), Flyte reports an empty message; it says why here.
                needed, total = state.min_success, state.original_array_size
                message = f"the map task needs {needed} successes of {total} sub-tasks"
            err = ExecutionError("", message, ErrorKind.USER)
            await self._store.write_error(f"{prefix.rstrip('/')}/error.pb", err, recoverable=False)
        except (OSError, ValueError) as e:
            return self._assembly_failed(state, e, self.config.error_assembler.max_retries)
        return replace(state, err=err, assembly_failures=0).with_phase(
            ArrayPhase.PERMANENT_FAILURE, version, "Assembled error"
        )

    def _assembly_failed(self, state: ArrayState, error: Exception, max_retries: int) -> ArrayState:
        failures = state.assembly_failures + 1
        log.warning("assembling the map task's outputs or errors failed (%d): %s", failures, error)
        if failures <= max_retries:
            # Stay; the next round (at the latest the resync) tries again, as Flyte's queue retries the item.
            return replace(state, assembly_failures=failures)
        # Flyte's error here has no code and an unknown kind; a storage failure is the system's.
        err = ExecutionError("", str(error), ErrorKind.SYSTEM)
        return replace(state, err=err, assembly_failures=failures).with_phase(
            ArrayPhase.RETRYABLE_FAILURE, 0, "Failed to assemble outputs/errors."
        )

    # -- wake-ups --------------------------------------------------------------------------------------------
    def _wake(self, tctx: TaskExecutionContext) -> None:
        try:
            self._enqueue_owner(*owner_key(tctx.metadata))
        except Exception as e:  # the resync still comes
            log.warning("failed to enqueue the map task: %s", e)

    def _route(self, tctx: TaskExecutionContext, on: bool) -> None:
        if self._wakeups is None:
            return
        meta = tctx.metadata
        execution_id = meta.labels.get(EXECUTION_ID_LABEL)
        if not execution_id:
            return  # its pods carry no owner label: the resync follows it
        pods = (subtask_namespace(self.config.namespace_template, meta.namespace), execution_id)
        name = meta.task_execution_id.generated_name
        if on:
            self._wakeups.route(pods, name, owner_key(meta))
        else:
            self._wakeups.forget(pods, name)


def _read_state(tctx: TaskExecutionContext) -> ArrayState:
    _, raw = tctx.plugin_state_reader.get()
    return ArrayState.from_json(raw)


def _write_to_discovery(
    state: ArrayState, template: tasks_pb2.TaskTemplate, next_phase: ArrayPhase, version: int
) -> ArrayState:
    """Flyte's ``WriteToDiscovery`` without a catalog: on to ``next_phase``."""
    reason = (
        "Skipping catalog write: taskplug has no data catalog."
        if template.metadata.discoverable
        else "Task is not discoverable."
    )
    return state.with_phase(next_phase, version, reason)


def _selector(labels: Mapping[str, str]) -> str | None:
    """The labels every sub-task pod of this map task carries (its execution and node)."""
    parts = [f"{key}={labels[key]}" for key in (EXECUTION_ID_LABEL, NODE_ID_LABEL) if labels.get(key)]
    return ",".join(parts) or None
