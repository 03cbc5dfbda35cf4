"""Conversions between flyteidl literals and plain values: the execution spec's inputs, the outputs shown.

Inputs are plain YAML/JSON values converted by the type the task interface declares, as ``pyflyte run``
and the console's launch form accept them (flytekit 1.16's transformers in
``flytekit/core/type_engine.py`` say what each type's literal is):

- INTEGER (within int64), FLOAT (``3`` is ``3.0``), STRING (never from a number), BOOLEAN (never from a
  string), DATETIME (RFC 3339, UTC when no zone is given), DURATION (seconds, ``1h30m``, ``PT1H30M``);
- enums: one of the declared values; unions (``Optional`` is a union with NONE): the first variant that
  takes the value, written as flytekit writes it, ``Scalar.union`` with the variant as its type;
- lists and maps, nested; FlyteFile/FlyteDirectory and StructuredDataset from a URI (a dataset also from
  ``{uri, format}``, in the format the type declares);
- STRUCT (dataclass, pydantic model, ``dict``): a mapping, checked against the declared fields and encoded
  as flytekit writes it (msgpack; see :mod:`taskplug.core._literals_struct`).

An input may also be given as flyteidl Literal JSON (``{"scalar": …}``); it is checked against the
declared type as flyteadmin checks inputs at launch (:mod:`taskplug.core._literals_types`). Every
mismatch is a :class:`SpecError` naming the input's path (``inputs.x[2].y``). Without a declared type, the
Python type decides. Outputs are shown as plain values by the same rules (a dataclass as its fields, a
dataset as ``{uri, format}``, a union as its value, a duration in Go's syntax).

Nesting is bounded: a value deeper than documents may be (``MAX_DEPTH``) is refused, and so is a literal
deeper than protobuf lets flytekit read (100 nested messages), rather than failing in the pod.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta
from typing import Any, Final

from flyteidl.core import interface_pb2, literals_pb2, types_pb2
from google.protobuf import json_format
from google.protobuf.message import DecodeError

from taskplug.core._documents import MAX_DEPTH
from taskplug.core._errors import SpecError
from taskplug.core._literals_struct import (
    binary_to_plain,
    choose_variant,
    dataset_of,
    decoded_to_plain,
    enum_value,
    struct_field_names,
    struct_scalar,
    too_deep,
    uri_of,
)
from taskplug.core._literals_types import are_types_castable, describe_type, literal_type_for_literal
from taskplug.core._literals_values import (
    format_duration,
    key_text,
    read_bool,
    read_datetime,
    read_duration,
    read_float,
    read_int,
    read_str,
    shown,
    what,
)

__all__ = ["literal_map_from_plain", "literal_map_to_plain", "literal_to_plain", "plain_to_literal"]

_Simple = types_pb2.SimpleType
_LITERAL_VALUE_KEYS: Final = frozenset(
    {"scalar", "collection", "map", "offloadedMetadata", "offloaded_metadata"}
)
_LITERAL_KEYS: Final = _LITERAL_VALUE_KEYS | {"hash", "metadata"}
_TOO_DEEP_FOR_PROTOBUF: Final = (
    "nests deeper than a Flyte literal can: protobuf reads at most 100 nested messages, so flytekit could "
    "not read this input"
)


# -- plain → literal ----------------------------------------------------------------------------------------


def plain_to_literal(
    value: Any, literal_type: types_pb2.LiteralType | None, path: str
) -> literals_pb2.Literal:
    """Convert a plain value (or a Literal given as JSON) into a Literal of ``literal_type``; ``path`` names
    it in errors."""
    try:
        return _to_literal(value, literal_type, path, 1, strict=False)
    except DecodeError as e:
        # protobuf refuses to nest a message deeper than it could read back.
        raise SpecError(path, _TOO_DEEP_FOR_PROTOBUF) from e


def _to_literal(
    value: Any, literal_type: types_pb2.LiteralType | None, path: str, depth: int, *, strict: bool
) -> literals_pb2.Literal:
    if depth > MAX_DEPTH:
        raise too_deep(path)
    given = _literal_json(value, literal_type, path)
    if given is not None:
        if literal_type is not None:
            _check_literal(given, literal_type, path)
        return given
    if literal_type is None:
        return _untyped_literal(value, path, depth)
    kind = literal_type.WhichOneof("type")
    if (
        value is None
        and kind != "union_type"
        and not (kind == "simple" and literal_type.simple == _Simple.NONE)
    ):
        raise SpecError(path, f"got null, but the type {describe_type(literal_type)} is not Optional")
    if kind == "collection_type":
        if not isinstance(value, list | tuple):
            raise SpecError(path, f"expected a list, got {what(value)}")
        return literals_pb2.Literal(
            collection=literals_pb2.LiteralCollection(
                literals=[
                    _to_literal(v, literal_type.collection_type, f"{path}[{i}]", depth + 1, strict=strict)
                    for i, v in enumerate(value)
                ]
            )
        )
    if kind == "map_value_type":
        if not isinstance(value, Mapping):
            raise SpecError(path, f"expected a mapping, got {what(value)}")
        out = literals_pb2.Literal(map=literals_pb2.LiteralMap())
        for k, v in value.items():
            if not isinstance(k, str):
                raise SpecError(
                    f"{path}.{shown(k)}",
                    f"the keys of {describe_type(literal_type)} are strings, got {what(k)}",
                )
            out.map.literals[k].CopyFrom(
                _to_literal(v, literal_type.map_value_type, f"{path}.{k}", depth + 1, strict=strict)
            )
        return out
    if kind == "union_type":
        variant, literal = choose_variant(
            literal_type,
            lambda variant, s: _to_literal(value, variant, path, depth + 1, strict=s),
            path,
            strict=strict,
        )
        return literals_pb2.Literal(
            scalar=literals_pb2.Scalar(union=literals_pb2.Union(value=literal, type=variant))
        )
    return literals_pb2.Literal(scalar=_scalar(value, literal_type, path, depth, strict=strict))


def _scalar(
    value: Any, literal_type: types_pb2.LiteralType, path: str, depth: int, *, strict: bool
) -> literals_pb2.Scalar:
    kind = literal_type.WhichOneof("type")
    if kind == "enum_type":
        return _primitive_scalar(string_value=enum_value(value, literal_type, path))
    if kind == "blob":
        blob = literals_pb2.Blob(metadata=literals_pb2.BlobMetadata(type=literal_type.blob))
        blob.uri = uri_of(value, path)
        return literals_pb2.Scalar(blob=blob)
    if kind == "structured_dataset_type":
        uri, fmt = dataset_of(value, literal_type, path)
        dataset_type = types_pb2.StructuredDatasetType()
        dataset_type.CopyFrom(literal_type.structured_dataset_type)
        dataset_type.format = fmt
        return literals_pb2.Scalar(
            structured_dataset=literals_pb2.StructuredDataset(
                uri=uri, metadata=literals_pb2.StructuredDatasetMetadata(structured_dataset_type=dataset_type)
            )
        )
    if kind == "schema":
        return literals_pb2.Scalar(
            schema=literals_pb2.Schema(uri=uri_of(value, path), type=literal_type.schema)
        )
    if kind != "simple":
        raise SpecError(path, f"inputs of type {describe_type(literal_type)} cannot be given as plain values")
    simple = literal_type.simple
    if simple == _Simple.INTEGER:
        return _primitive_scalar(integer=read_int(value, path, strict=strict))
    if simple == _Simple.FLOAT:
        return _primitive_scalar(float_value=read_float(value, path, strict=strict))
    if simple == _Simple.STRING:
        return _primitive_scalar(string_value=read_str(value, path, strict=strict))
    if simple == _Simple.BOOLEAN:
        return _primitive_scalar(boolean=read_bool(value, path, strict=strict))
    if simple == _Simple.DATETIME:
        return _datetime_scalar(read_datetime(value, path, strict=strict))
    if simple == _Simple.DURATION:
        seconds, nanos = read_duration(value, path, strict=strict)
        scalar = literals_pb2.Scalar()
        scalar.primitive.duration.seconds = seconds
        scalar.primitive.duration.nanos = nanos
        return scalar
    if simple == _Simple.NONE:
        if value is not None:
            raise SpecError(path, f"expected null, got {what(value)}")
        return literals_pb2.Scalar(none_type=literals_pb2.Void())
    if simple == _Simple.STRUCT:
        return struct_scalar(value, literal_type, path, strict=strict, depth=depth)
    raise SpecError(path, f"inputs of type {describe_type(literal_type)} cannot be given as plain values")


def _primitive_scalar(**value: Any) -> literals_pb2.Scalar:
    return literals_pb2.Scalar(primitive=literals_pb2.Primitive(**value))


def _datetime_scalar(value: datetime) -> literals_pb2.Scalar:
    scalar = literals_pb2.Scalar()
    scalar.primitive.datetime.FromDatetime(value.astimezone(UTC).replace(tzinfo=None))
    return scalar


def _untyped_literal(value: Any, path: str, depth: int) -> literals_pb2.Literal:
    """Without a declared type, the Python type decides."""
    if isinstance(value, list | tuple):
        return literals_pb2.Literal(
            collection=literals_pb2.LiteralCollection(
                literals=[
                    _to_literal(v, None, f"{path}[{i}]", depth + 1, strict=False) for i, v in enumerate(value)
                ]
            )
        )
    if isinstance(value, Mapping):
        out = literals_pb2.Literal(map=literals_pb2.LiteralMap())
        for k, v in value.items():
            key = key_text(k)
            out.map.literals[key].CopyFrom(_to_literal(v, None, f"{path}.{key}", depth + 1, strict=False))
        return out
    if value is None:
        return literals_pb2.Literal(scalar=literals_pb2.Scalar(none_type=literals_pb2.Void()))
    if isinstance(value, bool):
        scalar = _primitive_scalar(boolean=value)
    elif isinstance(value, int):
        scalar = _primitive_scalar(integer=read_int(value, path))
    elif isinstance(value, float):
        scalar = _primitive_scalar(float_value=value)
    elif isinstance(value, str):
        scalar = _primitive_scalar(string_value=value)
    elif isinstance(value, datetime | date):
        scalar = _datetime_scalar(read_datetime(value, path))
    elif isinstance(value, timedelta):
        seconds, nanos = read_duration(value, path)
        scalar = literals_pb2.Scalar()
        scalar.primitive.duration.seconds = seconds
        scalar.primitive.duration.nanos = nanos
    else:
        raise SpecError(path, f"{what(value)} cannot be given as an input")
    return literals_pb2.Literal(scalar=scalar)


# -- Literal JSON, checked as flyteadmin checks inputs --------------------------------------------------------


def _is_struct(literal_type: types_pb2.LiteralType | None) -> bool:
    return literal_type is not None and bool(
        literal_type.WhichOneof("type") == "simple" and literal_type.simple == _Simple.STRUCT
    )


def _may_be_a_plain_mapping(literal_type: types_pb2.LiteralType | None) -> bool:
    """Whether a plain mapping with a key named ``scalar`` or ``map`` could be a value of this type."""
    if literal_type is None:
        return False
    kind = literal_type.WhichOneof("type")
    if kind == "union_type":
        return any(_may_be_a_plain_mapping(v) for v in literal_type.union_type.variants)
    return bool(kind == "map_value_type" or (kind == "simple" and literal_type.simple == _Simple.STRUCT))


def _literal_json(
    value: Any, literal_type: types_pb2.LiteralType | None, path: str
) -> literals_pb2.Literal | None:
    """``value`` parsed as Literal JSON when it is one; None for a plain value."""
    if not isinstance(value, Mapping) or not _LITERAL_VALUE_KEYS & set(value):
        return None
    plain_possible = _may_be_a_plain_mapping(literal_type)
    if plain_possible and not set(value) <= _LITERAL_KEYS:
        return None
    if _is_struct(literal_type) and set(value) <= struct_field_names(literal_type):
        return None  # a dataclass with a field named ``map`` (or ``scalar``…)
    try:
        return json_format.ParseDict(dict(value), literals_pb2.Literal())
    except json_format.ParseError as e:
        # A map or STRUCT input may have keys named like a Literal's fields: then it is a plain mapping.
        if plain_possible:
            return None
        raise SpecError(path, f"not a valid Literal: {e}") from e


def _check_literal(literal: literals_pb2.Literal, declared: types_pb2.LiteralType, path: str) -> None:
    inferred = literal_type_for_literal(literal)
    name = path.rsplit(".", 1)[-1]
    if inferred is None:
        raise SpecError(path, f"invalid {name} input: Flyte cannot tell the type of this literal")
    if not are_types_castable(inferred, declared):
        raise SpecError(
            path,
            f"invalid {name} input wrong type. Expected {describe_type(declared)}, but got {describe_type(inferred)}",
        )
    _check_enum_values(literal, declared, path)


def _check_enum_values(literal: literals_pb2.Literal, declared: types_pb2.LiteralType, path: str) -> None:
    # Deviation: flyteadmin accepts any string for an enum input (an enum casts from STRING), and the task
    # then fails in flytekit (``Color("purple")``); taskplug refuses it before launch, naming the values.
    kind = declared.WhichOneof("type")
    if kind == "enum_type" and literal.scalar.primitive.WhichOneof("value") == "string_value":
        enum_value(literal.scalar.primitive.string_value, declared, path)
    elif kind == "collection_type" and literal.WhichOneof("value") == "collection":
        for i, element in enumerate(literal.collection.literals):
            _check_enum_values(element, declared.collection_type, f"{path}[{i}]")
    elif kind == "map_value_type" and literal.WhichOneof("value") == "map":
        for key, element in literal.map.literals.items():
            _check_enum_values(element, declared.map_value_type, f"{path}.{key}")


# -- maps of inputs -----------------------------------------------------------------------------------------


def literal_map_from_plain(
    values: Mapping[str, Any], interface: interface_pb2.VariableMap | None, path: str = "inputs"
) -> literals_pb2.LiteralMap:
    """The inputs ``values`` (plain or Literal JSON) as a LiteralMap typed by ``interface`` (when given)."""
    declared = dict(interface.variables) if interface is not None else {}
    out = literals_pb2.LiteralMap()
    for name, value in values.items():
        variable = declared.get(name)
        if interface is not None and variable is None:
            raise SpecError(
                f"{path}.{name}", f"the task declares no input named {name!r} (it has {sorted(declared)})"
            )
        literal = plain_to_literal(value, variable.type if variable else None, f"{path}.{name}")
        try:
            out.literals[name].CopyFrom(literal)
        except DecodeError as e:
            raise SpecError(f"{path}.{name}", _TOO_DEEP_FOR_PROTOBUF) from e
    # The map itself nests its literals two messages deeper: make sure flytekit can read inputs.pb back.
    try:
        literals_pb2.LiteralMap.FromString(out.SerializeToString())
    except DecodeError:
        for name in out.literals:
            single = literals_pb2.LiteralMap()
            single.literals[name].CopyFrom(out.literals[name])
            try:
                literals_pb2.LiteralMap.FromString(single.SerializeToString())
            except DecodeError as e:
                raise SpecError(f"{path}.{name}", _TOO_DEEP_FOR_PROTOBUF) from e
        raise SpecError(path, _TOO_DEEP_FOR_PROTOBUF) from None
    return out


# -- literal → plain value, for people ------------------------------------------------------------------------


def literal_to_plain(literal: literals_pb2.Literal, literal_type: types_pb2.LiteralType | None = None) -> Any:
    """A JSON-able view of a literal, for showing outputs to people. With the declared ``literal_type``, the
    fields of a dataclass are shown as the same types are outside one (a duration as ``1h30m0s``, a file as
    its path, a dataset as ``{uri, format}``); without it, as the msgpack carries them."""
    which = literal.WhichOneof("value")
    kind = literal_type.WhichOneof("type") if literal_type is not None else None
    if which == "collection":
        element = (
            literal_type.collection_type if literal_type is not None and kind == "collection_type" else None
        )
        return [literal_to_plain(v, element) for v in literal.collection.literals]
    if which == "map":
        value = literal_type.map_value_type if literal_type is not None and kind == "map_value_type" else None
        return {k: literal_to_plain(v, value) for k, v in literal.map.literals.items()}
    if which == "scalar":
        return _scalar_to_plain(literal.scalar, literal_type)
    return json_format.MessageToDict(literal)


def _scalar_to_plain(scalar: literals_pb2.Scalar, literal_type: types_pb2.LiteralType | None) -> Any:
    kind = scalar.WhichOneof("value")
    if kind == "primitive":
        p = scalar.primitive
        pk = p.WhichOneof("value")
        if pk == "integer":
            return p.integer
        if pk == "float_value":
            return p.float_value if math.isfinite(p.float_value) else str(p.float_value)
        if pk == "string_value":
            return p.string_value
        if pk == "boolean":
            return p.boolean
        if pk == "datetime":
            return p.datetime.ToDatetime().replace(tzinfo=UTC).isoformat().replace("+00:00", "Z")
        if pk == "duration":
            return format_duration(p.duration.seconds, p.duration.nanos)
        return None
    if kind == "union":
        # The union literal carries the variant it holds.
        return literal_to_plain(
            scalar.union.value, scalar.union.type if scalar.union.HasField("type") else None
        )
    if kind == "blob":
        return scalar.blob.uri
    if kind == "structured_dataset":
        dataset = scalar.structured_dataset
        return {"uri": dataset.uri, "format": dataset.metadata.structured_dataset_type.format}
    if kind == "schema":
        return scalar.schema.uri
    if kind == "none_type":
        return None
    if kind == "generic":
        return decoded_to_plain(json_format.MessageToDict(scalar.generic), literal_type)
    if kind == "binary":
        return binary_to_plain(scalar.binary, literal_type)
    return json_format.MessageToDict(scalar)


def literal_map_to_plain(
    literal_map: literals_pb2.LiteralMap, interface: interface_pb2.VariableMap | None = None
) -> dict[str, Any]:
    """The outputs (or inputs) in ``literal_map`` as plain values, each shown by its type in ``interface``
    (the task's output variables) when given."""
    declared = interface.variables if interface is not None else {}
    return {
        name: literal_to_plain(lit, declared[name].type if name in declared else None)
        for name, lit in literal_map.literals.items()
    }
