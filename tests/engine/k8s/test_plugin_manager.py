"""The plugin manager (flytepropeller/pkg/controller/nodes/task/k8s/plugin_manager.go) against the local
cluster's API, with a bare-Pod test plugin."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pytest
from flyteidl.core import identifier_pb2, tasks_pb2
from prometheus_client import CollectorRegistry

from taskplug.core import (
    BackOffConfig,
    BadTaskSpecification,
    ErrorKind,
    FakeClock,
    Phase,
    PhaseInfo,
    PluginError,
    SetupContext,
    StaticTaskExecutionContext,
    TaskExecutionContext,
    TaskExecutionID,
    TaskExecutionMetadata,
    load_platform_config,
)
from taskplug.engine.k8s._backoff import BackOffController
from taskplug.engine.k8s._informer import InformerFactory
from taskplug.engine.k8s._plugin_manager import (
    FINALIZER,
    PLUGIN_STATE_VERSION,
    CleanupError,
    PluginManager,
    SharedK8sMachinery,
    add_object_metadata,
    compose_resource_key,
    effective_pod_limits,
    k8s_core_entry,
)
from taskplug.k8s import EVENT, POD, KubeApiError, ResourceType
from taskplug.k8s._config import K8S_SECTION, K8sPluginConfig
from taskplug.k8s._plugin import (
    AbortBehavior,
    K8sPluginEntry,
    K8sPluginProperties,
    K8sPluginSetup,
    PluginContext,
    PluginState,
)
from taskplug.testing import fake_task_context, next_round

if TYPE_CHECKING:
    from conftest import CountingKubeClient

NS = "flyte-ns"
OWNER_KIND = "FlyteWorkflow"
OWNER_REFERENCE: dict[str, Any] = {
    "apiVersion": "flyte.lyft.com/v1alpha1",
    "kind": OWNER_KIND,
    "name": "exec1",
    "uid": "u-1",
    "controller": True,
}
PHASE_ANNOTATION = "test.taskplug/phase"
RESOURCE_QUOTA = ResourceType("v1", "ResourceQuota", "resourcequotas")
POD_TEMPLATE = ResourceType("v1", "PodTemplate", "podtemplates")


# -- the test plugin ----------------------------------------------------------------------------------------


class BarePodPlugin:
    """Builds a one-container Pod; reads its phase from an annotation the test sets (no kubelet needed)."""

    def __init__(
        self, properties: K8sPluginProperties | None = None, limits: Mapping[str, str] | None = None
    ) -> None:
        self.properties = properties or K8sPluginProperties()
        self.limits = dict(limits or {"cpu": "1", "memory": "1Gi"})
        self.build_error: Exception | None = None
        self.outputs: Any = None
        self.seen_states: list[PluginState] = []
        self.built_with: list[TaskExecutionContext] = []

    def get_properties(self) -> K8sPluginProperties:
        return self.properties

    def build_identity_resource(self, meta: TaskExecutionMetadata) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Pod"}

    def build_resource(self, tctx: TaskExecutionContext) -> dict[str, Any]:
        self.built_with.append(tctx)
        if self.build_error is not None:
            raise self.build_error
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"labels": {"obj": "own", "shared": "object"}, "annotations": {"obj": "own"}},
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "main",
                        "image": "busybox",
                        "command": ["true"],
                        "resources": {"limits": dict(self.limits), "requests": dict(self.limits)},
                    }
                ],
            },
        }

    def get_task_phase(self, pctx: PluginContext, resource: dict[str, Any]) -> PhaseInfo:
        self.seen_states.append(pctx.plugin_state)
        phase = ((resource.get("metadata") or {}).get("annotations") or {}).get(PHASE_ANNOTATION, "Queued")
        if phase == "Running":
            return PhaseInfo.running(0)
        if phase == "Success":
            if self.outputs is not None:
                pctx.output_writer.put(self.outputs)
            return PhaseInfo.success()
        if phase == "Failed":
            return PhaseInfo.retryable_failure("Boom", "it failed")
        return PhaseInfo.queued(pctx.now, 0, phase)


class AbortingPlugin(BarePodPlugin):
    def __init__(self, behavior: AbortBehavior | Exception) -> None:
        super().__init__()
        self.behavior = behavior

    def on_abort(self, tctx: TaskExecutionContext, resource: dict[str, Any]) -> AbortBehavior:
        if isinstance(self.behavior, Exception):
            raise self.behavior
        return self.behavior


# -- fixtures and helpers ------------------------------------------------------------------------------------


def metadata(name: str = "exec1-n0-0", **kw: Any) -> TaskExecutionMetadata:
    """Metadata alone, for ``add_object_metadata`` (an execution spec always adds the standard labels)."""
    task_id = identifier_pb2.TaskExecutionIdentifier()
    task_id.node_execution_id.execution_id.name = "exec1"
    defaults: dict[str, Any] = {
        "task_execution_id": TaskExecutionID(name, task_id, "n0"),
        "namespace": NS,
        "owner_name": "exec1",
        "owner_reference": dict(OWNER_REFERENCE),
        "labels": {"execution-id": "exec1", "shared": "exec"},
        "annotations": {"exec": "a"},
    }
    defaults.update(kw)
    return TaskExecutionMetadata(**defaults)


def make_tctx(
    template: tasks_pb2.TaskTemplate | None = None,
    *,
    name: str = "exec1-n0-0",
    owner_reference: Mapping[str, Any] = OWNER_REFERENCE,
    state: Mapping[str, Any] | None = None,
    state_version: int = 0,
    execution: Mapping[str, Any] | None = None,
) -> StaticTaskExecutionContext:
    """A round of a ``bare`` task (or ``template``) of execution exec1 in namespace ``NS``, owned by
    ``owner_reference``; ``name`` is the generated name, ``state`` the plugin state an earlier round stored."""
    return fake_task_context(
        template if template is not None else tasks_pb2.TaskTemplate(type="bare"),
        namespace=NS,
        labels={"shared": "exec"},
        annotations={"exec": "a"},
        execution={"generatedName": name, "ownerReference": owner_reference, **(execution or {})},
        state=state,
        state_version=state_version,
    )


def entry(plugin: BarePodPlugin, **kw: Any) -> K8sPluginEntry:
    return K8sPluginEntry(
        id="Bare", registered_task_types=("bare",), resource_to_watch=POD, load_plugin=lambda _: plugin, **kw
    )


class Harness:
    def __init__(
        self, cluster: Any, client: CountingKubeClient, clock: FakeClock, factory: InformerFactory
    ) -> None:
        self.cluster = cluster
        self.client = client
        self.clock = clock
        self.factory = factory
        self.enqueued: list[tuple[str, str]] = []
        self.registry = CollectorRegistry()

    def manager(
        self,
        plugin: BarePodPlugin,
        *,
        backoff: BackOffController | None = None,
        config: K8sPluginConfig | None = None,
        **kw: Any,
    ) -> PluginManager:
        return PluginManager(
            entry(plugin),
            plugin,
            kube_client=self.client,
            informers=self.factory,
            config=config or K8sPluginConfig(),
            enqueue_owner=lambda ns, name: self.enqueued.append((ns, name)),
            owner_kind=OWNER_KIND,
            backoff_config=BackOffConfig(),
            backoff_controller=backoff,
            clock=self.clock,
            metrics_registry=self.registry,
            **kw,
        )

    async def synced(self) -> None:
        for informer in self.factory.informers:
            await informer.wait_synced()

    async def until(self, predicate: Callable[[], bool]) -> None:
        for _ in range(2000):
            if predicate():
                return
            await asyncio.sleep(0)
        assert predicate()

    async def in_cache(self, name: str, check: Callable[[dict[str, Any]], bool] = lambda _: True) -> None:
        informer = self.factory.informer(POD)

        def ready() -> bool:
            obj = informer.get(NS, name)
            return obj is not None and check(obj)

        await self.until(ready)

    async def set_phase(self, name: str, phase: str) -> None:
        await self.client.inner.patch(POD, NS, name, {"metadata": {"annotations": {PHASE_ANNOTATION: phase}}})
        await self.in_cache(name, lambda o: o["metadata"]["annotations"].get(PHASE_ANNOTATION) == phase)


@pytest.fixture
async def harness(local_cluster: Any, counting_kube_client: CountingKubeClient) -> AsyncIterator[Harness]:
    clock = FakeClock()
    factory = InformerFactory(counting_kube_client, clock=clock)
    async with factory:
        yield Harness(local_cluster, counting_kube_client, clock, factory)


def quota_error(requested: str = "limits.memory=1Gi", limited: str = "limits.memory=8000Gi") -> KubeApiError:
    return KubeApiError(
        403,
        "Forbidden",
        f'pods "x" is forbidden: exceeded quota: project-quota, requested: {requested}, '
        f"used: limits.memory=7976Gi, limited: {limited}",
    )


# -- construction (NewPluginManager) -------------------------------------------------------------------------


async def test_construction_requires_an_enqueue_owner(harness: Harness) -> None:
    plugin = BarePodPlugin()
    with pytest.raises(PluginError) as info:
        PluginManager(
            entry(plugin),
            plugin,
            kube_client=harness.client,
            informers=harness.factory,
            config=K8sPluginConfig(),
            enqueue_owner=None,
        )
    assert info.value.code == "PluginInitializationFailed"
    assert info.value.message == "Failed to initialize plugin, enqueue Owner cannot be nil or empty."


async def test_construction_requires_a_kube_client_unless_the_entry_brings_one(harness: Harness) -> None:
    plugin = BarePodPlugin()
    with pytest.raises(PluginError, match="Kubeclient cannot be nil!"):
        PluginManager(
            entry(plugin),
            plugin,
            kube_client=None,
            informers=harness.factory,
            config=K8sPluginConfig(),
            enqueue_owner=lambda ns, n: None,
        )
    custom = harness.cluster.client()
    manager = PluginManager(
        entry(plugin, custom_kube_client=lambda: custom),
        plugin,
        kube_client=None,
        informers=harness.factory,
        config=K8sPluginConfig(),
        enqueue_owner=lambda ns, n: None,
    )
    assert manager.kube_client is custom


async def test_custom_kube_client_errors_propagate(harness: Harness) -> None:
    plugin = BarePodPlugin()

    def broken() -> Any:
        raise RuntimeError("no cluster credentials")

    with pytest.raises(RuntimeError, match="no cluster credentials"):
        PluginManager(
            entry(plugin, custom_kube_client=broken),
            plugin,
            kube_client=harness.client,
            informers=harness.factory,
            config=K8sPluginConfig(),
            enqueue_owner=lambda ns, n: None,
        )


async def test_properties_expose_only_the_generated_name_max_length(harness: Harness) -> None:
    plugin = BarePodPlugin(K8sPluginProperties(generated_name_max_length=20, disable_inject_finalizer=True))
    manager = harness.manager(plugin)
    assert manager.id == "Bare"
    assert manager.get_properties().generated_name_max_length == 20


# -- launch (Handle, launchResource, addObjectMetadata) ------------------------------------------------------


async def test_first_round_creates_the_object_with_flytes_metadata_and_reports_queued(
    harness: Harness,
) -> None:
    config = K8sPluginConfig(inject_finalizer=True, default_labels={"shared": "config", "cfg": "l"})
    manager = harness.manager(BarePodPlugin(), config=config)
    template = tasks_pb2.TaskTemplate(type="bare")
    template.metadata.metadata.labels["tmpl"] = "l"
    template.metadata.metadata.labels["shared"] = "template"
    template.metadata.metadata.annotations["tmpl"] = "a"
    tctx = make_tctx(template, name="Exec1_N0-0")
    # The executor also labels node-id and interruptible; the precedence below is pinned on these two.
    tctx.metadata = dataclasses.replace(tctx.metadata, labels={"execution-id": "exec1", "shared": "exec"})

    transition = await manager.handle(tctx)

    assert transition.info.phase is Phase.QUEUED
    assert transition.info.reason == "task submitted to K8s"
    assert transition.info.info is not None and transition.info.info.occurred_at == harness.clock.now()
    pod = await harness.client.inner.get(POD, NS, "exec1n0-0")
    meta = pod["metadata"]
    assert meta["labels"] == {
        "obj": "own",
        "shared": "exec",
        "cfg": "l",
        "tmpl": "l",
        "execution-id": "exec1",
    }
    assert meta["annotations"] == {
        "cluster-autoscaler.kubernetes.io/safe-to-evict": "false",
        "obj": "own",
        "tmpl": "a",
        "exec": "a",
        # Not Flyte's: the attempt the object was created for, checked before adopting or deleting it.
        "taskplug.io/task-execution": "testproject/development/exec1/n0/0",
    }
    assert meta["ownerReferences"][0]["kind"] == OWNER_KIND
    assert meta["finalizers"] == [FINALIZER]
    changed, version, state = tctx.plugin_state.written
    assert changed and version == PLUGIN_STATE_VERSION
    assert state == {
        "phase": 2,
        "k8sPluginState": {"phase": int(Phase.QUEUED), "phaseVersion": 0, "reason": "task submitted to K8s"},
        "lastEventUpdate": None,
    }


async def test_plugin_properties_disable_owner_references_and_finalizer(harness: Harness) -> None:
    plugin = BarePodPlugin(
        K8sPluginProperties(disable_inject_owner_references=True, disable_inject_finalizer=True)
    )
    manager = harness.manager(plugin, config=K8sPluginConfig(inject_finalizer=True))
    await manager.handle(make_tctx())
    pod = await harness.client.inner.get(POD, NS, "exec1-n0-0")
    assert "ownerReferences" not in pod["metadata"]
    assert not pod["metadata"].get("finalizers")


async def test_already_existing_object_counts_as_submitted(harness: Harness) -> None:
    manager = harness.manager(BarePodPlugin())
    await manager.handle(make_tctx())
    again = make_tctx()  # a lost state: the object is there already
    transition = await manager.handle(again)
    assert transition.info.phase is Phase.QUEUED
    assert again.plugin_state.written[2]["phase"] == 2  # type: ignore[index]


async def test_a_plugin_that_cannot_build_the_object_fails_permanently_and_stays_not_started(
    harness: Harness,
) -> None:
    plugin = BarePodPlugin()
    plugin.build_error = ValueError("no image")
    tctx = make_tctx()
    transition = await harness.manager(plugin).handle(tctx)
    assert transition.info.phase is Phase.PERMANENT_FAILURE
    assert transition.info.err is not None
    assert (transition.info.err.code, transition.info.err.message) == (
        "FailedToBuildResource",
        "could not build resource for task: no image",
    )
    assert tctx.plugin_state.written[2]["phase"] == 0  # type: ignore[index]
    assert harness.client.calls["create"] == 0


async def test_plugins_build_with_secret_annotations_and_identity_label(harness: Harness) -> None:
    plugin = BarePodPlugin()
    template = tasks_pb2.TaskTemplate(type="bare")
    template.security_context.secrets.add(group="g", key="k")
    # The identity is the execution's (task_exec_context.go), the secrets the template's.
    identity = {"securityContext": {"runAs": {"executionIdentity": "me@corp.io"}}}
    await harness.manager(plugin).handle(make_tctx(template=template, execution=identity))
    seen = plugin.built_with[0].metadata
    assert "flyte.secrets/s0" in seen.annotations
    assert seen.labels["inject-flyte-secrets"] == "true"
    pod = await harness.client.inner.get(POD, NS, "exec1-n0-0")
    assert pod["metadata"]["labels"]["execution-identity"] == "me-corp-io"
    assert "flyte.secrets/s0" in pod["metadata"]["annotations"]


def _err(code: str, message: str, kind: ErrorKind = ErrorKind.USER) -> tuple[str, str, ErrorKind]:
    return (code, message, kind)


@pytest.mark.parametrize(
    ("error", "with_backoff", "phase", "code"),
    [
        pytest.param(
            quota_error(), False, Phase.WAITING_FOR_RESOURCES, None, id="quota_without_backoff_waits"
        ),
        pytest.param(quota_error(), True, Phase.WAITING_FOR_RESOURCES, None, id="quota_with_backoff_waits"),
        pytest.param(
            quota_error("limits.memory=9000Gi"),
            True,
            Phase.PERMANENT_FAILURE,
            "ResourceRequestsExceedLimits",
            id="quota_that_can_never_fit_fails_permanently",
        ),
        pytest.param(
            quota_error("limits.memory=9000Gi"),
            False,
            Phase.PERMANENT_FAILURE,
            "ResourceRequestsExceedLimits",
            id="quota_that_can_never_fit_fails_permanently_without_backoff",
        ),
        pytest.param(
            KubeApiError(403, "Forbidden", 'pods "x" is forbidden: no psp'),
            True,
            Phase.RETRYABLE_FAILURE,
            "RuntimeFailure",
            id="other_forbidden_is_retryable_runtime_failure",
        ),
        pytest.param(
            KubeApiError(400, "BadRequest", "bad"),
            True,
            Phase.PERMANENT_FAILURE,
            "BadTaskFormat",
            id="bad_request_is_bad_task_format",
        ),
        pytest.param(
            KubeApiError(422, "Invalid", "invalid"),
            True,
            Phase.PERMANENT_FAILURE,
            "BadTaskFormat",
            id="invalid_is_bad_task_format",
        ),
        pytest.param(
            KubeApiError(413, "RequestEntityTooLarge", "big"),
            True,
            Phase.PERMANENT_FAILURE,
            "EntityTooLarge",
            id="too_large_is_entity_too_large",
        ),
        pytest.param(
            KubeApiError(429, "TooManyRequests", "slow"),
            True,
            Phase.WAITING_FOR_RESOURCES,
            None,
            id="too_many_requests_through_backoff_waits",
        ),
        pytest.param(
            KubeApiError(500, "ServerTimeout", "later"),
            True,
            Phase.WAITING_FOR_RESOURCES,
            None,
            id="server_timeout_through_backoff_waits",
        ),
    ],
)
async def test_create_errors_are_classified_as_flyte_does(
    harness: Harness, error: KubeApiError, with_backoff: bool, phase: Phase, code: str | None
) -> None:
    harness.cluster.faults.fail("create", error=error)
    backoff = BackOffController(harness.clock) if with_backoff else None
    await harness.clock.advance(0.001)
    tctx = make_tctx()
    transition = await harness.manager(BarePodPlugin(), backoff=backoff).handle(tctx)
    info = transition.info
    assert info.phase is phase
    if code is None:
        assert info.err is None
        assert info.reason.startswith("Exceeded resourcequota: ")
        assert error.message in info.reason
    else:
        assert info.err is not None and info.err.code == code
        assert error.message in info.err.message
        assert info.err.kind is ErrorKind.USER
    if code == "ResourceRequestsExceedLimits":
        assert info.err is not None and info.err.message.startswith("requested resources exceed limits: ")
    assert tctx.plugin_state.written[2]["phase"] == 0  # type: ignore[index]


@pytest.mark.parametrize(
    ("error", "code"),
    [
        pytest.param(KubeApiError(500, "InternalError", "boom"), "InternalError", id="internal_error"),
        pytest.param(
            KubeApiError(429, "TooManyRequests", "slow"), "TooManyRequests", id="429_without_backoff"
        ),
        pytest.param(KubeApiError(503, "", "bare status"), "SystemError", id="no_reason"),
    ],
)
async def test_other_create_errors_are_raised_with_the_status_reason_as_code(
    harness: Harness, error: KubeApiError, code: str
) -> None:
    harness.cluster.faults.fail("create", error=error)
    tctx = make_tctx()
    with pytest.raises(PluginError) as info:
        await harness.manager(BarePodPlugin()).handle(tctx)
    assert info.value.code == code
    assert info.value.message == "failed to create resource"
    assert info.value.cause is not None
    assert tctx.plugin_state.written[0] is False


async def test_connection_errors_on_create_are_raised_for_the_executor_to_retry(harness: Harness) -> None:
    harness.client.refuse_connections("create", 1)
    with pytest.raises(PluginError) as info:
        await harness.manager(BarePodPlugin()).handle(make_tctx())
    assert info.value.code == "SystemError"  # an API that cannot be reached is a system error
    assert isinstance(info.value.cause, ConnectionError)


async def test_quota_on_a_non_pod_with_a_backoff_controller_is_a_retryable_runtime_failure(
    harness: Harness,
) -> None:
    """Flyte's rule order: back-off is only for Pods, and with a controller attached rule 3 does not apply."""

    class TemplatePlugin(BarePodPlugin):
        def build_identity_resource(self, meta: TaskExecutionMetadata) -> dict[str, Any]:
            return {"apiVersion": "v1", "kind": "PodTemplate"}

        def build_resource(self, tctx: TaskExecutionContext) -> dict[str, Any]:
            return {"apiVersion": "v1", "kind": "PodTemplate", "template": {"spec": {"containers": []}}}

    harness.cluster.faults.fail("create", error=quota_error(), plural="podtemplates")
    plugin = TemplatePlugin()
    manager = PluginManager(
        K8sPluginEntry("tmpl", ("tmpl",), POD_TEMPLATE, lambda _: plugin),
        plugin,
        kube_client=harness.client,
        informers=harness.factory,
        config=K8sPluginConfig(),
        enqueue_owner=lambda ns, n: None,
        backoff_controller=BackOffController(harness.clock),
        clock=harness.clock,
    )
    transition = await manager.handle(make_tctx())
    assert transition.info.phase is Phase.RETRYABLE_FAILURE
    assert transition.info.err is not None and transition.info.err.code == "RuntimeFailure"


