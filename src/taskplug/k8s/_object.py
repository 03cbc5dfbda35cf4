"""The object the plugin manager creates, built without I/O, and the key that routes it back to its owner.

Follows flytepropeller/pkg/controller/nodes/task/k8s/plugin_manager.go (``launchResource``,
``addObjectMetadata``) and the labels of nodes/task/taskexec_context.go. :func:`build_object` is the one
place the created object is assembled: the plugin manager sends what it returns (with
:data:`ATTEMPT_ANNOTATION` added by :func:`stamp_attempt`, so that it adopts and deletes only its own
attempt's objects), ``taskplug render`` prints it, and ``taskplug.testing.check_k8s_plugin`` checks it (in
the manner of lightkube's ``prepare_request``).

Every created object carries the ``execution-id`` label of its owner; when the informer sees the object
change, :func:`owner_key_of` reads the key back and the engine wakes the executions that own it
(:func:`owner_key` of their metadata).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from flyteidl.core import tasks_pb2

from taskplug.core import ResourceType, TaskExecutionContext, TaskExecutionMetadata
from taskplug.k8s._config import K8sPluginConfig
from taskplug.k8s._exec_context import PluginTaskExecutionContext
from taskplug.k8s._names import convert_to_dns1123_subdomain_compatible
from taskplug.k8s._plugin import K8sPlugin
from taskplug.k8s._secrets import (
    EXECUTION_IDENTITY_LABEL,
    SECRET_POD_LABEL,
    k8s_task_execution_metadata,
    sanitize_label_value,
)

__all__ = [
    "ATTEMPT_ANNOTATION",
    "EXECUTION_ID_LABEL",
    "FINALIZER",
    "MACHINERY_ANNOTATIONS",
    "MACHINERY_LABELS",
    "add_object_metadata",
    "attempt_of",
    "build_object",
    "execution_labels",
    "is_attempts_object",
    "owner_key",
    "owner_key_of",
    "registered_kind",
    "stamp_attempt",
]

KubeObject = dict[str, Any]

FINALIZER: Final = "flyte.org/finalizer-k8s"
EXECUTION_ID_LABEL: Final = "execution-id"
ATTEMPT_ANNOTATION: Final = "taskplug.io/task-execution"
"""The annotation naming the one attempt an object was created for (project/domain/name/node/attempt): the
plugin manager adopts an object that already exists, and deletes one, only when it names this attempt."""
_OWNER_LABELS: Final = (EXECUTION_ID_LABEL, "node-id")
MACHINERY_LABELS: Final = frozenset(
    {*_OWNER_LABELS, "interruptible", "task-name", EXECUTION_IDENTITY_LABEL, SECRET_POD_LABEL}
)
"""The labels the machinery sets on every object itself (the owner's execution and node route the object
back to its execution): a submitter through the API may not set them."""
MACHINERY_ANNOTATIONS: Final = frozenset({ATTEMPT_ANNOTATION})
"""The annotations the machinery sets itself: a submitter through the API may not set them."""


def execution_labels(
    execution_name: str, node_id: str, *, interruptible: bool, task_name: str = ""
) -> dict[str, str]:
    """The labels propeller puts on every task object; ``execution-id`` is the owner key."""
    labels = {
        EXECUTION_ID_LABEL: sanitize_label_value(execution_name),
        "node-id": sanitize_label_value(node_id),
        "interruptible": "true" if interruptible else "false",
    }
    if task_name:
        labels["task-name"] = sanitize_label_value(task_name)
    return labels


def owner_key(meta: TaskExecutionMetadata) -> tuple[str, str]:
    """``(namespace, execution-id)``: what ``SetupContext.enqueue_owner`` is called with for this execution's
    objects."""
    return meta.namespace, meta.labels.get(EXECUTION_ID_LABEL) or sanitize_label_value(meta.owner_name)


def owner_key_of(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    """The owner key an observed object carries, or None for an object taskplug did not create."""
    meta = obj.get("metadata") or {}
    execution_id = (meta.get("labels") or {}).get(EXECUTION_ID_LABEL)
    if not execution_id:
        return None
    return str(meta.get("namespace") or ""), str(execution_id)


def attempt_of(meta: TaskExecutionMetadata) -> str:
    """The :data:`ATTEMPT_ANNOTATION` value of an attempt: ``project/domain/name/unique-node-id/attempt``
    (the unique node id tells a map element from the node that holds it)."""
    tid = meta.task_execution_id
    execution = tid.id.node_execution_id.execution_id
    node = tid.unique_node_id or tid.id.node_execution_id.node_id
    return f"{execution.project}/{execution.domain}/{execution.name}/{node}/{tid.id.retry_attempt}"


def stamp_attempt(obj: KubeObject, meta: TaskExecutionMetadata) -> KubeObject:
    """Mark ``obj`` as created for this attempt (:data:`ATTEMPT_ANNOTATION`, over whatever the spec said).
    Mutates and returns ``obj``."""
    metadata = obj.setdefault("metadata", {})
    metadata["annotations"] = {**(metadata.get("annotations") or {}), ATTEMPT_ANNOTATION: attempt_of(meta)}
    return obj


def is_attempts_object(existing: Mapping[str, Any], meta: TaskExecutionMetadata) -> bool:
    """Whether an object found under this attempt's name was created for this attempt: its
    :data:`ATTEMPT_ANNOTATION` names it; an object without one (created before taskplug stamped them) must
    carry this attempt's ``execution-id`` and ``node-id`` labels."""
    found = existing.get("metadata") or {}
    stamped = (found.get("annotations") or {}).get(ATTEMPT_ANNOTATION)
    if stamped is not None:
        return bool(stamped == attempt_of(meta))
    theirs = found.get("labels") or {}
    return all(theirs.get(k) == meta.labels.get(k) for k in _OWNER_LABELS if k in meta.labels)


