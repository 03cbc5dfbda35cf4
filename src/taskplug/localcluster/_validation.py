"""What the API server does to an object before storing it: decode (400), default, validate (422).

Follows, in the order a create goes through them:

* decoding (k8s.io/apimachinery/pkg/runtime/serializer/json over sigs.k8s.io/json): the object must be
  JSON, and every field the scheduler, the kubelet and quota admission read has its Go type. A value of
  another JSON type is a 400 worded as the API server words it (``Pod in version "v1" cannot be handled as
  a Pod: json: cannot unmarshal number into Go struct field Container.spec.containers.name of type
  string``); a quantity that does not parse is a 400 with ``resource.ParseQuantity``'s message; ``null``
  reads as Go reads it (a missing field; ``""`` / ``0`` / ``{}`` inside a list or a map); unknown fields
  are kept.
* defaulting (pkg/apis/core/v1/defaults.go): requests default to limits, ``restartPolicy`` ``Always``,
  ``terminationMessagePath`` ``/dev/termination-log``, ``imagePullPolicy`` by tag, …
* validation (k8s.io/apimachinery/pkg/api/validation, …/util/validation, pkg/apis/core/validation):
  ObjectMeta for every kind (the name by the kind's rule — a DNS-1123 subdomain, a DNS-1123 label for
  namespaces —, ``generateName``, the namespace, label keys and values, annotation keys and their total
  size, finalizers); pods and pod templates (containers and init containers: names that are DNS-1123
  labels unique in the pod, an image, env var names — ``RelaxedEnvironmentVariableValidation``, GA since
  1.34 — and ``valueFrom``, resource names and quantities — non-negative, whole for extended resources,
  requests within limits —, ``terminationMessagePolicy``, ``imagePullPolicy``, the security context's
  user and group ids (``IsValidUserID``/``IsValidGroupID``, pod and container); ``restartPolicy``,
  ``nodeSelector``, ``serviceAccountName``, ``nodeName``, ``activeDeadlineSeconds``, tolerations, required
  node affinity); node taints; quota ``spec.hard``. Every problem is a cause of one 422 ``Invalid``, in
  Kubernetes' order and words (``Pod "x" is invalid: spec.containers[0].name: Invalid value: …``).

Deviation: only the rules the machinery can trip over are checked, unknown fields are kept (a real server
drops them with a warning), and a pod's spec stays mutable on update. Three refusals a real server does not
make, because this one runs the commands on the user's machine and keeps quantities as exact integers: a
NUL character in ``command``, ``args`` or an env value (no process argument or environment entry can hold
one; a real cluster accepts the pod and the container fails to start); a quantity written in more than 64
characters, with an exponent beyond ±30, or above 2^63-1 units; JSON nested more than 254 levels deep.
The 400's ``details.causes`` names the field with its indices.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any, Final

import orjson

from taskplug.core import Quantity, QuantityError
from taskplug.k8s import ResourceType
from taskplug.localcluster._errors import FieldError, cannot_decode, invalid
from taskplug.localcluster._resources import (
    EVENT,
    NAMESPACE,
    NODE,
    POD,
    POD_TEMPLATE,
    RESOURCE_QUOTA,
    type_key,
)

__all__ = [
    "decode_object",
    "default_pod",
    "json_copy",
    "parse_quantity",
    "pod_qos_class",
    "validate_object",
]

Obj = dict[str, Any]

# -- apimachinery's string rules ----------------------------------------------------------------------------

_LABEL_FMT: Final = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN_FMT: Final = _LABEL_FMT + "(\\." + _LABEL_FMT + ")*"
_QNAME_FMT: Final = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE_FMT: Final = "(" + _QNAME_FMT + ")?"
_CONFIG_KEY_FMT: Final = "[-._a-zA-Z0-9]+"
# Go's regexp matches the whole text with ^…$; Python's $ would also match before a trailing newline.
_LABEL_RE: Final = re.compile(_LABEL_FMT)
_SUBDOMAIN_RE: Final = re.compile(_SUBDOMAIN_FMT)
_QNAME_RE: Final = re.compile(_QNAME_FMT)
_LABEL_VALUE_RE: Final = re.compile(_LABEL_VALUE_FMT)
_CONFIG_KEY_RE: Final = re.compile(_CONFIG_KEY_FMT)


def _regex_error(message: str, fmt: str, *examples: str) -> str:
    """apimachinery's RegexError (the doubled space after each example's comma is Go's)."""
    if not examples:
        return f"{message} (regex used for validation is '{fmt}')"
    listed = " or ".join(f"'{e}', " for e in examples)
    return f"{message} (e.g. {listed}regex used for validation is '{fmt}')"


def _max_len(limit: int) -> str:
    return f"must be no more than {limit} bytes"


_LABEL_MSG: Final = _regex_error(
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
    "and end with an alphanumeric character",
    _LABEL_FMT,
    "my-name",
    "123-abc",
)
_SUBDOMAIN_MSG: Final = _regex_error(
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
    "must start and end with an alphanumeric character",
    _SUBDOMAIN_FMT,
    "example.com",
)
_QNAME_MSG: Final = _regex_error(
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
    "character",
    _QNAME_FMT,
    "MyName",
    "my.name",
    "123-abc",
)
_LABEL_VALUE_MSG: Final = _regex_error(
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character",
    _LABEL_VALUE_FMT,
    "MyValue",
    "my_value",
    "12345",
)
_CONFIG_KEY_MSG: Final = _regex_error(
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
    _CONFIG_KEY_FMT,
    "key.name",
    "KEY_NAME",
    "key-name",
)
_ENV_NAME_MSG: Final = (
    "a valid environment variable name must consist only of printable ASCII characters other than '='"
)


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))  # Go's len(): bytes


def is_dns1123_label(value: str) -> list[str]:
    errors = [_max_len(63)] if _size(value) > 63 else []
    if not _LABEL_RE.fullmatch(value):
        errors.append("must not contain dots" if _SUBDOMAIN_RE.fullmatch(value) else _LABEL_MSG)
    return errors


def is_dns1123_subdomain(value: str) -> list[str]:
    errors = [_max_len(253)] if _size(value) > 253 else []
    if not _SUBDOMAIN_RE.fullmatch(value):
        errors.append(_SUBDOMAIN_MSG)
    return errors


def is_qualified_name(value: str) -> list[str]:
    """content.IsLabelKey: an optional DNS subdomain prefix and ``/``, then a name of at most 63 bytes."""
    parts = value.split("/")
    errors: list[str] = []
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            errors += [f"prefix part {m}" for m in is_dns1123_subdomain(prefix)]
    else:
        return [
            f"a valid label key {_QNAME_MSG} with an optional DNS subdomain prefix and '/' "
            "(e.g. 'example.com/MyName')"
        ]
    if not name:
        errors.append("name part must be non-empty")
    elif _size(name) > 63:
        errors.append(f"name part {_max_len(63)}")
    if not _QNAME_RE.fullmatch(name):
        errors.append(f"name part {_QNAME_MSG}")
    return errors


def is_label_value(value: str) -> list[str]:
    errors = [_max_len(63)] if _size(value) > 63 else []
    if not _LABEL_VALUE_RE.fullmatch(value):
        errors.append(_LABEL_VALUE_MSG)
    return errors


def is_relaxed_env_var_name(value: str) -> list[str]:
    if not value:
        return ["environment variable name must be non-empty"]
    if any(ch == "=" or not (" " <= ch <= "~") for ch in value):
        return [_ENV_NAME_MSG]
    return []