async def test_quota_exceeded_pods_back_off_per_kind_and_namespace_and_are_then_blocked_locally(
    harness: Harness,
) -> None:
    controller = BackOffController(harness.clock)
    manager = harness.manager(BarePodPlugin(limits={"cpu": "2", "memory": "1Gi"}), backoff=controller)
    # A new handler's window ends at its creation time, and equal times block; a real clock has moved on.
    controller.get_or_create_handler(f"/v1, Kind=Pod,{NS}", 2, timedelta(seconds=20))
    await harness.clock.advance(0.001)
    harness.cluster.faults.fail("create", error=quota_error(), times=None)

    first = await manager.handle(make_tctx(name="t1"))
    assert first.info.phase is Phase.WAITING_FOR_RESOURCES
    handler = controller.get_handler(f"/v1, Kind=Pod,{NS}")
    assert handler is not None
    assert handler.blocker.exponent == 1
    assert {k: str(v) for k, v in handler.ceilings.ceilings.items()} == {"memory": "1Gi"}
    creates = harness.client.calls["create"]

    blocked = await manager.handle(make_tctx(name="t2"))
    assert blocked.info.phase is Phase.WAITING_FOR_RESOURCES
    assert "blocked by back-off" in blocked.info.reason
    assert harness.client.calls["create"] == creates

    harness.cluster.faults.clear()
    await harness.clock.advance(1.001)
    ok = await manager.handle(make_tctx(name="t2"))
    assert ok.info.phase is Phase.QUEUED
    assert handler.blocker.exponent == 0
    assert {k: str(v) for k, v in handler.ceilings.ceilings.items()} == {"memory": "1Ei"}


