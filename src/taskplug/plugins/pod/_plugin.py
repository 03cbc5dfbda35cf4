"""The pod plugin: container, python-task, python, raw-container and sidecar tasks as Kubernetes Pods.

Follows flyteplugins/go/tasks/plugins/k8s/pod/plugin.go (Flyte 1's, branch ``master``; Flyte 2's backend on
branch ``main`` registers the same plugin for its plain task type ``python`` too, with no extra config). Building goes through the full pod pipeline
(``taskplug.k8s``); status goes through the shared pod status mapping.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from google.protobuf import json_format

from taskplug.core import BadTaskSpecification, PhaseInfo, TaskExecutionContext, TaskExecutionMetadata
from taskplug.k8s import (
    LOGS_SECTION,
    POD,
    PRIMARY_CONTAINER_KEY,
    K8sPluginEntry,
    K8sPluginProperties,
    K8sPluginSetup,
    PlatformPodConfig,
    PluginContext,
    RawPod,
    apply_flyte_pod_configuration,
    build_identity_pod,
    build_raw_pod,
    get_task_phase_with_logs,
    pod_spec_from_struct,
    service_account_name,
)

__all__ = ["PodPlugin", "plugin_entries"]

CONTAINER_TASK_TYPE = "container"
PYTHON_TASK_TYPE = "python-task"
FLYTE2_PYTHON_TASK_TYPE = "python"  # Flyte 2's plain task (flyteplugins on main: pythonTaskType)
RAW_CONTAINER_TASK_TYPE = "raw-container"
SIDECAR_TASK_TYPE = "sidecar"

KubeObject = dict[str, Any]

_PROPERTIES = K8sPluginProperties()  # frozen: one value serves every call


class PodPlugin:
    """Builds a Pod for a task and reports the Pod's phase."""

    def __init__(self, platform: PlatformPodConfig, setup: K8sPluginSetup | None = None) -> None:
        self.platform = platform
        self._log_config = setup.config.get(LOGS_SECTION) if setup is not None else LOGS_SECTION.model()
        self._clock = setup.clock if setup is not None else None

    def get_properties(self) -> K8sPluginProperties:
        return _PROPERTIES

    def build_identity_resource(self, meta: TaskExecutionMetadata) -> KubeObject:
        return build_identity_pod()

    def build_resource(self, tctx: TaskExecutionContext) -> KubeObject:
        template = tctx.task_reader.read()
        task_type = template.type
        if task_type == SIDECAR_TASK_TYPE and template.task_type_version == 0:
            raw = _sidecar_v0(template.custom)
        elif task_type == SIDECAR_TASK_TYPE and template.task_type_version == 1:
            raw = _sidecar_v1(template)
        else:
            raw = build_raw_pod(tctx, self.platform)
        raw = apply_flyte_pod_configuration(tctx, raw, self.platform)
        spec, meta = raw.spec, raw.meta
        # Flyte marks the primary container for sidecar tasks and, as an optimisation, for single-container
        # pods (so a task completes when its container does, before e.g. an injected Istio sidecar).
        if task_type == SIDECAR_TASK_TYPE or (
            len(spec.get("containers") or []) == 1 and task_type != RAW_CONTAINER_TASK_TYPE
        ):
            meta.setdefault("annotations", {})[PRIMARY_CONTAINER_KEY] = raw.primary
        if not spec.get("serviceAccountName"):
            account = service_account_name(tctx.metadata)
            if account:
                spec["serviceAccountName"] = account
        pod = build_identity_pod()
        pod["metadata"] = {k: v for k, v in meta.items() if v or k in ("annotations", "labels")}
        pod["spec"] = spec
        return pod

    def get_task_phase(self, pctx: PluginContext, resource: KubeObject) -> PhaseInfo:
        return get_task_phase_with_logs(pctx, resource, config=self.platform.k8s, log_config=self._log_config)


def _field(data: Mapping[str, Any], name: str) -> tuple[str, Any]:
    """Go's JSON decoding matches field names case-insensitively (``podSpec`` or ``PodSpec``): the key as
    written, and its value."""
    for key, value in data.items():
        if key.lower() == name.lower():
            return key, value
    return name, None