def _chdir_prefix(value: str) -> list[str]:
    if value in (".", ".."):
        return [f"must not be '{value}'"]
    return ["must not start with '..'"] if value.startswith("..") else []


def is_config_map_key(value: str) -> list[str]:
    errors = [_max_len(253)] if _size(value) > 253 else []
    if not _CONFIG_KEY_RE.fullmatch(value):
        errors.append(_CONFIG_KEY_MSG)
    return errors + _chdir_prefix(value)


def _not_supported(field: str, value: str, supported: list[str]) -> FieldError:
    listed = ", ".join(f'"{v}"' for v in supported)
    return FieldError(field, "Unsupported value", f"supported values: {listed}", value)


# -- quantities ---------------------------------------------------------------------------------------------

_QUANTITY_MSG: Final = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)
_MAX_QUANTITY_TEXT: Final = 64
_MAX_QUANTITY_EXPONENT: Final = 30
_MAX_QUANTITY_UNITS: Final = 2**63 - 1
_EXPONENT_RE: Final = re.compile(r"[eE]([+-]?[0-9]+)\s*$")


def parse_quantity(value: object) -> Quantity:
    """A quantity as the API server reads one (a string, or a JSON number read by its text), within the
    bounds this server keeps; :class:`QuantityError` otherwise."""
    if isinstance(value, str):
        if len(value) > _MAX_QUANTITY_TEXT:
            raise QuantityError(f"a quantity may not be longer than {_MAX_QUANTITY_TEXT} characters")
        exponent = _EXPONENT_RE.search(value)
        if exponent is not None and abs(int(exponent.group(1))) > _MAX_QUANTITY_EXPONENT:
            raise QuantityError(f"the exponent of a quantity must be within ±{_MAX_QUANTITY_EXPONENT}")
        quantity = Quantity(value)
    elif (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or (isinstance(value, float) and not math.isfinite(value))
    ):
        raise QuantityError(_QUANTITY_MSG)
    elif isinstance(value, int) and abs(value) > _MAX_QUANTITY_UNITS:
        raise QuantityError(f"a quantity may not be more than {_MAX_QUANTITY_UNITS}")
    else:
        quantity = Quantity.from_json(value)
    if abs(quantity.nanos) > _MAX_QUANTITY_UNITS * 10**9:
        raise QuantityError(f"a quantity may not be more than {_MAX_QUANTITY_UNITS}")
    return quantity


# -- decoding: the Go types of the fields the machinery reads ----------------------------------------------

# A field path as a linked list, rendered only when something is wrong: (parent, key | index | (map key,)).
_Path = tuple[Any, "str | int | tuple[str]"] | None


def _render(path: _Path) -> tuple[str, str]:
    """``spec.containers[0].resources.limits[cpu]`` and Go's ``spec.containers.resources.limits``."""
    segments: list[str | int | tuple[str]] = []
    while path is not None:
        path, segment = path
        segments.append(segment)
    indexed, keys = "", []
    for segment in reversed(segments):
        if isinstance(segment, int):
            indexed += f"[{segment}]"
        elif isinstance(segment, tuple):
            indexed += f"[{segment[0]}]"
        else:
            indexed += f".{segment}" if indexed else segment
            keys.append(segment)
    return indexed, ".".join(keys)


def _json_kind(value: object) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


class _Undecodable(Exception):
    """A value that does not decode; rendered into the 400 at the top."""

    def __init__(
        self, path: _Path, struct: str, *, got: str = "", go_type: str = "", detail: str = ""
    ) -> None:
        super().__init__(detail)
        self.path, self.struct, self.got, self.go_type, self.detail = path, struct, got, go_type, detail

    def message(self) -> tuple[str, str]:
        indexed, go_path = _render(self.path)
        if self.detail:
            return self.detail, indexed
        return (
            f"json: cannot unmarshal {self.got} into Go struct field {self.struct}.{go_path} of type {self.go_type}",
            indexed,
        )


class _Type:
    """One Go type: ``check`` returns the value as decoded (possibly normalized) or raises."""

    __slots__ = ("go",)

    def __init__(self, go: str) -> None:
        self.go = go

    def check(self, value: Any, path: _Path, struct: str) -> Any:
        raise NotImplementedError

    def zero(self) -> Any:
        """What JSON ``null`` becomes inside a list or a map."""
        return None

    def mismatch(self, value: object, path: _Path, struct: str, got: str | None = None) -> _Undecodable:
        return _Undecodable(path, struct, got=got or _json_kind(value), go_type=self.go)


class _Str(_Type):
    __slots__ = ()

    def check(self, value: Any, path: _Path, struct: str) -> Any:
        if isinstance(value, str):
            return value
        raise self.mismatch(value, path, struct)

    def zero(self) -> Any:
        return ""


class _Bool(_Type):
    __slots__ = ()

    def check(self, value: Any, path: _Path, struct: str) -> Any:
        if isinstance(value, bool):
            return value
        raise self.mismatch(value, path, struct)

    def zero(self) -> Any:
        return False


class _Int(_Type):
    __slots__ = ("high", "low")

    def __init__(self, bits: int) -> None:
        super().__init__(f"int{bits}")
        self.low, self.high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1

    def check(self, value: Any, path: _Path, struct: str) -> Any:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.mismatch(value, path, struct)
        if isinstance(value, float):
            # A whole double is a whole number (a protobuf Struct holds every number as a double).
            if not value.is_integer():
                raise self.mismatch(value, path, struct, f"number {value!r}")
            value = int(value)
        if not self.low <= value <= self.high:
            raise self.mismatch(value, path, struct, f"number {value}")
        return value

    def zero(self) -> Any:
        return 0


class _QuantityType(_Type):
    __slots__ = ()

    def check(self, value: Any, path: _Path, struct: str) -> Any:
        try:
            quantity = parse_quantity(value)
        except QuantityError as err:
            raise _Undecodable(path, struct, detail=str(err)) from None
        return value if isinstance(value, str) else str(quantity)  # the server answers quantities as strings

    def zero(self) -> Any:
        return "0"


_RFC3339_RE: Final = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})"
)


class _Time(_Type):
    __slots__ = ()

    def check(self, value: Any, path: _Path, struct: str) -> Any:
        if not isinstance(value, str):
            raise self.mismatch(value, path, struct)
        match = _RFC3339_RE.fullmatch(value)
        try:
            if match is None:
                raise ValueError
            year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
            datetime(year, month, day, hour, minute, second)
        except ValueError:
            raise _Undecodable(
                path,
                struct,
                detail=f'parsing time {value!r} as "2006-01-02T15:04:05Z07:00": not an RFC 3339 time',
            ) from None
        return value


class _Any(_Type):
    __slots__ = ()

    def check(self, value: Any, path: _Path, struct: str) -> Any:
        return value


class _List(_Type):
    __slots__ = ("item",)

    def __init__(self, item: _Type) -> None:
        super().__init__(f"[]{item.go}")
        self.item = item

    def check(self, value: Any, path: _Path, struct: str) -> Any:
        if not isinstance(value, list):
            raise self.mismatch(value, path, struct)
        item = self.item
        for i, element in enumerate(value):
            if element is None:
                element = item.zero()
                if element is None:
                    continue
            checked = item.check(element, (path, i), struct)
            if checked is not value[i]:
                value[i] = checked
        return value

    def zero(self) -> Any:
        return []


