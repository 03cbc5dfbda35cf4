"""Flyte's type checker (``flytepropeller/pkg/compiler/validators/typing.go``, ``utils.go``), ported: the
cases of ``typing_test.go`` as a table, the type inferred for literals, and Literal JSON inputs refused
at launch as flyteadmin refuses them (``execution_validator.go``)."""

from __future__ import annotations

from typing import Any

import pytest
from flyteidl.core import interface_pb2, literals_pb2, types_pb2
from google.protobuf import json_format

from taskplug.core import SpecError, literal_map_from_plain, plain_to_literal
from taskplug.core._literals_types import are_types_castable, describe_type, literal_type_for_literal


def lt(document: dict[str, Any]) -> types_pb2.LiteralType:
    return json_format.ParseDict(document, types_pb2.LiteralType())


def lit(document: dict[str, Any]) -> literals_pb2.Literal:
    return json_format.ParseDict(document, literals_pb2.Literal())


INT, FLOAT, STR, NONE, STRUCT = ({"simple": s} for s in ("INTEGER", "FLOAT", "STRING", "NONE", "STRUCT"))


def tagged(simple: str, tag: str) -> dict[str, Any]:
    return {"simple": simple, "structure": {"tag": tag}}


def union(*variants: dict[str, Any]) -> dict[str, Any]:
    return {"unionType": {"variants": list(variants)}}


def schema(**columns: str) -> dict[str, Any]:
    return {"schema": {"columns": [{"name": n, "type": t} for n, t in columns.items()]}}


def dataset(fmt: str = "", **columns: dict[str, Any]) -> dict[str, Any]:
    return {
        "structuredDatasetType": {
            "format": fmt,
            "columns": [{"name": n, "literalType": t} for n, t in columns.items()],
        }
    }


def enum(*values: str) -> dict[str, Any]:
    return {"enumType": {"values": list(values)}}


def blob(fmt: str = "") -> dict[str, Any]:
    return {"blob": {"format": fmt}}


SCHEMA_A = {"type": "object", "title": "A", "properties": {"x": {"type": "integer"}}}
SCHEMA_B = {"type": "object", "title": "B", "properties": {"y": {"type": "string"}}}