def _union(*maps: Mapping[str, str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for m in maps:
        if m:
            out.update(m)
    return out


def add_object_metadata(
    meta: TaskExecutionMetadata,
    obj: KubeObject,
    cfg: K8sPluginConfig,
    template: tasks_pb2.TaskTemplate | None,
    *,
    inject_owner_references: bool = True,
    inject_finalizer: bool = True,
) -> KubeObject:
    """Name, namespace, labels, annotations, owner reference and finalizer of a created object.

    Later sources win: execution metadata over template metadata over the object's own over config
    defaults. Mutates and returns ``obj``.
    """
    metadata = obj.setdefault("metadata", {})
    template_meta = template.metadata.metadata if template is not None else None
    # (A protobuf map is copied only when it holds something: most templates set none.)
    template_annotations = template_meta.annotations if template_meta is not None else None
    template_labels = template_meta.labels if template_meta is not None else None
    metadata["namespace"] = meta.namespace
    metadata["annotations"] = _union(
        cfg.default_annotations,
        metadata.get("annotations"),
        dict(template_annotations) if template_annotations else None,
        meta.annotations,
    )
    metadata["labels"] = _union(
        cfg.default_labels,
        metadata.get("labels"),
        dict(template_labels) if template_labels else None,
        meta.labels,
    )
    metadata["name"] = convert_to_dns1123_subdomain_compatible(meta.task_execution_id.generated_name)
    if inject_owner_references and meta.owner_reference is not None:
        metadata["ownerReferences"] = [dict(meta.owner_reference)]
    if cfg.inject_finalizer and inject_finalizer:
        finalizers = list(metadata.get("finalizers") or [])
        if FINALIZER not in finalizers:
            finalizers.append(FINALIZER)
        metadata["finalizers"] = finalizers
    return obj


def registered_kind(obj: Mapping[str, Any], watched: ResourceType) -> ResourceType:
    """The resource type of a built object: the watched type when apiVersion and kind match (kinds compare
    case-insensitively, as the API server's REST mapping does: Flyte's identity pod says ``pod``)."""
    if (
        obj.get("apiVersion") == watched.api_version
        and str(obj.get("kind", "")).lower() == watched.kind.lower()
    ):
        return watched
    return ResourceType.of(obj)


def build_object(
    plugin: K8sPlugin, tctx: TaskExecutionContext, cfg: K8sPluginConfig, *, watched: ResourceType
) -> KubeObject:
    """The exact object the plugin manager creates for this task execution. Pure: no I/O.

    The plugin sees the launch metadata (secret annotations and the execution-identity label added); the
    object then gets its name, namespace, labels, annotations, owner reference and finalizer, and the kind
    its resource type is registered with (controller-runtime sends the scheme's kind: ``Pod``, not ``pod``).
    Whatever the plugin raises propagates (the manager reports it as ``FailedToBuildResource``).
    """
    template = tctx.task_reader.read()
    launch_meta = k8s_task_execution_metadata(tctx.metadata, template)
    obj = plugin.build_resource(PluginTaskExecutionContext(tctx, base_metadata=launch_meta))
    properties = plugin.get_properties()
    add_object_metadata(
        launch_meta,
        obj,
        cfg,
        template,
        inject_owner_references=not properties.disable_inject_owner_references,
        inject_finalizer=not properties.disable_inject_finalizer,
    )
    obj["kind"] = registered_kind(obj, watched).kind
    return obj
