"""STRUCT values — dataclasses, pydantic models, bare ``dict`` — between plain mappings and literals.

flytekit 1.16 declares a dataclass or pydantic model as ``STRUCT`` with its JSON schema in ``metadata``,
each field's literal type in ``structure.dataclass_type`` and the annotation
``{"cache-key-metadata": {"serialization-format": "msgpack"}}``; a bare ``dict`` as ``STRUCT`` with that
annotation only. It writes the value as ``Binary(value=<msgpack>, tag="msgpack")``: a mapping of the
fields as mashumaro's MessagePackEncoder (``DataclassTransformer.to_literal``, ``DictTransformer``) or
pydantic's JSON (``PydanticTransformer.to_literal``) gives them — nested dataclasses as mappings, enums as
their values, times as ISO 8601 strings, durations as seconds, FlyteFile/FlyteDirectory as ``{"path"}``,
StructuredDataset as ``{"uri", "file_format"}``. A STRUCT without that annotation (flytekit before 1.14,
or ``FLYTE_USE_OLD_DC_FORMAT``) is written as a protobuf ``Struct`` (``Scalar.generic``).

A plain mapping is checked against the declared type before it is encoded: each field by its literal
type, missing required fields and, when the schema closes the object (``additionalProperties: false``,
as mashumaro's does), unknown fields are refused, naming the field's path.
"""

from __future__ import annotations

import base64
import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from fractions import Fraction
from types import MappingProxyType
from typing import Any, Final, TypeVar

from flyteidl.core import literals_pb2, types_pb2
from google.protobuf import json_format, struct_pb2

from taskplug.core._documents import MAX_DEPTH
from taskplug.core._errors import SpecError
from taskplug.core._literals_types import describe_type
from taskplug.core._literals_values import (
    format_duration,
    key_text,
    read_bool,
    read_date,
    read_datetime,
    read_duration,
    read_float,
    read_int,
    read_str,
    shown,
    what,
)

__all__ = [
    "MESSAGEPACK",
    "binary_to_plain",
    "choose_variant",
    "dataset_of",
    "decoded_to_plain",
    "enum_value",
    "jsonable",
    "struct_field_names",
    "struct_scalar",
    "too_deep",
    "uri_of",
]

MESSAGEPACK: Final = "msgpack"
_Simple = types_pb2.SimpleType
T = TypeVar("T")


def _msgpack() -> Any:
    # Imported on first use: only a STRUCT value converted needs msgpack, and render converts none.
    import msgpack  # type: ignore[import-untyped]

    return msgpack


def too_deep(path: str) -> SpecError:
    return SpecError(path, f"nests deeper than {MAX_DEPTH} levels")


def choose_variant(
    union: types_pb2.LiteralType,
    attempt: Callable[[types_pb2.LiteralType, bool], T],
    path: str,
    *,
    strict: bool,
) -> tuple[types_pb2.LiteralType, T]:
    """The first variant of ``union``, in declared order, that takes the value (as ``pyflyte run`` tries a
    union's types; flytekit's UnionTransformer then writes the variant that matched): first a variant the
    value already is (``3`` is an INTEGER, ``"3"`` a STRING), then one it converts to (``3`` to a FLOAT).
    ``attempt(variant, strict)`` converts or raises :class:`SpecError`; when no variant takes it, the error
    names each variant and why."""
    variants = union.union_type.variants
    failures: list[str] = []
    for strict_pass in (True,) if strict else (True, False):
        failures = []
        for variant in variants:
            try:
                return variant, attempt(variant, strict_pass)
            except SpecError as e:
                where = f"{e.path}: " if e.path != path else ""
                failures.append(f"{describe_type(variant)}: {where}{e.reason}")
    raise SpecError(path, f"matches no variant of {describe_type(union)} ({'; '.join(failures)})")


