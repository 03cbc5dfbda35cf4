"""What a plugin sees of a task execution: metadata, overrides, template, inputs, outputs, plugin state.

Follows flyteplugins/go/tasks/pluginmachinery/core/{exec_context,exec_metadata,state,resource_manager,
setup_context,secret_manager}.go.

Deviation: Flyte's readers do I/O on every call (``TaskReader.Read``, ``InputReader.Get``). Here the executor
reads the template and the inputs once, at its edge, and the context hands out what it read, so that
building a resource is a pure function and never blocks the event loop.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from flyteidl.core import identifier_pb2, literals_pb2, security_pb2, tasks_pb2

from taskplug.core._clock import Clock, SystemClock
from taskplug.core._config import PlatformConfig
from taskplug.core._kube_client import KubeClient
from taskplug.core._quantity import Quantity

__all__ = [
    "AllocationStatus",
    "InputReader",
    "LiteralMapOutputReader",
    "OutputPaths",
    "OutputReader",
    "OutputWriter",
    "PluginStateHolder",
    "PluginStateReader",
    "PluginStateWriter",
    "PodTemplates",
    "ResourceConstraintsSpec",
    "ResourceManager",
    "ResourceRegistrar",
    "ResourceRequirements",
    "SecretManager",
    "SetupContext",
    "StaticInputReader",
    "StaticOutputWriter",
    "StaticTaskExecutionContext",
    "StaticTaskReader",
    "TaskExecutionContext",
    "TaskExecutionID",
    "TaskExecutionMetadata",
    "TaskOverrides",
    "TaskReader",
]


@dataclass(frozen=True, slots=True)
class ResourceRequirements:
    """Kubernetes ResourceRequirements with parsed quantities; the maps are never mutated."""

    requests: Mapping[str, Quantity] = field(default_factory=dict)
    limits: Mapping[str, Quantity] = field(default_factory=dict)

    @classmethod
    def from_k8s(cls, value: Mapping[str, Any] | None) -> ResourceRequirements:
        if not value:
            return cls()
        return cls(
            {k: Quantity.from_json(v) for k, v in (value.get("requests") or {}).items()},
            {k: Quantity.from_json(v) for k, v in (value.get("limits") or {}).items()},
        )

    def to_k8s(self) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        if self.limits:
            out["limits"] = {k: str(v) for k, v in self.limits.items()}
        if self.requests:
            out["requests"] = {k: str(v) for k, v in self.requests.items()}
        return out


@dataclass(frozen=True, slots=True)
class TaskOverrides:
    """Per-execution overrides (Flyte's TaskOverrides)."""

    resources: ResourceRequirements | None = None
    extended_resources: tasks_pb2.ExtendedResources | None = None
    container_image: str = ""
    pod_template: tasks_pb2.K8sPod | None = None
    config: Mapping[str, str] | None = None


@dataclass(frozen=True, slots=True)
class TaskExecutionID:
    """The identity of one attempt (Flyte's ``core.TaskExecutionID``): the flyteidl identifier, the unique
    node id, and the generated name, which is unique per attempt and names everything the attempt creates
    (the Kubernetes object, the web-API cache entry, the allocation token)."""

    generated_name: str
    id: identifier_pb2.TaskExecutionIdentifier
    unique_node_id: str

    def generated_name_with(self, min_length: int, max_length: int) -> str:
        """Pad with ``0`` up to ``min_length``; hash down to ``max_length`` when longer."""
        name = self.generated_name
        if len(name) < min_length:
            return name + "0" * (min_length - len(name))
        if len(name) > max_length:
            import hashlib

            digest = hashlib.sha256(name.encode()).hexdigest()
            return ("a" + digest)[:max_length]
        return name


@dataclass(frozen=True, slots=True)
class TaskExecutionMetadata:
    """Everything the platform knows about one attempt of a task (Flyte's TaskExecutionMetadata)."""

    task_execution_id: TaskExecutionID
    namespace: str
    owner_name: str = ""
    owner_reference: Mapping[str, Any] | None = None
    overrides: TaskOverrides = field(default_factory=TaskOverrides)
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    max_attempts: int = 1
    k8s_service_account: str = ""
    security_context: security_pb2.SecurityContext = field(default_factory=security_pb2.SecurityContext)
    interruptible: bool = False
    platform_resources: ResourceRequirements | None = None
    interruptible_failure_threshold: int = 0
    environment_variables: Mapping[str, str] = field(default_factory=dict)
    console_url: str = ""

    @property
    def owner_id(self) -> tuple[str, str]:
        return (self.namespace, self.owner_name)


@runtime_checkable
class TaskReader(Protocol):
    """The task template of the execution (Flyte's ``core.TaskReader``). ``read`` does no I/O here: the
    executor loaded the template once (see the module's deviation)."""

    @property
    def path(self) -> str: ...

    def read(self) -> tasks_pb2.TaskTemplate: ...


@runtime_checkable
class InputReader(Protocol):
    """The execution's inputs and where they are stored (Flyte's ``io.InputReader``); ``get`` returns what the
    executor already read, or None for a task without inputs."""

    @property
    def input_prefix(self) -> str: ...

    @property
    def input_path(self) -> str: ...

    def get(self) -> literals_pb2.LiteralMap | None: ...


class OutputPaths(Protocol):
    """Where an attempt writes its outputs, raw data and checkpoints (Flyte's ``io.OutputFilePaths``,
    ``RawOutputPaths`` and ``CheckpointPaths``); the executor lays them out (``executor.ExecutionPaths``)."""

    @property
    def output_prefix(self) -> str: ...

    @property
    def raw_output_prefix(self) -> str: ...

    @property
    def checkpoint_prefix(self) -> str: ...

    @property
    def prev_checkpoint_prefix(self) -> str: ...


class OutputReader(Protocol):
    """Where a finished task's outputs come from: memory (web-API plugins) or files under the output prefix."""

    async def read(self) -> literals_pb2.LiteralMap | None: ...


class OutputWriter(OutputPaths, Protocol):
    """Where a plugin says where a finished task's outputs are (Flyte's ``io.OutputWriter``). A Kubernetes
    plugin usually puts nothing (the container wrote ``outputs.pb``); a web-API plugin puts an in-memory
    :class:`OutputReader`. The executor reads the outputs once the phase is Success."""

    def put(self, reader: OutputReader | None) -> None:
        """Record the outputs; ``None`` means "read ``outputs.pb`` under the output prefix" (Flyte's
        remote-file output reader)."""
        ...


class PluginStateReader(Protocol):
    """What the plugin wrote to its state last round (Flyte's ``core.PluginStateReader``); the executor
    persists it between rounds and across restarts."""

    def get_state_version(self) -> int: ...

    def get(self) -> tuple[int, Mapping[str, Any] | None]:
        """The state version and the state last put (a JSON-able mapping), or ``(0, None)``."""
        ...


class PluginStateWriter(Protocol):
    """Where a plugin writes the state it needs next round (Flyte's ``core.PluginStateWriter``): a JSON-able
    mapping and a version; the last put of a round wins, ``reset`` clears it."""

    def put(self, version: int, state: Mapping[str, Any]) -> None: ...

    def reset(self) -> None: ...


class PluginStateHolder:
    """Both sides of plugin state for one round: reads what was stored, collects what is put."""

    __slots__ = ("_dirty", "_state", "_version", "_written", "_written_version")

    def __init__(self, version: int = 0, state: Mapping[str, Any] | None = None) -> None:
        self._version = version
        self._state = state
        self._written: Mapping[str, Any] | None = None
        self._written_version = 0
        self._dirty = False

    def get_state_version(self) -> int:
        return self._version

    def get(self) -> tuple[int, Mapping[str, Any] | None]:
        return self._version, self._state

    def put(self, version: int, state: Mapping[str, Any]) -> None:
        self._written, self._written_version, self._dirty = state, version, True

    def reset(self) -> None:
        self._written, self._written_version, self._dirty = None, 0, True

    @property
    def written(self) -> tuple[bool, int, Mapping[str, Any] | None]:
        """Whether anything was put or reset this round, and what: (changed, version, state)."""
        return self._dirty, self._written_version, self._written


class AllocationStatus(enum.IntEnum):
    """The answer to an allocation-token request (Flyte's ``core.AllocationStatus``); ``str()`` gives Flyte's
    names. Nothing returns ``NAMESPACE_QUOTA_EXCEEDED`` (as in Flyte), but the value exists."""

    UNDEFINED = 0
    GRANTED = 1
    EXHAUSTED = 2
    NAMESPACE_QUOTA_EXCEEDED = 3

    def __str__(self) -> str:
        return {0: "AllocationUndefined", 1: "Granted", 2: "Exhausted", 3: "NamespaceQuotaExceeded"}[
            self.value
        ]


@dataclass(frozen=True, slots=True)
class ResourceConstraintsSpec:
    """Caps on allocation tokens per project and per project+domain (``None`` = no cap)."""

    project_scope: int | None = None
    namespace_scope: int | None = None


class ResourceRegistrar(Protocol):
    """Where a plugin registers its quota per namespace at load time (Flyte's ``core.ResourceRegistrar``);
    the web-API adapter registers ``resourceQuotas`` through it."""

    async def register_resource_quota(self, namespace: str, quota: int) -> None: ...


class ResourceManager(Protocol):
    """Allocation tokens under the registered quotas (Flyte's ``core.ResourceManager``): a plugin allocates a
    token per attempt (its generated name) before starting remote work and releases it when finalizing.
    The engine's ``TaskResourceManager`` implements it, in process or over Redis."""

    def get_id(self) -> str: ...

    async def allocate_resource(
        self, namespace: str, token: str, constraints: ResourceConstraintsSpec
    ) -> AllocationStatus: ...

    async def release_resource(self, namespace: str, token: str) -> None: ...


class SecretManager(Protocol):
    """Looks up a secret by key (Flyte's ``core.SecretManager``); None on a context that has none."""

    async def get(self, key: str) -> str: ...


class TaskExecutionContext(Protocol):
    """The per-round view of one task execution handed to a plugin."""

    @property
    def metadata(self) -> TaskExecutionMetadata: ...

    @property
    def task_reader(self) -> TaskReader: ...

    @property
    def input_reader(self) -> InputReader: ...

    @property
    def output_writer(self) -> OutputWriter: ...

    @property
    def plugin_state_reader(self) -> PluginStateReader: ...

    @property
    def plugin_state_writer(self) -> PluginStateWriter: ...

    @property
    def resource_manager(self) -> ResourceManager | None: ...

    @property
    def secret_manager(self) -> SecretManager | None: ...


class PodTemplates(Protocol):
    """The platform's named pod templates (``taskplug.k8s.PodTemplateStore`` is the implementation)."""

    def load_or_default(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The template ``name`` of ``namespace``, else of the default namespace; None when neither has it."""
        ...


@dataclass(frozen=True, slots=True)
class SetupContext:
    """What a plugin loader gets (Flyte's ``SetupContext``): how to wake an execution, quotas, the clock, and
    the platform's parsed configuration and pod templates.

    ``enqueue_owner(namespace, key)`` wakes every execution owning objects labelled with that owner key
    (``taskplug.k8s.owner_key``: the ``execution-id`` label of the objects it created). A loader reads its own
    config section with ``setup.config.get(SECTION)``.
    """

    enqueue_owner: Callable[[str, str], None]
    owner_kind: str = "FlyteWorkflow"
    enqueue_object: Callable[[str, str], bool] | None = None
    """``enqueue_object(namespace, name)``: wake the execution running the object ``name`` (its generated
    name), telling it which of its objects changed (a workflow then gives that node alone a round); False when
    none runs it here (then ``enqueue_owner``)."""
    kube_client: KubeClient | None = None
    """The cluster, for a core plugin that creates objects itself (Flyte's k8s array plugin)."""
    secret_manager: SecretManager | None = None
    resource_registrar: ResourceRegistrar | None = None
    clock: Clock = field(default_factory=SystemClock)
    config: PlatformConfig | None = None
    pod_templates: PodTemplates | None = None


# -- simple implementations, used by the executor and by taskplug.testing -------------------------------


@dataclass(frozen=True, slots=True)
class StaticTaskReader:
    """A :class:`TaskReader` over a template already loaded (the executor and ``taskplug.testing`` use it)."""

    template: tasks_pb2.TaskTemplate
    path: str = ""

    def read(self) -> tasks_pb2.TaskTemplate:
        return self.template


@dataclass(frozen=True, slots=True)
class StaticInputReader:
    """An :class:`InputReader` over inputs already loaded; ``input_path`` is ``inputs.pb`` under the
    prefix."""

    inputs: literals_pb2.LiteralMap | None
    input_prefix: str = ""

    @property
    def input_path(self) -> str:
        return f"{self.input_prefix.rstrip('/')}/inputs.pb" if self.input_prefix else "inputs.pb"

    def get(self) -> literals_pb2.LiteralMap | None:
        return self.inputs


@dataclass(frozen=True, slots=True)
class LiteralMapOutputReader:
    """Outputs already in memory: a plugin that computed them (echo) or was handed them (a connector's
    ``Resource.outputs``) gives this to ``output_writer.put`` instead of writing ``outputs.pb``."""

    literals: literals_pb2.LiteralMap

    async def read(self) -> literals_pb2.LiteralMap | None:
        return self.literals


@dataclass(slots=True)
class StaticOutputWriter:
    """An :class:`OutputWriter` that records the reader put this round (``was_put``, ``reader``) for the
    executor to read the outputs from."""

    output_prefix: str = ""
    raw_output_prefix: str = ""
    checkpoint_prefix: str = ""
    prev_checkpoint_prefix: str = ""
    reader: OutputReader | None = None
    was_put: bool = False

    def put(self, reader: OutputReader | None) -> None:
        self.reader, self.was_put = reader, True


AsyncCallback = Callable[[], Awaitable[None]]


@dataclass(slots=True)
class StaticTaskExecutionContext:
    """A TaskExecutionContext over values already loaded (the executor builds one per round)."""

    metadata: TaskExecutionMetadata
    task_reader: TaskReader
    input_reader: InputReader
    output_writer: StaticOutputWriter = field(default_factory=StaticOutputWriter)
    plugin_state: PluginStateHolder = field(default_factory=PluginStateHolder)
    resource_manager: ResourceManager | None = None
    secret_manager: SecretManager | None = None

    @property
    def plugin_state_reader(self) -> PluginStateReader:
        return self.plugin_state

    @property
    def plugin_state_writer(self) -> PluginStateWriter:
        return self.plugin_state
