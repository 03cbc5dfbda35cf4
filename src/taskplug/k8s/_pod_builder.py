"""From a task to the pod spec Flyte would create: containers, resources, env, tolerations, node affinity,
GPU selectors, shared memory, base pod templates.

Follows flyteplugins/go/tasks/pluginmachinery/flytek8s/{pod_helper,container_helper,k8s_resource_adds}.go.
Everything here is a pure function of the task context and the :class:`PlatformPodConfig`; pods are plain
JSON dicts with the API's camelCase keys, and empty fields are left out as Go's JSON encoding does.

These are the public building blocks for plugin authors: ``build_raw_pod`` (the task's own pod),
``apply_flyte_pod_configuration`` (every piece of platform configuration) and ``to_k8s_pod_spec`` (both, as
Flyte's ToK8sPodSpec).
"""

from __future__ import annotations

import os
import random
import string
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from flyteidl.core import tasks_pb2
from google.protobuf import json_format, struct_pb2
from pydantic import ValidationError

from taskplug.core import (
    BadTaskSpecification,
    PlatformConfig,
    PodTemplates,
    Quantity,
    QuantityError,
    TaskExecutionContext,
    TaskExecutionMetadata,
    TemplateParameters,
    render_command,
)
from taskplug.k8s._config import K8S_SECTION, K8sPluginConfig
from taskplug.k8s._copilot import add_copilot_to_container, add_copilot_to_pod
from taskplug.k8s._field_errors import first_error, json_type
from taskplug.k8s._names import is_dns1123_label
from taskplug.k8s._pod_spec_model import PodSpecModel
from taskplug.k8s._pod_template import (
    PodTemplateStore,
    deep_copy,
    deep_merge,
    merge_base_pod_spec_onto_template,
)
from taskplug.k8s._resources import (
    ResourceCustomizationMode,
    Resources,
    apply_resource_overrides,
    merge_resources_if_missing,
    resources_from_container,
    resources_from_requirements,
    resources_to_k8s,
    sanitize_gpu_resource_requirements,
    to_k8s_resources_block,
)

__all__ = [
    "PRIMARY_CONTAINER_KEY",
    "PlatformPodConfig",
    "PodSpecModel",
    "RawPod",
    "add_flyte_customizations_to_container",
    "add_required_node_selector_requirements",
    "add_tolerations_for_extended_resources",
    "apply_container_image_override",
    "apply_flyte_pod_configuration",
    "apply_gpu_node_selectors",
    "apply_shared_memory",
    "build_identity_pod",
    "build_raw_container",
    "build_raw_pod",
    "check_pod_spec",
    "decorate_env_vars",
    "execution_env_vars",
    "extract_container_resources_from_pod_template",
    "get_container",
    "get_pod_tolerations",
    "pod_spec_from_struct",
    "service_account_name",
    "to_k8s_pod_spec",
    "update_pod",
]

PRIMARY_CONTAINER_KEY = "primary_container_name"
POD_KIND = "pod"

KubeObject = dict[str, Any]