# -- the JSON schema in a STRUCT's metadata -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Schema:
    """A node of a JSON schema (mashumaro's or pydantic's) and the document its ``$ref`` s point into."""

    node: Mapping[str, Any]
    root: Mapping[str, Any]

    @staticmethod
    def of(literal_type: types_pb2.LiteralType) -> _Schema | None:
        if not literal_type.HasField("metadata"):
            return None
        document = _schema_document(literal_type.metadata.SerializeToString(deterministic=True))
        return _Schema(document, document).resolved()

    def resolved(self) -> _Schema:
        node = self.node
        for _ in range(MAX_DEPTH):  # a cycle of $refs ends here
            ref = node.get("$ref")
            if not isinstance(ref, str) or not ref.startswith("#/"):
                break
            target: Any = self.root
            for part in ref[2:].split("/"):
                target = target.get(part) if isinstance(target, Mapping) else None
            if not isinstance(target, Mapping):
                break
            node = target
        return _Schema(node, self.root)

    def _members(self) -> list[_Schema]:
        out = [self]
        for key in ("anyOf", "oneOf", "allOf"):
            members = self.node.get(key)
            if isinstance(members, list):
                out.extend(_Schema(m, self.root).resolved() for m in members if isinstance(m, Mapping))
        return out

    def child(self, key: str, name: str | None = None) -> _Schema:
        """``items``, ``additionalProperties`` or (with ``name``) a property, looking through ``anyOf``."""
        for member in self._members():
            found = member.node.get(key)
            if name is not None:
                found = found.get(name) if isinstance(found, Mapping) else None
            if isinstance(found, Mapping):
                return _Schema(found, self.root).resolved()
        return _Schema({}, self.root)

    def formats(self) -> set[str]:
        return {str(m.node["format"]) for m in self._members() if "format" in m.node}

    def fields(self) -> tuple[set[str], set[str], bool]:
        """The object's properties, its required ones, and whether it refuses others."""
        properties = self.node.get("properties")
        required = self.node.get("required")
        return (
            set(properties) if isinstance(properties, Mapping) else set(),
            {str(r) for r in required} if isinstance(required, list) else set(),
            self.node.get("additionalProperties") is False,
        )


_NO_SCHEMA = _Schema({}, {})


@functools.lru_cache(maxsize=64)
def _schema_document(metadata: bytes) -> Mapping[str, Any]:
    # Each element of a list of dataclasses has the same schema: read it once.
    return MappingProxyType(json_format.MessageToDict(struct_pb2.Struct.FromString(metadata)))


def struct_field_names(literal_type: types_pb2.LiteralType) -> set[str]:
    """The fields a STRUCT declares (a dataclass's or model's), from its field types and its schema."""
    declared = set(literal_type.structure.dataclass_type) if literal_type.HasField("structure") else set()
    schema = _Schema.of(literal_type)
    return declared | (schema.fields()[0] if schema is not None else set())


# -- plain → msgpack-ready value ----------------------------------------------------------------------------


def is_msgpack_struct(literal_type: types_pb2.LiteralType) -> bool:
    annotations = literal_type.annotation.annotations.fields if literal_type.HasField("annotation") else {}
    metadata = annotations.get("cache-key-metadata")
    if metadata is None or metadata.WhichOneof("kind") != "struct_value":
        return False
    fmt = metadata.struct_value.fields.get("serialization-format")
    return fmt is not None and fmt.string_value == MESSAGEPACK


def struct_scalar(
    value: Any, literal_type: types_pb2.LiteralType, path: str, *, strict: bool, depth: int
) -> literals_pb2.Scalar:
    """The scalar flytekit 1.16 writes for the STRUCT ``literal_type`` given the plain mapping ``value``."""
    plain = _encode(value, literal_type, _NO_SCHEMA, path, depth, strict)
    if is_msgpack_struct(literal_type):
        try:
            data = _msgpack().packb(plain)
        except (TypeError, ValueError, OverflowError) as e:
            raise SpecError(path, f"cannot be written as msgpack: {e}") from e
        return literals_pb2.Scalar(binary=literals_pb2.Binary(value=data, tag=MESSAGEPACK))
    generic = struct_pb2.Struct()
    try:
        json_format.ParseDict(plain, generic)
    except (json_format.ParseError, TypeError, ValueError, AttributeError) as e:
        raise SpecError(path, f"cannot be written as a protobuf Struct: {e}") from e
    return literals_pb2.Scalar(generic=generic)


