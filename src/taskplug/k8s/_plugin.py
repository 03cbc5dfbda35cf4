"""What a Kubernetes plugin author implements, and what the plugin manager gives back to it.

Follows flyteplugins/go/tasks/pluginmachinery/k8s/plugin.go. A plugin builds an object (a Pod, a
SparkApplication, …) from a task and maps an observed object to a phase; the plugin manager
(``taskplug.engine``) does the creating, watching, aborting and cleaning up.

Deviation: Flyte's ``PluginEntry`` holds a plugin instance that reads process-global config. Here the entry
holds a loader that is handed the parsed config explicitly (:class:`K8sPluginSetup`), so there is no global
state and tests can build a plugin with any config.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from taskplug.core import (
    Clock,
    ConfigSection,
    ErrorCode,
    InputReader,
    KubeClient,
    OutputWriter,
    Phase,
    PhaseInfo,
    PlatformConfig,
    PluginError,
    PluginKind,
    PodTemplates,
    ResourceType,
    SystemClock,
    TaskExecutionContext,
    TaskExecutionMetadata,
    TaskReader,
)
from taskplug.k8s._operator import Operator

__all__ = [
    "AbortBehavior",
    "ErrorAggregationStrategy",
    "K8sPlugin",
    "K8sPluginEntry",
    "K8sPluginProperties",
    "K8sPluginSetup",
    "PluginAbortOverride",
    "PluginContext",
    "PluginState",
    "StaticPluginContext",
    "maybe_update_phase_version",
]

KubeObject = dict[str, Any]


class ErrorAggregationStrategy(enum.IntEnum):
    """How a multi-pod plugin's errors are combined (Flyte's ``k8s.ErrorAggregationStrategy``): one error file
    (``DEFAULT``) or the earliest error of all pods (``EARLIEST``). Declared for parity; the executor reads
    one error document."""

    DEFAULT = 0  # a single error file
    EARLIEST = 1

    def __str__(self) -> str:
        return "Default" if self is ErrorAggregationStrategy.DEFAULT else "Earliest"


@dataclass(frozen=True, slots=True)
class K8sPluginProperties:
    """What a Kubernetes plugin declares about the objects it builds (Flyte's ``k8s.PluginProperties``).

    The plugin manager reads them: no owner references on the object (and no owner-kind filter in the
    informer), no finalizer even when ``plugins.k8s.inject-finalizer`` is on, no delete on finalize even
    when ``delete-resource-on-finalize`` is on, and a cap on the generated name (the object's name).
    """

    disable_inject_owner_references: bool = False
    disable_inject_finalizer: bool = False
    generated_name_max_length: int | None = None
    disable_delete_resource_on_finalize: bool = False
    error_aggregation_strategy: ErrorAggregationStrategy = ErrorAggregationStrategy.DEFAULT


@dataclass(frozen=True, slots=True)
class PluginState:
    """The phase a Kubernetes plugin last reported (Flyte's k8s.PluginState)."""

    phase: Phase = Phase.UNDEFINED
    phase_version: int = 0
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"phase": int(self.phase), "phaseVersion": self.phase_version, "reason": self.reason}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> PluginState:
        if not data:
            return cls()
        return cls(
            Phase(int(data.get("phase", 0))), int(data.get("phaseVersion", 0)), str(data.get("reason", ""))
        )


class PluginContext(Protocol):
    """What ``get_task_phase`` sees (Flyte's k8s.PluginContext)."""

    @property
    def metadata(self) -> TaskExecutionMetadata: ...

    @property
    def task_reader(self) -> TaskReader: ...

    @property
    def input_reader(self) -> InputReader: ...

    @property
    def output_writer(self) -> OutputWriter: ...

    @property
    def plugin_state(self) -> PluginState:
        """The phase this plugin reported last round."""
        ...

    @property
    def now(self) -> Any:
        """The current time (a timezone-aware datetime from the injected clock)."""
        ...


@dataclass(frozen=True)
class StaticPluginContext:
    """A PluginContext over values already at hand (the plugin manager and ``taskplug status`` build one)."""

    metadata: TaskExecutionMetadata
    task_reader: TaskReader
    input_reader: InputReader
    output_writer: OutputWriter
    plugin_state: PluginState = field(default_factory=lambda: PluginState())
    now: Any = None


@runtime_checkable
class K8sPlugin(Protocol):
    """What a Kubernetes plugin author implements (Flyte's ``k8s.Plugin`` in pluginmachinery/k8s/plugin.go).

    The plugin only translates: a task into an object, an observed object into a phase. The engine's
    ``PluginManager`` does every API call (create with back-off, watch through the informer, delete on
    abort, drop the finalizer on finalize), so none of these methods may touch the cluster or block.

    * :meth:`build_identity_resource` returns the object's type only (apiVersion and kind); the manager fills
      name and namespace to find, abort and finalize the object.
    * :meth:`build_resource` returns the full object for one attempt, built from the task context alone
      (pure: same context, same object). It leaves name, namespace, owner references and finalizer to
      :func:`build_object`, which sets them afterwards and merges the execution's labels and annotations
      over the object's own. Raise :class:`~taskplug.core.PluginError` (or any error) for a task that
      cannot be built: the attempt fails permanently with ``FailedToBuildResource``.
    * :meth:`get_task_phase` maps the object as last observed (from the informer's cache) to a
      :class:`~taskplug.core.PhaseInfo`, once per round while the task runs (pure: no I/O; the time is
      ``pctx.now``). A failed task is a failure PhaseInfo, not an exception. On success, put an output
      reader on ``pctx.output_writer`` only when the outputs are not in ``outputs.pb`` under the output
      prefix. Finish with :func:`maybe_update_phase_version` so a new reason in the same phase is reported.

    Register it with a :class:`K8sPluginEntry`; check it with ``taskplug.testing.check_k8s_plugin``. An
    optional :class:`PluginAbortOverride` changes what abort does.
    """

    def get_properties(self) -> K8sPluginProperties: ...

    def build_identity_resource(self, meta: TaskExecutionMetadata) -> KubeObject:
        """The object's type only (apiVersion + kind); the manager fills name and namespace."""
        ...

    def build_resource(self, tctx: TaskExecutionContext) -> KubeObject:
        """The full object to create. Raise PluginError for a task that cannot be built."""
        ...

    def get_task_phase(self, pctx: PluginContext, resource: KubeObject) -> PhaseInfo:
        """Map an observed object to a phase (pure: no I/O)."""
        ...


@dataclass(frozen=True, slots=True)
class AbortBehavior:
    """What to do with the object on abort (Flyte's k8s.AbortBehavior)."""

    resource: KubeObject | None = None
    delete_resource: bool = False
    update: bool = False
    patch: Mapping[str, Any] | None = None
    delete_on_err: bool = False

    @classmethod
    def deleting(cls, resource: KubeObject | None = None) -> AbortBehavior:
        return cls(resource=resource, delete_resource=True)

    @classmethod
    def patching(
        cls, patch: Mapping[str, Any], *, delete_on_err: bool, resource: KubeObject | None = None
    ) -> AbortBehavior:
        return cls(resource=resource, patch=patch, delete_on_err=delete_on_err)

    @classmethod
    def updating(cls, resource: KubeObject | None = None, *, delete_on_err: bool) -> AbortBehavior:
        return cls(resource=resource, update=True, delete_on_err=delete_on_err)


@runtime_checkable
class PluginAbortOverride(Protocol):
    """Optional: a plugin that wants something other than delete on abort (Flyte's PluginAbortOverride)."""

    def on_abort(self, tctx: TaskExecutionContext, resource: KubeObject) -> AbortBehavior: ...


@dataclass(frozen=True)
class K8sPluginSetup:
    """What a Kubernetes plugin loader is given."""

    config: PlatformConfig
    pod_templates: PodTemplates | None = None
    clock: Clock = field(default_factory=SystemClock)
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))


