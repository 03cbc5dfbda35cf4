"""Plain values converted by the types flytekit 1.16 declares, read back by flytekit itself.

Each declared type is ``TypeEngine.to_literal_type`` of a Python type; the literal taskplug makes from a
plain value must be what ``TypeEngine.to_python_value`` turns into the right Python value — the value a
task receives in its pod. Outputs flytekit writes are shown as plain values (a dataclass as its fields).
"""

# No ``from __future__ import annotations``: flytekit and mashumaro read these dataclasses' field types.
import dataclasses
import datetime
import enum
import typing
from typing import Any

import pydantic
import pytest
from flyteidl.core import interface_pb2, literals_pb2, types_pb2

flytekit = pytest.importorskip("flytekit")

from flytekit.core.context_manager import FlyteContextManager  # noqa: E402
from flytekit.core.type_engine import TypeEngine  # noqa: E402
from flytekit.models.literals import Literal  # noqa: E402
from flytekit.types.directory import FlyteDirectory  # noqa: E402
from flytekit.types.file import FlyteFile  # noqa: E402
from flytekit.types.structured import StructuredDataset  # noqa: E402

from taskplug.core import SpecError, literal_map_to_plain, literal_to_plain, plain_to_literal  # noqa: E402

UTC = datetime.UTC


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass
class Point:
    x: int
    y: float
    label: str = "origin"


@dataclasses.dataclass
class Shape:
    name: str
    color: Color
    points: list[Point]
    scale: float | None
    tags: dict[str, int]
    extra: dict
    when: datetime.datetime
    day: datetime.date
    every: datetime.timedelta
    either: int | str
    file: FlyteFile
    folder: FlyteDirectory
    table: StructuredDataset
    center: Point = dataclasses.field(default_factory=lambda: Point(0, 0.0))


@dataclasses.dataclass
class Index:
    # Named like a Literal's fields: {"hash": …, "map": …} is Literal JSON's shape too.
    hash: str
    map: dict[str, int]


class Model(pydantic.BaseModel):
    name: str
    color: Color
    point: "PointModel"
    when: datetime.datetime
    day: datetime.date
    count: int = 1


class PointModel(pydantic.BaseModel):
    x: int
    y: float


Model.model_rebuild()


def declared(python_type: Any) -> types_pb2.LiteralType:
    return TypeEngine.to_literal_type(python_type).to_flyte_idl()


def read_back(literal: literals_pb2.Literal, python_type: Any) -> Any:
    ctx = FlyteContextManager.current_context()
    return TypeEngine.to_python_value(ctx, Literal.from_flyte_idl(literal), python_type)


def written_by_flytekit(value: Any, python_type: Any) -> literals_pb2.Literal:
    ctx = FlyteContextManager.current_context()
    return TypeEngine.to_literal(
        ctx, value, python_type, TypeEngine.to_literal_type(python_type)
    ).to_flyte_idl()


SHAPE = {
    "name": "tri",
    "color": "blue",
    "points": [{"x": 1, "y": 2}, {"x": 3, "y": 4.5, "label": "b"}],
    "scale": None,
    "tags": {"a": 1},
    "extra": {"nested": [1, "two", {"three": None}]},
    "when": "2024-05-06T07:08:09Z",
    "day": "2024-05-06",
    "every": "1h30m",
    "either": "seven",
    "file": "s3://bucket/data.csv",
    "folder": "s3://bucket/dir",
    "table": "s3://bucket/table",
}


# -- round trips -----------------------------------------------------------------------------------------------


def test_a_dataclass_given_as_a_mapping_is_read_by_flytekit_as_the_dataclass() -> None:
    literal = plain_to_literal(SHAPE, declared(Shape), "inputs.shape")
    assert literal.scalar.binary.tag == "msgpack"
    shape = read_back(literal, Shape)
    assert isinstance(shape, Shape)
    assert shape.points == [Point(1, 2.0), Point(3, 4.5, "b")]
    assert isinstance(shape.points[0].y, float)
    assert (shape.name, shape.color, shape.scale, shape.tags) == ("tri", Color.BLUE, None, {"a": 1})
    assert shape.extra == {"nested": [1, "two", {"three": None}]}
    assert shape.when == datetime.datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)
    assert shape.day == datetime.date(2024, 5, 6)
    assert shape.every == datetime.timedelta(hours=1, minutes=30)
    assert shape.either == "seven"
    assert shape.file.remote_source == "s3://bucket/data.csv"
    assert shape.folder.remote_source == "s3://bucket/dir"
    assert shape.table.literal.uri == "s3://bucket/table"
    assert shape.center == Point(0, 0.0)  # a default, not given