class _Map(_Type):
    __slots__ = ("item",)

    def __init__(self, item: _Type, go: str) -> None:
        super().__init__(go)
        self.item = item

    def check(self, value: Any, path: _Path, struct: str) -> Any:
        if not isinstance(value, dict):
            raise self.mismatch(value, path, struct)
        item = self.item
        for key, element in list(value.items()):
            if element is None:
                element = item.zero()
                if element is None:
                    del value[key]
                    continue
            checked = item.check(element, (path, (key,)), struct)
            if checked is not value[key]:
                value[key] = checked
        return value

    def zero(self) -> Any:
        return {}


class _Struct(_Type):
    __slots__ = ("fields", "name")

    def __init__(self, name: str, fields: dict[str, _Type], *, package: str = "v1") -> None:
        super().__init__(f"{package}.{name}")
        self.name = name
        self.fields = fields

    def check(self, value: Any, path: _Path, struct: str) -> Any:
        if not isinstance(value, dict):
            raise self.mismatch(value, path, struct)
        fields = self.fields
        for key, element in list(value.items()):
            kind = fields.get(key)
            if kind is None:
                continue  # unknown fields are kept as they are
            if element is None:
                del value[key]  # Go leaves the field at its zero value, which is not written back
                continue
            checked = kind.check(element, (path, key), self.name)
            if checked is not element:
                value[key] = checked
        return value

    def zero(self) -> Any:
        return {}


def _struct(go_name: str, /, **fields: _Type) -> _Struct:
    return _Struct(go_name, fields)


def _opaque(name: str) -> _Struct:
    """A struct whose fields nothing here reads: it must be an object, its content is kept as it is."""
    return _Struct(name, {})


_S: Final = _Str("string")
_B: Final = _Bool("bool")
_I32: Final = _Int(32)
_I64: Final = _Int(64)
_Q: Final = _QuantityType("resource.Quantity")
_T: Final = _Time("v1.Time")
_ANY: Final = _Any("interface {}")
_STRINGS: Final = _List(_S)
_STRING_MAP: Final = _Map(_S, "map[string]string")
_RESOURCE_LIST: Final = _Map(_Q, "v1.ResourceList")

_OBJECT_META: Final = _struct(
    "ObjectMeta",
    name=_S,
    generateName=_S,
    namespace=_S,
    selfLink=_S,
    uid=_S,
    resourceVersion=_S,
    generation=_I64,
    creationTimestamp=_T,
    deletionTimestamp=_T,
    deletionGracePeriodSeconds=_I64,
    labels=_STRING_MAP,
    annotations=_STRING_MAP,
    ownerReferences=_List(
        _struct(
            "OwnerReference", apiVersion=_S, kind=_S, name=_S, uid=_S, controller=_B, blockOwnerDeletion=_B
        )
    ),
    finalizers=_STRINGS,
    managedFields=_List(_opaque("ManagedFieldsEntry")),
)
_RESOURCES: Final = _struct(
    "ResourceRequirements",
    limits=_RESOURCE_LIST,
    requests=_RESOURCE_LIST,
    claims=_List(_opaque("ResourceClaim")),
)
_ENV_VAR: Final = _struct(
    "EnvVar",
    name=_S,
    value=_S,
    valueFrom=_struct(
        "EnvVarSource",
        fieldRef=_struct("ObjectFieldSelector", apiVersion=_S, fieldPath=_S),
        resourceFieldRef=_struct("ResourceFieldSelector", containerName=_S, resource=_S, divisor=_Q),
        configMapKeyRef=_struct("ConfigMapKeySelector", name=_S, key=_S, optional=_B),
        secretKeyRef=_struct("SecretKeySelector", name=_S, key=_S, optional=_B),
    ),
)
_SECURITY_CONTEXT: Final = _struct(
    "SecurityContext",
    capabilities=_struct("Capabilities", add=_STRINGS, drop=_STRINGS),
    privileged=_B,
    seLinuxOptions=_opaque("SELinuxOptions"),
    windowsOptions=_opaque("WindowsSecurityContextOptions"),
    runAsUser=_I64,
    runAsGroup=_I64,
    runAsNonRoot=_B,
    readOnlyRootFilesystem=_B,
    allowPrivilegeEscalation=_B,
    procMount=_S,
    seccompProfile=_opaque("SeccompProfile"),
    appArmorProfile=_opaque("AppArmorProfile"),
)
_POD_SECURITY_CONTEXT: Final = _struct(
    "PodSecurityContext",
    seLinuxOptions=_opaque("SELinuxOptions"),
    windowsOptions=_opaque("WindowsSecurityContextOptions"),
    runAsUser=_I64,
    runAsGroup=_I64,
    runAsNonRoot=_B,
    supplementalGroups=_List(_I64),
    supplementalGroupsPolicy=_S,
    fsGroup=_I64,
    sysctls=_List(_opaque("Sysctl")),
    fsGroupChangePolicy=_S,
    seccompProfile=_opaque("SeccompProfile"),
    appArmorProfile=_opaque("AppArmorProfile"),
)
_CONTAINER: Final = _struct(
    "Container",
    name=_S,
    image=_S,
    command=_STRINGS,
    args=_STRINGS,
    workingDir=_S,
    ports=_List(_struct("ContainerPort", name=_S, hostPort=_I32, containerPort=_I32, protocol=_S, hostIP=_S)),
    envFrom=_List(_opaque("EnvFromSource")),
    env=_List(_ENV_VAR),
    resources=_RESOURCES,
    resizePolicy=_List(_opaque("ContainerResizePolicy")),
    restartPolicy=_S,
    volumeMounts=_List(
        _struct(
            "VolumeMount", name=_S, readOnly=_B, mountPath=_S, subPath=_S, subPathExpr=_S, mountPropagation=_S
        )
    ),
    volumeDevices=_List(_opaque("VolumeDevice")),
    livenessProbe=_opaque("Probe"),
    readinessProbe=_opaque("Probe"),
    startupProbe=_opaque("Probe"),
    lifecycle=_opaque("Lifecycle"),
    terminationMessagePath=_S,
    terminationMessagePolicy=_S,
    imagePullPolicy=_S,
    securityContext=_SECURITY_CONTEXT,
    stdin=_B,
    stdinOnce=_B,
    tty=_B,
)
_SELECTOR_TERM: Final = _struct(
    "NodeSelectorTerm",
    matchExpressions=_List(_struct("NodeSelectorRequirement", key=_S, operator=_S, values=_STRINGS)),
    matchFields=_List(_struct("NodeSelectorRequirement", key=_S, operator=_S, values=_STRINGS)),
)
_AFFINITY: Final = _struct(
    "Affinity",
    nodeAffinity=_struct(
        "NodeAffinity",
        requiredDuringSchedulingIgnoredDuringExecution=_struct(
            "NodeSelector", nodeSelectorTerms=_List(_SELECTOR_TERM)
        ),
        preferredDuringSchedulingIgnoredDuringExecution=_List(
            _struct("PreferredSchedulingTerm", weight=_I32, preference=_SELECTOR_TERM)
        ),
    ),
    podAffinity=_opaque("PodAffinity"),
    podAntiAffinity=_opaque("PodAntiAffinity"),
)
_POD_SPEC: Final = _struct(
    "PodSpec",
    volumes=_List(_struct("Volume", name=_S, hostPath=_struct("HostPathVolumeSource", path=_S, type=_S))),
    initContainers=_List(_CONTAINER),
    containers=_List(_CONTAINER),
    ephemeralContainers=_List(_opaque("EphemeralContainer")),
    restartPolicy=_S,
    terminationGracePeriodSeconds=_I64,
    activeDeadlineSeconds=_I64,
    dnsPolicy=_S,
    nodeSelector=_STRING_MAP,
    serviceAccountName=_S,
    serviceAccount=_S,
    automountServiceAccountToken=_B,
    nodeName=_S,
    hostNetwork=_B,
    hostPID=_B,
    hostIPC=_B,
    shareProcessNamespace=_B,
    securityContext=_POD_SECURITY_CONTEXT,
    imagePullSecrets=_List(_struct("LocalObjectReference", name=_S)),
    hostname=_S,
    subdomain=_S,
    affinity=_AFFINITY,
    schedulerName=_S,
    tolerations=_List(
        _struct("Toleration", key=_S, operator=_S, value=_S, effect=_S, tolerationSeconds=_I64)
    ),
    hostAliases=_List(_opaque("HostAlias")),
    priorityClassName=_S,
    priority=_I32,
    dnsConfig=_opaque("PodDNSConfig"),
    readinessGates=_List(_opaque("PodReadinessGate")),
    runtimeClassName=_S,
    enableServiceLinks=_B,
    preemptionPolicy=_S,
    overhead=_RESOURCE_LIST,
    topologySpreadConstraints=_List(_opaque("TopologySpreadConstraint")),
    setHostnameAsFQDN=_B,
    os=_opaque("PodOS"),
    hostUsers=_B,
    schedulingGates=_List(_opaque("PodSchedulingGate")),
    resourceClaims=_List(_opaque("PodResourceClaim")),
    resources=_RESOURCES,
)
_CONTAINER_STATE: Final = _struct(
    "ContainerState",
    waiting=_struct("ContainerStateWaiting", reason=_S, message=_S),
    running=_struct("ContainerStateRunning", startedAt=_T),
    terminated=_struct(
        "ContainerStateTerminated",
        exitCode=_I32,
        signal=_I32,
        reason=_S,
        message=_S,
        startedAt=_T,
        finishedAt=_T,
        containerID=_S,
    ),
)
_CONTAINER_STATUS: Final = _struct(
    "ContainerStatus",
    name=_S,
    state=_CONTAINER_STATE,
    lastState=_CONTAINER_STATE,
    ready=_B,
    restartCount=_I32,
    image=_S,
    imageID=_S,
    containerID=_S,
    started=_B,
)
_POD_STATUS: Final = _struct(
    "PodStatus",
    phase=_S,
    conditions=_List(
        _struct(
            "PodCondition",
            type=_S,
            status=_S,
            lastProbeTime=_T,
            lastTransitionTime=_T,
            reason=_S,
            message=_S,
        )
    ),
    message=_S,
    reason=_S,
    nominatedNodeName=_S,
    hostIP=_S,
    hostIPs=_List(_opaque("HostIP")),
    podIP=_S,
    podIPs=_List(_opaque("PodIP")),
    startTime=_T,
    initContainerStatuses=_List(_CONTAINER_STATUS),
    containerStatuses=_List(_CONTAINER_STATUS),
    qosClass=_S,
)


