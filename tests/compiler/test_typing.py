"""Types as the compiler sees them: castability (validators/typing_test.go cases that workflows meet), the type
of a bound scalar, and Go's text form that Flyte's messages print."""

from __future__ import annotations

import pytest
from flyteidl.core import identifier_pb2, literals_pb2, types_pb2
from google.protobuf import struct_pb2

from taskplug.compiler import are_types_castable, go_text, literal_type_for_scalar, literal_type_to_str
from taskplug.compiler._typing import is_optional_type
from taskplug.core import go_format_float

S = types_pb2.SimpleType
INTEGER = types_pb2.LiteralType(simple=S.INTEGER)
FLOAT = types_pb2.LiteralType(simple=S.FLOAT)
STRING = types_pb2.LiteralType(simple=S.STRING)
NONE = types_pb2.LiteralType(simple=S.NONE)


def _union(*variants: types_pb2.LiteralType) -> types_pb2.LiteralType:
    return types_pb2.LiteralType(union_type=types_pb2.UnionType(variants=variants))


def _list(element: types_pb2.LiteralType) -> types_pb2.LiteralType:
    return types_pb2.LiteralType(collection_type=element)


def _struct(**fields: types_pb2.LiteralType) -> types_pb2.LiteralType:
    found = types_pb2.LiteralType(simple=S.STRUCT)
    for name, field in fields.items():
        found.structure.dataclass_type[name].CopyFrom(field)
    return found


@pytest.mark.parametrize(
    ("upstream", "downstream", "castable"),
    [
        (INTEGER, INTEGER, True),
        (INTEGER, FLOAT, False),  # no int-to-float widening
        (_list(INTEGER), _list(INTEGER), True),
        (_list(NONE), _list(STRING), True),  # an empty list fits any list
        (INTEGER, _union(INTEGER, NONE), True),
        (INTEGER, _union(INTEGER, INTEGER), False),  # two variants take it: ambiguous
        (_union(INTEGER), INTEGER, True),  # a union of one variant casts like its variant
        (_union(INTEGER, STRING), _union(STRING, INTEGER, NONE), True),
        (_union(INTEGER, FLOAT), _union(INTEGER, NONE), False),
        (NONE, _union(INTEGER, NONE), True),
        (INTEGER, NONE, False),
        (types_pb2.LiteralType(enum_type=types_pb2.EnumType(values=["a"])), STRING, True),
        (_struct(x=INTEGER), _struct(y=STRING), True),  # structs without schemas match any struct
    ],
)
def test_castability(
    upstream: types_pb2.LiteralType, downstream: types_pb2.LiteralType, castable: bool
) -> None:
    assert are_types_castable(upstream, downstream) is castable


def test_the_type_of_a_bound_scalar() -> None:
    assert (
        literal_type_for_scalar(literals_pb2.Scalar(primitive=literals_pb2.Primitive(integer=1))) == INTEGER
    )
    assert literal_type_for_scalar(literals_pb2.Scalar(none_type=literals_pb2.Void())) == NONE
    # A blob without metadata has no type Flyte can tell.
    assert literal_type_for_scalar(literals_pb2.Scalar(blob=literals_pb2.Blob(uri="s3://b/k"))) is None


def test_optional_means_a_union_with_none_and_any_non_simple_variant_reads_as_none() -> None:
    assert is_optional_type(_union(INTEGER, NONE))
    assert not is_optional_type(_union(INTEGER, STRING))
    assert is_optional_type(_union(_list(INTEGER), STRING))  # Go's GetSimple() of a list is NONE
    assert not is_optional_type(INTEGER)


def test_go_text_is_the_compact_protobuf_text() -> None:
    assert go_text(INTEGER) == "simple:INTEGER"
    assert go_text(_list(STRING)) == "collection_type:{simple:STRING}"
    assert go_text(NONE) == "simple:NONE"  # a oneof member set to zero is still shown
    identifier = identifier_pb2.Identifier(resource_type=identifier_pb2.TASK, name='say "hi"', version="v1")
    assert go_text(identifier) == 'resource_type:TASK name:"say \\"hi\\"" version:"v1"'
    assert go_text(None) == "<nil>"
    metadata = struct_pb2.Struct()
    metadata.update({"b": 1.5, "a": "x"})
    typed = types_pb2.LiteralType(simple=S.STRUCT, metadata=metadata)
    assert go_text(typed) == (
        'simple:STRUCT metadata:{fields:{key:"a" value:{string_value:"x"}} fields:{key:"b" value:{number_value:1.5}}}'
    )


def test_struct_types_print_their_dataclass_fields_only() -> None:
    assert literal_type_to_str(_struct(b=STRING, a=INTEGER)) == (
        "simple: STRUCT structure{dataclass_type:{key:a value:{simple:INTEGER}, dataclass_type:{key:b value:"
        "{simple:STRING}}"
    )
    assert literal_type_to_str(None) == "None"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (4.0, "4"),
        (1.5, "1.5"),
        (123456.0, "123456"),
        (1e6, "1e+06"),
        (0.0001, "0.0001"),
        (1e-5, "1e-05"),
        (-2.5, "-2.5"),
    ],
)
def test_floats_print_as_go_prints_them(value: float, text: str) -> None:
    assert go_format_float(value) == text
