"""Conversions between flyteidl literals and plain Python values.

The execution spec gives inputs as plain YAML values or as flyteidl Literal JSON; outputs are shown to
users as plain values. Typed conversion follows the task interface when it declares a type (so ``3`` for a
FLOAT input becomes ``3.0``), and falls back on the Python type otherwise.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from flyteidl.core import interface_pb2, literals_pb2, types_pb2
from google.protobuf import json_format

from taskplug.core._errors import SpecError

__all__ = ["literal_map_from_plain", "literal_map_to_plain", "literal_to_plain", "plain_to_literal"]

_Simple = types_pb2.SimpleType


def plain_to_literal(
    value: Any, literal_type: types_pb2.LiteralType | None, path: str
) -> literals_pb2.Literal:
    """Convert a plain value (or a Literal given as JSON) into a Literal; ``path`` names it in errors."""
    # A map input may have a key named "scalar"; any other declared type cannot be a mapping, so such a
    # mapping is Literal JSON.
    looks_like_literal = isinstance(value, Mapping) and (
        "scalar" in value or "collection" in value or "map" in value
    )
    if looks_like_literal and (literal_type is None or literal_type.WhichOneof("type") != "map_value_type"):
        try:
            return json_format.ParseDict(dict(value), literals_pb2.Literal())
        except json_format.ParseError as e:
            raise SpecError(path, f"not a valid Literal: {e}") from e
    kind = literal_type.WhichOneof("type") if literal_type is not None else None
    if kind == "collection_type" or (kind is None and isinstance(value, list | tuple)):
        if not isinstance(value, list | tuple):
            raise SpecError(path, f"expected a list, got {type(value).__name__}")
        sub = literal_type.collection_type if literal_type is not None and kind == "collection_type" else None
        return literals_pb2.Literal(
            collection=literals_pb2.LiteralCollection(
                literals=[plain_to_literal(v, sub, f"{path}[{i}]") for i, v in enumerate(value)]
            )
        )
    if kind == "map_value_type" or (kind is None and isinstance(value, Mapping)):
        if not isinstance(value, Mapping):
            raise SpecError(path, f"expected a mapping, got {type(value).__name__}")
        sub = literal_type.map_value_type if literal_type is not None and kind == "map_value_type" else None
        return literals_pb2.Literal(
            map=literals_pb2.LiteralMap(
                literals={str(k): plain_to_literal(v, sub, f"{path}.{k}") for k, v in value.items()}
            )
        )
    if kind == "blob":
        assert literal_type is not None
        if not isinstance(value, str):
            raise SpecError(path, "a blob input is given as its URI string")
        return literals_pb2.Literal(
            scalar=literals_pb2.Scalar(
                blob=literals_pb2.Blob(metadata=literals_pb2.BlobMetadata(type=literal_type.blob), uri=value)
            )
        )
    simple = literal_type.simple if literal_type is not None and kind == "simple" else None
    return literals_pb2.Literal(scalar=literals_pb2.Scalar(primitive=_primitive(value, simple, path)))


def _primitive(value: Any, simple: int | None, path: str) -> literals_pb2.Primitive:
    if simple == _Simple.INTEGER or (
        simple is None and isinstance(value, int) and not isinstance(value, bool)
    ):
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise SpecError(path, f"expected an integer, got {value!r}")
        try:
            return literals_pb2.Primitive(integer=int(value))
        except ValueError as e:
            raise SpecError(path, f"expected an integer, got {value!r}") from e
    if simple == _Simple.FLOAT or (simple is None and isinstance(value, float)):
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise SpecError(path, f"expected a number, got {value!r}")
        try:
            return literals_pb2.Primitive(float_value=float(value))
        except ValueError as e:
            raise SpecError(path, f"expected a number, got {value!r}") from e
    if simple == _Simple.BOOLEAN or (simple is None and isinstance(value, bool)):
        if not isinstance(value, bool):
            raise SpecError(path, f"expected true or false, got {value!r}")
        return literals_pb2.Primitive(boolean=value)
    if simple == _Simple.DATETIME or (simple is None and isinstance(value, datetime)):
        if isinstance(value, str):
            try:
                value = datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError as e:
                raise SpecError(path, f"expected an RFC 3339 time, got {value!r}") from e
        if not isinstance(value, datetime):
            raise SpecError(path, f"expected a time, got {value!r}")
        if value.tzinfo is None:
            # A time without a zone is UTC (as in YAML), never the machine's local time.
            value = value.replace(tzinfo=UTC)
        primitive = literals_pb2.Primitive()
        primitive.datetime.FromDatetime(value.astimezone(UTC).replace(tzinfo=None))
        return primitive
    if simple in (None, _Simple.STRING, _Simple.NONE):
        if not isinstance(value, str):
            raise SpecError(path, f"expected a string, got {value!r}")
        return literals_pb2.Primitive(string_value=value)
    raise SpecError(path, f"inputs of type {_Simple.Name(simple)} cannot be given as plain values")


def literal_map_from_plain(
    values: Mapping[str, Any], interface: interface_pb2.VariableMap | None, path: str = "inputs"
) -> literals_pb2.LiteralMap:
    declared = dict(interface.variables) if interface is not None else {}
    out = literals_pb2.LiteralMap()
    for name, value in values.items():
        variable = declared.get(name)
        if interface is not None and variable is None:
            raise SpecError(
                f"{path}.{name}", f"the task declares no input named {name!r} (it has {sorted(declared)})"
            )
        out.literals[name].CopyFrom(
            plain_to_literal(value, variable.type if variable else None, f"{path}.{name}")
        )
    return out


def literal_to_plain(literal: literals_pb2.Literal) -> Any:
    """A JSON-able view of a literal, for showing outputs to people."""
    which = literal.WhichOneof("value")
    if which == "collection":
        return [literal_to_plain(v) for v in literal.collection.literals]
    if which == "map":
        return {k: literal_to_plain(v) for k, v in literal.map.literals.items()}
    if which == "scalar":
        scalar = literal.scalar
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
                return p.duration.ToTimedelta().total_seconds()
            return None
        if kind == "blob":
            return scalar.blob.uri
        if kind == "schema":
            return scalar.schema.uri
        if kind == "none_type":
            return None
        if kind == "generic":
            return json_format.MessageToDict(scalar.generic)
        if kind == "binary":
            return {"binary": base64.b64encode(scalar.binary.value).decode(), "tag": scalar.binary.tag}
    return json_format.MessageToDict(literal)


def literal_map_to_plain(literal_map: literals_pb2.LiteralMap) -> dict[str, Any]:
    return {name: literal_to_plain(lit) for name, lit in literal_map.literals.items()}