def _encode(
    value: Any,
    literal_type: types_pb2.LiteralType | None,
    schema: _Schema,
    path: str,
    depth: int,
    strict: bool,
) -> Any:
    if depth > MAX_DEPTH:
        raise too_deep(path)
    if literal_type is None:
        return _untyped(value, path, depth)
    kind = literal_type.WhichOneof("type")
    if kind == "simple":
        return _encode_simple(value, literal_type, schema, path, depth, strict)
    if kind == "collection_type":
        if not isinstance(value, list | tuple):
            raise SpecError(path, f"expected a list, got {what(value)}")
        items = schema.child("items")
        return [
            _encode(v, literal_type.collection_type, items, f"{path}[{i}]", depth + 1, strict)
            for i, v in enumerate(value)
        ]
    if kind == "map_value_type":
        if not isinstance(value, Mapping):
            raise SpecError(path, f"expected a mapping, got {what(value)}")
        values = schema.child("additionalProperties")
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise SpecError(
                    f"{path}.{shown(k)}",
                    f"the keys of {describe_type(literal_type)} are strings, got {what(k)}",
                )
            out[k] = _encode(v, literal_type.map_value_type, values, f"{path}.{k}", depth + 1, strict)
        return out
    if kind == "enum_type":
        return enum_value(value, literal_type, path)
    if kind == "union_type":
        return choose_variant(
            literal_type,
            lambda variant, s: _encode(value, variant, schema, path, depth + 1, s),
            path,
            strict=strict,
        )[1]
    if kind == "blob":
        return {"path": uri_of(value, path)}
    if kind == "structured_dataset_type":
        uri, fmt = dataset_of(value, literal_type, path)
        return {"uri": uri, "file_format": fmt}
    raise SpecError(path, f"a {describe_type(literal_type)} field cannot be given as a plain value")


def _encode_simple(
    value: Any, literal_type: types_pb2.LiteralType, schema: _Schema, path: str, depth: int, strict: bool
) -> Any:
    simple = literal_type.simple
    if simple == _Simple.INTEGER:
        return read_int(value, path, strict=strict)
    if simple == _Simple.FLOAT:
        return read_float(value, path, strict=strict)
    if simple == _Simple.STRING:
        return read_str(value, path, strict=strict)
    if simple == _Simple.BOOLEAN:
        return read_bool(value, path, strict=strict)
    if simple == _Simple.DATETIME:
        # flytekit declares datetime.date as DATETIME too; the schema's format tells them apart, and
        # mashumaro reads a date field only from a date ("2024-05-06").
        formats = schema.formats()
        if "date" in formats and "date-time" not in formats:
            return read_date(value, path, strict=strict).isoformat()
        return read_datetime(value, path, strict=strict).isoformat()
    if simple == _Simple.DURATION:
        seconds, nanos = read_duration(value, path, strict=strict)
        return seconds + nanos / 1e9  # mashumaro writes a timedelta as its seconds
    if simple == _Simple.NONE:
        if value is not None:
            raise SpecError(path, f"expected null, got {what(value)}")
        return None
    if simple == _Simple.STRUCT:
        return _encode_fields(value, literal_type, schema, path, depth, strict)
    raise SpecError(path, f"a {describe_type(literal_type)} value cannot be given as a plain value")