async def test_real_resource_quota_admission_drives_the_classification(harness: Harness) -> None:
    await harness.client.inner.create(
        RESOURCE_QUOTA,
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "project-quota", "namespace": NS},
            "spec": {"hard": {"limits.memory": "1Gi", "limits.cpu": "4"}},
        },
    )
    await harness.clock.advance(0.001)
    manager = harness.manager(
        BarePodPlugin(limits={"cpu": "1", "memory": "2Gi"}), backoff=BackOffController(harness.clock)
    )
    never = await manager.handle(make_tctx(name="too-big"))
    assert never.info.phase is Phase.PERMANENT_FAILURE
    assert never.info.err is not None and never.info.err.code == "ResourceRequestsExceedLimits"
    fits = harness.manager(
        BarePodPlugin(limits={"cpu": "1", "memory": "512Mi"}), backoff=BackOffController(harness.clock)
    )
    assert (await fits.handle(make_tctx(name="first"))).info.phase is Phase.QUEUED
    full = await fits.handle(make_tctx(name="second"))
    assert full.info.phase is Phase.QUEUED  # 512Mi + 512Mi = 1Gi fits exactly
    third = await fits.handle(make_tctx(name="third"))
    assert third.info.phase is Phase.WAITING_FOR_RESOURCES


def test_effective_pod_limits_take_the_max_of_init_max_and_container_sum() -> None:
    pod = {
        "spec": {
            "initContainers": [
                {"resources": {"limits": {"cpu": "3", "memory": "1Gi"}}},
                {"resources": {"limits": {"cpu": "1", "gpu": "1"}}},
            ],
            "containers": [
                {
                    "resources": {
                        "limits": {"cpu": "1", "memory": "1Gi"},
                        "requests": {"ephemeral-storage": "1Gi"},
                    }
                },
                {"resources": {"limits": {"cpu": "500m", "memory": "2Gi"}}},
                {},
            ],
        }
    }
    assert {k: str(v) for k, v in effective_pod_limits(pod).items()} == {
        "cpu": "3",
        "memory": "3Gi",
        "gpu": "1",
    }