@dataclass(frozen=True)
class PlatformPodConfig:
    """The platform's pod configuration (``plugins.k8s``), with what can be computed once computed once."""

    k8s: K8sPluginConfig = field(default_factory=K8sPluginConfig)
    pod_templates: PodTemplates = field(default_factory=PodTemplateStore)
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))

    @classmethod
    def from_config(
        cls,
        config: PlatformConfig,
        pod_templates: PodTemplates | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> PlatformPodConfig:
        return cls(
            config.get(K8S_SECTION),
            pod_templates if pod_templates is not None else PodTemplateStore(),
            dict(os.environ) if environ is None else environ,
        )

    @cached_property
    def default_env(self) -> tuple[dict[str, str], ...]:
        env = [{"name": k, "value": v} for k, v in self.k8s.default_env_vars.items()]
        env += [
            {"name": k, "value": self.environ.get(v, "")}
            for k, v in self.k8s.default_env_vars_from_env.items()
        ]
        return tuple(env)

    @cached_property
    def default_env_from(self) -> tuple[dict[str, Any], ...]:
        refs: list[dict[str, Any]] = [
            {"secretRef": {"name": n, "optional": True}} for n in self.k8s.default_env_from_secrets
        ]
        refs += [
            {"configMapRef": {"name": n, "optional": True}} for n in self.k8s.default_env_from_configmaps
        ]
        return tuple(refs)

    @cached_property
    def resource_tolerations(self) -> dict[str, tuple[dict[str, Any], ...]]:
        return {name: tuple(t.k8s for t in tols) for name, tols in self.k8s.resource_tolerations.items()}

    @cached_property
    def interruptible_tolerations(self) -> tuple[dict[str, Any], ...]:
        return tuple(t.k8s for t in self.k8s.interruptible_tolerations)

    @cached_property
    def default_tolerations(self) -> tuple[dict[str, Any], ...]:
        return tuple(t.k8s for t in self.k8s.default_tolerations)


# -- containers -------------------------------------------------------------------------------------------


def _template_parameters(tctx: TaskExecutionContext, include_console_url: bool = False) -> TemplateParameters:
    return TemplateParameters(
        metadata=tctx.metadata,
        inputs=tctx.input_reader,
        output_paths=tctx.output_writer,
        task=tctx.task_reader,
        include_console_url=include_console_url,
    )


def build_raw_container(tctx: TaskExecutionContext, platform: PlatformPodConfig) -> KubeObject:
    """The container of a task with a ``Container`` target, before any platform configuration."""
    template = tctx.task_reader.read()
    if not template.HasField("container"):
        raise BadTaskSpecification("unable to create container with no definition in TaskTemplate")
    meta = tctx.metadata
    overrides = meta.overrides
    if overrides is None or overrides.resources is None:
        raise BadTaskSpecification("resource requirements not found for container task, required!")
    task_container = template.container
    name = meta.task_execution_id.generated_name
    if not is_dns1123_label(name):
        # Flyte picks 4 random lowercase letters/digits when the generated name is not a valid label.
        name = "".join(random.choices(string.ascii_lowercase + string.digits, k=4))
    container: KubeObject = {"name": name, "image": task_container.image}
    command, args, env = task_container.command, task_container.args, task_container.env
    if command:
        container["command"] = list(command)
    if args:
        container["args"] = list(args)
    if env:
        container["env"] = [{"name": kv.key, "value": kv.value} for kv in env]
    resources = to_k8s_resources_block(task_container.resources)
    if resources:
        container["resources"] = resources
    container["terminationMessagePolicy"] = "FallbackToLogsOnError"
    if platform.k8s.image_pull_policy:
        container["imagePullPolicy"] = platform.k8s.image_pull_policy
    return container


def execution_env_vars(meta: TaskExecutionMetadata, console_url: str) -> list[dict[str, str]]:
    """FLYTE_INTERNAL_* variables identifying the execution (Flyte's GetExecutionEnvVars)."""
    tid = meta.task_execution_id.id
    if not tid.HasField("node_execution_id"):
        return []
    node = tid.node_execution_id
    if not node.HasField("execution_id"):
        return []
    execution = node.execution_id
    project, domain, name = execution.project, execution.domain, execution.name
    env = [
        {"name": "FLYTE_INTERNAL_EXECUTION_ID", "value": name},
        {"name": "FLYTE_INTERNAL_EXECUTION_PROJECT", "value": project},
        {"name": "FLYTE_INTERNAL_EXECUTION_DOMAIN", "value": domain},
        {"name": "FLYTE_ATTEMPT_NUMBER", "value": str(tid.retry_attempt)},
    ]
    if console_url:
        url = (
            f"{console_url.rstrip('/')}/projects/{project}/domains/{domain}"
            f"/executions/{name}/nodeId/{meta.task_execution_id.unique_node_id}/nodes"
        )
        env.append({"name": "FLYTE_EXECUTION_URL", "value": url})
    if tid.HasField("task_id"):
        task = tid.task_id
        env += (
            {"name": "FLYTE_INTERNAL_TASK_PROJECT", "value": task.project},
            {"name": "FLYTE_INTERNAL_TASK_DOMAIN", "value": task.domain},
            {"name": "FLYTE_INTERNAL_TASK_NAME", "value": task.name},
            {"name": "FLYTE_INTERNAL_TASK_VERSION", "value": task.version},
        )
    return env


def decorate_env_vars(
    container: KubeObject, meta: TaskExecutionMetadata, platform: PlatformPodConfig, console_url: str
) -> None:
    """Existing env, then execution, task and platform default env; no de-duplication (as Flyte)."""
    own = container.get("env")
    env = list(own) if own else []
    env += execution_env_vars(meta, console_url)
    if meta.environment_variables:
        env += [{"name": k, "value": v} for k, v in meta.environment_variables.items()]
    if platform.default_env:
        env += [dict(e) for e in platform.default_env]
    if env:
        container["env"] = env
    if platform.default_env_from:
        container["envFrom"] = list(container.get("envFrom") or ()) + deep_copy(
            list(platform.default_env_from)
        )


def extract_container_resources_from_pod_template(
    template: Mapping[str, Any] | None, name: str, init: bool
) -> Resources:
    """The resources a pod template gives container ``name``: same name, else ``primary``, else ``default``."""
    if template is None:
        return {"requests": {}, "limits": {}}
    spec = (template.get("template") or {}).get("spec") or {}
    containers = spec.get("initContainers" if init else "containers") or []
    by_name = {c.get("name"): c for c in containers}
    suffix = "-init" if init else ""
    for candidate in (name, f"primary{suffix}", f"default{suffix}"):
        if candidate in by_name:
            return resources_from_container(by_name[candidate], "podTemplate.resources")
    return {"requests": {}, "limits": {}}


def add_flyte_customizations_to_container(
    container: KubeObject,
    params: TemplateParameters,
    mode: ResourceCustomizationMode,
    platform: PlatformPodConfig,
    pod_template_resources: Resources | None = None,
) -> Resources:
    """Render the command line, decorate env, and customize resources; returns the resulting resources."""
    if container.get("command"):
        container["command"] = render_command(container["command"], params)
    if container.get("args"):
        container["args"] = render_command(container["args"], params)
    meta = params.metadata
    decorate_env_vars(container, meta, platform, meta.console_url if params.include_console_url else "")

    k8s = platform.k8s
    platform_requirements = meta.platform_resources
    # (only read: the execution's own maps, uncopied)
    platform_resources: Mapping[str, Mapping[str, Quantity]] = (
        {"requests": platform_requirements.requests, "limits": platform_requirements.limits}
        if platform_requirements is not None
        else {}
    )
    override_requirements = meta.overrides.resources
    own = resources_from_container(container)
    # Only the container's own resources are sanitized; overrides keep a raw `gpu` key (as Flyte).
    sanitize_gpu_resource_requirements(own, k8s.gpu_resource_name)

    if mode is ResourceCustomizationMode.ASSIGN:
        result = resources_from_requirements(override_requirements)
        assign = True
    else:
        if mode is ResourceCustomizationMode.MERGE_EXISTING and override_requirements is not None:
            # (merge_resources, from the execution's maps without copying them first)
            own["limits"].update(override_requirements.limits)
            own["requests"].update(override_requirements.requests)
        if pod_template_resources:
            merge_resources_if_missing(pod_template_resources, own)
        result, assign = own, mode is ResourceCustomizationMode.MERGE_EXISTING
    apply_resource_overrides(
        result,
        platform_resources,
        assign_if_unset=assign,
        default_cpu=k8s.default_cpus,
        default_memory=k8s.default_memory,
        gpu_resource_name=k8s.gpu_resource_name,
    )
    encoded: dict[str, Any] = resources_to_k8s(result)
    if mode is not ResourceCustomizationMode.ASSIGN:
        # The container's other requirements (e.g. DRA `claims`) stay, as in Flyte, which edits them in place.
        for key, value in (container.get("resources") or {}).items():
            if key != "requests" and key != "limits":
                encoded[key] = value
    if encoded:
        container["resources"] = encoded
    else:
        container.pop("resources", None)
    return result


# -- the task's pod spec -----------------------------------------------------------------------------------


def check_pod_spec(spec: Any, what: str, *, prefix: str = "") -> KubeObject:
    """``spec`` checked to have the types of a v1.PodSpec where they are read; a mismatch is a
    BadTaskSpecification naming the field (``prefix`` before it, e.g. ``podSpec``)."""
    if not isinstance(spec, Mapping):
        at = f"{prefix}: " if prefix else ""
        raise BadTaskSpecification(
            f"Unable to unmarshal {what}, Err: [{at}a pod spec must be a mapping, got {json_type(spec)}]"
        )
    try:
        PodSpecModel.model_validate(spec)
    except ValidationError as e:
        path, reason = first_error(e, (prefix,) if prefix else ())
        raise BadTaskSpecification(f"Unable to unmarshal {what}, Err: [{path}: {reason}]") from None
    return dict(spec)


# -- pods -------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class RawPod:
    """A pod spec, its object metadata (annotations and labels) and the primary container's name."""

    spec: KubeObject
    meta: KubeObject
    primary: str


def build_identity_pod() -> KubeObject:
    # Flyte's identity pod carries kind "pod"; the API accepts it and reports "Pod" back.
    return {"kind": POD_KIND, "apiVersion": "v1"}


def pod_spec_from_struct(
    struct: struct_pb2.Struct | Mapping[str, Any], what: str, *, prefix: str = ""
) -> KubeObject:
    """A pod spec given as a protobuf Struct (or already decoded from one), checked by
    :func:`check_pod_spec`: a field of the wrong type is a BadTaskSpecification naming it (after
    ``prefix``, the spec's own field name when it sits inside a larger object)."""
    decoded: Any
    if not isinstance(struct, struct_pb2.Struct) and isinstance(struct, Mapping):
        # (A Struct is registered as a Mapping too, but its values are protobuf Values.)
        decoded = dict(struct)
    else:
        try:
            decoded = json_format.MessageToDict(struct)
        except Exception as e:  # a malformed Struct
            raise BadTaskSpecification(f"Unable to unmarshal {what} [{struct}], Err: [{e}]") from e
    return check_pod_spec(_whole_doubles_as_ints(decoded), what, prefix=prefix)


def _whole_doubles_as_ints(value: Any) -> Any:
    """A Struct's numbers as Flyte's protojson writes them: a whole double as an integer (``8080``, not
    ``8080.0``, which Go's decoder refuses for an int32 field such as ``containerPort``)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return int(value)
    if isinstance(value, dict):
        return {k: _whole_doubles_as_ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole_doubles_as_ints(v) for v in value]
    return value


def _go_map(values: Mapping[str, str]) -> str:
    return "map[" + " ".join(f"{k}:{v}" for k, v in sorted(values.items())) + "]"


def _apply_pod_template_override(raw: RawPod, override: tasks_pb2.K8sPod) -> RawPod:
    """Per-execution pod template override: its metadata merges in, its pod spec replaces the task's."""
    raw.meta["annotations"].update(override.metadata.annotations)
    raw.meta["labels"].update(override.metadata.labels)
    raw.spec = pod_spec_from_struct(override.pod_spec, "pod template override")
    raw.primary = override.primary_container_name
    return raw


def build_raw_pod(tctx: TaskExecutionContext, platform: PlatformPodConfig) -> RawPod:
    """The task's own pod spec and metadata (Flyte's BuildRawPod): no platform configuration yet."""
    template = tctx.task_reader.read()
    meta: KubeObject = {"annotations": {}, "labels": {}}
    target = template.WhichOneof("target")
    if target == "container":
        container = build_raw_container(tctx, platform)
        raw = RawPod({"containers": [container]}, meta, container["name"])
    elif target == "k8s_pod":
        pod = template.k8s_pod
        if not pod.HasField("pod_spec"):
            raise BadTaskSpecification(
                "Pod tasks with task type version > 1 should specify their target as a K8sPod with a defined pod spec"
            )
        spec = pod_spec_from_struct(pod.pod_spec, "task k8s pod")
        if PRIMARY_CONTAINER_KEY not in template.config:
            raise BadTaskSpecification(
                f"invalid TaskSpecification, config missing [{PRIMARY_CONTAINER_KEY}] key in [{_go_map(template.config)}]"
            )
        meta["annotations"].update(pod.metadata.annotations)
        meta["labels"].update(pod.metadata.labels)
        raw = RawPod(spec, meta, template.config[PRIMARY_CONTAINER_KEY])
    else:
        raise BadTaskSpecification("invalid TaskSpecification, unable to determine Pod configuration")
    override = tctx.metadata.overrides.pod_template
    if override is not None and override.HasField("pod_spec"):
        raw = _apply_pod_template_override(raw, override)
    return raw


def get_pod_tolerations(
    interruptible: bool, platform: PlatformPodConfig, requirements: Iterable[Resources]
) -> list[dict[str, Any]]:
    """Resource tolerations (for every resource any container asks for), interruptible, then default ones."""
    tolerations: list[dict[str, Any]] = []
    by_resource = platform.resource_tolerations
    if by_resource:
        names: set[str] = set()
        for req in requirements:
            names.update(req.get("limits") or ())
            names.update(req.get("requests") or ())
        # Flyte iterates a set here (random order); sorted keeps the output stable.
        for name in sorted(names):
            tolerations += [dict(t) for t in by_resource.get(name, ())]
    if interruptible:
        tolerations += [dict(t) for t in platform.interruptible_tolerations]
    tolerations += [dict(t) for t in platform.default_tolerations]
    return tolerations


def add_required_node_selector_requirements(
    affinity: KubeObject, requirements: Iterable[Mapping[str, Any]]
) -> None:
    """Add requirements to every existing required node selector term (terms are OR-ed), or make one term."""
    # Copied: requirements often come from the (cached, shared) platform config, and a caller may later
    # change the pod it gets.
    reqs = deep_copy(list(requirements))
    if not reqs:
        return
    node_affinity = affinity.setdefault("nodeAffinity", {})
    required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.get("nodeSelectorTerms") or []
    if terms:
        for term in terms:
            term["matchExpressions"] = list(term.get("matchExpressions") or []) + deep_copy(reqs)
    else:
        terms = [{"matchExpressions": reqs}]
    required["nodeSelectorTerms"] = terms


def update_pod(
    meta: TaskExecutionMetadata, requirements: list[Resources], spec: KubeObject, platform: PlatformPodConfig
) -> None:
    """Pod-level platform configuration (Flyte's UpdatePod), in place."""
    k8s = platform.k8s
    if not spec.get("restartPolicy"):
        spec["restartPolicy"] = "Never"
    tolerations = get_pod_tolerations(meta.interruptible, platform, requirements) + list(
        spec.get("tolerations") or []
    )
    if tolerations:
        spec["tolerations"] = tolerations
    if not spec.get("serviceAccountName") and meta.k8s_service_account:
        spec["serviceAccountName"] = meta.k8s_service_account
    if not spec.get("schedulerName") and k8s.scheduler_name:
        spec["schedulerName"] = k8s.scheduler_name
    node_selector = {**k8s.default_node_selector, **(spec.get("nodeSelector") or {})}
    if meta.interruptible:
        node_selector.update(k8s.interruptible_node_selector)
    if node_selector:
        spec["nodeSelector"] = node_selector
    if spec.get("affinity") is None and k8s.default_affinity is not None:
        spec["affinity"] = deep_copy(k8s.default_affinity)
    if spec.get("securityContext") is None and k8s.default_pod_security_context is not None:
        spec["securityContext"] = deep_copy(k8s.default_pod_security_context)
    if k8s.enable_host_networking_pod is not None:
        spec["hostNetwork"] = k8s.enable_host_networking_pod
    if spec.get("dnsConfig") is None and k8s.default_pod_dns_config is not None:
        spec["dnsConfig"] = deep_copy(k8s.default_pod_dns_config)
    # Flyte always leaves an affinity object behind here, empty or not.
    affinity = spec.setdefault("affinity", {})
    requirement = (
        k8s.interruptible_node_selector_requirement
        if meta.interruptible
        else k8s.non_interruptible_node_selector_requirement
    )
    if requirement is not None:
        add_required_node_selector_requirements(affinity, [requirement.k8s])


def apply_gpu_node_selectors(
    spec: KubeObject, accelerator: tasks_pb2.GPUAccelerator, platform: PlatformPodConfig
) -> None:
    """Node affinity and tolerations for a GPU device and MIG partition (only when a container asks for GPUs)."""
    k8s = platform.k8s
    gpu = k8s.gpu_resource_name
    if not any(gpu in ((c.get("resources") or {}).get("limits") or {}) for c in spec.get("containers") or []):
        return
    affinity = spec.setdefault("affinity", {})
    requirements: list[dict[str, Any]] = []
    tolerations: list[dict[str, Any]] = []
    if accelerator.device:
        requirements.append(
            {"key": k8s.gpu_device_node_label, "operator": "In", "values": [accelerator.device]}
        )
        tolerations.append(
            {
                "key": k8s.gpu_device_node_label,
                "operator": "Equal",
                "value": accelerator.device,
                "effect": "NoSchedule",
            }
        )
    partition = accelerator.WhichOneof("partition_size_value")
    if partition == "unpartitioned" and accelerator.unpartitioned:
        requirement = k8s.gpu_unpartitioned_node_selector_requirement
        requirements.append(
            requirement.k8s
            if requirement is not None
            else {"key": k8s.gpu_partition_size_node_label, "operator": "DoesNotExist"}
        )
        if k8s.gpu_unpartitioned_toleration is not None:
            tolerations.append(dict(k8s.gpu_unpartitioned_toleration.k8s))
    elif partition == "partition_size":
        size = accelerator.partition_size
        requirements.append({"key": k8s.gpu_partition_size_node_label, "operator": "In", "values": [size]})
        tolerations.append(
            {
                "key": k8s.gpu_partition_size_node_label,
                "operator": "Equal",
                "value": size,
                "effect": "NoSchedule",
            }
        )
    add_required_node_selector_requirements(affinity, requirements)
    if tolerations:
        spec["tolerations"] = list(spec.get("tolerations") or []) + tolerations


def apply_shared_memory(spec: KubeObject, primary: str, shm: tasks_pb2.SharedMemory) -> None:
    """An in-memory emptyDir volume mounted into the primary container."""
    if not shm.mount_name:
        raise BadTaskSpecification("mount name is not set")
    if not shm.mount_path:
        raise BadTaskSpecification("mount path is not set")
    container = next((c for c in spec.get("containers") or [] if c.get("name") == primary), None)
    if container is None:
        raise BadTaskSpecification("Unable to find primary container")
    if any(v.get("name") == shm.mount_name for v in spec.get("volumes") or []):
        raise BadTaskSpecification(f"A volume is already named {shm.mount_name} in pod spec")
    for mount in container.get("volumeMounts") or []:
        if mount.get("name") == shm.mount_name:
            raise BadTaskSpecification(f"A volume is already named {shm.mount_name} in container")
        if mount.get("mountPath") == shm.mount_path:
            raise BadTaskSpecification(f"{shm.mount_path} is already mounted in container")
    size = Quantity(0)
    if shm.size_limit:
        try:
            size = Quantity(shm.size_limit)
        except QuantityError as e:
            raise BadTaskSpecification(f"Unable to parse size limit: {shm.size_limit}", cause=e) from e
    # Flyte sets a zero sizeLimit when none is given (Kubernetes reads 0 as "no limit"); kept as users see it.
    spec["volumes"] = [
        *(spec.get("volumes") or []),
        {"name": shm.mount_name, "emptyDir": {"medium": "Memory", "sizeLimit": str(size)}},
    ]
    container["volumeMounts"] = [
        *(container.get("volumeMounts") or []),
        {"name": shm.mount_name, "mountPath": shm.mount_path},
    ]


def add_tolerations_for_extended_resources(spec: KubeObject, platform: PlatformPodConfig) -> KubeObject:
    """``Exists/NoSchedule`` tolerations for each configured extended resource some container requests."""
    wanted = platform.k8s.add_tolerations_for_extended_resources
    if not wanted:
        return spec
    requested: set[str] = set()
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        requests = (container.get("resources") or {}).get("requests") or {}
        requested.update(name for name in wanted if name in requests)
    tolerations = list(spec.get("tolerations") or [])
    for name in sorted(requested):
        toleration = {"key": name, "operator": "Exists", "effect": "NoSchedule"}
        if not any(_same_toleration(toleration, t) for t in tolerations):
            tolerations.append(toleration)
    if tolerations:
        spec["tolerations"] = tolerations
    return spec


def _same_toleration(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return all(a.get(k, "") == b.get(k, "") for k in ("key", "operator", "value", "effect"))


def apply_container_image_override(spec: KubeObject, image: str, primary: str) -> None:
    for container in spec.get("containers") or []:
        if container.get("name") == primary:
            container["image"] = image
            return


def get_container(spec: Mapping[str, Any], name: str) -> KubeObject:
    for container in spec.get("containers") or []:
        if container.get("name") == name:
            return container  # type: ignore[no-any-return]
    raise BadTaskSpecification(f"invalid TaskSpecification, container [{name}] not defined")


def _base_pod_template(
    namespace: str, template: tasks_pb2.TaskTemplate, platform: PlatformPodConfig
) -> KubeObject | None:
    name = template.metadata.pod_template_name
    if name:
        found = platform.pod_templates.load_or_default(namespace, name)
        if found is None:
            raise BadTaskSpecification(f"PodTemplate '{name}' does not exist")
        return found
    return platform.pod_templates.load_or_default(namespace, platform.k8s.default_pod_template_name)


def _merged_extended_resources(
    base: tasks_pb2.ExtendedResources, override: tasks_pb2.ExtendedResources | None
) -> tasks_pb2.ExtendedResources:
    merged = tasks_pb2.ExtendedResources()
    merged.CopyFrom(base)
    if override is not None:
        # Field-wise: an override's accelerator or shared memory replaces the task's wholesale.
        if override.HasField("gpu_accelerator"):
            merged.gpu_accelerator.CopyFrom(override.gpu_accelerator)
        if override.HasField("shared_memory"):
            merged.shared_memory.CopyFrom(override.shared_memory)
    return merged


def apply_flyte_pod_configuration(
    tctx: TaskExecutionContext, raw: RawPod, platform: PlatformPodConfig
) -> RawPod:
    """Every piece of platform configuration, in Flyte's order (ApplyFlytePodConfiguration)."""
    template = tctx.task_reader.read()
    params = _template_parameters(tctx, include_console_url="link_type" in template.config)
    exec_meta = params.metadata  # (a property that may build a new value on each read: read once)
    base_template = _base_pod_template(exec_meta.namespace, template, platform)
    spec = raw.spec

    for init in spec.get("initContainers") or []:
        add_flyte_customizations_to_container(
            init,
            params,
            ResourceCustomizationMode.MERGE_EXISTING,
            platform,
            extract_container_resources_from_pod_template(base_template, init.get("name", ""), init=True),
        )
    requirements: list[Resources] = []
    primary_container: KubeObject | None = None
    for container in spec.get("containers") or []:
        is_primary = container.get("name") == raw.primary
        mode = (
            ResourceCustomizationMode.MERGE_EXISTING
            if is_primary
            else ResourceCustomizationMode.ENSURE_IN_RANGE
        )
        requirements.append(
            add_flyte_customizations_to_container(
                container,
                params,
                mode,
                platform,
                extract_container_resources_from_pod_template(
                    base_template, container.get("name", ""), init=False
                ),
            )
        )
        if is_primary:
            primary_container = container
    if primary_container is None:
        raise BadTaskSpecification(
            f"invalid TaskSpecification, primary container [{raw.primary}] not defined"
        )

    primary_init = ""
    data_config = _data_loading_config(template)
    if data_config is not None and data_config.enabled:
        add_copilot_to_container(platform.k8s.co_pilot, primary_container, template.interface, data_config)
        overrides = exec_meta.overrides.resources
        primary_init = add_copilot_to_pod(
            platform.k8s.co_pilot,
            spec,
            template.interface,
            data_config,
            input_path=tctx.input_reader.input_path,
            output_prefix=tctx.output_writer.output_prefix,
            raw_output_prefix=tctx.output_writer.raw_output_prefix,
            data_root=tctx.output_writer.output_prefix,
            override_resources=overrides.to_k8s() if overrides is not None else None,
        )

    update_pod(exec_meta, requirements, spec, platform)
    if primary_container.get("securityContext") is None and platform.k8s.default_security_context is not None:
        primary_container["securityContext"] = deep_copy(platform.k8s.default_security_context)

    meta = raw.meta
    if base_template is not None:
        template_spec = (base_template.get("template") or {}).get("spec") or {}
        try:
            # The store's template is this pod's own copy (load_or_default): its containers go in as they are.
            spec = merge_base_pod_spec_onto_template(
                template_spec, spec, raw.primary, primary_init, consume_template_containers=True
            )
        except ValueError as e:
            raise BadTaskSpecification(str(e)) from e
        template_meta = (base_template.get("template") or {}).get("metadata") or {}
        meta = deep_merge(template_meta, meta)
        meta.setdefault("annotations", {})
        meta.setdefault("labels", {})

    override_extended = exec_meta.overrides.extended_resources
    if template.HasField("extended_resources") or override_extended is not None:
        extended = _merged_extended_resources(template.extended_resources, override_extended)
        if extended.HasField("gpu_accelerator"):
            apply_gpu_node_selectors(spec, extended.gpu_accelerator, platform)
        if extended.HasField("shared_memory"):
            apply_shared_memory(spec, raw.primary, extended.shared_memory)

    image = exec_meta.overrides.container_image
    if image:
        apply_container_image_override(spec, image, raw.primary)
    return RawPod(spec, meta, raw.primary)


def _data_loading_config(template: tasks_pb2.TaskTemplate) -> tasks_pb2.DataLoadingConfig | None:
    if template.HasField("container") and template.container.HasField("data_config"):
        return template.container.data_config
    if template.HasField("k8s_pod") and template.k8s_pod.HasField("data_config"):
        return template.k8s_pod.data_config
    return None


def to_k8s_pod_spec(tctx: TaskExecutionContext, platform: PlatformPodConfig) -> RawPod:
    """The task's pod with all platform configuration (Flyte's ToK8sPodSpec)."""
    raw = apply_flyte_pod_configuration(tctx, build_raw_pod(tctx, platform), platform)
    add_tolerations_for_extended_resources(raw.spec, platform)
    return raw


def service_account_name(meta: TaskExecutionMetadata) -> str:
    """The security context's service account if set, else the execution's (Flyte's helper of that name)."""
    run_as = meta.security_context.run_as
    return run_as.k8s_service_account or meta.k8s_service_account