def _encode_fields(
    value: Any, literal_type: types_pb2.LiteralType, schema: _Schema, path: str, depth: int, strict: bool
) -> Any:
    if not isinstance(value, Mapping):
        raise SpecError(path, f"expected a mapping for {describe_type(literal_type)}, got {what(value)}")
    own = _Schema.of(literal_type) or schema
    declared = dict(literal_type.structure.dataclass_type) if literal_type.HasField("structure") else {}
    properties, required, closed = own.fields()
    if not declared and not properties:
        return _untyped(value, path, depth)  # a bare dict: any mapping
    known = set(declared) | properties
    for key in value:
        if not isinstance(key, str):
            raise SpecError(path, f"field names are strings, got {what(key)}")
    unknown = sorted(set(value) - known)
    if unknown and closed:
        raise SpecError(
            f"{path}.{unknown[0]}",
            f"{describe_type(literal_type)} has no field {shown(unknown[0])} (it has {sorted(known)})",
        )
    missing = sorted(required - set(value))
    if missing:
        raise SpecError(f"{path}.{missing[0]}", f"{describe_type(literal_type)} needs field(s) {missing}")
    return {
        key: _encode(v, declared.get(key), own.child("properties", key), f"{path}.{key}", depth + 1, strict)
        for key, v in value.items()
    }