# (upstream, downstream, castable), as typing_test.go states them.
CASES = {
    "integer to integer": (INT, INT, True),
    "integer to float": (INT, FLOAT, False),
    "float to integer": (FLOAT, INT, False),
    "void to integer (non-optional types are non-nullable)": (NONE, INT, False),
    "metadata is ignored": ({**INT, "metadata": {"a": 1}}, INT, True),
    "enum to string": (enum("x", "y"), STR, True),
    "enum to the same enum": (enum("x", "y"), enum("x", "y"), True),
    "enum to another enum": (enum("x", "y"), enum("x", "z"), False),
    "string to enum (may fail at run time)": (STR, enum("x", "y"), True),
    "string to (int | str)": (STR, union(tagged("INTEGER", "int"), tagged("STRING", "str")), True),
    "string to (str | str) is ambiguous": (
        STR,
        union(tagged("STRING", "str1"), tagged("STRING", "str2")),
        False,
    ),
    "union to a superset union": (
        union(tagged("STRING", "str1"), tagged("STRING", "str2")),
        union(tagged("STRING", "str1"), tagged("INTEGER", "int1"), tagged("STRING", "str2")),
        True,
    ),
    "union to a union with other tags": (
        union(tagged("STRING", "str1"), tagged("STRING", "str2")),
        union(tagged("INTEGER", "str2"), tagged("STRING", "str3")),
        False,
    ),
    "union to a union with other types": (
        union(tagged("STRING", "test")),
        union(tagged("INTEGER", "test")),
        False,
    ),
    "singular union to its type": (union(tagged("STRING", "string")), tagged("STRING", "string"), True),
    "[integer] to [integer]": ({"collectionType": INT}, {"collectionType": INT}, True),
    "[] to [integer]": ({"collectionType": NONE}, {"collectionType": INT}, True),
    "[integer] to [float]": ({"collectionType": INT}, {"collectionType": FLOAT}, False),
    "[integer] to integer": ({"collectionType": INT}, INT, False),
    "[integer] to [[integer]]": ({"collectionType": INT}, {"collectionType": {"collectionType": INT}}, False),
    "void to [integer]": (NONE, {"collectionType": INT}, False),
    "{integer} to {integer}": ({"mapValueType": INT}, {"mapValueType": INT}, True),
    "{integer} to {float}": ({"mapValueType": INT}, {"mapValueType": FLOAT}, False),
    "{} to {float}": ({"mapValueType": NONE}, {"mapValueType": FLOAT}, True),
    "{integer} to integer": ({"mapValueType": INT}, INT, False),
    "{integer} to {{integer}}": ({"mapValueType": INT}, {"mapValueType": {"mapValueType": INT}}, False),
    "struct to struct": (STRUCT, STRUCT, True),
    "struct to a dataclass (no schema on the value)": (STRUCT, {**STRUCT, "metadata": SCHEMA_A}, True),
    "dataclass to the same dataclass": (
        {**STRUCT, "metadata": SCHEMA_A},
        {**STRUCT, "metadata": SCHEMA_A},
        True,
    ),
    "dataclass to another dataclass": (
        {**STRUCT, "metadata": SCHEMA_A},
        {**STRUCT, "metadata": SCHEMA_B},
        False,
    ),
    "schema() to schema()": (schema(), schema(), True),
    "schema() to schema(a)": (schema(), schema(a="INTEGER"), True),
    "schema(a) to schema()": (schema(a="INTEGER"), schema(), True),
    "schema(a, b) to schema(a)": (schema(a="INTEGER", b="FLOAT"), schema(a="INTEGER"), True),
    "generic dataset to schema(a)": (dataset(), schema(a="INTEGER"), True),
    "schema(a) to generic dataset": (schema(a="INTEGER"), dataset(), True),
    "dataset(a, b) to schema(a)": (dataset(a=INT, b=FLOAT), schema(a="INTEGER"), True),
    "csv dataset to a schema (schemas are parquet)": (dataset("csv"), schema(), False),
    "schema(a) to schema(a, b)": (schema(a="INTEGER"), schema(a="INTEGER", b="FLOAT"), False),
    "schema(a int) to schema(a float)": (schema(a="INTEGER"), schema(a="FLOAT"), False),
    "void to schema (not nullable)": (NONE, schema(), False),
    "dataset() to dataset()": (dataset(), dataset(), True),
    "dataset() to dataset(a, b)": (dataset(), dataset(a=INT, b={"collectionType": INT}), True),
    "dataset(a, b) to dataset()": (dataset(a=INT, b={"collectionType": INT}), dataset(), True),
    "dataset(a, b, c) to dataset(a, b)": (
        dataset(a=INT, b={"collectionType": INT}, c={"mapValueType": INT}),
        dataset(a=INT, b={"collectionType": INT}),
        True,
    ),
    "dataset(a, b) to dataset(a, b, c)": (
        dataset(a=INT, b={"collectionType": INT}),
        dataset(a=INT, b={"collectionType": INT}, c={"mapValueType": INT}),
        False,
    ),
    "schema(a) to dataset(a)": (schema(a="INTEGER"), dataset(a=INT), True),
    "schema(a int) to dataset(a float)": (schema(a="INTEGER"), dataset(a=FLOAT), False),
    "dataset(a int) to dataset(a float)": (
        dataset(a=INT, b={"collectionType": INT}),
        dataset(a=FLOAT),
        False,
    ),
    "parquet dataset to dataset()": (dataset("parquet"), dataset(), True),
    "dataset() to parquet dataset": (dataset(), dataset("parquet"), True),
    "formats compare without case": (dataset("Parquet"), dataset("parquet"), True),
    "csv dataset to parquet dataset": (dataset("csv"), dataset("parquet"), False),
    "void to dataset (datasets are nullable)": (NONE, dataset(), True),
    "blob() to blob()": (blob(), blob(), True),
    "blob(csv) to blob()": (blob("csv"), blob(), True),
    "blob() to blob(csv)": (blob(), blob("csv"), True),
    "blob(csv) to blob(pdf)": (blob("csv"), blob("pdf"), False),
    "void to blob (not nullable)": (NONE, blob(), False),
}