def _top(kind: str, /, package: str = "v1", **fields: _Type) -> _Struct:
    return _Struct(kind, {"apiVersion": _S, "kind": _S, "metadata": _OBJECT_META, **fields}, package=package)


_SCHEMAS: Final = {
    type_key(POD): _top("Pod", spec=_POD_SPEC, status=_POD_STATUS),
    type_key(POD_TEMPLATE): _top(
        "PodTemplate", template=_struct("PodTemplateSpec", metadata=_OBJECT_META, spec=_POD_SPEC)
    ),
    type_key(NODE): _top(
        "Node",
        spec=_struct(
            "NodeSpec",
            podCIDR=_S,
            podCIDRs=_STRINGS,
            providerID=_S,
            unschedulable=_B,
            taints=_List(_struct("Taint", key=_S, value=_S, effect=_S, timeAdded=_T)),
        ),
        status=_struct(
            "NodeStatus",
            capacity=_RESOURCE_LIST,
            allocatable=_RESOURCE_LIST,
            phase=_S,
            conditions=_List(_opaque("NodeCondition")),
            addresses=_List(_opaque("NodeAddress")),
            nodeInfo=_opaque("NodeSystemInfo"),
        ),
    ),
    type_key(NAMESPACE): _top(
        "Namespace",
        spec=_struct("NamespaceSpec", finalizers=_STRINGS),
        status=_struct("NamespaceStatus", phase=_S),
    ),
    type_key(RESOURCE_QUOTA): _top(
        "ResourceQuota",
        spec=_struct(
            "ResourceQuotaSpec", hard=_RESOURCE_LIST, scopes=_STRINGS, scopeSelector=_opaque("ScopeSelector")
        ),
        status=_struct("ResourceQuotaStatus", hard=_RESOURCE_LIST, used=_RESOURCE_LIST),
    ),
    type_key(EVENT): _top(
        "Event",
        eventTime=_S,
        series=_opaque("EventSeries"),
        reportingController=_S,
        reportingInstance=_S,
        action=_S,
        reason=_S,
        regarding=_opaque("ObjectReference"),
        related=_opaque("ObjectReference"),
        note=_S,
        type=_S,
        deprecatedCount=_I32,
    ),
}


def _schema(rtype: ResourceType) -> _Struct:
    schema = _SCHEMAS.get(type_key(rtype))
    if schema is None:
        # A custom resource: its metadata is ObjectMeta; what else it holds is its operator's business.
        schema = _top(rtype.kind, package="unstructured")
    return schema


_MAX_DEPTH: Final = 254  # orjson's limit, which every copy in the store goes through


def _first_unencodable(value: object) -> tuple[str, str]:
    """Where and why ``value`` is not JSON (the field path and Go-like words), walked without recursion."""
    stack: list[tuple[object, _Path, int]] = [(value, None, 0)]
    while stack:
        current, path, depth = stack.pop()
        if depth > _MAX_DEPTH:
            return _render(path)[0], f"json: exceeded max depth of {_MAX_DEPTH}"
        if isinstance(current, dict):
            for key, element in reversed(list(current.items())):
                if not isinstance(key, str):
                    return _render(path)[0], f"json: unsupported map key {key!r}: keys must be strings"
                stack.append((element, (path, key), depth + 1))
        elif isinstance(current, list | tuple):
            for i in reversed(range(len(current))):
                stack.append((current[i], (path, i), depth + 1))
        elif isinstance(current, str):
            try:
                current.encode("utf-8")
            except UnicodeEncodeError:
                return _render(path)[0], "json: invalid UTF-8 in string (a lone surrogate)"
        elif isinstance(current, bool) or current is None or isinstance(current, float):
            continue
        elif isinstance(current, int):
            if not -(2**63) <= current < 2**64:
                return _render(path)[0], f"json: number {current} is out of the 64-bit range"
        else:
            try:
                orjson.dumps(current)
            except TypeError:
                return _render(path)[0], f"json: unsupported type: {type(current).__name__}"
    return "", "json: the object cannot be encoded"


def json_copy(value: object, rtype: ResourceType) -> Any:
    """A private copy of a JSON value given to the API (400 naming the field when it is not JSON)."""
    try:
        return orjson.loads(orjson.dumps(value))
    except (TypeError, ValueError):
        field, detail = _first_unencodable(value)
        raise cannot_decode(rtype.kind, rtype.version, detail, field) from None