def test_back_off_key_uses_the_objects_own_kind_and_namespace() -> None:
    assert (
        compose_resource_key({"apiVersion": "v1", "kind": "pod", "metadata": {"namespace": "ns"}})
        == "/v1, Kind=pod,ns"
    )
    assert (
        compose_resource_key(
            {
                "apiVersion": "sparkoperator.k8s.io/v1beta2",
                "kind": "SparkApplication",
                "metadata": {"namespace": "n"},
            }
        )
        == "sparkoperator.k8s.io/v1beta2, Kind=SparkApplication,n"
    )


def test_object_metadata_precedence_and_name_conversion() -> None:
    obj: dict[str, Any] = {
        "metadata": {"labels": {"k": "obj"}, "annotations": {"k": "obj"}, "finalizers": ["x"]}
    }
    template = tasks_pb2.TaskTemplate()
    template.metadata.metadata.labels["k"] = "template"
    add_object_metadata(
        metadata(name="orgflyteHelloWorld-0", labels={}, annotations={"k": "exec"}),
        obj,
        K8sPluginConfig(default_labels={"k": "config", "only": "config"}, inject_finalizer=True),
        template,
    )
    assert obj["metadata"]["name"] == "orgflyte-hello-world-0"
    assert obj["metadata"]["labels"] == {"k": "template", "only": "config"}
    assert obj["metadata"]["annotations"]["k"] == "exec"
    assert obj["metadata"]["finalizers"] == ["x", FINALIZER]


# -- plugin state (read and written by Handle) ---------------------------------------------------------------