@pytest.mark.parametrize(("upstream", "downstream", "castable"), list(CASES.values()), ids=list(CASES))
def test_types_cast_as_flytepropeller_casts_them(
    upstream: dict[str, Any], downstream: dict[str, Any], castable: bool
) -> None:
    assert are_types_castable(lt(upstream), lt(downstream)) is castable


# -- the type of a literal ---------------------------------------------------------------------------------

INT_LIT = {"scalar": {"primitive": {"integer": "1"}}}
STR_LIT = {"scalar": {"primitive": {"stringValue": "a"}}}

INFERRED = {
    "integer": (INT_LIT, INT),
    "duration": ({"scalar": {"primitive": {"duration": "1s"}}}, {"simple": "DURATION"}),
    "msgpack binary is a struct": ({"scalar": {"binary": {"value": "gA==", "tag": "msgpack"}}}, STRUCT),
    "other binary is binary": ({"scalar": {"binary": {"value": "gA==", "tag": "raw"}}}, {"simple": "BINARY"}),
    "generic is a struct": ({"scalar": {"generic": {"a": 1}}}, STRUCT),
    "none": ({"scalar": {"noneType": {}}}, NONE),
    "union is a union of its stored type": (
        {"scalar": {"union": {"value": INT_LIT, "type": tagged("INTEGER", "int")}}},
        union(tagged("INTEGER", "int")),
    ),
    "empty list": ({"collection": {}}, {"collectionType": NONE}),
    "list of one type": ({"collection": {"literals": [INT_LIT, INT_LIT]}}, {"collectionType": INT}),
    "mixed list is a list of a union": (
        {"collection": {"literals": [INT_LIT, STR_LIT]}},
        {"collectionType": union(INT, STR)},
    ),
    "map": ({"map": {"literals": {"a": STR_LIT}}}, {"mapValueType": STR}),
    "blob": ({"scalar": {"blob": {"uri": "s3://b/f", "metadata": {"type": {"format": "csv"}}}}}, blob("csv")),
    "dataset": (
        {
            "scalar": {
                "structuredDataset": {
                    "uri": "s3://b/d",
                    "metadata": {"structuredDatasetType": {"format": "csv"}},
                }
            }
        },
        dataset("csv"),
    ),
    "offloaded": ({"offloadedMetadata": {"uri": "s3://b/o", "inferredType": INT}}, INT),
}


@pytest.mark.parametrize(("literal", "expected"), list(INFERRED.values()), ids=list(INFERRED))
def test_the_type_of_a_literal_is_inferred_as_flyte_infers_it(
    literal: dict[str, Any], expected: dict[str, Any]
) -> None:
    assert literal_type_for_literal(lit(literal)) == lt(expected)


def test_a_blob_without_metadata_has_no_type() -> None:
    assert literal_type_for_literal(lit({"scalar": {"blob": {"uri": "s3://b/f"}}})) is None
    assert (
        literal_type_for_literal(lit({"collection": {"literals": [{"scalar": {"blob": {"uri": "x"}}}]}}))
        is None
    )


@pytest.mark.parametrize(
    ("t", "name"),
    [
        (INT, "INTEGER"),
        ({"collectionType": STR}, "list[STRING]"),
        ({"mapValueType": FLOAT}, "map[str, FLOAT]"),
        (enum("red", "blue"), "enum[red, blue]"),
        (union(INT, NONE), "union[INTEGER, NONE]"),
        ({**STRUCT, "metadata": SCHEMA_A}, "STRUCT (A)"),
        (blob("csv"), "FlyteFile[csv]"),
        ({"blob": {"dimensionality": "MULTIPART"}}, "FlyteDirectory"),
        (dataset("parquet"), "StructuredDataset[parquet]"),
    ],
)
def test_types_have_readable_names(t: dict[str, Any], name: str) -> None:
    assert describe_type(lt(t)) == name


# -- Literal JSON inputs, checked at launch ------------------------------------------------------------------

