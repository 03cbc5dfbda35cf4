"""The plugin manager: a core plugin that runs a Kubernetes plugin's objects on a cluster.

Follows flytepropeller/pkg/controller/nodes/task/k8s/{plugin_manager,plugin_context,task_exec_context}.go
and the k8s part of task/plugin_config.go. The Kubernetes plugin builds an
object and maps an observed object to a phase; the manager creates it (under resource-aware back-off for
Pods), follows it through a shared informer (no GET per task in steady state), reports Kubernetes events,
aborts and finalizes it.

Cleanup that cannot reach the API (abort, finalize) raises :class:`CleanupError`, which lists the objects that
may be left behind as (kind, namespace, name); the executor bounds how long it retries and prints them.
:meth:`PluginManager.check_task` builds the object the manager would create without creating it, so that a
task it cannot build is refused before anything runs (``taskplug render`` refuses the same, with the same
``build_object``).

Plugin state (persisted by the executor) is a JSON-able mapping, state version 1::

    {"phase": 0|2, "k8sPluginState": PluginState.to_json(), "lastEventUpdate": "2026-01-01T00:00:00+00:00" | None}
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Final

from prometheus_client import CollectorRegistry

from taskplug.core import (
    TASKS_SECTION,
    BackOffConfig,
    BadTaskSpecification,
    Clock,
    ErrorCode,
    OutputReader,
    OutputWriter,
    Phase,
    PhaseInfo,
    PlatformConfig,
    PluginEntry,
    PluginError,
    PluginKind,
    PluginProperties,
    PodTemplates,
    Quantity,
    ReasonInfo,
    SetupContext,
    SystemClock,
    TaskExecutionContext,
    TaskInfo,
    TaskplugError,
    Transition,
)
from taskplug.engine.k8s._backoff import (
    BackOffController,
    is_resource_quota_exceeded,
    is_resource_requests_eligible,
)
from taskplug.engine.k8s._events import EventWatcher
from taskplug.engine.k8s._informer import Informer, InformerFactory
from taskplug.engine.k8s._monitor import K8sMetrics, ResourceLevelMonitor
from taskplug.k8s import (
    ATTEMPT_ANNOTATION,
    FINALIZER,
    K8S_SECTION,
    AbortBehavior,
    ErrorAggregationStrategy,
    K8sPlugin,
    K8sPluginConfig,
    K8sPluginEntry,
    K8sPluginSetup,
    KubeClient,
    PluginAbortOverride,
    PluginState,
    ResourceType,
    StaticPluginContext,
    add_object_metadata,
    api_error_of,
    attempt_of,
    build_object,
    is_already_exists,
    is_attempts_object,
    is_bad_request,
    is_conflict,
    is_forbidden,
    is_invalid,
    is_not_found,
    is_request_entity_too_large,
    owner_key_of,
    registered_kind,
    stamp_attempt,
)

__all__ = [
    "PLUGIN_STATE_VERSION",
    "CleanupError",
    "ManagerState",
    "PluginManager",
    "PluginPhase",
    "SharedK8sMachinery",
    "compose_resource_key",
    "effective_pod_limits",
    "k8s_core_entry",
]

log = logging.getLogger(__name__)

KubeObject = dict[str, Any]

PLUGIN_STATE_VERSION: Final = 1


class PluginPhase:
    """The manager's own phase (Go's PluginPhase)."""

    NOT_STARTED: Final = 0
    ALLOCATION_TOKEN_ACQUIRED: Final = 1  # defined by Flyte, unused by the manager
    STARTED: Final = 2


@dataclass(frozen=True, slots=True)
class ManagerState:
    """The persisted state of one task execution (Go's k8s PluginState of the plugin manager)."""

    phase: int = PluginPhase.NOT_STARTED
    k8s_plugin_state: PluginState = field(default_factory=PluginState)
    last_event_update: datetime | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "k8sPluginState": self.k8s_plugin_state.to_json(),
            "lastEventUpdate": self.last_event_update.isoformat() if self.last_event_update else None,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ManagerState:
        """Parse a stored state; raise ValueError/TypeError/KeyError when it is not one."""
        if not isinstance(data, Mapping):
            raise TypeError(f"plugin state must be a mapping, got {type(data).__name__}")
        phase = data["phase"]
        if not isinstance(phase, int) or isinstance(phase, bool) or phase not in (0, 1, 2):
            raise ValueError(f"unknown plugin phase {phase!r}")
        k8s_state = data.get("k8sPluginState")
        if k8s_state is not None and not isinstance(k8s_state, Mapping):
            raise TypeError("k8sPluginState must be a mapping")
        last = data.get("lastEventUpdate")
        if last is not None and not isinstance(last, str):
            raise TypeError("lastEventUpdate must be a time string")
        return cls(
            phase,
            PluginState.from_json(k8s_state),
            datetime.fromisoformat(last) if last else None,
        )


# -- pure helpers ---------------------------------------------------------------------------------------


def compose_resource_key(obj: Mapping[str, Any]) -> str:
    """Back-off key ``"{GVK},{namespace}"`` from the object's own apiVersion/kind (e.g. ``/v1, Kind=Pod,ns``)."""
    rtype = ResourceType(str(obj.get("apiVersion") or ""), str(obj.get("kind") or ""), "")
    return f"{rtype.gvk_string()},{(obj.get('metadata') or {}).get('namespace') or ''}"


def _limits(container: Mapping[str, Any]) -> dict[str, Quantity]:
    limits = ((container.get("resources") or {}).get("limits")) or {}
    return {name: Quantity(value) for name, value in limits.items()}


def effective_pod_limits(pod: Mapping[str, Any]) -> dict[str, Quantity]:
    """Per resource, max(max over init containers, sum over containers) of *limits* only (Flyte's
    ``getPodEffectiveResourceLimits``)."""
    spec = pod.get("spec") or {}
    init: dict[str, Quantity] = {}
    for container in spec.get("initContainers") or []:
        for name, q in _limits(container).items():
            if name not in init or q > init[name]:
                init[name] = q
    total: dict[str, Quantity] = {}
    for container in spec.get("containers") or []:
        for name, q in _limits(container).items():
            total[name] = total[name] + q if name in total else q
    out = dict(init)
    for name, q in total.items():
        if name not in out or q > out[name]:
            out[name] = q
    return out


def _is_pod(obj: Mapping[str, Any]) -> bool:
    # Go type-asserts *v1.Pod; on dicts the core group and kind identify one (kind case as written).
    return obj.get("apiVersion") == "v1" and str(obj.get("kind") or "").lower() == "pod"


def _has_deletion_timestamp(obj: Mapping[str, Any]) -> bool:
    meta = obj.get("metadata")
    return isinstance(meta, Mapping) and bool(meta.get("deletionTimestamp"))


class CleanupError(PluginError):
    """Abort or finalize could not clean up (code ``SystemError``); ``leftovers`` are the objects that may be
    left behind, each ``{"kind", "namespace", "name"}``. The executor retries the cleanup within its bound,
    then prints them."""

    def __init__(
        self, message: str, *, leftovers: list[dict[str, str]], cause: BaseException | None = None
    ) -> None:
        super().__init__(ErrorCode.SYSTEM_ERROR, message, cause=cause)
        self.leftovers = tuple(leftovers)

    def __str__(self) -> str:
        # The cause is part of each message already (its text names the API address).
        return f"[{self.code}] {self.message}"


def _ref(obj: Mapping[str, Any], watched: ResourceType) -> dict[str, str]:
    ns, name = _name_of(obj)
    # The kind as the API registers it (``Pod``), whatever case the plugin's identity object used.
    return {"kind": registered_kind(obj, watched).kind, "namespace": ns, "name": name}


def _is_api_trouble(error: BaseException) -> bool:
    """Whether ``error`` (or its cause) is the API's: an answer, or a connection or time-out failure."""
    seen: BaseException | None = error
    while seen is not None:
        if api_error_of(seen) is not None or isinstance(seen, ConnectionError | TimeoutError | OSError):
            return True
        seen = seen.cause if isinstance(seen, PluginError) else seen.__cause__
    return False


def _name_of(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


# -- the output writer get_task_phase sees -------------------------------------------------------------------------------------


class _BufferedOutputWriter:
    """The output writer ``get_task_phase`` sees: records a put; the manager forwards it on success."""

    __slots__ = ("_inner", "put_called", "reader")

    def __init__(self, inner: OutputWriter) -> None:
        self._inner = inner
        self.put_called = False
        self.reader: OutputReader | None = None

    @property
    def output_prefix(self) -> str:
        return self._inner.output_prefix

    @property
    def raw_output_prefix(self) -> str:
        return self._inner.raw_output_prefix

    @property
    def checkpoint_prefix(self) -> str:
        return self._inner.checkpoint_prefix

    @property
    def prev_checkpoint_prefix(self) -> str:
        return self._inner.prev_checkpoint_prefix

    def put(self, reader: OutputReader | None) -> None:
        self.put_called, self.reader = True, reader


# -- the manager ------------------------------------------------------------------------------------------


class PluginManager:
    """A :class:`taskplug.core.Plugin` around one Kubernetes plugin (Go's PluginManager)."""

    def __init__(
        self,
        entry: K8sPluginEntry,
        plugin: K8sPlugin,
        *,
        kube_client: KubeClient | None,
        informers: InformerFactory,
        config: K8sPluginConfig,
        enqueue_owner: Callable[[str, str], None] | None,
        owner_kind: str = "FlyteWorkflow",
        enqueue_object: Callable[[str, str], bool] | None = None,
        backoff_config: BackOffConfig | None = None,
        backoff_controller: BackOffController | None = None,
        clock: Clock | None = None,
        metrics_registry: CollectorRegistry | None = None,
    ) -> None:
        if enqueue_owner is None:
            raise PluginError(
                ErrorCode.PLUGIN_INITIALIZATION_FAILED,
                "Failed to initialize plugin, enqueue Owner cannot be nil or empty.",
            )
        if entry.custom_kube_client is not None:
            custom = entry.custom_kube_client()
            if custom is not None:
                kube_client = custom
        if kube_client is None:
            raise PluginError(
                ErrorCode.PLUGIN_INITIALIZATION_FAILED,
                "Failed to initialize plugin, Kubeclient cannot be nil!",
            )
        if not entry.resource_to_watch.kind:
            raise PluginError(
                ErrorCode.PLUGIN_INITIALIZATION_FAILED, f"No kind in schema for {entry.resource_to_watch}"
            )
        self.entry = entry
        self.plugin = plugin
        self.kube_client = kube_client
        self.config = config
        self.enqueue_owner = enqueue_owner
        self.enqueue_object = enqueue_object
        self.owner_kind = owner_kind
        self.backoff_config = backoff_config or BackOffConfig()
        self.backoff_controller = backoff_controller
        self.clock: Clock = clock or informers.clock
        self.metrics = K8sMetrics.for_registry(metrics_registry)
        self.rtype = entry.resource_to_watch
        self.properties = plugin.get_properties()
        # Bound once: resolving prometheus label children on every informer event was a measurable cost.
        self._updates_dropped = self.metrics.informer_updates.labels(plugin=entry.id, outcome="dropped")
        self._updates_enqueued = self.metrics.informer_updates.labels(plugin=entry.id, outcome="enqueued")
        # Deviation: the informer reads through the factory's client (Flyte: the setup context's cache),
        # the manager's CRUD through the custom client when the entry has one, as in Flyte.
        self._informers = informers
        self._informer: Informer | None = None
        self.event_watcher: EventWatcher | None = None
        self.monitor: ResourceLevelMonitor | None = None
        self.update_base_backoff_ms = config.update_base_backoff_duration
        self.update_backoff_retries = config.update_backoff_retries

    @property
    def informer(self) -> Informer:
        """The cache of watched objects, started with this plugin's first task (its check at submit, or its
        first round).

        Deviation: Flyte starts every plugin's informer at start-up; starting it with the first task keeps a
        plugin whose custom resource the cluster does not have (no Spark operator installed) from failing
        and logging for as long as the executor runs, while costing a running plugin nothing.
        """
        if self._informer is None:
            informers = self._informers
            self._informer = informers.informer(self.rtype)
            self._informer.add_callbacks(
                on_add=self._on_initial_add,
                on_update_version=self._on_update_version,
                on_delete=self._on_delete,
            )
            if self.config.send_object_events:
                self.event_watcher = EventWatcher.attach(informers)
            self.monitor = ResourceLevelMonitor.start(informers, self._informer, metrics=self.metrics)
        return self._informer

    # -- core.Plugin ---------------------------------------------------------------------------------
    @property
    def id(self) -> str:
        return self.entry.id

    def get_properties(self) -> PluginProperties:
        return PluginProperties(
            generated_name_max_length=self.properties.generated_name_max_length,
            earliest_error_aggregation=(
                self.properties.error_aggregation_strategy is ErrorAggregationStrategy.EARLIEST
            ),
        )

    # -- informer ------------------------------------------------------------------------------------
    def _owned_by_owner_kind(self, obj: Mapping[str, Any]) -> bool:
        # Deviation: propeller owns every object through its FlyteWorkflow. taskplug's executor creates no
        # owner object (an owner reference to nothing would let Kubernetes' garbage collector delete the pod),
        # so it passes an empty owner kind, which turns the filter off; the execution-id label still routes.
        if self.properties.disable_inject_owner_references or not self.owner_kind:
            return True
        for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
            if ref.get("controller"):
                return bool(ref.get("kind") == self.owner_kind)
        return False

    def _on_initial_add(self, obj: KubeObject) -> None:
        # Flyte ignores creations. But this informer starts with the first task, so its first list can
        # already hold an object created and updated before the watch began (a pod scheduled, or finished,
        # while the list was on its way): those updates will never come as events, so wake the owner now.
        if self._informer is not None and not self._informer.has_synced:
            self._on_update_version(None, obj)

    def _on_update(self, old: KubeObject | None, new: KubeObject) -> None:
        old_rv = (old.get("metadata") or {}).get("resourceVersion") if old is not None else None
        self._on_update_version(None if old is None else str(old_rv or ""), new)

    def _on_update_version(self, old_rv: str | None, new: KubeObject) -> None:
        # ``old_rv`` None: there is no old copy (an object the first list found).
        if not self._owned_by_owner_kind(new):
            return
        new_meta = new.get("metadata") or {}
        if old_rv is not None and old_rv == str(new_meta.get("resourceVersion") or ""):
            self._updates_dropped.inc()
            return
        owner = owner_key_of(new)
        if owner is not None:
            self._updates_enqueued.inc()
            self._enqueue(owner, new_meta)

    def _on_delete(self, obj: KubeObject) -> None:
        # Deviation: Flyte's informer predicate drops deletions, so an object deleted behind its back is
        # noticed at the next resync; waking the owner reports ResourceDeletedExternally at once.
        if not self._owned_by_owner_kind(obj):
            return
        owner = owner_key_of(obj)
        if owner is not None:
            self._updates_enqueued.inc()
            self._enqueue(owner, obj.get("metadata") or {})

    def _enqueue(self, owner: tuple[str, str], meta: Mapping[str, Any]) -> None:
        # The execution running this object by its name, told which object changed; else its owner's.
        name = meta.get("name")
        if self.enqueue_object is not None and name and self.enqueue_object(owner[0], str(name)):
            return
        self.enqueue_owner(*owner)

    # -- handle --------------------------------------------------------------------------------------
    def _rtype_for(self, obj: Mapping[str, Any]) -> ResourceType:
        return registered_kind(obj, self.rtype)

    async def handle(self, tctx: TaskExecutionContext) -> Transition:
        self.informer  # noqa: B018 - start watching before the first create, so its status is never missed
        version, raw = tctx.plugin_state_reader.get()
        if raw is None:
            state = ManagerState()
        else:
            try:
                state = ManagerState.from_json(raw)
            except (KeyError, TypeError, ValueError) as e:
                if version != PLUGIN_STATE_VERSION:
                    return Transition.to(
                        PhaseInfo.retryable_failure(
                            ErrorCode.CORRUPTED_PLUGIN_STATE,
                            f"plugin state version mismatch expected [{PLUGIN_STATE_VERSION}] got [{version}]",
                        )
                    )
                raise PluginError(
                    ErrorCode.CORRUPTED_PLUGIN_STATE, "Failed to read unmarshal custom state", cause=e
                ) from e

        plugin_phase = state.phase
        last_event_update = state.last_event_update
        looked_up: KubeObject | None = None
        if state.phase == PluginPhase.NOT_STARTED:
            transition = await self.launch_resource(tctx)
            if transition.info.phase is Phase.QUEUED:
                plugin_phase = PluginPhase.STARTED
        else:
            try:
                identity = self._get_resource(tctx)
            except Exception as e:
                transition = Transition.to(
                    PhaseInfo.failure("BadTaskDefinition", f"Failed to build resource, caused by: {e}")
                )
            else:
                looked_up = identity
                transition = await self.check_resource_phase(tctx, identity, state.k8s_plugin_state)

        info = transition.info
        if info.err is not None:
            self.metrics.task_pod_errors.labels(
                plugin=self.id, phase=str(info.phase), error_code=info.err.code
            ).inc()

        stored_version = info.version
        if looked_up is not None and self.event_watcher is not None:
            ns, name = _name_of(looked_up)
            events = self.event_watcher.list(
                str(looked_up.get("kind") or self.rtype.kind), ns, name, last_event_update
            )
            if events:
                reasons = tuple(ReasonInfo(e.note, e.created_at) for e in events)
                task_info = info.info if info.info is not None else TaskInfo()
                info = info.with_info(replace(task_info, additional_reasons=reasons))
                transition = Transition(info, transition.type)
                last_event_update = events[-1].created_at
                # Only the persisted version moves: the next round's same-phase report then differs.
                stored_version = info.version + 1

        new_state = ManagerState(
            plugin_phase, PluginState(info.phase, stored_version, info.reason), last_event_update
        )
        if raw is None or new_state != state:
            tctx.plugin_state_writer.put(PLUGIN_STATE_VERSION, new_state.to_json())
        return transition

    def _get_resource(self, tctx: TaskExecutionContext) -> KubeObject:
        obj = self.plugin.build_identity_resource(tctx.metadata)
        template = tctx.task_reader.read()
        return add_object_metadata(
            tctx.metadata,
            obj,
            self.config,
            template,
            inject_owner_references=not self.properties.disable_inject_owner_references,
            inject_finalizer=not self.properties.disable_inject_finalizer,
        )

    # -- launch --------------------------------------------------------------------------------------
    def check_task(self, tctx: TaskExecutionContext) -> None:
        """Build the object :meth:`launch_resource` would create, and create nothing: what cannot be built
        is a :class:`BadTaskSpecification`, raised before any round. Deviation: Flyte finds out at launch
        and fails the attempt (``FailedToBuildResource``); the executor asks here at submit, so that
        ``taskplug run`` refuses what ``taskplug render`` refuses.

        A task that can be built starts the informer, as :meth:`handle` would: its first list then runs
        before the task's object is created, not after everything submitted at once has been (a list of
        every one of those objects, then one wake-up each)."""
        try:
            build_object(self.plugin, tctx, self.config, watched=self.rtype)
        except BadTaskSpecification:
            raise
        except Exception as e:  # whatever a plugin raises while building is the task's fault
            raise BadTaskSpecification(str(e) or type(e).__name__) from e
        self.informer  # noqa: B018 - start watching before the first create

    async def launch_resource(self, tctx: TaskExecutionContext) -> Transition:
        try:
            obj = build_object(self.plugin, tctx, self.config, watched=self.rtype)
        except Exception as e:
            return Transition.to(
                PhaseInfo.failure("FailedToBuildResource", f"could not build resource for task: {e}")
            )
        rtype = self._rtype_for(obj)
        # Deviation: the object names its attempt (an annotation): an object that already exists under its
        # name is adopted only when it names this attempt (Flyte adopts whatever AlreadyExists).
        stamp_attempt(obj, tctx.metadata)

        async def create() -> KubeObject:
            return await self.kube_client.create(rtype, obj)

        try:
            if self.backoff_controller is not None and _is_pod(obj):
                handler = self.backoff_controller.get_or_create_handler(
                    compose_resource_key(obj),
                    self.backoff_config.base_second,
                    self.backoff_config.max_duration,
                )
                await handler.handle(create, effective_pod_limits(obj))
            else:
                await create()
        except Exception as err:
            if not is_already_exists(err):
                return self._classify_create_error(err)
            foreign = await self._foreign_at_create(tctx, rtype, obj)
            if foreign is not None:
                return Transition.to(foreign)
        return Transition.to(PhaseInfo.queued(self.clock.now(), 0, "task submitted to K8s"))

    async def _foreign_at_create(
        self, tctx: TaskExecutionContext, rtype: ResourceType, obj: KubeObject
    ) -> PhaseInfo | None:
        """The failure of an attempt whose object's name is taken by an object that is not its own (None
        when the existing object is this attempt's: a replayed create, adopted). The foreign object is left
        as it is, and :meth:`abort` and :meth:`finalize` leave it too."""
        ns, name = _name_of(obj)
        try:
            existing = await self.kube_client.get(rtype, ns, name)
        except Exception as e:
            # Gone again (or unreadable): the round cannot decide; the next one creates it anew.
            raise PluginError(
                ErrorCode.SYSTEM_ERROR,
                f"{rtype.kind} [{ns}/{name}] already exists but cannot be read",
                cause=e,
            ) from e
        if is_attempts_object(existing, tctx.metadata):
            return None
        stamped = ((existing.get("metadata") or {}).get("annotations") or {}).get(ATTEMPT_ANNOTATION)
        return PhaseInfo.system_retryable_failure(
            "ResourceOwnedByAnother",
            f"{rtype.kind} [{ns}/{name}] already exists and was not created for this attempt "
            f"(its {ATTEMPT_ANNOTATION} is {stamped!r}, this attempt is {attempt_of(tctx.metadata)!r}): "
            "it is left alone and this attempt fails",
        )

    async def _is_own(self, tctx: TaskExecutionContext, resource: Mapping[str, Any]) -> bool:
        """Whether the object under ``resource``'s name is this attempt's (or there is none): what abort and
        finalize may delete or patch. The informer's copy decides when it has one, else one GET."""
        own, _ = await self._own_object(tctx, resource)
        return own

    async def _own_object(
        self, tctx: TaskExecutionContext, resource: Mapping[str, Any]
    ) -> tuple[bool, KubeObject | None]:
        """:meth:`_is_own`, with the object it looked at (None when there is none): finalize's first look at
        its finalizers, so the object is read (and decoded) once."""
        ns, name = _name_of(resource)
        rtype = self._rtype_for(resource)
        current = self.informer.get(ns, name) if rtype == self.rtype else None
        if current is None:
            try:
                current = await self.kube_client.get(rtype, ns, name)
            except Exception as e:
                if is_not_found(e):
                    return True, None  # nothing there: deleting it is a no-op
                raise
        if is_attempts_object(current, tctx.metadata):
            return True, current
        log.warning("%s [%s/%s] was not created for this attempt: left alone", rtype.kind, ns, name)
        return False, current

    async def _is_own_or_cleanup_error(
        self, tctx: TaskExecutionContext, resource: KubeObject, failed_to: str
    ) -> bool:
        """:meth:`_is_own`, its failure a :class:`CleanupError` worded as the cleanup it prevents."""
        try:
            return await self._is_own(tctx, resource)
        except Exception as e:
            ns, name = _name_of(resource)
            raise CleanupError(
                f"{failed_to} resource with name [{ns}/{name}]. Error: {e}",
                leftovers=[_ref(resource, self.rtype)],
                cause=e,
            ) from e

    def _classify_create_error(self, err: Exception) -> Transition:
        text = str(err)
        quota = is_resource_quota_exceeded(err)
        if quota and not is_resource_requests_eligible(err):
            return Transition.to(
                PhaseInfo.failure(
                    "ResourceRequestsExceedLimits", f"requested resources exceed limits: {text}"
                )
            )
        if (isinstance(err, PluginError) and err.has_code(ErrorCode.BACK_OFF_ERROR)) or (
            self.backoff_controller is None and quota
        ):
            return Transition.to(PhaseInfo.waiting_for_resources(0, f"Exceeded resourcequota: {text}"))
        if is_forbidden(err):
            return Transition.to(PhaseInfo.retryable_failure(ErrorCode.RUNTIME_FAILURE, text))
        if is_bad_request(err) or is_invalid(err):
            return Transition.to(PhaseInfo.failure("BadTaskFormat", text))
        if is_request_entity_too_large(err):
            return Transition.to(PhaseInfo.failure("EntityTooLarge", text))
        api = api_error_of(err)
        # Flyte returns the error (the round could not decide; the executor's round-error budget bounds
        # it). An API that cannot be reached or answers 5xx is a system error; the cause names its address.
        code = api.reason if api is not None and api.reason else ErrorCode.SYSTEM_ERROR
        raise PluginError(code, "failed to create resource", cause=err) from err

    # -- observe -------------------------------------------------------------------------------------
    async def check_resource_phase(
        self, tctx: TaskExecutionContext, identity: KubeObject, k8s_state: PluginState
    ) -> Transition:
        ns, name = _name_of(identity)
        observed = self.informer.get(ns, name) if self._rtype_for(identity) == self.rtype else None
        if observed is None:
            # Not (yet) in the cache, e.g. created a moment ago: one GET decides.
            try:
                observed = await self.kube_client.get(self._rtype_for(identity), ns, name)
            except Exception as e:
                if is_not_found(e):
                    return Transition.to(
                        PhaseInfo.system_retryable_failure(
                            "ResourceDeletedExternally",
                            f"resource not found, name [{ns}/{name}]. reason: {e}",
                        )
                    )
                raise
        writer = _BufferedOutputWriter(tctx.output_writer)
        pctx = StaticPluginContext(
            metadata=tctx.metadata,
            task_reader=tctx.task_reader,
            input_reader=tctx.input_reader,
            output_writer=writer,
            plugin_state=k8s_state,
            now=self.clock.now(),
        )
        try:
            info = self.plugin.get_task_phase(pctx, observed)
        except Exception as e:
            # Flyte's checkResourcePhase returns GetTaskPhase's error (a panic too, recovered by the task
            # handler): the round could not decide and is retried, the object may read well next time. The
            # executor's round-error budget turns an error that persists into a SystemRetryableFailure.
            kind = str(observed.get("kind") or self.rtype.kind)
            detail = "" if isinstance(e, TaskplugError) else f" ({type(e).__name__})"
            raise PluginError(
                e.code if isinstance(e, PluginError) else ErrorCode.SYSTEM_ERROR,
                f"failed to check status of {kind} [{ns}/{name}] in plugin [{self.id}]{detail}",
                cause=e,
            ) from e
        if info.phase is Phase.SUCCESS:
            tctx.output_writer.put(writer.reader if writer.put_called else None)
            return Transition.to(info)
        if not info.phase.is_terminal and _has_deletion_timestamp(observed):
            return Transition.to(
                PhaseInfo.system_retryable_failure(
                    "UnexpectedObjectDeletion", f"object [{ns}/{name}] terminated in the background, manually"
                )
            )
        return Transition.to(info)

    # -- abort ---------------------------------------------------------------------------------------
    async def abort(self, tctx: TaskExecutionContext) -> None:
        try:
            resource = self._get_resource(tctx)
        except Exception:
            log.exception("abort: failed to build the resource to abort")
            return
        if not await self._is_own_or_cleanup_error(tctx, resource, "abort: failed to delete"):
            return  # another attempt's (a name taken before this attempt's create): not ours to abort
        target = resource
        delete = True
        behavior: AbortBehavior | None = None
        if isinstance(self.plugin, PluginAbortOverride):
            try:
                behavior = self.plugin.on_abort(tctx, resource)
            except Exception as e:
                if is_not_found(e):
                    return
                raise
            delete = behavior.delete_resource
            if behavior.resource is not None:
                target = behavior.resource
        error: Exception | None = None
        try:
            if delete:
                await self._delete(target)
            else:
                assert behavior is not None
                error = await self._patch_or_update(behavior, target)
                if error is not None and behavior.delete_on_err:
                    error = None
                    await self._delete(target)
        except Exception as e:
            error = e
        if error is not None and not is_not_found(error):
            if isinstance(error, PluginError) and not _is_api_trouble(error):
                raise error  # a misuse (an AbortBehavior naming no operation), not the API's doing
            ns, name = _name_of(target)
            raise CleanupError(
                f"abort: failed to {'delete' if delete else 'update'} resource with name [{ns}/{name}]. "
                f"Error: {error}",
                leftovers=[_ref(target, self.rtype)],
                cause=error,
            ) from error

    async def _delete(self, obj: Mapping[str, Any]) -> None:
        ns, name = _name_of(obj)
        await self.kube_client.delete(self._rtype_for(obj), ns, name)

    async def _patch_or_update(self, behavior: AbortBehavior, target: KubeObject) -> Exception | None:
        """Run the one operation the behavior names; its failure is returned, a misuse raised."""
        if (behavior.patch is not None) == behavior.update:
            raise PluginError(
                ErrorCode.RUNTIME_FAILURE,
                f"AbortBehavior for resource {_name_of(target)[1]} must specify either a Patch and an Update "
                "operation if Delete is set to false. Only one can be supplied.",
            )
        ns, name = _name_of(target)
        try:
            if behavior.patch is not None:
                await self.kube_client.patch(self._rtype_for(target), ns, name, behavior.patch)
            else:
                await self.kube_client.replace(self._rtype_for(target), target)
        except Exception as e:
            return e
        return None

    # -- finalize ------------------------------------------------------------------------------------
    async def finalize(self, tctx: TaskExecutionContext) -> None:
        try:
            resource = self._get_resource(tctx)
        except Exception:
            log.exception("finalize: failed to build the resource to finalize")
            return
        errors: list[str] = []
        first_error: Exception | None = None
        ns, name = _name_of(resource)
        deleting = (
            self.config.delete_resource_on_finalize
            and not self.properties.disable_delete_resource_on_finalize
        )
        current: KubeObject | None = None
        try:
            own, current = await self._own_object(tctx, resource)
        except Exception as e:
            # Whose it is cannot be told: neither step is taken, and both are reported as not done.
            own, first_error = False, e
            errors.append(
                f"finalize: failed to remove the finalizer (if any) of resource with name [{ns}/{name}]. "
                f"Error: {e}"
            )
            if deleting:
                errors.append(f"finalize: failed to delete resource with name [{ns}/{name}]. Error: {e}")
        if own:
            last_error = await self._remove_finalizer(resource, first_look=current)
            if last_error is not None:
                errors.append(
                    f"finalize: failed to remove the finalizer (if any) of resource with name [{ns}/{name}]. "
                    f"Error: {last_error}"
                )
                first_error = last_error
            if deleting:
                try:
                    await self._delete(resource)
                except Exception as e:
                    if not is_not_found(e):
                        errors.append(
                            f"finalize: failed to delete resource with name [{ns}/{name}]. Error: {e}"
                        )
                        first_error = first_error or e
        if errors:
            # Deviation: Flyte returns an untyped multi-error; here it is one error naming every part and the
            # object that may be left behind (with our finalizer, or undeleted).
            raise CleanupError("; ".join(errors), leftovers=[_ref(resource, self.rtype)], cause=first_error)

    async def _remove_finalizer(
        self, resource: KubeObject, *, first_look: KubeObject | None = None
    ) -> Exception | None:
        """Drop our finalizer with a merge patch, retrying conflicts with apimachinery's back-off.
        ``first_look``: the object as the caller just read it, used for the first try instead of reading again.

        Returns the error of the last attempt that did not succeed (None when done).
        """
        ns, name = _name_of(resource)
        rtype = self._rtype_for(resource)
        delay = self.update_base_backoff_ms / 1000.0
        last_error: Exception | None = None
        for step in range(self.update_backoff_retries):
            last_error = None
            # Deviation: the first look comes from the informer cache (Flyte GETs from the API); a cached
            # object without our finalizer needs no patch, so a finished task costs no GET. After a conflict,
            # and for objects the cache does not hold, the API is asked.
            cached = None
            if step == 0:
                cached = first_look or (self.informer.get(ns, name) if rtype == self.rtype else None)
            try:
                current = cached if cached is not None else await self.kube_client.get(rtype, ns, name)
            except Exception as e:
                if is_not_found(e):
                    return None
                return e
            meta = current.get("metadata") or {}
            finalizers = list(meta.get("finalizers") or [])
            if FINALIZER not in finalizers:
                return None
            remaining = [f for f in finalizers if f != FINALIZER]
            # The resourceVersion makes the patch conditional, so a concurrent writer yields a Conflict
            # (retried) instead of losing its change.
            patch = {
                "metadata": {"finalizers": remaining or None, "resourceVersion": meta.get("resourceVersion")}
            }
            try:
                await self.kube_client.patch(rtype, ns, name, patch, patch_type="merge")
            except Exception as e:
                err = e
                if is_not_found(err):
                    return None
                if not is_conflict(err):
                    return e
                last_error = e
                if step + 1 < self.update_backoff_retries:
                    # apimachinery wait.Backoff: jitter adds up to 10 %, then the delay doubles.
                    await self.clock.sleep(delay * (1 + 0.1 * random.random()))
                    delay *= 2
                continue
            return None
        return last_error


# -- wiring (Flyte's WranglePluginsAndGenerateFinalList for k8s entries) -----------------------------------


@dataclass
class SharedK8sMachinery:
    """What every plugin manager of a process shares: one back-off controller, one informer factory, one
    metrics registry, the parsed config.

    The informer factory owns the background tasks: enter it (``async with shared.informers:``) around
    the plugins' lifetime.
    """

    config: PlatformConfig
    informers: InformerFactory
    clock: Clock = field(default_factory=SystemClock)
    backoff_controller: BackOffController | None = None
    metrics_registry: CollectorRegistry | None = None
    pod_templates: PodTemplates | None = None

    def __post_init__(self) -> None:
        if self.backoff_controller is None:
            self.backoff_controller = BackOffController(self.clock)

    def build(self, entry: K8sPluginEntry, setup: SetupContext) -> PluginManager:
        plugin = entry.load_plugin(
            K8sPluginSetup(config=self.config, pod_templates=self.pod_templates, clock=self.clock)
        )
        return PluginManager(
            entry,
            plugin,
            kube_client=self.informers.client,
            informers=self.informers,
            config=self.config.get(K8S_SECTION),
            enqueue_owner=setup.enqueue_owner,
            enqueue_object=setup.enqueue_object,
            owner_kind=setup.owner_kind,
            backoff_config=self.config.get(TASKS_SECTION).backoff,
            backoff_controller=self.backoff_controller,
            clock=self.clock,
            metrics_registry=self.metrics_registry,
        )


def k8s_core_entry(entry: K8sPluginEntry, shared: SharedK8sMachinery) -> PluginEntry:
    """A core :class:`PluginEntry` (lower-cased id) whose loader builds a PluginManager on ``shared``."""

    def load(setup: SetupContext) -> PluginManager:
        return shared.build(entry, setup)

    return PluginEntry(
        id=entry.id.lower(),
        registered_task_types=tuple(entry.registered_task_types),
        load_plugin=load,
        is_default=entry.is_default,
        kind=PluginKind.K8S,
    )