async def test_unreadable_state_of_another_version_is_a_retryable_corrupted_state_failure(
    harness: Harness,
) -> None:
    tctx = make_tctx(state={"gob": "bytes"}, state_version=3)
    transition = await harness.manager(BarePodPlugin()).handle(tctx)
    assert transition.info.phase is Phase.RETRYABLE_FAILURE
    assert transition.info.err is not None
    assert transition.info.err.code == "CorruptedPluginState"
    assert transition.info.err.message == "plugin state version mismatch expected [1] got [3]"


async def test_unreadable_state_of_the_current_version_is_an_error(harness: Harness) -> None:
    tctx = make_tctx(state={"phase": "started?"}, state_version=1)
    with pytest.raises(PluginError) as info:
        await harness.manager(BarePodPlugin()).handle(tctx)
    assert info.value.code == "CorruptedPluginState"
    assert info.value.message == "Failed to read unmarshal custom state"


async def test_state_is_written_only_when_it_changes(harness: Harness) -> None:
    manager = harness.manager(BarePodPlugin())
    tctx = make_tctx()
    await manager.handle(tctx)
    await harness.in_cache("exec1-n0-0")
    second = next_round(tctx)
    await manager.handle(second)  # Queued "task submitted" → Queued "Queued": changes the reason
    third = next_round(second)
    await manager.handle(third)
    assert third.plugin_state.written[0] is False


# -- observing (checkResourcePhase) --------------------------------------------------------------------------


async def test_steady_state_reads_come_from_the_informer_cache_not_the_api(harness: Harness) -> None:
    plugin = BarePodPlugin()
    manager = harness.manager(plugin)
    tctx = make_tctx()
    await manager.handle(tctx)
    await harness.set_phase("exec1-n0-0", "Running")
    gets = harness.client.calls["get"]
    for _ in range(20):
        tctx = next_round(tctx)
        assert (await manager.handle(tctx)).info.phase is Phase.RUNNING
    assert harness.client.calls["get"] == gets
    assert plugin.seen_states[-1].phase is Phase.RUNNING


async def test_an_object_not_yet_in_the_cache_is_read_with_one_get(harness: Harness) -> None:
    manager = harness.manager(BarePodPlugin())
    await harness.synced()
    harness.client.watch_gate.clear()
    harness.cluster.drop_watches()  # the informer will not see the create
    tctx = make_tctx()
    await manager.handle(tctx)
    transition = await manager.handle(next_round(tctx))
    assert transition.info.phase is Phase.QUEUED
    assert harness.client.calls["get"] == 1
    harness.client.watch_gate.set()


async def test_an_object_deleted_behind_our_back_is_a_system_retryable_failure(harness: Harness) -> None:
    manager = harness.manager(BarePodPlugin())
    tctx = make_tctx()
    await manager.handle(tctx)
    await harness.in_cache("exec1-n0-0")
    await harness.client.inner.delete(POD, NS, "exec1-n0-0")
    await harness.until(lambda: harness.factory.informer(POD).get(NS, "exec1-n0-0") is None)
    transition = await manager.handle(next_round(tctx))
    info = transition.info
    assert info.phase is Phase.RETRYABLE_FAILURE
    assert info.err is not None and info.err.kind is ErrorKind.SYSTEM
    assert info.err.code == "ResourceDeletedExternally"
    assert info.err.message.startswith(f"resource not found, name [{NS}/exec1-n0-0]. reason: ")


async def test_a_non_terminal_object_being_deleted_is_an_unexpected_deletion(harness: Harness) -> None:
    manager = harness.manager(BarePodPlugin(), config=K8sPluginConfig(inject_finalizer=True))
    tctx = make_tctx()
    await manager.handle(tctx)
    await harness.client.inner.delete(
        POD, NS, "exec1-n0-0"
    )  # the finalizer keeps it, with a deletionTimestamp
    await harness.in_cache("exec1-n0-0", lambda o: bool(o["metadata"].get("deletionTimestamp")))
    info = (await manager.handle(next_round(tctx))).info
    assert info.phase is Phase.RETRYABLE_FAILURE
    assert info.err is not None and info.err.kind is ErrorKind.SYSTEM
    assert (info.err.code, info.err.message) == (
        "UnexpectedObjectDeletion",
        f"object [{NS}/exec1-n0-0] terminated in the background, manually",
    )


async def test_a_terminal_object_being_deleted_keeps_its_phase(harness: Harness) -> None:
    manager = harness.manager(BarePodPlugin(), config=K8sPluginConfig(inject_finalizer=True))
    tctx = make_tctx()
    await manager.handle(tctx)
    await harness.set_phase("exec1-n0-0", "Failed")
    await harness.client.inner.delete(POD, NS, "exec1-n0-0")
    await harness.in_cache("exec1-n0-0", lambda o: bool(o["metadata"].get("deletionTimestamp")))
    info = (await manager.handle(next_round(tctx))).info
    assert info.err is not None and info.err.code == "Boom"


async def test_success_records_outputs_from_files_unless_the_plugin_put_its_own(harness: Harness) -> None:
    plugin = BarePodPlugin()
    manager = harness.manager(plugin)
    tctx = make_tctx()
    await manager.handle(tctx)
    await harness.set_phase("exec1-n0-0", "Success")
    done = next_round(tctx)
    assert (await manager.handle(done)).info.phase is Phase.SUCCESS
    assert done.output_writer.was_put and done.output_writer.reader is None

    plugin.outputs = object()
    again = next_round(done)
    await manager.handle(again)
    assert again.output_writer.reader is plugin.outputs


async def test_non_success_phases_record_no_outputs(harness: Harness) -> None:
    manager = harness.manager(BarePodPlugin())
    tctx = make_tctx()
    await manager.handle(tctx)
    await harness.set_phase("exec1-n0-0", "Running")
    running = next_round(tctx)
    await manager.handle(running)
    assert not running.output_writer.was_put


async def test_errors_are_counted_by_phase_and_code(harness: Harness) -> None:
    manager = harness.manager(BarePodPlugin())
    tctx = make_tctx()
    await manager.handle(tctx)
    await harness.set_phase("exec1-n0-0", "Failed")
    await manager.handle(next_round(tctx))
    value = harness.registry.get_sample_value(
        "task_pod_errors_total", {"plugin": "Bare", "phase": "RetryableFailure", "error_code": "Boom"}
    )
    assert value == 1.0


# -- informer → enqueue owner (NewPluginManager's event handler) ---------------------------------------------


async def test_updates_of_owned_objects_enqueue_the_owner_by_execution_id_label(harness: Harness) -> None:
    manager = harness.manager(BarePodPlugin())
    await manager.handle(make_tctx())
    await harness.in_cache("exec1-n0-0")
    harness.enqueued.clear()
    await harness.set_phase("exec1-n0-0", "Running")
    assert harness.enqueued
    assert set(harness.enqueued) == {(NS, "exec1")}