def test_a_pydantic_model_ignores_keys_it_does_not_declare_as_pydantic_does() -> None:
    plain = {"x": 1, "y": 2, "z": "ignored"}
    assert read_back(plain_to_literal(plain, declared(PointModel), "inputs.p"), PointModel) == PointModel(
        x=1, y=2.0
    )


def test_a_dataclass_taskplug_writes_decodes_as_the_one_flytekit_writes() -> None:
    mine = read_back(plain_to_literal({"x": 1, "y": 2.5}, declared(Point), "inputs.p"), Point)
    assert mine == read_back(written_by_flytekit(Point(1, 2.5), Point), Point) == Point(1, 2.5)


def test_a_dataclass_with_fields_named_like_a_literals_is_given_as_a_plain_mapping() -> None:
    literal = plain_to_literal({"hash": "abc", "map": {}}, declared(Index), "inputs.i")
    assert read_back(literal, Index) == Index("abc", {})


def test_files_in_a_dataclass_may_be_given_as_a_mapping_of_their_uri() -> None:
    plain = {**SHAPE, "file": {"uri": "s3://bucket/a.csv"}, "folder": {"path": "s3://bucket/d"}}
    shape = read_back(plain_to_literal(plain, declared(Shape), "inputs.shape"), Shape)
    assert (shape.file.remote_source, shape.folder.remote_source) == ("s3://bucket/a.csv", "s3://bucket/d")


def test_a_pydantic_model_given_as_a_mapping_is_read_by_flytekit_as_the_model() -> None:
    plain = {
        "name": "m",
        "color": "red",
        "point": {"x": 1, "y": 2},
        "when": "2024-05-06T07:08:09Z",
        "day": "2024-05-06",
    }
    model = read_back(plain_to_literal(plain, declared(Model), "inputs.m"), Model)
    assert model == Model(
        name="m",
        color=Color.RED,
        point=PointModel(x=1, y=2.0),
        when=datetime.datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC),
        day=datetime.date(2024, 5, 6),
    )


@pytest.mark.parametrize(
    ("python_type", "plain", "expected"),
    [
        (dict, {"a": [1, {"b": None}], "c": "d"}, {"a": [1, {"b": None}], "c": "d"}),
        (list[dict], [{"a": 1}, {}], [{"a": 1}, {}]),
        (dict[str, list[int]], {"k": [1, 2]}, {"k": [1, 2]}),
        (int | None, None, None),
        (int | None, 3, 3),
        (int | str, 3, 3),
        (int | str, "3", "3"),
        (Point | None, {"x": 1, "y": 2}, Point(1, 2.0)),
        (Color, "red", Color.RED),
        (datetime.datetime, "2024-05-06T09:08:09+02:00", datetime.datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)),
        (datetime.timedelta, "PT1H30M", datetime.timedelta(minutes=90)),
        (datetime.timedelta, 2.5, datetime.timedelta(seconds=2.5)),
        (float, 3, 3.0),
        (list[Color | None], ["blue", None], [Color.BLUE, None]),
    ],
)
def test_plain_values_are_read_by_flytekit_as_the_declared_python_values(
    python_type: Any, plain: Any, expected: Any
) -> None:
    value = read_back(plain_to_literal(plain, declared(python_type), "inputs.x"), python_type)
    assert value == expected
    assert type(value) is type(expected)


def test_a_union_literal_is_the_one_flytekit_writes() -> None:
    for python_type, plain, value in [(int | None, None, None), (int | str, "s", "s")]:
        assert plain_to_literal(plain, declared(python_type), "inputs.u") == written_by_flytekit(
            value, python_type
        )


def test_a_dataset_given_as_a_uri_is_read_by_flytekit_with_the_declared_format() -> None:
    python_type = typing.Annotated[StructuredDataset, flytekit.kwtypes(a=int), "csv"]
    literal = plain_to_literal("s3://bucket/t.csv", declared(python_type), "inputs.df")
    dataset = read_back(literal, python_type)
    assert (dataset.literal.uri, dataset.file_format) == ("s3://bucket/t.csv", "csv")
    assert literal == written_by_flytekit(StructuredDataset(uri="s3://bucket/t.csv"), python_type)


