"""The Kubernetes-specific task execution metadata: secret annotations and identity labels.

Follows flytepropeller/pkg/controller/nodes/task/k8s/task_exec_context.go and
flyteplugins/go/tasks/pluginmachinery/utils/secrets/marshaler.go. The annotations are read by Flyte's
secret-injection webhook, so their encoding is kept exactly: the secret's protobuf text form (as
golang/protobuf's ``MarshalTextString`` writes it), base32-encoded with Flyte's alphabet.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Final

from flyteidl.core import security_pb2, tasks_pb2
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from taskplug.core import BadTaskSpecification, TaskExecutionMetadata
from taskplug.k8s._names import encode_base32

__all__ = [
    "EXECUTION_IDENTITY_LABEL",
    "SECRET_ANNOTATION_PREFIX",
    "SECRET_POD_LABEL",
    "SECRET_POD_LABEL_VALUE",
    "k8s_task_execution_metadata",
    "marshal_secrets_to_annotations",
    "sanitize_label_value",
    "secret_text",
]

SECRET_ANNOTATION_PREFIX: Final = "flyte.secrets/s"
SECRET_POD_LABEL: Final = "inject-flyte-secrets"
SECRET_POD_LABEL_VALUE: Final = "true"
EXECUTION_IDENTITY_LABEL: Final = "execution-identity"
# Kubernetes' limit on the total size of an object's annotations (apimachinery objectmeta.go).
_TOTAL_ANNOTATION_SIZE_LIMIT_B: Final = 256 * (1 << 10)

_LABEL_INVALID_RUN: Final = re.compile(r"[^-a-z0-9]+")


def _quote(value: bytes) -> str:
    # golang/protobuf textWriter.writeQuotedString: only \n \r \t " \\ are escaped by name, other bytes
    # outside printable ASCII as three-digit octal, everything else (including ') as is.
    out = ['"']
    for c in value:
        if c == 0x0A:
            out.append("\\n")
        elif c == 0x0D:
            out.append("\\r")
        elif c == 0x09:
            out.append("\\t")
        elif c == 0x22:
            out.append('\\"')
        elif c == 0x5C:
            out.append("\\\\")
        elif 0x20 <= c < 0x7F:
            out.append(chr(c))
        else:
            out.append(f"\\{c:03o}")
    out.append('"')
    return "".join(out)


def _scalar_text(field: FieldDescriptor, value: object) -> str:
    if field.type == FieldDescriptor.TYPE_STRING:
        assert isinstance(value, str)
        return _quote(value.encode())
    if field.type == FieldDescriptor.TYPE_BYTES:
        assert isinstance(value, bytes)
        return _quote(value)
    if field.type == FieldDescriptor.TYPE_ENUM:
        assert isinstance(value, int)
        enum_value = field.enum_type.values_by_number.get(value)
        return enum_value.name if enum_value is not None else str(value)
    if field.type == FieldDescriptor.TYPE_BOOL:
        return "true" if value else "false"
    return str(value)


def secret_text(message: Message, indent: str = "") -> str:
    """golang/protobuf's ``MarshalTextString``: one ``name: value`` line per set field, in field order."""
    lines: list[str] = []
    for field, value in message.ListFields():
        repeated = isinstance(value, Sequence) and not isinstance(value, str | bytes)
        values = list(value) if repeated else [value]
        for v in values:
            if field.type == FieldDescriptor.TYPE_MESSAGE:
                lines.append(f"{indent}{field.name}: <\n{secret_text(v, indent + '  ')}{indent}>\n")
            else:
                lines.append(f"{indent}{field.name}: {_scalar_text(field, v)}\n")
    return "".join(lines)


def marshal_secrets_to_annotations(secrets: Sequence[security_pb2.Secret]) -> dict[str, str]:
    """Flyte's ``MarshalSecretsToMapStrings``: ``flyte.secrets/s{i}`` → encoded secret."""
    valid_mounts = set(security_pb2.Secret.MountType.values())
    out: dict[str, str] = {}
    for index, secret in enumerate(secrets):
        if secret.mount_requirement not in valid_mounts:
            raise BadTaskSpecification(f"invalid mount requirement [{secret.mount_requirement}]")
        encoded = encode_base32(secret_text(secret).encode()).rstrip("=")
        out[f"{SECRET_ANNOTATION_PREFIX}{index}"] = encoded
        if len(encoded) > _TOTAL_ANNOTATION_SIZE_LIMIT_B:
            raise BadTaskSpecification(f"secret descriptor cannot exceed [{_TOTAL_ANNOTATION_SIZE_LIMIT_B}]")
    return out


def sanitize_label_value(value: str) -> str:
    """Lower-case; runs outside ``[-a-z0-9]`` become ``-``; at most 63 characters; ``-`` trimmed."""
    return _LABEL_INVALID_RUN.sub("-", value.lower())[:63].strip("-")


def k8s_task_execution_metadata(
    meta: TaskExecutionMetadata, template: tasks_pb2.TaskTemplate
) -> TaskExecutionMetadata:
    """The metadata plugins see at launch: secret annotations and the identity label added.

    As Flyte's ``newTaskExecutionMetadata``: the secrets are the *task template's* (what the task needs), the
    execution identity the *execution's* security context (``tCtx.GetSecurityContext()``: who launched it).

    Raises BadTaskSpecification when a secret cannot be encoded.
    """
    annotations: Mapping[str, str] = meta.annotations
    labels: dict[str, str] = {}
    secrets = template.security_context.secrets
    if len(secrets) > 0:
        annotations = {**meta.annotations, **marshal_secrets_to_annotations(secrets)}
        labels[SECRET_POD_LABEL] = SECRET_POD_LABEL_VALUE
    identity = meta.security_context.run_as.execution_identity
    if identity:
        labels[EXECUTION_IDENTITY_LABEL] = sanitize_label_value(identity)
    if not labels and annotations is meta.annotations:
        return meta
    return replace(meta, annotations=dict(annotations), labels={**meta.labels, **labels})