async def test_updates_of_objects_owned_by_another_kind_are_ignored(harness: Harness) -> None:
    manager = harness.manager(BarePodPlugin())
    other = {"apiVersion": "v1", "kind": "Job", "name": "j", "uid": "u", "controller": True}
    await manager.handle(make_tctx(owner_reference=other))
    await harness.in_cache("exec1-n0-0")
    await harness.set_phase("exec1-n0-0", "Running")
    assert harness.enqueued == []


async def test_without_owner_references_every_labelled_update_enqueues(harness: Harness) -> None:
    plugin = BarePodPlugin(K8sPluginProperties(disable_inject_owner_references=True))
    manager = harness.manager(plugin)
    await manager.handle(make_tctx())
    await harness.in_cache("exec1-n0-0")
    await harness.set_phase("exec1-n0-0", "Running")
    assert (NS, "exec1") in harness.enqueued


async def test_same_resource_version_and_unlabelled_updates_do_not_enqueue(harness: Harness) -> None:
    manager = harness.manager(BarePodPlugin(K8sPluginProperties(disable_inject_owner_references=True)))
    obj = {"metadata": {"namespace": NS, "resourceVersion": "5", "labels": {"execution-id": "e"}}}
    manager._on_update(obj, obj)
    manager._on_update(None, {"metadata": {"namespace": NS, "resourceVersion": "6"}})
    assert harness.enqueued == []
    manager._on_update(None, obj)
    assert harness.enqueued == [(NS, "e")]


# -- events (Handle, event_watcher.go) -----------------------------------------------------------------------


def k8s_event(name: str, pod: str, note: str, reason: str = "Scheduled") -> dict[str, Any]:
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": NS},
        "regarding": {"kind": "Pod", "namespace": NS, "name": pod, "apiVersion": "v1"},
        "reason": reason,
        "note": note,
        "type": "Normal",
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "test",
        "reportingInstance": "test",
        "action": "Test",
    }


async def test_object_events_become_additional_reasons_and_bump_the_stored_version(harness: Harness) -> None:
    manager = harness.manager(BarePodPlugin(), config=K8sPluginConfig(send_object_events=True))
    tctx = make_tctx()
    await manager.handle(tctx)
    events = harness.factory.informer(EVENT)
    await harness.client.inner.create(EVENT, k8s_event("e1", "exec1-n0-0", "Successfully assigned"))
    await harness.client.inner.create(EVENT, k8s_event("e2", "other-pod", "not ours"))
    await harness.until(lambda: len(events) == 2)
    await harness.in_cache("exec1-n0-0")

    second = next_round(tctx)
    info = (await manager.handle(second)).info
    assert info.info is not None
    assert [r.reason for r in info.info.additional_reasons] == ["Successfully assigned"]
    stored = second.plugin_state.written[2]
    assert stored is not None
    assert stored["k8sPluginState"]["phaseVersion"] == info.version + 1
    assert stored["lastEventUpdate"] is not None

    third = next_round(second)
    info3 = (await manager.handle(third)).info
    assert info3.info is not None and info3.info.additional_reasons == ()


# -- adoption: an object that already exists under the attempt's name ----------------------------------------


def attacker_tctx(name: str = "exec1-n0-0") -> StaticTaskExecutionContext:
    """Another execution's attempt that names exec1's object and claims exec1's labels (what a submitter
    could ask for before the API refused both)."""
    return fake_task_context(
        tasks_pb2.TaskTemplate(type="bare"),
        namespace=NS,
        labels={"execution-id": "exec1", "node-id": "n0"},
        execution={"id": {"project": "evil", "name": "attacker"}, "generatedName": name},
    )


async def test_an_existing_object_created_for_this_attempt_is_adopted(harness: Harness) -> None:
    manager = harness.manager(BarePodPlugin())
    await manager.handle(make_tctx())
    replayed = await manager.handle(make_tctx())  # a round that lost its state creates again
    assert replayed.info.phase is Phase.QUEUED
    assert harness.client.calls["create"] == 2
    pod = await harness.client.inner.get(POD, NS, "exec1-n0-0")
    assert (
        pod["metadata"]["annotations"]["taskplug.io/task-execution"] == "testproject/development/exec1/n0/0"
    )


async def test_an_existing_object_of_another_execution_is_not_adopted_and_fails_the_attempt(
    harness: Harness,
) -> None:
    victim = harness.manager(BarePodPlugin())
    await victim.handle(make_tctx())
    attacker = harness.manager(BarePodPlugin())

    info = (await attacker.handle(attacker_tctx())).info

    assert info.phase is Phase.RETRYABLE_FAILURE and info.err is not None
    assert info.err.kind is ErrorKind.SYSTEM and info.err.code == "ResourceOwnedByAnother"
    assert "Pod [flyte-ns/exec1-n0-0] already exists and was not created for this attempt" in info.err.message
    assert "'testproject/development/exec1/n0/0'" in info.err.message


async def test_abort_and_finalize_leave_another_executions_object_alone(harness: Harness) -> None:
    config = K8sPluginConfig(inject_finalizer=True)
    victim = harness.manager(BarePodPlugin(), config=config)
    await victim.handle(make_tctx())
    attacker = harness.manager(BarePodPlugin(), config=config)
    tctx = attacker_tctx()
    await attacker.handle(tctx)

    await attacker.abort(tctx)
    await attacker.finalize(tctx)

    pod = await harness.client.inner.get(POD, NS, "exec1-n0-0")
    assert pod["metadata"]["finalizers"] == [FINALIZER] and not pod["metadata"].get("deletionTimestamp")
    assert harness.client.calls["delete"] == 0 and harness.client.calls["patch"] == 0


# -- abort (Abort) -------------------------------------------------------------------------------------------


async def test_abort_deletes_the_object_and_tolerates_it_being_gone(harness: Harness) -> None:
    manager = harness.manager(BarePodPlugin())
    tctx = make_tctx()
    await manager.handle(tctx)
    await manager.abort(tctx)
    with pytest.raises(KubeApiError):
        await harness.client.inner.get(POD, NS, "exec1-n0-0")
    await manager.abort(tctx)


async def test_abort_override_can_patch_instead_of_deleting(harness: Harness) -> None:
    plugin = AbortingPlugin(
        AbortBehavior.patching({"metadata": {"labels": {"aborted": "yes"}}}, delete_on_err=False)
    )
    manager = harness.manager(plugin)
    tctx = make_tctx()
    await manager.handle(tctx)
    await manager.abort(tctx)
    pod = await harness.client.inner.get(POD, NS, "exec1-n0-0")
    assert pod["metadata"]["labels"]["aborted"] == "yes"


