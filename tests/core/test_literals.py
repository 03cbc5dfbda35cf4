"""Plain values ↔ flyteidl literals (the execution spec's inputs, the outputs shown to users)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta, timezone

import pytest
from flyteidl.core import interface_pb2, literals_pb2, types_pb2

from taskplug.core import (
    SpecError,
    literal_map_from_plain,
    literal_map_to_plain,
    literal_to_plain,
    plain_to_literal,
)

S = types_pb2.SimpleType


def simple(kind: int) -> types_pb2.LiteralType:
    return types_pb2.LiteralType(simple=kind)


def list_of(inner: types_pb2.LiteralType) -> types_pb2.LiteralType:
    return types_pb2.LiteralType(collection_type=inner)


def map_of(inner: types_pb2.LiteralType) -> types_pb2.LiteralType:
    return types_pb2.LiteralType(map_value_type=inner)


def variables(**types: types_pb2.LiteralType) -> interface_pb2.VariableMap:
    return interface_pb2.VariableMap(variables={k: interface_pb2.Variable(type=t) for k, t in types.items()})


def primitive(literal: literals_pb2.Literal) -> tuple[str, object]:
    p = literal.scalar.primitive
    kind = p.WhichOneof("value")
    return kind, getattr(p, kind)


# -- typed by the interface ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "kind", "expected"),
    [
        (3, S.INTEGER, ("integer", 3)),
        ("3", S.INTEGER, ("integer", 3)),
        (3, S.FLOAT, ("float_value", 3.0)),
        (2.5, S.FLOAT, ("float_value", 2.5)),
        ("1e6", S.FLOAT, ("float_value", 1e6)),
        (True, S.BOOLEAN, ("boolean", True)),
        ("world", S.STRING, ("string_value", "world")),
    ],
)
def test_a_plain_value_takes_the_declared_type(
    value: object, kind: int, expected: tuple[str, object]
) -> None:
    assert primitive(plain_to_literal(value, simple(kind), "inputs.x")) == expected


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (2.5, S.INTEGER),
        (True, S.INTEGER),
        ("three", S.INTEGER),
        (True, S.FLOAT),
        ("x", S.FLOAT),
        ("true", S.BOOLEAN),
        (1, S.BOOLEAN),
        (3, S.STRING),
        ("yesterday", S.DATETIME),
        ([1], S.STRING),
    ],
)
def test_a_value_of_the_wrong_type_is_a_spec_error_naming_the_input(value: object, kind: int) -> None:
    with pytest.raises(SpecError) as err:
        plain_to_literal(value, simple(kind), "inputs.x")
    assert err.value.path == "inputs.x"


def test_datetime_input_from_an_rfc3339_string() -> None:
    literal = plain_to_literal("2024-05-06T07:08:09Z", simple(S.DATETIME), "inputs.t")
    assert literal.scalar.primitive.datetime.ToDatetime(tzinfo=UTC) == datetime(
        2024, 5, 6, 7, 8, 9, tzinfo=UTC
    )


def test_datetime_input_with_an_offset_is_stored_in_utc() -> None:
    value = datetime(2024, 5, 6, 9, 8, 9, tzinfo=timezone(timedelta(hours=2)))
    literal = plain_to_literal(value, simple(S.DATETIME), "inputs.t")
    assert literal.scalar.primitive.datetime.ToDatetime(tzinfo=UTC) == datetime(
        2024, 5, 6, 7, 8, 9, tzinfo=UTC
    )


@pytest.mark.parametrize(
    "value", [datetime(2024, 5, 6, 7, 8, 9), "2024-05-06T07:08:09"], ids=["yaml", "string"]
)
def test_a_datetime_without_a_zone_is_utc_whatever_the_local_zone(
    value: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    # YAML timestamps without a zone are UTC; the result must not depend on the machine's TZ.
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        literal = plain_to_literal(value, simple(S.DATETIME), "inputs.t")
    finally:
        monkeypatch.undo()
        time.tzset()
    assert literal.scalar.primitive.datetime.ToDatetime(tzinfo=UTC) == datetime(
        2024, 5, 6, 7, 8, 9, tzinfo=UTC
    )


def test_collections_and_maps_follow_their_element_types() -> None:
    literal = plain_to_literal([1, 2], list_of(simple(S.FLOAT)), "inputs.xs")
    assert [primitive(v) for v in literal.collection.literals] == [("float_value", 1.0), ("float_value", 2.0)]
    literal = plain_to_literal({"a": 1}, map_of(simple(S.INTEGER)), "inputs.m")
    assert primitive(literal.map.literals["a"]) == ("integer", 1)


def test_an_element_of_the_wrong_type_is_named_by_its_index() -> None:
    with pytest.raises(SpecError) as err:
        plain_to_literal([1, "x"], list_of(simple(S.INTEGER)), "inputs.xs")
    assert err.value.path == "inputs.xs[1]"


def test_a_list_declared_input_given_a_scalar_is_an_error() -> None:
    with pytest.raises(SpecError, match="expected a list"):
        plain_to_literal(3, list_of(simple(S.INTEGER)), "inputs.xs")


def test_a_blob_input_is_its_uri() -> None:
    blob_type = types_pb2.LiteralType(blob=types_pb2.BlobType(format="csv"))
    literal = plain_to_literal("s3://bucket/f.csv", blob_type, "inputs.f")
    assert literal.scalar.blob.uri == "s3://bucket/f.csv"
    assert literal.scalar.blob.metadata.type.format == "csv"
    with pytest.raises(SpecError):
        plain_to_literal(3, blob_type, "inputs.f")


# -- untyped ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (3, ("integer", 3)),
        (2.5, ("float_value", 2.5)),
        (True, ("boolean", True)),
        ("s", ("string_value", "s")),
    ],
)
def test_without_a_declared_type_the_python_type_decides(value: object, expected: tuple[str, object]) -> None:
    assert primitive(plain_to_literal(value, None, "inputs.x")) == expected


def test_literal_json_is_accepted_as_is() -> None:
    literal = plain_to_literal({"scalar": {"primitive": {"integer": "7"}}}, None, "inputs.x")
    assert primitive(literal) == ("integer", 7)


def test_bad_literal_json_is_a_spec_error() -> None:
    with pytest.raises(SpecError) as err:
        plain_to_literal({"scalar": {"nope": 1}}, None, "inputs.x")
    assert err.value.path == "inputs.x"


# -- maps of inputs --------------------------------------------------------------------------------------


def test_literal_map_from_plain_types_each_input() -> None:
    lm = literal_map_from_plain(
        {"x": 3, "name": "world"}, variables(x=simple(S.FLOAT), name=simple(S.STRING))
    )
    assert primitive(lm.literals["x"]) == ("float_value", 3.0)
    assert primitive(lm.literals["name"]) == ("string_value", "world")


def test_an_unknown_input_name_is_a_spec_error() -> None:
    with pytest.raises(SpecError) as err:
        literal_map_from_plain({"y": 1}, variables(x=simple(S.INTEGER)))
    assert err.value.path == "inputs.y"
    assert "'x'" in err.value.reason


def test_an_input_for_a_task_that_declares_none_is_a_spec_error() -> None:
    with pytest.raises(SpecError) as err:
        literal_map_from_plain({"y": 1}, interface_pb2.VariableMap())
    assert err.value.path == "inputs.y"


def test_without_an_interface_any_input_is_accepted() -> None:
    lm = literal_map_from_plain({"y": 1}, None)
    assert primitive(lm.literals["y"]) == ("integer", 1)


# -- back to plain values --------------------------------------------------------------------------------


def test_literals_to_plain_values() -> None:
    lm = literal_map_from_plain({"i": 1, "f": 2.5, "b": True, "s": "x", "xs": [1, 2], "m": {"a": "b"}}, None)
    assert literal_map_to_plain(lm) == {"i": 1, "f": 2.5, "b": True, "s": "x", "xs": [1, 2], "m": {"a": "b"}}


def test_a_datetime_literal_is_shown_in_rfc3339() -> None:
    literal = plain_to_literal("2024-05-06T07:08:09Z", simple(S.DATETIME), "t")
    assert literal_to_plain(literal) == "2024-05-06T07:08:09Z"


def test_non_finite_floats_are_shown_as_text() -> None:
    assert literal_to_plain(plain_to_literal(float("inf"), None, "f")) == "inf"


def test_literal_json_is_accepted_for_a_typed_input() -> None:
    literal = plain_to_literal({"scalar": {"primitive": {"floatValue": 2.5}}}, simple(S.FLOAT), "inputs.x")
    assert primitive(literal) == ("float_value", 2.5)


def test_a_map_input_with_a_key_named_scalar_is_a_map_not_literal_json() -> None:
    literal = plain_to_literal({"scalar": 1}, map_of(simple(S.INTEGER)), "inputs.m")
    assert primitive(literal.map.literals["scalar"]) == ("integer", 1)