# -- refusals -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "path", "message"),
    [
        ({"color": "green"}, "inputs.shape.color", "expected one of ['red', 'blue'], got 'green' (str)"),
        (
            {"points": [{"x": 1, "y": 2}, {"x": "one", "y": 2}]},
            "inputs.shape.points[1].x",
            "expected an integer",
        ),
        ({"points": [{"x": 1}]}, "inputs.shape.points[0].y", "STRUCT (Point) needs field(s) ['y']"),
        ({"colour": "red"}, "inputs.shape.colour", "STRUCT (Shape) has no field 'colour'"),
        ({"every": "forever"}, "inputs.shape.every", "expected a duration"),
        ({"day": "2024-05-06T07:00:00Z"}, "inputs.shape.day", "expected a date such as 2024-05-06"),
        ({"tags": {"a": "one"}}, "inputs.shape.tags.a", "expected an integer"),
        ({"scale": "big"}, "inputs.shape.scale", "matches no variant of union[FLOAT, NONE]"),
        ({"name": 3}, "inputs.shape.name", "expected a string"),
    ],
)
def test_a_dataclass_mapping_that_does_not_fit_is_refused_naming_the_field(
    change: dict[str, Any], path: str, message: str
) -> None:
    with pytest.raises(SpecError) as err:
        plain_to_literal({**SHAPE, **change}, declared(Shape), "inputs.shape")
    assert err.value.path == path
    assert message in err.value.reason


def test_a_missing_dataclass_field_is_refused() -> None:
    plain = {k: v for k, v in SHAPE.items() if k != "when"}
    with pytest.raises(SpecError) as err:
        plain_to_literal(plain, declared(Shape), "inputs.shape")
    assert (err.value.path, err.value.reason) == (
        "inputs.shape.when",
        "STRUCT (Shape) needs field(s) ['when']",
    )


def test_a_dataclass_is_given_as_a_mapping() -> None:
    with pytest.raises(SpecError) as err:
        plain_to_literal([1, 2], declared(Point), "inputs.p")
    assert err.value.reason == "expected a mapping for STRUCT (Point), got [1, 2] (list)"


# -- outputs shown as values -----------------------------------------------------------------------------------


def test_a_dataclass_output_is_shown_as_its_fields() -> None:
    literal = written_by_flytekit(Point(1, 2.5, "p"), Point)
    assert literal_to_plain(literal) == {"x": 1, "y": 2.5, "label": "p"}


def test_with_the_output_interface_dataclass_fields_are_shown_as_their_types() -> None:
    shape = read_back(plain_to_literal(SHAPE, declared(Shape), "inputs.shape"), Shape)
    outputs = literals_pb2.LiteralMap(literals={"o0": written_by_flytekit(shape, Shape)})
    interface = interface_pb2.VariableMap(variables={"o0": interface_pb2.Variable(type=declared(Shape))})
    shown = literal_map_to_plain(outputs, interface)["o0"]
    assert shown["every"] == "1h30m0s"
    assert shown["file"] == "s3://bucket/data.csv"
    assert shown["table"] == {"uri": "s3://bucket/table", "format": ""}
    assert shown["points"] == [{"x": 1, "y": 2.0, "label": "origin"}, {"x": 3, "y": 4.5, "label": "b"}]
    assert (shown["color"], shown["scale"], shown["day"]) == ("blue", None, "2024-05-06")
    assert shown["when"] == "2024-05-06T07:08:09Z"
    # Without the interface, the fields are as the msgpack carries them.
    assert literal_map_to_plain(outputs)["o0"]["every"] == 5400.0


def test_a_dataset_output_is_shown_as_uri_and_format() -> None:
    python_type = typing.Annotated[StructuredDataset, "parquet"]
    literal = written_by_flytekit(StructuredDataset(uri="s3://bucket/out"), python_type)
    assert literal_to_plain(literal) == {"uri": "s3://bucket/out", "format": "parquet"}


@pytest.mark.parametrize(
    ("value", "python_type", "shown"),
    [
        (Color.BLUE, Color, "blue"),
        (None, int | None, None),
        ("s", int | str, "s"),
        (Point(1, 2.0), Point | None, {"x": 1, "y": 2.0, "label": "origin"}),
        (datetime.timedelta(hours=2), datetime.timedelta, "2h0m0s"),
        ({"a": [1, None]}, dict, {"a": [1, None]}),
    ],
)
def test_outputs_flytekit_writes_are_shown_as_plain_values(value: Any, python_type: Any, shown: Any) -> None:
    assert literal_to_plain(written_by_flytekit(value, python_type)) == shown


def test_a_binary_that_is_not_msgpack_is_shown_as_its_bytes() -> None:
    literal = literals_pb2.Literal(
        scalar=literals_pb2.Scalar(binary=literals_pb2.Binary(value=b"\xc1", tag="msgpack"))
    )
    assert literal_to_plain(literal) == {"binary": "wQ==", "tag": "msgpack"}