async def test_abort_override_can_update_a_replacement_object(harness: Harness) -> None:
    manager_plugin = AbortingPlugin(AbortBehavior.deleting())
    manager = harness.manager(manager_plugin)
    tctx = make_tctx()
    await manager.handle(tctx)
    current = await harness.client.inner.get(POD, NS, "exec1-n0-0")
    current["metadata"]["labels"]["updated"] = "yes"
    manager_plugin.behavior = AbortBehavior.updating(current, delete_on_err=False)
    await manager.abort(tctx)
    pod = await harness.client.inner.get(POD, NS, "exec1-n0-0")
    assert pod["metadata"]["labels"]["updated"] == "yes"


async def test_abort_patch_failure_deletes_when_asked_to(harness: Harness) -> None:
    plugin = AbortingPlugin(AbortBehavior.patching({"metadata": {"labels": {"a": "b"}}}, delete_on_err=True))
    manager = harness.manager(plugin)
    tctx = make_tctx()
    await manager.handle(tctx)
    harness.cluster.faults.fail("patch", 500)
    await manager.abort(tctx)
    with pytest.raises(KubeApiError):
        await harness.client.inner.get(POD, NS, "exec1-n0-0")


async def test_abort_patch_failure_is_raised_without_delete_on_err(harness: Harness) -> None:
    plugin = AbortingPlugin(AbortBehavior.patching({"metadata": {"labels": {"a": "b"}}}, delete_on_err=False))
    manager = harness.manager(plugin)
    tctx = make_tctx()
    await manager.handle(tctx)
    harness.cluster.faults.fail("patch", 500)
    with pytest.raises(CleanupError) as info:
        await manager.abort(tctx)
    assert isinstance(info.value.cause, KubeApiError)
    assert info.value.leftovers == ({"kind": "Pod", "namespace": NS, "name": "exec1-n0-0"},)
    assert "abort: failed to update resource with name [flyte-ns/exec1-n0-0]" in str(info.value)


@pytest.mark.parametrize(
    "behavior",
    [
        pytest.param(AbortBehavior(), id="neither_patch_nor_update"),
        pytest.param(AbortBehavior(patch={"a": 1}, update=True), id="both_patch_and_update"),
    ],
)
async def test_abort_behavior_must_name_exactly_one_operation(
    harness: Harness, behavior: AbortBehavior
) -> None:
    manager = harness.manager(AbortingPlugin(behavior))
    with pytest.raises(PluginError) as info:
        await manager.abort(make_tctx())
    assert info.value.code == "RuntimeFailure"
    assert info.value.message == (
        "AbortBehavior for resource exec1-n0-0 must specify either a Patch and an Update operation if Delete "
        "is set to false. Only one can be supplied."
    )


async def test_abort_override_errors_skip_the_client_unless_not_found(harness: Harness) -> None:
    manager = harness.manager(AbortingPlugin(KubeApiError(404, "NotFound", "gone")))
    await manager.abort(make_tctx())
    failing = harness.manager(AbortingPlugin(RuntimeError("cannot decide")))
    with pytest.raises(RuntimeError):
        await failing.abort(make_tctx())
    assert harness.client.calls["delete"] == 0


# -- finalize (Finalize) -------------------------------------------------------------------------------------


async def drive(clock: FakeClock, coro: Any) -> Any:
    """Run ``coro`` while advancing the fake clock whenever it sleeps."""
    task = asyncio.ensure_future(coro)
    for _ in range(1000):
        if task.done():
            break
        await asyncio.sleep(0)
        if clock.sleepers:
            await clock.advance(1.0)
    return await task


async def test_finalize_removes_the_finalizer_with_a_merge_patch(harness: Harness) -> None:
    manager = harness.manager(BarePodPlugin(), config=K8sPluginConfig(inject_finalizer=True))
    tctx = make_tctx()
    await manager.handle(tctx)
    await manager.finalize(tctx)
    pod = await harness.client.inner.get(POD, NS, "exec1-n0-0")
    assert not pod["metadata"].get("finalizers")
    assert harness.client.calls["patch"] == 1
    await manager.finalize(tctx)  # nothing left to remove: no patch
    assert harness.client.calls["patch"] == 1


async def test_finalize_releases_an_object_being_deleted(harness: Harness) -> None:
    manager = harness.manager(BarePodPlugin(), config=K8sPluginConfig(inject_finalizer=True))
    tctx = make_tctx()
    await manager.handle(tctx)
    await manager.abort(tctx)
    await manager.finalize(tctx)
    with pytest.raises(KubeApiError) as info:
        await harness.client.inner.get(POD, NS, "exec1-n0-0")
    assert info.value.status == 404


async def test_finalize_retries_conflicts_with_backoff_on_the_clock(harness: Harness) -> None:
    manager = harness.manager(BarePodPlugin(), config=K8sPluginConfig(inject_finalizer=True))
    tctx = make_tctx()
    await manager.handle(tctx)
    harness.cluster.faults.fail(
        "patch", error=KubeApiError(409, "Conflict", "the object has been modified"), times=2
    )
    await drive(harness.clock, manager.finalize(tctx))
    assert harness.client.calls["patch"] == 3
    pod = await harness.client.inner.get(POD, NS, "exec1-n0-0")
    assert not pod["metadata"].get("finalizers")


async def test_finalize_gives_up_after_the_configured_retries(harness: Harness) -> None:
    config = K8sPluginConfig(inject_finalizer=True, update_backoff_retries=2)
    manager = harness.manager(BarePodPlugin(), config=config)
    tctx = make_tctx()
    await manager.handle(tctx)
    harness.cluster.faults.fail("patch", error=KubeApiError(409, "Conflict", "modified"), times=None)
    with pytest.raises(PluginError, match="modified"):
        await drive(harness.clock, manager.finalize(tctx))
    assert harness.client.calls["patch"] == 2


async def test_finalize_does_not_retry_other_patch_errors(harness: Harness) -> None:
    manager = harness.manager(BarePodPlugin(), config=K8sPluginConfig(inject_finalizer=True))
    tctx = make_tctx()
    await manager.handle(tctx)
    harness.cluster.faults.fail("patch", 500, times=None)
    with pytest.raises(PluginError):
        await drive(harness.clock, manager.finalize(tctx))
    assert harness.client.calls["patch"] == 1


@pytest.mark.parametrize(("disable", "deleted"), [(False, True), (True, False)])
async def test_finalize_deletes_the_object_when_configured_unless_the_plugin_opts_out(
    harness: Harness, disable: bool, deleted: bool
) -> None:
    plugin = BarePodPlugin(K8sPluginProperties(disable_delete_resource_on_finalize=disable))
    manager = harness.manager(plugin, config=K8sPluginConfig(delete_resource_on_finalize=True))
    tctx = make_tctx()
    await manager.handle(tctx)
    await manager.finalize(tctx)
    gone = False
    try:
        await harness.client.inner.get(POD, NS, "exec1-n0-0")
    except KubeApiError:
        gone = True
    assert gone is deleted
    await manager.finalize(tctx)  # already gone: fine


