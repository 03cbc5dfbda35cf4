"""Which literal type a literal has, and whether one literal type can be used where another is declared.

Follows flytepropeller's type checker, which flyteadmin runs on every input of an execution it is asked
to create (``CheckAndFetchInputsForExecution`` in
``flyteadmin/pkg/manager/impl/validation/execution_validator.go``): the literal's type is inferred
(``LiteralTypeForLiteral``, ``flytepropeller/pkg/compiler/validators/utils.go``), then checked against
the declared type (``AreTypesCastable``, ``flytepropeller/pkg/compiler/validators/typing.go``). The rules
are Flyte's: an integer is not a float, a string casts to an enum and an enum to a string, a blob with no
format matches any blob, a structured dataset matches when its format agrees and the declared columns are
a subset of its columns, a value casts to a union when exactly one variant takes it, an empty list or map
matches any list or map.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from flyteidl.core import literals_pb2, types_pb2
from google.protobuf import json_format

__all__ = ["are_types_castable", "describe_type", "literal_type_for_literal"]

_Simple = types_pb2.SimpleType
_MESSAGEPACK = "msgpack"


# -- the type of a literal (validators/utils.go) ------------------------------------------------------------


def _simple(kind: int) -> types_pb2.LiteralType:
    return types_pb2.LiteralType(simple=kind)


_PRIMITIVE_TYPES = {
    "integer": _Simple.INTEGER,
    "float_value": _Simple.FLOAT,
    "string_value": _Simple.STRING,
    "boolean": _Simple.BOOLEAN,
    "datetime": _Simple.DATETIME,
    "duration": _Simple.DURATION,
}


def _literal_type_for_scalar(scalar: literals_pb2.Scalar) -> types_pb2.LiteralType | None:
    kind = scalar.WhichOneof("value")
    if kind == "primitive":
        return _simple(_PRIMITIVE_TYPES.get(str(scalar.primitive.WhichOneof("value")), _Simple.NONE))
    if kind == "blob":
        if not scalar.blob.HasField("metadata"):
            return None
        return types_pb2.LiteralType(blob=scalar.blob.metadata.type)
    if kind == "binary":
        # A tagged binary is a structured value (dict, dataclass, pydantic model); untagged, raw bytes.
        return _simple(_Simple.STRUCT if scalar.binary.tag == _MESSAGEPACK else _Simple.BINARY)
    if kind == "schema":
        return types_pb2.LiteralType(schema=scalar.schema.type)
    if kind == "structured_dataset":
        return types_pb2.LiteralType(
            structured_dataset_type=scalar.structured_dataset.metadata.structured_dataset_type
        )
    if kind == "none_type":
        return _simple(_Simple.NONE)
    if kind == "error":
        return _simple(_Simple.ERROR)
    if kind == "generic":
        return _simple(_Simple.STRUCT)
    if kind == "union":
        return types_pb2.LiteralType(union_type=types_pb2.UnionType(variants=[scalar.union.type]))
    return None


def _literal_type_for_literals(literals: Iterable[literals_pb2.Literal]) -> types_pb2.LiteralType | None:
    """The element type of a collection or map: the one type all share, NONE when empty, else a union."""
    inner: list[types_pb2.LiteralType] = []
    seen: set[bytes] = set()
    none_type: types_pb2.LiteralType | None = None
    for literal in literals:
        found = literal_type_for_literal(literal)
        if found is None:
            return None
        if literal.WhichOneof("value") == "collection" and not literal.collection.literals:
            none_type = found
            continue
        key = found.SerializeToString(deterministic=True)
        if key not in seen:
            seen.add(key)
            inner.append(found)
    if not inner and none_type is not None:
        inner.append(none_type)
    if not inner:
        return _simple(_Simple.NONE)
    if len(inner) == 1:
        return inner[0]
    # Sorted, so that the same mixture always gives the same union (Go sorts by the types' text).
    inner.sort(key=lambda t: t.SerializeToString(deterministic=True))
    variants: list[types_pb2.LiteralType] = []
    nested = False
    for t in inner:
        if t.collection_type.HasField("union_type"):
            nested = True
            variants.extend(t.collection_type.union_type.variants)
        else:
            variants.append(t)
    union = types_pb2.LiteralType(union_type=types_pb2.UnionType(variants=variants))
    return types_pb2.LiteralType(collection_type=union) if nested else union


def literal_type_for_literal(literal: literals_pb2.Literal) -> types_pb2.LiteralType | None:
    """The type Flyte infers for ``literal`` (``LiteralTypeForLiteral``); None when it cannot tell."""
    kind = literal.WhichOneof("value")
    if kind == "scalar":
        return _literal_type_for_scalar(literal.scalar)
    if kind == "collection":
        element = _literal_type_for_literals(literal.collection.literals)
        return None if element is None else types_pb2.LiteralType(collection_type=element)
    if kind == "map":
        value = _literal_type_for_literals(literal.map.literals.values())
        return None if value is None else types_pb2.LiteralType(map_value_type=value)
    if kind == "offloaded_metadata":
        return literal.offloaded_metadata.inferred_type
    return None


# -- castability (validators/typing.go) --------------------------------------------------------------------


def _is_simple(t: types_pb2.LiteralType, kind: int) -> bool:
    return bool(t.WhichOneof("type") == "simple" and t.simple == kind)


def _is_none_type(t: types_pb2.LiteralType) -> bool:
    return _is_simple(t, _Simple.NONE)


def _tag(t: types_pb2.LiteralType) -> str:
    return t.structure.tag if t.HasField("structure") else ""


def _trivial_casts(downstream: types_pb2.LiteralType, upstream: types_pb2.LiteralType) -> bool:
    # An enum is a constrained string: each casts to the other.
    if upstream.HasField("enum_type") and _is_simple(downstream, _Simple.STRING):
        return True
    if downstream.HasField("enum_type") and _is_simple(upstream, _Simple.STRING):
        return True
    if _tag(upstream) and _tag(downstream) != _tag(upstream):
        return False
    if _is_simple(upstream, _Simple.STRUCT) and _is_simple(downstream, _Simple.STRUCT):
        # A struct's JSON schema is in its metadata; without one on either side it matches any struct.
        if not upstream.HasField("metadata") or not downstream.HasField("metadata"):
            return True
        # Deviation: Flyte also accepts a struct whose schema is a supertype of the declared one
        # (isSuperTypeInJSON, a JSON-schema comparison); taskplug only accepts the same schema. The type of a
        # literal never carries a schema, so the launch check (the only caller) never gets here.
        return bool(
            json_format.MessageToDict(upstream.metadata) == json_format.MessageToDict(downstream.metadata)
        )
    up, down = types_pb2.LiteralType(), types_pb2.LiteralType()
    up.CopyFrom(upstream)
    down.CopyFrom(downstream)
    for t in (up, down):
        for name in ("structure", "metadata", "annotation"):
            t.ClearField(name)
    return bool(up == down)


def _blob_casts(downstream: types_pb2.LiteralType, upstream: types_pb2.LiteralType) -> bool:
    if not upstream.HasField("blob"):
        return False
    if not upstream.blob.format or not downstream.blob.format:
        return True
    return bool(upstream.blob.format == downstream.blob.format)


def _schema_columns_match(
    upstream: Sequence[types_pb2.SchemaType.SchemaColumn],
    downstream: Sequence[types_pb2.SchemaType.SchemaColumn],
) -> bool:
    if not upstream or not downstream:
        return True
    by_name = {c.name: c.type for c in upstream}
    return all(c.name in by_name and by_name[c.name] == c.type for c in downstream)


_SCHEMA_COLUMN_SIMPLE = {
    types_pb2.SchemaType.SchemaColumn.INTEGER: _Simple.INTEGER,
    types_pb2.SchemaType.SchemaColumn.FLOAT: _Simple.FLOAT,
    types_pb2.SchemaType.SchemaColumn.STRING: _Simple.STRING,
    types_pb2.SchemaType.SchemaColumn.BOOLEAN: _Simple.BOOLEAN,
    types_pb2.SchemaType.SchemaColumn.DATETIME: _Simple.DATETIME,
    types_pb2.SchemaType.SchemaColumn.DURATION: _Simple.DURATION,
}


def _schema_column_is(column_type: int, simple: int) -> bool:
    return _SCHEMA_COLUMN_SIMPLE.get(column_type) == simple


def _schema_casts(downstream: types_pb2.LiteralType, upstream: types_pb2.LiteralType) -> bool:
    if upstream.HasField("schema"):
        return _schema_columns_match(upstream.schema.columns, downstream.schema.columns)
    if not upstream.HasField("structured_dataset_type"):
        return False
    sdt = upstream.structured_dataset_type
    # A FlyteSchema is always parquet.
    if sdt.format and sdt.format.lower() != "parquet":
        return False
    if not sdt.columns or not downstream.schema.columns:
        return True
    by_name = {c.name: c.literal_type.simple for c in sdt.columns}
    return all(
        c.name in by_name and _schema_column_is(c.type, by_name[c.name]) for c in downstream.schema.columns
    )


def _structured_dataset_casts(downstream: types_pb2.LiteralType, upstream: types_pb2.LiteralType) -> bool:
    if _is_none_type(upstream):
        return True  # structured datasets are nullable
    declared = downstream.structured_dataset_type
    if upstream.HasField("schema"):
        if declared.format and declared.format.lower() != "parquet":
            return False
        if not upstream.schema.columns or not declared.columns:
            return True
        by_name = {c.name: c.type for c in upstream.schema.columns}
        return all(
            c.name in by_name and _schema_column_is(by_name[c.name], c.literal_type.simple)
            for c in declared.columns
        )
    if not upstream.HasField("structured_dataset_type"):
        return False
    given = upstream.structured_dataset_type
    # An empty format matches any (flyteorg/flyte#2864).
    if given.format and declared.format and given.format.lower() != declared.format.lower():
        return False
    if not given.columns or not declared.columns:
        return True
    columns = {c.name: c.literal_type for c in given.columns}
    return all(c.name in columns and _casts_from(c.literal_type, columns[c.name]) for c in declared.columns)


def _union_casts(downstream: types_pb2.LiteralType, upstream: types_pb2.LiteralType) -> bool:
    variants = downstream.union_type.variants
    if upstream.HasField("union_type"):
        # Every variant the value may be must fit some declared variant.
        return all(any(are_types_castable(u, d) for d in variants) for u in upstream.union_type.variants)
    # Otherwise exactly one variant must take it: the choice must be unambiguous.
    return sum(1 for d in variants if are_types_castable(upstream, d)) == 1


def _casts_from(downstream: types_pb2.LiteralType, upstream: types_pb2.LiteralType) -> bool:
    """``getTypeChecker(downstream).CastsFrom(upstream)``."""
    kind = downstream.WhichOneof("type")
    if kind == "collection_type":
        if _is_none_type(upstream.collection_type):
            return True  # an empty list matches any list
        return upstream.HasField("collection_type") and _casts_from(
            downstream.collection_type, upstream.collection_type
        )
    if kind == "map_value_type":
        if _is_none_type(upstream.map_value_type):
            return True
        return upstream.HasField("map_value_type") and _casts_from(
            downstream.map_value_type, upstream.map_value_type
        )
    if kind == "blob":
        return _blob_casts(downstream, upstream)
    if kind == "schema":
        return _schema_casts(downstream, upstream)
    if kind == "union_type":
        return _union_casts(downstream, upstream)
    if kind == "structured_dataset_type":
        return _structured_dataset_casts(downstream, upstream)
    if _is_none_type(downstream):
        return _is_none_type(upstream)
    return _trivial_casts(downstream, upstream)


def are_types_castable(upstream: types_pb2.LiteralType, downstream: types_pb2.LiteralType) -> bool:
    """Whether a value of type ``upstream`` may be given where ``downstream`` is declared (``AreTypesCastable``)."""
    # A union of one variant (the type of a union literal) casts where its variant does.
    singular = upstream.HasField("union_type") and len(upstream.union_type.variants) == 1
    if singular and _casts_from(downstream, upstream.union_type.variants[0]):
        return True
    return _casts_from(downstream, upstream)


# -- names for people --------------------------------------------------------------------------------------


def describe_type(t: types_pb2.LiteralType | None) -> str:
    """A short readable name: ``INTEGER``, ``list[STRING]``, ``map[str, FLOAT]``, ``enum[red, blue]``,
    ``union[INTEGER, NONE]``, ``STRUCT``, ``FlyteFile[csv]``, ``StructuredDataset[parquet]``."""
    if t is None:
        return "an unknown type"
    kind = t.WhichOneof("type")
    if kind == "simple":
        name = _Simple.Name(t.simple)
        title = t.metadata.fields.get("title") if t.HasField("metadata") else None
        if t.simple == _Simple.STRUCT and title is not None and title.WhichOneof("kind") == "string_value":
            return f"STRUCT ({title.string_value})"
        return str(name)
    if kind == "collection_type":
        return f"list[{describe_type(t.collection_type)}]"
    if kind == "map_value_type":
        return f"map[str, {describe_type(t.map_value_type)}]"
    if kind == "enum_type":
        return f"enum[{', '.join(t.enum_type.values)}]"
    if kind == "union_type":
        return f"union[{', '.join(describe_type(v) for v in t.union_type.variants)}]"
    if kind == "blob":
        name = "FlyteDirectory" if t.blob.dimensionality == types_pb2.BlobType.MULTIPART else "FlyteFile"
        return f"{name}[{t.blob.format}]" if t.blob.format else name
    if kind == "structured_dataset_type":
        fmt = t.structured_dataset_type.format
        return f"StructuredDataset[{fmt}]" if fmt else "StructuredDataset"
    if kind == "schema":
        return "FlyteSchema"
    return "an unknown type"
