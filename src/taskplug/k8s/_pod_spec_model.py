"""The one typed model of a v1.PodSpec's fields, for every place a pod spec comes from someone else.

Flyte decodes a pod spec (a task's protobuf Struct: pod_helper.go ``ToK8sPodSpec``, the sidecar plugin's
``UnmarshalStructToObj``; a PodTemplate from the informer) into a typed ``v1.PodSpec``: a field of the wrong
type fails to unmarshal. taskplug keeps pod specs as JSON, so the fields the builder, the merge of pod
templates, the API server's scheduler and the kubelet read are checked against this model of their Go types
first: a ``command`` given as a string is refused naming the field, never turned into a list of characters.
Unknown fields pass untouched; JSON null reads as Go reads it (the zero value). The task's pod specs
(``check_pod_spec`` in ``_pod_builder.py``), PodTemplate manifests (``_pod_template.py``, whose containers
and env vars must be named) and the spec's pod-template override (``taskplug.executor``) all use it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from taskplug.core import Quantity, QuantityError

__all__ = ["PodSpecModel", "TemplatePodSpecModel"]


def _whole_number(value: Any) -> Any:
    # A protobuf Struct holds every number as a double: a whole double is the integer Go's decoder reads.
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _non_negative_quantity(value: Any) -> Any:
    try:
        parsed = Quantity.from_json(value)
    except QuantityError as e:
        raise ValueError(str(e)) from None
    if parsed.nanos < 0:
        # apimachinery's ValidateNonnegativeQuantity: requests and limits are never negative.
        raise ValueError(f"must be greater than or equal to 0, got {value!r}")
    return value


def _in_range(bits: int) -> Callable[[int], int]:
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1

    def check(value: int) -> int:
        if not low <= value <= high:
            raise ValueError(f"must be a {bits}-bit integer ({low} to {high}), got {value}")
        return value

    return check


_Int32 = Annotated[int, BeforeValidator(_whole_number), AfterValidator(_in_range(32))]
_Int64 = Annotated[int, BeforeValidator(_whole_number), AfterValidator(_in_range(64))]
_Quantity = Annotated[Any, AfterValidator(_non_negative_quantity)]
_Object = dict[str, Any]


class _Typed(BaseModel):
    # Unknown fields pass through untouched (the pod carries them); the fields below must have their type.
    # defer_build: the validators are built on first use, not when a command imports the module.
    model_config = ConfigDict(extra="ignore", strict=True, frozen=True, defer_build=True)


class _ResourceRequirements(_Typed):
    requests: dict[str, _Quantity] | None = None
    limits: dict[str, _Quantity] | None = None
    claims: list[_Object] | None = None


class _EnvVar(_Typed):
    name: str
    value: str | None = None
    value_from: _Object | None = Field(None, alias="valueFrom")


class _ContainerPort(_Typed):
    name: str | None = None
    container_port: _Int32 | None = Field(None, alias="containerPort")
    host_port: _Int32 | None = Field(None, alias="hostPort")
    protocol: str | None = None


class _VolumeMount(_Typed):
    name: str | None = None
    mount_path: str | None = Field(None, alias="mountPath")
    sub_path: str | None = Field(None, alias="subPath")
    read_only: bool | None = Field(None, alias="readOnly")


class _Container(_Typed):
    name: str | None = None
    image: str | None = None
    command: list[str] | None = None
    args: list[str] | None = None
    working_dir: str | None = Field(None, alias="workingDir")
    env: Sequence[_EnvVar] | None = None  # Sequence: a template's container narrows it
    env_from: list[_Object] | None = Field(None, alias="envFrom")
    resources: _ResourceRequirements | None = None
    ports: list[_ContainerPort] | None = None
    volume_mounts: list[_VolumeMount] | None = Field(None, alias="volumeMounts")
    image_pull_policy: str | None = Field(None, alias="imagePullPolicy")
    termination_message_policy: str | None = Field(None, alias="terminationMessagePolicy")
    security_context: _Object | None = Field(None, alias="securityContext")


class _EmptyDir(_Typed):
    medium: str | None = None
    size_limit: _Quantity | None = Field(None, alias="sizeLimit")


class _Volume(_Typed):
    name: str | None = None
    empty_dir: _EmptyDir | None = Field(None, alias="emptyDir")
    host_path: _Object | None = Field(None, alias="hostPath")
    config_map: _Object | None = Field(None, alias="configMap")
    secret: _Object | None = None
    persistent_volume_claim: _Object | None = Field(None, alias="persistentVolumeClaim")


class _Toleration(_Typed):
    key: str | None = None
    operator: str | None = None
    value: str | None = None
    effect: str | None = None
    toleration_seconds: _Int64 | None = Field(None, alias="tolerationSeconds")


class _LocalObjectReference(_Typed):
    name: str | None = None


class PodSpecModel(_Typed):
    """The fields of a v1.PodSpec the builder, the scheduler and the kubelet read, with their Go types."""

    containers: Sequence[_Container] | None = None
    init_containers: Sequence[_Container] | None = Field(None, alias="initContainers")
    volumes: list[_Volume] | None = None
    tolerations: list[_Toleration] | None = None
    node_selector: dict[str, str] | None = Field(None, alias="nodeSelector")
    node_name: str | None = Field(None, alias="nodeName")
    affinity: _Object | None = None
    security_context: _Object | None = Field(None, alias="securityContext")
    dns_config: _Object | None = Field(None, alias="dnsConfig")
    image_pull_secrets: list[_LocalObjectReference] | None = Field(None, alias="imagePullSecrets")
    service_account_name: str | None = Field(None, alias="serviceAccountName")
    scheduler_name: str | None = Field(None, alias="schedulerName")
    priority_class_name: str | None = Field(None, alias="priorityClassName")
    restart_policy: str | None = Field(None, alias="restartPolicy")
    host_network: bool | None = Field(None, alias="hostNetwork")
    active_deadline_seconds: _Int64 | None = Field(None, alias="activeDeadlineSeconds")
    termination_grace_period_seconds: _Int64 | None = Field(None, alias="terminationGracePeriodSeconds")


_Name = Annotated[str, Field(min_length=1)]


class _NamedEnvVar(_EnvVar):
    name: _Name


class _NamedContainer(_Container):
    """A container of a PodTemplate: the merge matches containers by name, so a name is required."""

    name: _Name
    env: Sequence[_NamedEnvVar] | None = None


class TemplatePodSpecModel(PodSpecModel):
    """The pod spec of a PodTemplate manifest: containers and their env vars named."""

    containers: Sequence[_NamedContainer] | None = None
    init_containers: Sequence[_NamedContainer] | None = Field(None, alias="initContainers")
