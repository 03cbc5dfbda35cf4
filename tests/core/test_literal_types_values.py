"""Plain input values by their declared type: bounds of integers, floats and durations, enums, unions and
Optional, datasets, nested lists and maps, nesting limits — each refusal a SpecError naming the path."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from flyteidl.core import literals_pb2, types_pb2
from google.protobuf import json_format
from hypothesis import given
from hypothesis import strategies as st

from taskplug.core import SpecError, literal_to_plain, plain_to_literal
from taskplug.core._literals_types import are_types_castable, literal_type_for_literal
from taskplug.core._literals_values import DURATION_MAX_SECONDS, format_duration, read_duration


def lt(document: dict[str, Any]) -> types_pb2.LiteralType:
    return json_format.ParseDict(document, types_pb2.LiteralType())


def refusal(value: Any, declared: dict[str, Any], path: str = "inputs.x") -> SpecError:
    with pytest.raises(SpecError) as err:
        plain_to_literal(value, lt(declared), path)
    return err.value


INT, FLOAT, STR, BOOL = ({"simple": s} for s in ("INTEGER", "FLOAT", "STRING", "BOOLEAN"))
TIME, DURATION = {"simple": "DATETIME"}, {"simple": "DURATION"}
OPTIONAL_INT = {
    "unionType": {
        "variants": [
            {"simple": "INTEGER", "structure": {"tag": "int"}},
            {"simple": "NONE", "structure": {"tag": "none"}},
        ]
    }
}
INT_OR_STR = {
    "unionType": {
        "variants": [
            {"simple": "INTEGER", "structure": {"tag": "int"}},
            {"simple": "STRING", "structure": {"tag": "str"}},
        ]
    }
}
FLOAT_OR_STR = {
    "unionType": {
        "variants": [
            {"simple": "FLOAT", "structure": {"tag": "float"}},
            {"simple": "STRING", "structure": {"tag": "str"}},
        ]
    }
}
COLOR = {"enumType": {"values": ["red", "blue"]}}
DICT = {
    "simple": "STRUCT",
    "annotation": {"annotations": {"cache-key-metadata": {"serialization-format": "msgpack"}}},
}
CSV_DATASET = {
    "structuredDatasetType": {
        "format": "csv",
        "columns": [{"name": "a", "literalType": {"simple": "INTEGER"}}],
    }
}


# -- integers, floats, booleans, strings -------------------------------------------------------------------


@pytest.mark.parametrize("value", [2**63 - 1, -(2**63), str(2**63 - 1)])
def test_integers_within_int64_are_accepted(value: object) -> None:
    assert plain_to_literal(value, lt(INT), "inputs.x").scalar.primitive.integer == int(str(value))


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1, "99999999999999999999999"])
def test_integers_beyond_int64_are_refused(value: object) -> None:
    err = refusal(value, INT)
    assert err.path == "inputs.x"
    assert "does not fit in a 64-bit integer" in err.reason


def test_an_integer_string_longer_than_python_converts_is_a_spec_error() -> None:
    assert "expected an integer" in refusal("9" * 5000, INT).reason


@pytest.mark.parametrize("value", ["1e400", 10**400, "-1e999"])
def test_a_number_too_large_for_a_double_is_refused(value: object) -> None:
    err = refusal(value, FLOAT)
    assert err.path == "inputs.x"
    assert "too large for a 64-bit float" in err.reason


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), "inf", "-Infinity"])
def test_an_explicit_infinity_is_a_float_as_in_flyte(value: object) -> None:
    # YAML's .inf and pyflyte run's "inf": Flyte's FLOAT is an IEEE double, infinity included.
    assert plain_to_literal(value, lt(FLOAT), "inputs.x").scalar.primitive.float_value == float(str(value))


def test_nan_is_a_float() -> None:
    assert str(plain_to_literal("nan", lt(FLOAT), "inputs.x").scalar.primitive.float_value) == "nan"


@pytest.mark.parametrize(
    ("value", "declared"), [("true", BOOL), (1, BOOL), (0, BOOL), (True, INT), (False, FLOAT)]
)
def test_booleans_are_never_strings_or_numbers(value: object, declared: dict[str, Any]) -> None:
    assert refusal(value, declared).path == "inputs.x"


@pytest.mark.parametrize("value", [3, 1.5, True, date(2024, 1, 2)])
def test_a_string_is_never_made_from_another_scalar(value: object) -> None:
    err = refusal(value, STR)
    assert err.reason.startswith("expected a string, got ")
    assert "quote it" in err.reason


def test_null_for_a_type_that_is_not_optional_says_so() -> None:
    err = refusal(None, INT)
    assert err.reason == "got null, but the type INTEGER is not Optional"


# -- times and durations -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2024-05-06T07:08:09Z", datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)),
        ("2024-05-06T09:08:09.5+02:00", datetime(2024, 5, 6, 7, 8, 9, 500000, tzinfo=UTC)),
        (date(2024, 5, 6), datetime(2024, 5, 6, tzinfo=UTC)),
        ("2024-05-06", datetime(2024, 5, 6, tzinfo=UTC)),
    ],
)
def test_times_are_rfc3339_and_stored_in_utc(value: object, expected: datetime) -> None:
    literal = plain_to_literal(value, lt(TIME), "inputs.t")
    assert literal.scalar.primitive.datetime.ToDatetime(tzinfo=UTC) == expected


def test_a_time_that_falls_before_year_one_in_utc_is_a_spec_error() -> None:
    err = refusal("0001-01-01T00:00:00+02:00", TIME, "inputs.t")
    assert (err.path, err.reason) == ("inputs.t", "0001-01-01T00:00:00+02:00 is out of the range of times")


@pytest.mark.parametrize(
    ("value", "seconds", "nanos"),
    [
        (90, 90, 0),
        (1.5, 1, 500_000_000),
        ("90s", 90, 0),
        ("1h30m", 5400, 0),
        ("1.5h", 5400, 0),
        ("500ms", 0, 500_000_000),
        ("-5m", -300, 0),
        ("0", 0, 0),
        ("PT1H", 3600, 0),
        ("PT1H30M", 5400, 0),
        ("P1DT2H", 93600, 0),
        ("P2W", 1_209_600, 0),
        ("PT0.25S", 0, 250_000_000),
        ("-PT1M", -60, 0),
        (timedelta(hours=1, microseconds=5), 3600, 5000),
    ],
)
def test_durations_are_seconds_go_syntax_or_iso_8601(value: object, seconds: int, nanos: int) -> None:
    duration = plain_to_literal(value, lt(DURATION), "inputs.d").scalar.primitive.duration
    assert (duration.seconds, duration.nanos) == (seconds, nanos)


@pytest.mark.parametrize(
    "value", ["99999999999999h", "P999999999D", 1e20, -1e20, str(DURATION_MAX_SECONDS + 1) + "s"]
)
def test_a_duration_longer_than_protobuf_allows_is_a_spec_error_not_an_overflow(value: object) -> None:
    err = refusal(value, DURATION, "inputs.d")
    assert err.path == "inputs.d"
    assert "longer than a Flyte duration can be" in err.reason


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("P1Y", "years and months have no fixed length"),
        ("P1M", "years and months have no fixed length"),
        ("1 hour", "expected a duration"),
        ("", "expected a duration"),
        ("PT", "expected a duration"),
        (True, "expected a duration"),
        (float("inf"), "is not a duration"),
        ("9" * 5000 + "h", "expected a duration"),
    ],
)
def test_a_value_that_is_no_duration_is_refused(value: object, message: str) -> None:
    assert message in refusal(value, DURATION, "inputs.d").reason


def test_the_largest_duration_is_accepted() -> None:
    duration = plain_to_literal(DURATION_MAX_SECONDS, lt(DURATION), "inputs.d").scalar.primitive.duration
    assert duration.seconds == DURATION_MAX_SECONDS


@pytest.mark.parametrize(
    ("seconds", "nanos", "text"),
    [
        (5400, 0, "1h30m0s"),
        (1, 500_000_000, "1.5s"),
        (0, 500_000_000, "500ms"),
        (0, 0, "0s"),
        (-90, 0, "-1m30s"),
    ],
)
def test_durations_are_shown_in_gos_syntax(seconds: int, nanos: int, text: str) -> None:
    assert format_duration(seconds, nanos) == text


@given(
    st.integers(min_value=-DURATION_MAX_SECONDS, max_value=DURATION_MAX_SECONDS),
    st.integers(min_value=0, max_value=999_999_999),
)
def test_a_shown_duration_reads_back_as_the_same_duration(seconds: int, nanos: int) -> None:
    nanos = -nanos if seconds < 0 else nanos
    assert read_duration(format_duration(seconds, nanos), "d") == (seconds, nanos)


# -- enums and unions -----------------------------------------------------------------------------------------


def test_an_enum_is_one_of_its_values() -> None:
    assert plain_to_literal("blue", lt(COLOR), "inputs.c").scalar.primitive.string_value == "blue"


@pytest.mark.parametrize("value", ["green", "RED", 1])
def test_a_value_outside_the_enum_is_refused_naming_the_values(value: object) -> None:
    err = refusal(value, COLOR, "inputs.c")
    assert err.path == "inputs.c"
    assert err.reason.startswith("expected one of ['red', 'blue'], got ")


def _union_literal(value: Any, declared: dict[str, Any]) -> literals_pb2.Union:
    literal = plain_to_literal(value, lt(declared), "inputs.u")
    assert literal.scalar.WhichOneof("value") == "union"
    return literal.scalar.union


def test_null_for_optional_is_the_none_variant() -> None:
    union = _union_literal(None, OPTIONAL_INT)
    assert union.value.scalar.WhichOneof("value") == "none_type"
    assert union.type == lt(OPTIONAL_INT).union_type.variants[1]


def test_a_value_for_optional_is_its_type_variant_with_the_tag() -> None:
    union = _union_literal(3, OPTIONAL_INT)
    assert union.value.scalar.primitive.integer == 3
    assert union.type == lt({"simple": "INTEGER", "structure": {"tag": "int"}})


@pytest.mark.parametrize(
    ("value", "declared", "kind", "stored"),
    [
        (3, INT_OR_STR, "integer", 3),
        ("3", INT_OR_STR, "string_value", "3"),
        (3, FLOAT_OR_STR, "float_value", 3.0),
        ("x", FLOAT_OR_STR, "string_value", "x"),
    ],
)
def test_a_union_takes_the_variant_the_value_is_before_one_it_converts_to(
    value: object, declared: dict[str, Any], kind: str, stored: object
) -> None:
    primitive = _union_literal(value, declared).value.scalar.primitive
    assert (primitive.WhichOneof("value"), getattr(primitive, kind)) == (kind, stored)


def test_a_value_no_variant_takes_is_refused_naming_the_variants() -> None:
    err = refusal("x", OPTIONAL_INT, "inputs.u")
    assert err.path == "inputs.u"
    assert err.reason.startswith("matches no variant of union[INTEGER, NONE] (INTEGER: expected an integer")
    assert "NONE: expected null" in err.reason


def test_a_list_of_optionals_holds_a_union_per_element() -> None:
    literal = plain_to_literal([1, None], lt({"collectionType": OPTIONAL_INT}), "inputs.xs")
    kinds = [e.scalar.union.value.scalar.WhichOneof("value") for e in literal.collection.literals]
    assert kinds == ["primitive", "none_type"]


# -- nested lists and maps ---------------------------------------------------------------------------------

NESTED = {"collectionType": {"mapValueType": {"collectionType": INT}}}


def test_nested_lists_and_maps_follow_their_types() -> None:
    literal = plain_to_literal([{"a": [1, 2]}, {}], lt(NESTED), "inputs.x")
    assert literal_to_plain(literal) == [{"a": [1, 2]}, {}]


def test_an_error_deep_in_a_nested_value_names_its_whole_path() -> None:
    assert refusal([{"a": [1]}, {"k": [1, "two"]}], NESTED).path == "inputs.x[1].k[1]"


def test_map_keys_are_strings() -> None:
    err = refusal({1: [1]}, {"mapValueType": {"collectionType": INT}})
    assert err.reason.startswith("the keys of map[str, list[INTEGER]] are strings")


def test_a_value_nested_deeper_than_documents_may_be_is_a_spec_error_not_a_recursion_error() -> None:
    deep_list: Any = 1
    deep_dict: Any = 1
    for _ in range(10_000):
        deep_list, deep_dict = [deep_list], {"a": deep_dict}
    with pytest.raises(SpecError, match=r"^inputs.x(\[0\])+: nests deeper than 200 levels$"):
        plain_to_literal(deep_list, None, "inputs.x")
    with pytest.raises(SpecError, match=r"^inputs.x(\.a)+: nests deeper than 200 levels$"):
        plain_to_literal(deep_dict, lt(DICT), "inputs.x")


def test_a_deep_value_of_the_wrong_type_is_shown_cut_short() -> None:
    value: Any = 1
    for _ in range(10_000):
        value = [value]
    err = refusal([value], {"collectionType": INT})
    assert err.path == "inputs.x[0]"
    assert err.reason.startswith("expected an integer, got [[[")
    assert len(err.reason) < 200


def test_a_dict_input_nested_150_levels_is_accepted() -> None:
    value: Any = 1
    for _ in range(150):
        value = {"a": value}
    literal = plain_to_literal(value, lt(DICT), "inputs.x")
    assert literal.scalar.binary.tag == "msgpack"
    assert literal_to_plain(literal) == value


def test_a_list_nested_deeper_than_protobuf_reads_is_a_spec_error() -> None:
    declared: dict[str, Any] = INT
    value: Any = 1
    for _ in range(60):
        declared, value = {"collectionType": declared}, [value]
    err = refusal(value, declared)
    assert err.path == "inputs.x"
    assert "protobuf reads at most 100 nested messages" in err.reason


def test_a_list_nested_as_deep_as_protobuf_reads_is_accepted() -> None:
    declared: dict[str, Any] = INT
    value: Any = 7
    for _ in range(40):
        declared, value = {"collectionType": declared}, [value]
    literal = plain_to_literal(value, lt(declared), "inputs.x")
    assert literals_pb2.Literal.FromString(literal.SerializeToString()) == literal


# -- files and datasets --------------------------------------------------------------------------------------


def test_a_dataset_from_a_uri_takes_the_declared_format_and_columns() -> None:
    literal = plain_to_literal("s3://b/d.csv", lt(CSV_DATASET), "inputs.df")
    dataset = literal.scalar.structured_dataset
    assert dataset.uri == "s3://b/d.csv"
    assert dataset.metadata.structured_dataset_type == lt(CSV_DATASET).structured_dataset_type
    assert literal_to_plain(literal) == {"uri": "s3://b/d.csv", "format": "csv"}


def test_a_dataset_mapping_gives_the_format_a_generic_type_leaves_open() -> None:
    literal = plain_to_literal(
        {"uri": "s3://b/d", "format": "parquet"}, lt({"structuredDatasetType": {}}), "inputs.df"
    )
    assert literal_to_plain(literal) == {"uri": "s3://b/d", "format": "parquet"}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            {"uri": "s3://b/d", "format": "parquet"},
            "the input is declared StructuredDataset[csv], got format 'parquet'",
        ),
        ({"path": "s3://b/d"}, "a dataset is a URI or a mapping {uri, format}"),
        ({"uri": 3}, "expected a URI string"),
        (3, "expected a URI string"),
        ("", "expected a URI string"),
    ],
)
def test_a_dataset_that_does_not_fit_the_type_is_refused(value: object, message: str) -> None:
    err = refusal(value, CSV_DATASET, "inputs.df")
    assert err.path == "inputs.df"
    assert err.reason.startswith(message)


def test_a_file_is_its_uri_string_or_a_mapping_of_it() -> None:
    declared = lt({"blob": {"format": "csv"}})
    for value in ("s3://b/f.csv", {"uri": "s3://b/f.csv"}):
        literal = plain_to_literal(value, declared, "inputs.f")
        assert (literal.scalar.blob.uri, literal.scalar.blob.metadata.type.format) == ("s3://b/f.csv", "csv")


# -- STRUCT without flytekit 1.16's msgpack annotation -----------------------------------------------------


def test_a_struct_without_the_msgpack_annotation_is_a_protobuf_struct_as_older_flytekit_writes() -> None:
    literal = plain_to_literal({"a": [1, "x"], "b": None}, lt({"simple": "STRUCT"}), "inputs.s")
    assert literal.scalar.WhichOneof("value") == "generic"
    assert json_format.MessageToDict(literal.scalar.generic) == {"a": [1.0, "x"], "b": None}
    assert literal_to_plain(literal) == {"a": [1.0, "x"], "b": None}


def test_a_struct_with_keys_a_protobuf_struct_cannot_hold_is_refused() -> None:
    err = refusal({1: "a"}, {"simple": "STRUCT"}, "inputs.s")
    assert (err.path, err.reason.split(":")[0]) == ("inputs.s", "cannot be written as a protobuf Struct")


def test_a_dict_input_is_any_mapping_written_as_msgpack() -> None:
    value = {"when": datetime(2024, 1, 2, tzinfo=UTC), "n": [1, 2.5, None], "k": {"deep": True}}
    literal = plain_to_literal(value, lt(DICT), "inputs.d")
    assert literal.scalar.binary.tag == "msgpack"
    assert literal_to_plain(literal) == {
        "when": "2024-01-02T00:00:00+00:00",
        "n": [1, 2.5, None],
        "k": {"deep": True},
    }


def test_a_dict_input_is_a_mapping() -> None:
    assert refusal([1], DICT, "inputs.d").reason.startswith("expected a mapping for STRUCT, got [1]")


# -- every literal made is one Flyte's type checker accepts ------------------------------------------------

MADE = [
    (3, INT),
    (3, FLOAT),
    ("PT1H", DURATION),
    ("2024-01-02T00:00:00Z", TIME),
    ("red", COLOR),
    (None, OPTIONAL_INT),
    (7, OPTIONAL_INT),
    ("3", INT_OR_STR),
    ([1, None], {"collectionType": OPTIONAL_INT}),
    ([{"a": [1]}], NESTED),
    ([], NESTED),
    ("s3://b/d", CSV_DATASET),
    ({"a": [1, {"b": None}]}, {"simple": "STRUCT"}),
]


@pytest.mark.parametrize(("value", "declared"), MADE)
def test_each_literal_made_from_a_plain_value_passes_flyteadmins_check(
    value: object, declared: dict[str, Any]
) -> None:
    literal = plain_to_literal(value, lt(declared), "inputs.x")
    inferred = literal_type_for_literal(literal)
    assert inferred is not None
    assert are_types_castable(inferred, lt(declared))