@dataclass(frozen=True)
class K8sPluginEntry:
    """A Kubernetes plugin registration (Flyte's k8s.PluginEntry)."""

    id: str
    registered_task_types: tuple[str, ...]
    resource_to_watch: ResourceType
    load_plugin: Callable[[K8sPluginSetup], K8sPlugin]
    is_default: bool = False
    custom_kube_client: Callable[[], KubeClient] | None = None
    config_sections: tuple[ConfigSection[Any], ...] = ()
    kind: PluginKind = PluginKind.K8S
    local_operator: Callable[[], Operator] | None = None
    """Makes the operator the embedded local cluster runs for the watched type (``taskplug run`` registers it
    with ``LocalCluster.register_operator``); None when the plugin needs none (Pods). Discovery never calls
    it, so an operator may be as heavy as it needs to be without slowing any command down."""

    def validate(self) -> None:
        problems = []
        if not self.id:
            problems.append("an id")
        if not self.registered_task_types:
            problems.append("at least one task type")
        # Entries come from third-party packages: check what the types promise anyway.
        if getattr(self, "load_plugin", None) is None:
            problems.append("a plugin")
        if getattr(self, "resource_to_watch", None) is None:
            problems.append("a resource to watch")
        if problems:
            raise PluginError(
                ErrorCode.PLUGIN_INITIALIZATION_FAILED,
                f"k8s plugin entry [{self.id}] needs {', '.join(problems)}",
            )


def maybe_update_phase_version(info: PhaseInfo, state: PluginState) -> PhaseInfo:
    """Bump the version when the same phase comes back with a new reason (Flyte's MaybeUpdatePhaseVersion).

    Running is excluded, as in Flyte 1, for legacy reasons.
    """
    if (
        info.phase is not Phase.RUNNING
        and info.phase == state.phase
        and info.version <= state.phase_version
        and info.reason != state.reason
    ):
        return info.with_version(state.phase_version + 1)
    return info