def _untyped(value: Any, path: str, depth: int) -> Any:
    """A value of no declared type inside a STRUCT (a bare dict's values), as JSON would carry it."""
    if depth > MAX_DEPTH:
        raise too_deep(path)
    if isinstance(value, Mapping):
        return {k: _untyped(v, f"{path}.{key_text(k)}", depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_untyped(v, f"{path}[{i}]", depth + 1) for i, v in enumerate(value)]
    if value is None or isinstance(value, str | int | float | bytes):
        return value
    if isinstance(value, datetime):
        return read_datetime(value, path).isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    raise SpecError(path, f"{what(value)} cannot be given in a STRUCT")


def enum_value(value: Any, literal_type: types_pb2.LiteralType, path: str) -> str:
    allowed = list(literal_type.enum_type.values)
    if not isinstance(value, str) or value not in allowed:
        raise SpecError(path, f"expected one of {allowed}, got {what(value)}")
    return value


def uri_of(value: Any, path: str) -> str:
    """A file's, directory's or dataset's URI: the string itself, or ``{uri: …}`` / ``{path: …}``."""
    if isinstance(value, Mapping) and len(value) == 1 and set(value) <= {"uri", "path"}:
        value = next(iter(value.values()))
    if not isinstance(value, str) or not value:
        raise SpecError(path, f"expected a URI string, got {what(value)}")
    return value


def dataset_of(value: Any, literal_type: types_pb2.LiteralType, path: str) -> tuple[str, str]:
    """A StructuredDataset's URI and format from ``"s3://…"`` or ``{uri, format}``. The declared format wins
    (flytekit's ``StructuredDatasetTransformerEngine``); a different one given is refused, as Flyte's type
    checker refuses a dataset literal of another format."""
    declared = literal_type.structured_dataset_type.format
    given = ""
    if isinstance(value, Mapping):
        extra = sorted(set(value) - {"uri", "format"})
        if extra or "uri" not in value:
            raise SpecError(
                path, f"a dataset is a URI or a mapping {{uri, format}}, got the keys {sorted(value)}"
            )
        given = value.get("format") or ""
        if not isinstance(given, str):
            raise SpecError(f"{path}.format", f"expected a format name such as parquet, got {what(given)}")
        value = value["uri"]
    uri = uri_of(value, path)
    if declared and given and given.lower() != declared.lower():
        raise SpecError(
            path, f"the input is declared {describe_type(literal_type)}, got format {shown(given)}"
        )
    return uri, declared or given


# -- literal → plain value, for people ----------------------------------------------------------------------


class _TooDeep(Exception):
    pass


def jsonable(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON can show it: string keys, non-finite floats and bytes as text."""
    if depth > MAX_DEPTH:
        raise _TooDeep
    if isinstance(value, Mapping):
        return {(k if isinstance(k, str) else str(k)): jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v, depth + 1) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, _msgpack().Timestamp):
        return value.to_datetime().isoformat().replace("+00:00", "Z")
    if value is None or isinstance(value, str | int | float):
        return value
    return repr(value)


def binary_to_plain(binary: literals_pb2.Binary, literal_type: types_pb2.LiteralType | None = None) -> Any:
    """A msgpack binary (a dataclass, a model, a dict) as its decoded value — a dataclass as the mapping of
    its fields, shown by ``literal_type`` when known (see :func:`decoded_to_plain`); any other binary, or one
    that does not decode, as ``{"binary": <base64>, "tag": …}``."""
    raw = {"binary": base64.b64encode(binary.value).decode(), "tag": binary.tag}
    if binary.tag != MESSAGEPACK:
        return raw
    unpackb = _msgpack().unpackb
    try:
        return decoded_to_plain(unpackb(binary.value, strict_map_key=False), literal_type)
    # msgpack documents that unpacking may raise exceptions of any kind; an output that does not decode is
    # still shown, as its bytes.
    except Exception:
        return raw


def decoded_to_plain(value: Any, literal_type: types_pb2.LiteralType | None, depth: int = 0) -> Any:
    """A decoded STRUCT value (msgpack or protobuf Struct) shown as taskplug shows the same types outside a
    STRUCT: a duration in Go's syntax (mashumaro wrote seconds), a FlyteFile/FlyteDirectory as its path, a
    dataset as ``{uri, format}``, an INTEGER as an int (a protobuf Struct has only doubles)."""
    if depth > MAX_DEPTH:
        raise _TooDeep
    if literal_type is None:
        return jsonable(value, depth)
    kind = literal_type.WhichOneof("type")
    if kind == "simple":
        return _decoded_simple(value, literal_type, depth)
    if kind == "collection_type" and isinstance(value, list):
        return [decoded_to_plain(v, literal_type.collection_type, depth + 1) for v in value]
    if kind == "map_value_type" and isinstance(value, Mapping):
        return {str(k): decoded_to_plain(v, literal_type.map_value_type, depth + 1) for k, v in value.items()}
    if kind == "union_type" and value is not None:
        # Optional[X]: the value is an X. Other unions do not say which variant a value is.
        some = [
            v
            for v in literal_type.union_type.variants
            if v.WhichOneof("type") != "simple" or v.simple != _Simple.NONE
        ]
        if len(some) == 1:
            return decoded_to_plain(value, some[0], depth + 1)
    if kind == "blob" and isinstance(value, Mapping) and isinstance(value.get("path"), str):
        return value["path"]
    if kind == "structured_dataset_type" and isinstance(value, Mapping) and isinstance(value.get("uri"), str):
        return {"uri": value["uri"], "format": value.get("file_format") or ""}
    return jsonable(value, depth)


def _decoded_simple(value: Any, literal_type: types_pb2.LiteralType, depth: int) -> Any:
    simple = literal_type.simple
    if simple == _Simple.STRUCT and isinstance(value, Mapping) and literal_type.HasField("structure"):
        fields = literal_type.structure.dataclass_type
        return {
            str(k): decoded_to_plain(v, fields[k] if isinstance(k, str) and k in fields else None, depth + 1)
            for k, v in value.items()
        }
    number = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if simple == _Simple.DURATION and number:
        ns = round(Fraction(value) * 1_000_000_000)
        seconds, nanos = divmod(abs(ns), 1_000_000_000)
        sign = -1 if ns < 0 else 1
        return format_duration(sign * seconds, sign * nanos)
    if simple == _Simple.INTEGER and isinstance(value, float) and value.is_integer():
        return int(value)
    if simple == _Simple.DATETIME and isinstance(value, str) and "T" in value:
        # As a DATETIME outside a dataclass is shown: RFC 3339 in UTC.
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            return value
        if moment.tzinfo is not None:
            return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return jsonable(value, depth)