async def test_finalize_reports_a_failed_delete(harness: Harness) -> None:
    manager = harness.manager(BarePodPlugin(), config=K8sPluginConfig(delete_resource_on_finalize=True))
    tctx = make_tctx()
    await manager.handle(tctx)
    harness.cluster.faults.fail("delete", 500)
    with pytest.raises(
        PluginError, match=rf"finalize: failed to delete resource with name \[{NS}/exec1-n0-0\]"
    ) as info:
        await manager.finalize(tctx)
    # What may be left behind, as the executor prints it when it gives the cleanup up.
    assert isinstance(info.value, CleanupError)
    assert info.value.leftovers == ({"kind": "Pod", "namespace": NS, "name": "exec1-n0-0"},)


async def test_finalize_that_cannot_reach_the_api_lists_the_object_it_could_not_release(
    harness: Harness,
) -> None:
    manager = harness.manager(BarePodPlugin(), config=K8sPluginConfig(inject_finalizer=True))
    tctx = make_tctx()
    await manager.handle(tctx)
    await harness.in_cache("exec1-n0-0")
    harness.client.refuse_connections("patch", 1)
    with pytest.raises(CleanupError) as info:
        await manager.finalize(tctx)
    assert info.value.code == "SystemError"
    assert isinstance(info.value.cause, ConnectionError)
    assert f"failed to remove the finalizer (if any) of resource with name [{NS}/exec1-n0-0]" in str(
        info.value
    )
    assert info.value.leftovers == ({"kind": "Pod", "namespace": NS, "name": "exec1-n0-0"},)
    await drive(harness.clock, manager.finalize(tctx))  # the API back: released (a conflict is retried)
    pod = await harness.client.inner.get(POD, NS, "exec1-n0-0")
    assert not pod["metadata"].get("finalizers")


async def test_abort_that_cannot_reach_the_api_lists_the_object_it_could_not_delete(harness: Harness) -> None:
    manager = harness.manager(BarePodPlugin())
    tctx = make_tctx()
    await manager.handle(tctx)
    harness.client.refuse_connections("delete", 1)
    with pytest.raises(CleanupError) as info:
        await manager.abort(tctx)
    assert isinstance(info.value.cause, ConnectionError)
    assert info.value.leftovers == ({"kind": "Pod", "namespace": NS, "name": "exec1-n0-0"},)
    await manager.abort(tctx)  # the API back: deleted
    with pytest.raises(KubeApiError):
        await harness.client.inner.get(POD, NS, "exec1-n0-0")


async def test_check_task_builds_without_creating_and_refuses_what_cannot_be_built(harness: Harness) -> None:
    manager = harness.manager(BarePodPlugin())
    manager.check_task(make_tctx())
    assert harness.client.calls["create"] == 0
    broken = BarePodPlugin()
    broken.build_error = ValueError("no image")
    with pytest.raises(BadTaskSpecification, match="no image"):
        harness.manager(broken).check_task(make_tctx())
    assert harness.client.calls["create"] == 0


async def test_a_checked_task_starts_the_informer_whose_first_list_comes_before_the_create(
    harness: Harness,
) -> None:
    broken = BarePodPlugin()
    broken.build_error = ValueError("no image")
    refused = harness.manager(broken)
    with pytest.raises(BadTaskSpecification):
        refused.check_task(make_tctx())
    assert refused._informer is None  # a task that cannot be built starts nothing

    manager = harness.manager(BarePodPlugin())
    manager.check_task(make_tctx())
    informer = manager._informer
    assert informer is not None
    await informer.wait_synced()
    assert informer.stats["lists"] == 1 and len(informer) == 0  # listed before anything was created
    await manager.handle(make_tctx())
    await harness.in_cache("exec1-n0-0")  # the create arrives as a watch event, with no second list
    assert informer.stats["lists"] == 1


# -- resource monitor (plugin_collector.go) ------------------------------------------------------------------


async def test_resource_monitor_counts_objects_per_namespace_every_ten_seconds(harness: Harness) -> None:
    manager = harness.manager(BarePodPlugin())
    await manager.handle(make_tctx(name="a"))
    await manager.handle(make_tctx(name="b"))
    await harness.in_cache("b")

    def gauge() -> float | None:
        return harness.registry.get_sample_value("k8s_resources", {"namespace": NS, "kind": "pod"})

    await harness.until(lambda: gauge() is not None)
    await harness.clock.advance(10)
    await harness.until(lambda: gauge() == 2.0)
    await harness.client.inner.delete(POD, NS, "a")
    await harness.until(lambda: harness.factory.informer(POD).get(NS, "a") is None)
    await harness.clock.advance(10)
    await harness.until(lambda: gauge() == 1.0)


# -- wiring (WranglePluginsAndGenerateFinalList, task/plugin_config.go) --------------------------------------


async def test_core_entries_have_lower_cased_ids_and_share_one_backoff_controller(harness: Harness) -> None:
    platform = load_platform_config({}, [K8S_SECTION])
    shared = SharedK8sMachinery(config=platform, informers=harness.factory, clock=harness.clock)
    first_plugin, second_plugin = BarePodPlugin(), BarePodPlugin()
    a = k8s_core_entry(
        K8sPluginEntry("Container", ("container",), POD, lambda _: first_plugin, is_default=True), shared
    )
    b = k8s_core_entry(K8sPluginEntry("Sidecar", ("sidecar",), POD, lambda _: second_plugin), shared)
    assert (a.id, a.registered_task_types, a.is_default) == ("container", ("container",), True)
    setup = SetupContext(enqueue_owner=lambda ns, n: None)
    manager_a, manager_b = a.load_plugin(setup), b.load_plugin(setup)
    assert isinstance(manager_a, PluginManager) and isinstance(manager_b, PluginManager)
    assert manager_a.backoff_controller is manager_b.backoff_controller is not None
    assert manager_a.informer is manager_b.informer
    assert manager_a.backoff_config.max_duration == timedelta(seconds=20)


async def test_core_entry_loader_hands_the_platform_config_to_the_k8s_plugin(harness: Harness) -> None:
    platform = load_platform_config({"plugins": {"k8s": {"inject-finalizer": True}}}, [K8S_SECTION])
    shared = SharedK8sMachinery(config=platform, informers=harness.factory, clock=harness.clock)
    seen: list[K8sPluginSetup] = []

    def load(setup: K8sPluginSetup) -> BarePodPlugin:
        seen.append(setup)
        return BarePodPlugin()

    manager = k8s_core_entry(K8sPluginEntry("bare", ("bare",), POD, load), shared).load_plugin(
        SetupContext(enqueue_owner=lambda ns, n: None)
    )
    assert isinstance(manager, PluginManager)
    assert seen[0].config is platform
    assert manager.config.inject_finalizer is True