def decode_object(rtype: ResourceType, obj: object) -> Obj:
    """``obj`` as the API server decodes it: a private JSON copy, every field the machinery reads of its Go
    type, ``null`` read as Go reads it. A 400 ``BadRequest`` naming the field otherwise."""
    schema = _schema(rtype)
    if not isinstance(obj, dict):
        detail = f"json: cannot unmarshal {_json_kind(obj)} into Go value of type {schema.go}"
        raise cannot_decode(rtype.kind, rtype.version, detail, "")
    copied: Obj = json_copy(obj, rtype)
    try:
        schema.check(copied, None, rtype.kind)
    except _Undecodable as err:
        detail, field = err.message()
        raise cannot_decode(rtype.kind, rtype.version, detail, field) from None
    return copied


# -- defaulting -----------------------------------------------------------------------------------------


def _default_container(container: Obj) -> None:
    # Go's defaulting fills a field left at its zero value, so "" is defaulted like a missing field.
    if not container.get("terminationMessagePath"):
        container["terminationMessagePath"] = "/dev/termination-log"
    if not container.get("terminationMessagePolicy"):
        container["terminationMessagePolicy"] = "File"
    image = str(container.get("image") or "")
    tagless = ":" not in image.rpartition("/")[2] and "@" not in image
    if not container.get("imagePullPolicy"):
        container["imagePullPolicy"] = "Always" if tagless or image.endswith(":latest") else "IfNotPresent"
    resources = container.setdefault("resources", {})
    limits = resources.get("limits") or {}
    if limits:
        # SetDefaults_Pod: a limit with no request makes the request equal to the limit.
        requests = resources.setdefault("requests", {})
        for key, value in limits.items():
            requests.setdefault(key, value)
    for var in container.get("env") or []:
        field_ref = (var.get("valueFrom") or {}).get("fieldRef")
        if field_ref is not None and not field_ref.get("apiVersion"):
            field_ref["apiVersion"] = "v1"  # SetDefaults_ObjectFieldSelector


def default_pod(pod: Obj) -> None:
    """Apply the API server's pod defaults in place (on a private, decoded copy) and set the initial status."""
    spec = pod.setdefault("spec", {})
    if not spec.get("restartPolicy"):
        spec["restartPolicy"] = "Always"
    spec.setdefault("terminationGracePeriodSeconds", 30)
    if not spec.get("dnsPolicy"):
        spec["dnsPolicy"] = "ClusterFirst"
    if not spec.get("schedulerName"):
        spec["schedulerName"] = "default-scheduler"
    if not spec.get("serviceAccountName"):
        spec["serviceAccountName"] = "default"
    spec.setdefault("securityContext", {})
    spec.setdefault("priority", 0)
    for container in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        _default_container(container)
    status = pod.setdefault("status", {})
    status.setdefault("phase", "Pending")
    status["qosClass"] = pod_qos_class(spec)


def pod_qos_class(spec: Obj) -> str:
    """BestEffort, Burstable or Guaranteed (pkg/apis/core/v1/helper/qos), for cpu and memory."""
    requests_seen = limits_seen = False
    guaranteed = True
    for container in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        for res in ("cpu", "memory"):
            if res in requests:
                requests_seen = True
            if res in limits:
                limits_seen = True
            if res not in limits or str(requests.get(res, limits.get(res))) != str(limits[res]):
                guaranteed = False
    if not requests_seen and not limits_seen:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


# -- validation ---------------------------------------------------------------------------------------------

NameRule = Callable[[str], list[str]]


def _mask_trailing_dash(name: str) -> str:
    """A generateName may end in '-' (NameIsDNSSubdomain with prefix=true)."""
    return name[:-1] + "a" if len(name) > 1 and name.endswith("-") else name


def _object_meta_errors(meta: Obj, path: str, name_rule: NameRule, *, namespaced: bool) -> list[FieldError]:
    """ValidateObjectMetaAccessor: generateName, name, namespace, labels, annotations, finalizers."""
    errors: list[FieldError] = []
    generate = meta.get("generateName") or ""
    if generate:
        errors += [
            FieldError(f"{path}.generateName", "Invalid value", m, generate)
            for m in name_rule(_mask_trailing_dash(generate))
        ]
    name = meta.get("name") or ""
    if not name:
        errors.append(FieldError(f"{path}.name", "Required value", "name or generateName is required"))
    else:
        errors += [FieldError(f"{path}.name", "Invalid value", m, name) for m in name_rule(name)]
    if namespaced:
        namespace = meta.get("namespace") or ""
        if not namespace:
            errors.append(FieldError(f"{path}.namespace", "Required value"))
        else:
            errors += [
                FieldError(f"{path}.namespace", "Invalid value", m, namespace)
                for m in is_dns1123_label(namespace)
            ]
    errors += _label_errors(meta.get("labels"), f"{path}.labels")
    errors += _annotation_errors(meta.get("annotations"), f"{path}.annotations")
    for finalizer in meta.get("finalizers") or []:
        errors += [
            FieldError(f"{path}.finalizers", "Invalid value", m, finalizer)
            for m in is_qualified_name(finalizer)
        ]
    return errors


def _label_errors(labels: Obj | None, path: str) -> list[FieldError]:
    """metav1validation.ValidateLabels (also used for nodeSelector)."""
    errors: list[FieldError] = []
    for key, value in (labels or {}).items():
        errors += [FieldError(path, "Invalid value", m, key) for m in is_qualified_name(key)]
        errors += [FieldError(path, "Invalid value", m, value) for m in is_label_value(value)]
    return errors


_ANNOTATIONS_LIMIT: Final = 256 * 1024