REFUSED = {
    "a string for an integer": (STR_LIT, INT, "Expected INTEGER, but got STRING"),
    "an integer for a float": (INT_LIT, FLOAT, "Expected FLOAT, but got INTEGER"),
    "a list for an integer": (
        {"collection": {"literals": [INT_LIT]}},
        INT,
        "Expected INTEGER, but got list[INTEGER]",
    ),
    "strings for integers": (
        {"collection": {"literals": [STR_LIT]}},
        {"collectionType": INT},
        "Expected list[INTEGER], but got list[STRING]",
    ),
    "a csv file for a pdf": (
        {"scalar": {"blob": {"uri": "s3://b/f", "metadata": {"type": {"format": "csv"}}}}},
        blob("pdf"),
        "Expected FlyteFile[pdf], but got FlyteFile[csv]",
    ),
    "a string for a dataclass": (
        STR_LIT,
        {**STRUCT, "metadata": SCHEMA_A},
        "Expected STRUCT (A), but got STRING",
    ),
    "null for an integer": ({"scalar": {"noneType": {}}}, INT, "Expected INTEGER, but got NONE"),
}


@pytest.mark.parametrize(("literal", "declared", "message"), list(REFUSED.values()), ids=list(REFUSED))
def test_literal_json_of_the_wrong_type_is_refused_as_flyteadmin_refuses_it(
    literal: dict[str, Any], declared: dict[str, Any], message: str
) -> None:
    with pytest.raises(SpecError) as err:
        plain_to_literal(literal, lt(declared), "inputs.x")
    assert err.value.path == "inputs.x"
    assert err.value.reason == f"invalid x input wrong type. {message}"


ACCEPTED = {
    "an integer": (INT_LIT, INT),
    "a string for an enum": ({"scalar": {"primitive": {"stringValue": "red"}}}, enum("red", "blue")),
    "an integer for Optional[int]": (INT_LIT, union(tagged("INTEGER", "int"), tagged("NONE", "none"))),
    "a union literal": (
        {"scalar": {"union": {"value": {"scalar": {"noneType": {}}}, "type": tagged("NONE", "none")}}},
        union(tagged("INTEGER", "int"), tagged("NONE", "none")),
    ),
    "msgpack for a dataclass": (
        {"scalar": {"binary": {"value": "gaF4AQ==", "tag": "msgpack"}}},
        {**STRUCT, "metadata": SCHEMA_A},
    ),
    "an empty list for any list": ({"collection": {}}, {"collectionType": {"collectionType": INT}}),
    "a generic dataset for a csv one": (
        {"scalar": {"structuredDataset": {"uri": "s3://b/d", "metadata": {"structuredDatasetType": {}}}}},
        dataset("csv"),
    ),
}


@pytest.mark.parametrize(("literal", "declared"), list(ACCEPTED.values()), ids=list(ACCEPTED))
def test_literal_json_of_a_castable_type_is_accepted_as_given(
    literal: dict[str, Any], declared: dict[str, Any]
) -> None:
    assert plain_to_literal(literal, lt(declared), "inputs.x") == lit(literal)


def test_a_literal_whose_type_flyte_cannot_tell_is_refused() -> None:
    with pytest.raises(SpecError, match="cannot tell the type"):
        plain_to_literal({"scalar": {"blob": {"uri": "s3://b/f"}}}, lt(blob()), "inputs.f")


def test_an_enum_literal_outside_the_values_is_refused_before_launch() -> None:
    # Deviation from flyteadmin (which accepts it and lets flytekit fail in the pod).
    with pytest.raises(SpecError) as err:
        plain_to_literal(
            {"scalar": {"primitive": {"stringValue": "green"}}}, lt(enum("red", "blue")), "inputs.c"
        )
    assert (err.value.path, err.value.reason) == (
        "inputs.c",
        "expected one of ['red', 'blue'], got 'green' (str)",
    )


def test_a_wrong_literal_in_an_input_map_names_the_input() -> None:
    variables = {"variables": {"n": {"type": INT}, "s": {"type": STR}}}
    interface = json_format.ParseDict(variables, interface_pb2.VariableMap())
    with pytest.raises(SpecError) as err:
        literal_map_from_plain({"n": STR_LIT, "s": "ok"}, interface)
    assert err.value.path == "inputs.n"
    assert "invalid n input wrong type. Expected INTEGER, but got STRING" in str(err.value)