def _sidecar_v0(custom: Any) -> RawPod:
    """Flyte's sidecar v0: ``custom`` is a SidecarJob (a typed v1.PodSpec, its primary container's name,
    annotations and labels); a field of the wrong type fails to unmarshal, a BadTaskSpecification naming it."""
    try:
        job = json_format.MessageToDict(custom)
    except Exception as e:
        raise BadTaskSpecification(f"invalid TaskSpecification [{custom}], Err: [{e}]") from e
    spec_key, pod_spec = _field(job, "podSpec")
    if pod_spec is None:
        raise BadTaskSpecification(f"invalid TaskSpecification, nil PodSpec [{job}]")
    if not isinstance(pod_spec, dict):
        raise BadTaskSpecification(
            f"invalid TaskSpecification [{job}], Err: [{spec_key}: must be a mapping, got {type(pod_spec).__name__}]"
        )
    meta: KubeObject = {}
    for name in ("annotations", "labels"):
        key, value = _field(job, name)
        value = value or {}
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise BadTaskSpecification(
                f"invalid TaskSpecification [{job}], Err: [{key}: must be a mapping of strings to strings]"
            )
        meta[name] = dict(value)
    key, primary = _field(job, "primaryContainerName")
    if not isinstance(primary, str | None):
        raise BadTaskSpecification(
            f"invalid TaskSpecification [{job}], Err: [{key}: must be a string, got {type(primary).__name__}]"
        )
    spec = pod_spec_from_struct(pod_spec, "sidecar pod spec", prefix=spec_key)
    return RawPod(spec, meta, primary or "")


def _sidecar_v1(template: Any) -> RawPod:
    if not template.config:
        raise BadTaskSpecification(
            f"invalid TaskSpecification, config needs to be non-empty and include missing [{PRIMARY_CONTAINER_KEY}] key"
        )
    if PRIMARY_CONTAINER_KEY not in template.config:
        config = "map[" + " ".join(f"{k}:{v}" for k, v in sorted(template.config.items())) + "]"
        raise BadTaskSpecification(
            f"invalid TaskSpecification, config missing [{PRIMARY_CONTAINER_KEY}] key in [{config}]"
        )
    spec = pod_spec_from_struct(template.custom, "sidecar pod spec")
    meta: KubeObject = {"annotations": {}, "labels": {}}
    if template.HasField("k8s_pod"):
        meta["annotations"].update(template.k8s_pod.metadata.annotations)
        meta["labels"].update(template.k8s_pod.metadata.labels)
    return RawPod(spec, meta, template.config[PRIMARY_CONTAINER_KEY])


def _load(setup: K8sPluginSetup) -> PodPlugin:
    return PodPlugin(PlatformPodConfig.from_config(setup.config, setup.pod_templates, setup.environ), setup)


def plugin_entries() -> list[K8sPluginEntry]:
    """The pod plugin's three registrations, as Flyte makes them (one plugin, three ids); ``python`` beside
    flytekit's ``python-task``, as Flyte 2 registers it."""
    return [
        K8sPluginEntry(
            id="container",
            registered_task_types=(
                CONTAINER_TASK_TYPE,
                PYTHON_TASK_TYPE,
                FLYTE2_PYTHON_TASK_TYPE,
                RAW_CONTAINER_TASK_TYPE,
            ),
            resource_to_watch=POD,
            load_plugin=_load,
            is_default=True,
        ),
        K8sPluginEntry(
            id="sidecar",
            registered_task_types=(SIDECAR_TASK_TYPE,),
            resource_to_watch=POD,
            load_plugin=_load,
        ),
        K8sPluginEntry(
            id="pod",
            registered_task_types=(
                CONTAINER_TASK_TYPE,
                PYTHON_TASK_TYPE,
                FLYTE2_PYTHON_TASK_TYPE,
                RAW_CONTAINER_TASK_TYPE,
                SIDECAR_TASK_TYPE,
            ),
            resource_to_watch=POD,
            load_plugin=_load,
            is_default=True,
        ),
    ]