def _annotation_errors(annotations: Obj | None, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    total = 0
    for key, value in (annotations or {}).items():
        # A qualified name, except that case does not matter.
        errors += [FieldError(path, "Invalid value", m, key) for m in is_qualified_name(key.lower())]
        total += _size(key) + _size(value)
    if total > _ANNOTATIONS_LIMIT:
        errors.append(FieldError(path, "Too long", f"may not be more than {_ANNOTATIONS_LIMIT} bytes"))
    return errors


_RESTART_POLICIES: Final = ["Always", "OnFailure", "Never"]
_PULL_POLICIES: Final = ["Always", "IfNotPresent", "Never"]
_MESSAGE_POLICIES: Final = ["File", "FallbackToLogsOnError"]
_TAINT_EFFECTS: Final = ["NoSchedule", "PreferNoSchedule", "NoExecute"]
_DOWNWARD_FIELDS: Final = frozenset(
    {
        "metadata.annotations",
        "metadata.labels",
        "metadata.name",
        "metadata.namespace",
        "metadata.uid",
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.serviceAccountName",
        "spec.schedulerName",
        "status.phase",
        "status.hostIP",
        "status.hostIPs",
        "status.podIP",
        "status.podIPs",
    }
)
_ENV_FIELDS: Final = sorted(
    [
        "metadata.name",
        "metadata.namespace",
        "metadata.uid",
        "spec.nodeName",
        "spec.serviceAccountName",
        "status.hostIP",
        "status.hostIPs",
        "status.podIP",
        "status.podIPs",
    ]
)
_RESOURCE_FIELDS: Final = sorted(
    [
        "limits.cpu",
        "limits.ephemeral-storage",
        "limits.memory",
        "requests.cpu",
        "requests.ephemeral-storage",
        "requests.memory",
    ]
)
_CPU_DIVISORS: Final = frozenset({"1m", "1"})
_MEMORY_DIVISORS: Final = frozenset(
    {"1", "1k", "1M", "1G", "1T", "1P", "1E", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei"}
)
_MEMORY_DIVISORS_TEXT: Final = "1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei"
_STANDARD_CONTAINER_RESOURCES: Final = frozenset({"cpu", "memory", "ephemeral-storage"})
_STANDARD_RESOURCES: Final = frozenset(
    {
        "cpu",
        "memory",
        "ephemeral-storage",
        "requests.cpu",
        "requests.memory",
        "requests.ephemeral-storage",
        "limits.cpu",
        "limits.memory",
        "limits.ephemeral-storage",
        "pods",
        "services",
        "replicationcontrollers",
        "resourcequotas",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "storage",
        "requests.storage",
        "services.nodeports",
        "services.loadbalancers",
    }
)
_INTEGER_RESOURCES: Final = frozenset(
    {
        "pods",
        "services",
        "replicationcontrollers",
        "resourcequotas",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "services.nodeports",
        "services.loadbalancers",
    }
)
_NUL_MSG: Final = "must not contain a NUL character"


def _is_native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def _is_hugepages(name: str) -> bool:
    return name.startswith("hugepages-")


def _is_extended(name: str) -> bool:
    return (
        not _is_native(name)
        and not name.startswith("requests.")
        and not is_qualified_name(f"requests.{name}")
    )


def _overcommit_allowed(name: str) -> bool:
    return _is_native(name) and not _is_hugepages(name)


def _container_resource_name_errors(name: str, path: str) -> list[FieldError]:
    """validateContainerResourceName (over validateResourceName)."""
    errors = [FieldError(path, "Invalid value", m, name) for m in is_qualified_name(name)]
    if errors:
        return errors
    if "/" not in name:
        if name not in _STANDARD_RESOURCES and not _is_hugepages(
            name.removeprefix("requests.").removeprefix("limits.")
        ):
            errors.append(
                FieldError(path, "Invalid value", "must be a standard resource type or fully qualified", name)
            )
        if name not in _STANDARD_CONTAINER_RESOURCES and not _is_hugepages(name):
            errors.append(
                FieldError(path, "Invalid value", "must be a standard resource for containers", name)
            )
    elif not _is_native(name) and not _is_extended(name):
        errors.append(
            FieldError(path, "Invalid value", "doesn't follow extended resource name standard", name)
        )
    return errors


def _quantity_value_errors(name: str, quantity: Quantity, path: str) -> list[FieldError]:
    """ValidateResourceQuantityValue: non-negative; whole for integer resources."""
    errors = []
    if quantity.nanos < 0:
        errors.append(FieldError(path, "Invalid value", "must be greater than or equal to 0", str(quantity)))
    if (name in _INTEGER_RESOURCES or _is_extended(name)) and quantity.milli_value() % 1000:
        errors.append(FieldError(path, "Invalid value", "must be an integer", quantity))
    return errors


def _quantity(value: object) -> Quantity | None:
    try:
        return parse_quantity(value)
    except QuantityError:
        return None  # decoding refused it already; an in-process controller's object is not re-judged here


def _resource_errors(resources: Obj, path: str) -> list[FieldError]:
    """validateResourceRequirements for a container."""
    errors: list[FieldError] = []
    limits, requests = resources.get("limits") or {}, resources.get("requests") or {}
    parsed_limits: dict[str, Quantity] = {}
    for name, value in limits.items():
        key_path = f"{path}.limits[{name}]"
        errors += _container_resource_name_errors(name, key_path)
        quantity = _quantity(value)
        if quantity is not None:
            parsed_limits[name] = quantity
            errors += _quantity_value_errors(name, quantity, key_path)
    for name, value in requests.items():
        key_path = f"{path}.requests[{name}]"
        errors += _container_resource_name_errors(name, key_path)
        quantity = _quantity(value)
        if quantity is None:
            continue
        errors += _quantity_value_errors(name, quantity, key_path)
        limit = parsed_limits.get(name)
        if name in limits:
            if limit is None:
                continue
            if quantity != limit and not _overcommit_allowed(name):
                errors.append(
                    FieldError(
                        f"{path}.requests",
                        "Invalid value",
                        f"must be equal to {name} limit of {limit}",
                        str(quantity),
                    )
                )
            elif quantity > limit:
                errors.append(
                    FieldError(
                        f"{path}.requests",
                        "Invalid value",
                        f"must be less than or equal to {name} limit of {limit}",
                        str(quantity),
                    )
                )
        elif not _overcommit_allowed(name):
            errors.append(
                FieldError(
                    f"{path}.limits", "Required value", "Limit must be set for non overcommitable resources"
                )
            )
    return errors


def _split_subscript(path: str) -> tuple[str, str] | None:
    """fieldpath.SplitMaybeSubscriptedPath: ``metadata.labels['key']`` → (``metadata.labels``, ``key``)."""
    if not path.endswith("']"):
        return None
    head, sep, key = path[:-2].partition("['")
    return (head, key) if sep and head else None


def _field_ref_errors(ref: Obj, path: str) -> list[FieldError]:
    """validateObjectFieldSelector with the env var paths (after ConvertDownwardAPIFieldLabel)."""
    version = ref.get("apiVersion") or "v1"
    field_path = ref.get("fieldPath") or ""
    if not field_path:
        return [FieldError(f"{path}.fieldPath", "Required value")]
    subscripted = _split_subscript(field_path)
    if version != "v1":
        problem = f"unsupported pod version: {version}"
    elif subscripted is not None and subscripted[0] not in ("metadata.annotations", "metadata.labels"):
        problem = f"field label does not support subscript: {field_path}"
    elif subscripted is None and field_path not in _DOWNWARD_FIELDS and field_path != "spec.host":
        problem = f"field label not supported: {field_path}"
    else:
        problem = ""
    if problem:
        return [
            FieldError(
                f"{path}.fieldPath", "Invalid value", f"error converting fieldPath: {problem}", field_path
            )
        ]
    if subscripted is not None:
        head, key = subscripted
        key = key.lower() if head == "metadata.annotations" else key
        return [FieldError(path, "Invalid value", m, key) for m in is_qualified_name(key)]
    internal = "spec.nodeName" if field_path == "spec.host" else field_path
    if internal not in _ENV_FIELDS:
        return [_not_supported(f"{path}.fieldPath", internal, _ENV_FIELDS)]
    return []


def _resource_field_ref_errors(ref: Obj, path: str) -> list[FieldError]:
    """validateContainerResourceFieldSelector and validateContainerResourceDivisor."""
    resource = ref.get("resource") or ""
    errors: list[FieldError] = []
    hugepages = resource.startswith(("limits.hugepages-", "requests.hugepages-"))
    if not resource:
        errors.append(FieldError(f"{path}.resource", "Required value"))
    elif resource not in _RESOURCE_FIELDS and not hugepages:
        errors.append(_not_supported(f"{path}.resource", resource, _RESOURCE_FIELDS))
    divisor = _quantity(ref["divisor"]) if "divisor" in ref else None
    if divisor is None or divisor.is_zero():
        return errors
    text = str(divisor)
    if resource in ("limits.cpu", "requests.cpu") and text not in _CPU_DIVISORS:
        detail = "only divisor's values 1m and 1 are supported with the cpu resource"
    elif resource in ("limits.memory", "requests.memory") and text not in _MEMORY_DIVISORS:
        detail = f"only divisor's values {_MEMORY_DIVISORS_TEXT} are supported with the memory resource"
    elif (
        resource in ("limits.ephemeral-storage", "requests.ephemeral-storage")
        and text not in _MEMORY_DIVISORS
    ):
        detail = f"only divisor's values {_MEMORY_DIVISORS_TEXT} are supported with the local ephemeral storage resource"
    elif hugepages and text not in _MEMORY_DIVISORS:
        detail = f"only divisor's values {_MEMORY_DIVISORS_TEXT} are supported with the hugepages resource"
    else:
        return errors
    errors.append(FieldError(f"{path}.divisor", "Invalid value", detail, resource))
    return errors


def _key_selector_errors(ref: Obj, path: str) -> list[FieldError]:
    """validateConfigMapKeySelector / validateSecretKeySelector."""
    name = ref.get("name") or ""
    errors = [FieldError(f"{path}.name", "Invalid value", m, name) for m in is_dns1123_subdomain(name)]
    key = ref.get("key") or ""
    if not key:
        errors.append(FieldError(f"{path}.key", "Required value"))
    else:
        errors += [FieldError(f"{path}.key", "Invalid value", m, key) for m in is_config_map_key(key)]
    return errors


def _env_errors(env: list[Obj], path: str) -> list[FieldError]:
    """ValidateEnv with the relaxed names of 1.34+, and validateEnvVarValueFrom."""
    errors: list[FieldError] = []
    for i, var in enumerate(env):
        var_path = f"{path}[{i}]"
        name = var.get("name") or ""
        if not name:
            errors.append(FieldError(f"{var_path}.name", "Required value"))
        else:
            errors += [
                FieldError(f"{var_path}.name", "Invalid value", m, name)
                for m in is_relaxed_env_var_name(name)
            ]
        source = var.get("valueFrom")
        if source is not None:
            from_path = f"{var_path}.valueFrom"
            count = 0
            if "fieldRef" in source:
                count += 1
                errors += _field_ref_errors(source["fieldRef"], f"{from_path}.fieldRef")
            if "resourceFieldRef" in source:
                count += 1
                errors += _resource_field_ref_errors(
                    source["resourceFieldRef"], f"{from_path}.resourceFieldRef"
                )
            for selector in ("configMapKeyRef", "secretKeyRef"):
                if selector in source:
                    count += 1
                    errors += _key_selector_errors(source[selector], f"{from_path}.{selector}")
            if count == 0:
                detail = (
                    "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"
                )
                errors.append(FieldError(from_path, "Invalid value", detail, ""))
            elif var.get("value"):
                errors.append(
                    FieldError(
                        from_path, "Invalid value", "may not be specified when `value` is not empty", ""
                    )
                )
            elif count > 1:
                errors.append(
                    FieldError(
                        from_path, "Invalid value", "may not have more than one field specified at a time", ""
                    )
                )
        value = var.get("value") or ""
        if "\x00" in value:
            errors.append(FieldError(f"{var_path}.value", "Invalid value", _NUL_MSG, value))
    return errors


def _id_errors(context: Obj, path: str, fields: tuple[str, ...]) -> list[FieldError]:
    """IsValidUserID / IsValidGroupID of a security context's ids (the kubelet hands them to the runtime)."""
    errors: list[FieldError] = []
    for field in fields:
        values = context.get(field)
        items = (
            [(f"{path}.{field}[{i}]", v) for i, v in enumerate(values)]
            if isinstance(values, list)
            else [(f"{path}.{field}", values)]
        )
        for item_path, value in items:
            if value is not None and not 0 <= value <= 2**31 - 1:
                errors.append(
                    FieldError(
                        item_path, "Invalid value", "must be between 0 and 2147483647, inclusive", value
                    )
                )
    return errors


def _container_errors(container: Obj, path: str) -> list[FieldError]:
    """validateContainerCommon, for the fields the kubelet reads (the duplicate check is the caller's)."""
    errors: list[FieldError] = []
    name = container.get("name") or ""
    if not name:
        errors.append(FieldError(f"{path}.name", "Required value"))
    else:
        errors += [FieldError(f"{path}.name", "Invalid value", m, name) for m in is_dns1123_label(name)]
    if not container.get("image"):
        errors.append(FieldError(f"{path}.image", "Required value"))
    for field in ("command", "args"):
        for i, arg in enumerate(container.get(field) or []):
            if "\x00" in arg:
                errors.append(FieldError(f"{path}.{field}[{i}]", "Invalid value", _NUL_MSG, arg))
    errors += _env_errors(container.get("env") or [], f"{path}.env")
    errors += _resource_errors(container.get("resources") or {}, f"{path}.resources")
    policy = container.get("terminationMessagePolicy")
    if policy and policy not in _MESSAGE_POLICIES:
        errors.append(_not_supported(f"{path}.terminationMessagePolicy", policy, _MESSAGE_POLICIES))
    pull = container.get("imagePullPolicy")
    if pull and pull not in _PULL_POLICIES:
        errors.append(_not_supported(f"{path}.imagePullPolicy", pull, _PULL_POLICIES))
    errors += _id_errors(
        container.get("securityContext") or {}, f"{path}.securityContext", ("runAsUser", "runAsGroup")
    )
    return errors


def _containers_errors(spec: Obj, path: str) -> list[FieldError]:
    """validateContainers then validateInitContainers: names unique across both."""
    errors: list[FieldError] = []
    containers = spec.get("containers") or []
    if not containers:
        errors.append(FieldError(f"{path}.containers", "Required value"))
    names: set[str] = set()
    for i, container in enumerate(containers):
        item = f"{path}.containers[{i}]"
        errors += _container_errors(container, item)
        name = container.get("name") or ""
        if name in names:
            errors.append(FieldError(f"{item}.name", "Duplicate value", value=name))
        else:
            names.add(name)
    for i, container in enumerate(spec.get("initContainers") or []):
        item = f"{path}.initContainers[{i}]"
        errors += _container_errors(container, item)
        name = container.get("name") or ""
        if name in names:
            errors.append(FieldError(f"{item}.name", "Duplicate value", value=name))
        elif name:
            names.add(name)
    return errors


def _toleration_errors(tolerations: list[Obj], path: str) -> list[FieldError]:
    """ValidateTolerations."""
    errors: list[FieldError] = []
    for i, toleration in enumerate(tolerations):
        item = f"{path}[{i}]"
        key, operator = toleration.get("key") or "", toleration.get("operator") or ""
        value, effect = toleration.get("value") or "", toleration.get("effect") or ""
        if key:
            errors += [FieldError(f"{item}.key", "Invalid value", m, key) for m in is_qualified_name(key)]
        if not key and operator != "Exists":
            errors.append(
                FieldError(
                    f"{item}.operator",
                    "Invalid value",
                    'operator must be Exists when `key` is empty, which means "match all values and all keys"',
                    operator,
                )
            )
        if "tolerationSeconds" in toleration and effect != "NoExecute":
            errors.append(
                FieldError(
                    f"{item}.effect",
                    "Invalid value",
                    "effect must be 'NoExecute' when `tolerationSeconds` is set",
                    effect,
                )
            )
        if operator in ("Equal", ""):
            problems = is_label_value(value)
            if problems:
                errors.append(FieldError(f"{item}.operator", "Invalid value", ";".join(problems), value))
        elif operator == "Exists":
            if value:
                errors.append(
                    FieldError(
                        f"{item}.operator",
                        "Invalid value",
                        "value must be empty when `operator` is 'Exists'",
                        value,
                    )
                )
        else:
            errors.append(_not_supported(f"{item}.operator", operator, ["Equal", "Exists"]))
        if effect and effect not in _TAINT_EFFECTS:
            errors.append(_not_supported(f"{item}.effect", effect, _TAINT_EFFECTS))
    return errors


def _requirement_errors(requirement: Obj, path: str) -> list[FieldError]:
    """ValidateNodeSelectorRequirement."""
    errors: list[FieldError] = []
    operator, values = requirement.get("operator") or "", requirement.get("values") or []
    if operator in ("In", "NotIn"):
        if not values:
            errors.append(
                FieldError(
                    f"{path}.values", "Required value", "must be specified when `operator` is 'In' or 'NotIn'"
                )
            )
    elif operator in ("Exists", "DoesNotExist"):
        if values:
            errors.append(
                FieldError(
                    f"{path}.values",
                    "Forbidden",
                    "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                )
            )
    elif operator in ("Gt", "Lt"):
        if len(values) != 1:
            errors.append(
                FieldError(
                    f"{path}.values",
                    "Required value",
                    "must be specified single value when `operator` is 'Lt' or 'Gt'",
                )
            )
    else:
        errors.append(
            FieldError(f"{path}.operator", "Invalid value", "not a valid selector operator", operator)
        )
    key = requirement.get("key") or ""
    errors += [FieldError(f"{path}.key", "Invalid value", m, key) for m in is_qualified_name(key)]
    for i, value in enumerate(values):
        errors += [
            FieldError(f"{path}.values[{i}]", "Invalid value", m, value) for m in is_label_value(value)
        ]
    return errors


def _field_requirement_errors(requirement: Obj, path: str) -> list[FieldError]:
    """ValidateNodeFieldSelectorRequirement: only metadata.name, with In/NotIn and one value."""
    errors: list[FieldError] = []
    operator, values = requirement.get("operator") or "", requirement.get("values") or []
    if operator in ("In", "NotIn"):
        if len(values) != 1:
            errors.append(
                FieldError(
                    f"{path}.values",
                    "Required value",
                    "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
                )
            )
    else:
        errors.append(
            FieldError(f"{path}.operator", "Invalid value", "not a valid selector operator", operator)
        )
    key = requirement.get("key") or ""
    if key != "metadata.name":
        errors.append(_not_supported(f"{path}.key", key, ["metadata.name"]))
    return errors


def _affinity_errors(affinity: Obj, path: str) -> list[FieldError]:
    """validateAffinity → ValidateNodeSelector for the required node affinity."""
    required = (affinity.get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return []
    terms_path = f"{path}.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
    terms = required.get("nodeSelectorTerms") or []
    if not terms:
        return [FieldError(terms_path, "Required value", "must have at least one node selector term")]
    errors: list[FieldError] = []
    for i, term in enumerate(terms):
        for j, requirement in enumerate(term.get("matchExpressions") or []):
            errors += _requirement_errors(requirement, f"{terms_path}[{i}].matchExpressions[{j}]")
        for j, requirement in enumerate(term.get("matchFields") or []):
            errors += _field_requirement_errors(requirement, f"{terms_path}[{i}].matchFields[{j}]")
    return errors


def _pod_spec_errors(spec: Obj, path: str) -> list[FieldError]:
    """ValidatePodSpec, in its order, for what the scheduler and the kubelet read."""
    errors = _containers_errors(spec, path)
    policy = spec.get("restartPolicy")
    if policy and policy not in _RESTART_POLICIES:
        errors.append(_not_supported(f"{path}.restartPolicy", policy, _RESTART_POLICIES))
    errors += _label_errors(spec.get("nodeSelector"), f"{path}.nodeSelector")
    errors += _affinity_errors(spec.get("affinity") or {}, f"{path}.affinity")
    for field, rule in (("serviceAccountName", is_dns1123_subdomain), ("nodeName", is_dns1123_subdomain)):
        value = spec.get(field) or ""
        if value:
            errors += [FieldError(f"{path}.{field}", "Invalid value", m, value) for m in rule(value)]
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None and not 1 <= deadline <= 2**31 - 1:
        errors.append(
            FieldError(
                f"{path}.activeDeadlineSeconds",
                "Invalid value",
                "must be between 1 and 2147483647, inclusive",
                deadline,
            )
        )
    for field in ("hostname", "subdomain"):
        value = spec.get(field) or ""
        if value:
            errors += [
                FieldError(f"{path}.{field}", "Invalid value", m, value) for m in is_dns1123_label(value)
            ]
    errors += _toleration_errors(spec.get("tolerations") or [], f"{path}.tolerations")
    errors += _id_errors(
        spec.get("securityContext") or {},
        f"{path}.securityContext",
        ("runAsUser", "runAsGroup", "supplementalGroups", "fsGroup"),
    )
    return errors


def _pod_errors(pod: Obj) -> list[FieldError]:
    return _pod_spec_errors(pod.get("spec") or {}, "spec")


def _pod_template_errors(template_object: Obj) -> list[FieldError]:
    template = template_object.get("template") or {}
    meta = template.get("metadata") or {}
    errors = _label_errors(meta.get("labels"), "template.metadata.labels")
    errors += _annotation_errors(meta.get("annotations"), "template.metadata.annotations")
    return errors + _pod_spec_errors(template.get("spec") or {}, "template.spec")


def _node_errors(node: Obj) -> list[FieldError]:
    """validateNodeTaints."""
    errors: list[FieldError] = []
    for i, taint in enumerate((node.get("spec") or {}).get("taints") or []):
        path = f"spec.taints[{i}]"
        key, value, effect = taint.get("key") or "", taint.get("value") or "", taint.get("effect") or ""
        errors += [FieldError(f"{path}.key", "Invalid value", m, key) for m in is_qualified_name(key)]
        problems = is_label_value(value)
        if problems:
            errors.append(FieldError(f"{path}.value", "Invalid value", ";".join(problems), value))
        if not effect:
            errors.append(FieldError(f"{path}.effect", "Required value"))
        elif effect not in _TAINT_EFFECTS:
            errors.append(_not_supported(f"{path}.effect", effect, _TAINT_EFFECTS))
    return errors


def _quota_errors(quota: Obj) -> list[FieldError]:
    """ValidateResourceQuotaSpec: each hard limit a qualified name with a valid quantity."""
    errors: list[FieldError] = []
    for name, value in ((quota.get("spec") or {}).get("hard") or {}).items():
        path = f"spec.hard[{name}]"
        errors += [FieldError(path, "Invalid value", m, name) for m in is_qualified_name(name)]
        quantity = _quantity(value)
        if quantity is not None:
            errors += _quantity_value_errors(name, quantity, path)
    return errors


_KIND_RULES: Final[dict[tuple[str, str], Callable[[Obj], list[FieldError]]]] = {
    type_key(POD): _pod_errors,
    type_key(POD_TEMPLATE): _pod_template_errors,
    type_key(NODE): _node_errors,
    type_key(RESOURCE_QUOTA): _quota_errors,
}


def validate_object(rtype: ResourceType, obj: Obj) -> None:
    """Raise the 422 ``Invalid`` of a decoded, defaulted object (name already generated) that may not be
    stored, listing every cause."""
    meta = obj.get("metadata") or {}
    name_rule = is_dns1123_label if rtype == NAMESPACE else is_dns1123_subdomain
    errors = _object_meta_errors(meta, "metadata", name_rule, namespaced=rtype.namespaced)
    rules = _KIND_RULES.get(type_key(rtype))
    if rules is not None:
        errors += rules(obj)
    if errors:
        raise invalid(str(obj.get("kind") or rtype.kind), rtype, str(meta.get("name") or ""), errors)
