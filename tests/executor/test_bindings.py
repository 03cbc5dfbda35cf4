"""Binding resolution (propeller nodes/resolve.go, output_resolver.go, var_name_parser.go,
attr_path_resolver.go): Flyte's test tables, the rule book's vectors and real flytekit 1.16 literals."""

from __future__ import annotations

import typing
from collections import OrderedDict
from dataclasses import dataclass

import msgpack
import pytest
from flyteidl.core import literals_pb2, types_pb2, workflow_pb2
from flytekit.types.error import FlyteError
from google.protobuf import struct_pb2

from taskplug.core import ErrorKind
from taskplug.executor.nodes._bindings import (
    BindingError,
    NodeError,
    failure_node_error_literal,
    go_value,
    output_of,
    parse_var_name,
    resolve_attr_path,
    resolve_binding,
    resolve_inputs,
    undefined_node,
)

Literal = literals_pb2.Literal


def string(value: str) -> Literal:
    return Literal(scalar=literals_pb2.Scalar(primitive=literals_pb2.Primitive(string_value=value)))


def integer(value: int) -> Literal:
    return Literal(scalar=literals_pb2.Scalar(primitive=literals_pb2.Primitive(integer=value)))


def floating(value: float) -> Literal:
    return Literal(scalar=literals_pb2.Scalar(primitive=literals_pb2.Primitive(float_value=value)))


def boolean(value: bool) -> Literal:
    return Literal(scalar=literals_pb2.Scalar(primitive=literals_pb2.Primitive(boolean=value)))


def collection(*items: Literal) -> Literal:
    return Literal(collection=literals_pb2.LiteralCollection(literals=items))


def lmap(**items: Literal) -> Literal:
    return Literal(map=literals_pb2.LiteralMap(literals=items))


def generic(value: dict[str, typing.Any]) -> Literal:
    st = struct_pb2.Struct()
    st.update(value)
    return Literal(scalar=literals_pb2.Scalar(generic=st))


def packed(value: typing.Any, tag: str = "msgpack") -> Literal:
    return Literal(
        scalar=literals_pb2.Scalar(
            binary=literals_pb2.Binary(value=msgpack.packb(value, use_bin_type=True), tag=tag)
        )
    )


def path(*attrs: str | int) -> list[types_pb2.PromiseAttribute]:
    return [
        types_pb2.PromiseAttribute(string_value=a)
        if isinstance(a, str)
        else types_pb2.PromiseAttribute(int_value=a)
        for a in attrs
    ]


def unpacked_collection(literal: Literal) -> list[typing.Any]:
    assert literal.WhichOneof("value") == "collection"
    out = []
    for item in literal.collection.literals:
        assert item.scalar.binary.tag == "msgpack"
        out.append(msgpack.unpackb(item.scalar.binary.value, strict_map_key=False))
    return out


def unpacked(literal: Literal) -> typing.Any:
    assert literal.scalar.binary.tag == "msgpack"
    return msgpack.unpackb(literal.scalar.binary.value, strict_map_key=False)


# -- a flytekit 1.16 dataclass output ---------------------------------------------------------------------


@dataclass
class Point:
    x: int
    y: list[int]


@pytest.fixture(scope="module")
def point_literal() -> Literal:
    """``mk_point(4)``'s output as flytekit 1.16 writes it: msgpack ``{'x': 4, 'y': [4, 5]}``."""
    from flytekit.core.context_manager import FlyteContextManager
    from flytekit.core.type_engine import TypeEngine

    ctx = FlyteContextManager.current_context()
    literal = TypeEngine.to_literal(ctx, Point(x=4, y=[4, 5]), Point, TypeEngine.to_literal_type(Point))
    idl: Literal = literal.to_flyte_idl()
    assert idl.scalar.binary.tag == "msgpack"
    return idl


def test_a_dataclass_field_is_a_primitive(point_literal: Literal) -> None:
    assert resolve_attr_path(point_literal, path("x")) == integer(4)
    assert resolve_attr_path(point_literal, path("y", 1)) == integer(5)


def test_a_dataclass_list_is_a_collection_of_msgpack_values_even_for_ints(point_literal: Literal) -> None:
    resolved = resolve_attr_path(point_literal, path("y"))
    assert [item.scalar.binary.value for item in resolved.collection.literals] == [b"\x04", b"\x05"]
    assert {item.scalar.binary.tag for item in resolved.collection.literals} == {"msgpack"}


def test_a_missing_dataclass_field_names_the_producer_and_the_value(point_literal: Literal) -> None:
    with pytest.raises(NodeError) as caught:
        resolve_attr_path(point_literal, path("z"), node_id="n0")
    assert caught.value.code == "PromiseAttributeResolveError"
    assert str(caught.value) == (
        "failed at Node[n0]. PromiseAttributeResolveError: key [z] does not exist in literal map[x:4 y:[4 5]]"
    )


# -- TestResolveAttrPathInStruct (literal maps, collections, Structs) ----------------------------------------


@pytest.mark.parametrize(
    ("literal", "attrs", "expected"),
    [
        (lmap(foo=string("bar")), path("foo"), string("bar")),
        (collection(string("foo"), string("bar")), path(1), string("bar")),
        (generic({"foo": "bar"}), path("foo"), string("bar")),
        (generic({"foo": ["bar1", "bar2"]}), path("foo", 1), string("bar2")),
        (
            generic({"foo": [["bar1", "bar2"]]}),
            path("foo"),
            collection(collection(string("bar1"), string("bar2"))),
        ),
        (lmap(foo=collection(generic({"bar": "car"}))), path("foo", 0, "bar"), string("car")),
        (generic({"foo": {"bar": {"baz": 42}}}), path("foo", "bar"), generic({"baz": 42})),
        (generic({"x": 4}), path("x"), floating(4.0)),  # Struct numbers are floats (flyte#5959)
        (generic({"x": None}), path("x"), Literal()),  # a JSON null matches no case
        (generic({"x": True}), path("x"), boolean(True)),
        (generic({"x": "s"}), path("x", "deeper", 3), string("s")),  # the rest of the path is ignored
        (integer(3), path("a", 1), integer(3)),  # any other scalar comes back as is
    ],
)
def test_attribute_paths_over_literals_and_structs(
    literal: Literal, attrs: list[types_pb2.PromiseAttribute], expected: Literal
) -> None:
    assert resolve_attr_path(literal, attrs) == expected


@pytest.mark.parametrize(
    ("literal", "attrs", "message"),
    [
        (
            lmap(foo=string("bar")),
            path("random"),
            'key [random] does not exist in literal map[foo:scalar:{primitive:{string_value:"bar"}}]',
        ),
        (
            collection(string("foo"), string("bar")),
            path(2),
            'index [2] is out of range of [scalar:{primitive:{string_value:"foo"}} '
            'scalar:{primitive:{string_value:"bar"}}]',
        ),
        (generic({"foo": "bar"}), path("random"), "key [random] does not exist in literal map[foo:bar]"),
        (generic({"foo": ["bar1", "bar2"]}), path("foo", 100), "index [100] is out of range of [bar1 bar2]"),
        (generic({"foo": ["bar1", "bar2"]}), path("foo", -1), "index [-1] is out of range of [bar1 bar2]"),
        # Deviation: Flyte panics on a negative index into a literal collection.
        (
            collection(string("foo")),
            path(-1),
            'index [-1] is out of range of [scalar:{primitive:{string_value:"foo"}}]',
        ),
    ],
)
def test_attribute_path_errors_over_literals_and_structs(
    literal: Literal, attrs: list[types_pb2.PromiseAttribute], message: str
) -> None:
    with pytest.raises(NodeError) as caught:
        resolve_attr_path(literal, attrs, node_id="n3")
    assert caught.value.code == "PromiseAttributeResolveError"
    assert str(caught.value) == f"failed at Node[n3]. PromiseAttributeResolveError: {message}"


def test_an_offloaded_literal_on_the_path_is_read_first() -> None:
    offloaded = Literal(offloaded_metadata=literals_pb2.LiteralOffloadedMetadata(uri="s3://b/o"))
    seen: list[str] = []

    def load(literal: Literal) -> Literal:
        seen.append(literal.offloaded_metadata.uri)
        return lmap(a=integer(1))

    assert resolve_attr_path(offloaded, path("a"), load_offloaded=load) == integer(1)
    assert seen == ["s3://b/o"]
    with pytest.raises(NodeError, match="failed to read offloaded metadata for promise"):
        resolve_attr_path(offloaded, path("a"))


# -- TestResolveAttrPathInBinary (msgpack; Go marshals its DC struct under the field names) -------------------

FILE = {"path": "s3://my-s3-bucket/example.txt"}
DIRECTORY = {"path": "s3://my-s3-bucket/s3_flyte_dir"}
INT64_MAX = (1 << 63) - 1


def _inner() -> dict[str, typing.Any]:
    return {
        "A": -1,
        "B": -2.1,
        "C": "Hello, Flyte",
        "D": False,
        "E": [0, 1, 2, -1, -2],
        "F": [FILE],
        "G": [[0], [1], [-1]],
        "H": [{0: False}, {1: True}, {-1: True}],
        "I": {0: False, 1: True, -1: False},
        "J": {0: FILE, 1: FILE, -1: FILE},
        "K": {0: [0, 1, -1]},
        "L": {1: {-1: 0}},
        "M": {"key": "value"},
        "N": FILE,
        "O": DIRECTORY,
    }


NESTED_DC = {
    "Aint8": 127,
    "Aint16": 32767,
    "Aint32": 2147483647,
    "Aint64": INT64_MAX,
    "Aint": INT64_MAX,
    "Auint8": 255,
    "Auint16": 65535,
    "Auint32": 4294967295,
    "Auint64": INT64_MAX,
    "Auint": INT64_MAX,
    **{k: v for k, v in _inner().items() if k != "A"},
    "B": 2.1,
    "Inner": _inner(),
}


@pytest.mark.parametrize(
    ("attrs", "expected"),
    [
        (path("Aint8"), integer(127)),
        (path("Aint16"), integer(32767)),
        (path("Aint32"), integer(2147483647)),
        (path("Aint64"), integer(INT64_MAX)),
        (path("Aint"), integer(INT64_MAX)),
        (path("Auint8"), integer(255)),
        (path("Auint16"), integer(65535)),
        (path("Auint32"), integer(4294967295)),
        (path("Auint64"), integer(INT64_MAX)),
        (path("Auint"), integer(INT64_MAX)),
        (path("B"), floating(2.1)),
        (path("C"), string("Hello, Flyte")),
        (path("D"), boolean(False)),
        (path("Inner", "A"), integer(-1)),
        (path("Inner", "B"), floating(-2.1)),
        (path("Inner", "C"), string("Hello, Flyte")),
        (path("Inner", "D"), boolean(False)),
        (path("Inner", "G", 2, 0), integer(-1)),
    ],
)
def test_msgpack_primitive_leaves(attrs: list[types_pb2.PromiseAttribute], expected: Literal) -> None:
    assert resolve_attr_path(packed(NESTED_DC), attrs) == expected


@pytest.mark.parametrize(
    ("attrs", "expected"),
    [
        (path("E"), [0, 1, 2, -1, -2]),
        (path("F"), [FILE]),
        (path("G"), [[0], [1], [-1]]),
        (path("H"), [{0: False}, {1: True}, {-1: True}]),
        (path("Inner", "E"), [0, 1, 2, -1, -2]),
        (path("Inner", "F"), [FILE]),
        (path("Inner", "G"), [[0], [1], [-1]]),
        (path("Inner", "G", 0), [0]),
        (path("Inner", "H"), [{0: False}, {1: True}, {-1: True}]),
    ],
)
def test_msgpack_list_leaves_become_collections(
    attrs: list[types_pb2.PromiseAttribute], expected: list
) -> None:
    assert unpacked_collection(resolve_attr_path(packed(NESTED_DC), attrs)) == expected


@pytest.mark.parametrize("prefix", [(), ("Inner",)])
@pytest.mark.parametrize("field", ["I", "J", "K", "L", "M", "N", "O"])
def test_msgpack_map_leaves_stay_msgpack(prefix: tuple[str, ...], field: str) -> None:
    source = NESTED_DC["Inner"] if prefix else NESTED_DC
    assert unpacked(resolve_attr_path(packed(NESTED_DC), path(*prefix, field))) == source[field]


def test_a_whole_nested_dataclass_is_re_encoded() -> None:
    assert unpacked(resolve_attr_path(packed(NESTED_DC), path("Inner"))) == NESTED_DC["Inner"]
    assert resolve_attr_path(packed({"a": None}), path("a")) == packed(None)


@pytest.mark.parametrize(
    ("value", "attrs", "message"),
    [
        (
            {"foo": {"bar": 42, "baz": {"qux": 3.14, "quux": "str"}}},
            path("foo", "baz", "unknown"),
            "key [unknown] does not exist in literal map[quux:str qux:3.14]",
        ),
        ({"foo": [42, 3.14, "str"]}, path("foo", 10), "index [10] is out of range of [42 3.14 str]"),
        ({"foo": [42]}, path("foo", -1), "index [-1] is out of range of [42]"),
        (
            {"foo": [42]},
            path("foo", "x"),
            "unexpected attribute type [*core.PromiseAttribute_StringValue] for value &{x}",
        ),
        ({"foo": 1}, path(0), "unexpected attribute type [*core.PromiseAttribute_IntValue] for value &{0}"),
        ({"foo": 4}, path("foo", "x"), "unexpected type [uint8] for value 4"),
        ({"foo": -300}, path("foo", 1), "unexpected type [int16] for value -300"),
        ({"foo": None}, path("foo", 1), "unexpected type [<nil>] for value <nil>"),
    ],
)
def test_msgpack_path_errors(
    value: typing.Any, attrs: list[types_pb2.PromiseAttribute], message: str
) -> None:
    with pytest.raises(NodeError) as caught:
        resolve_attr_path(packed(value), attrs, node_id="n0")
    assert str(caught.value) == f"failed at Node[n0]. PromiseAttributeResolveError: {message}"


def test_a_uint64_beyond_int64_is_refused_with_its_own_code() -> None:
    with pytest.raises(NodeError) as caught:
        resolve_attr_path(packed({"big": INT64_MAX + 1}), path("big"), node_id="n0")
    assert caught.value.code == "InvalidPrimitiveType"
    assert str(caught.value).endswith("uint64 value is too large to be converted to int64")


def test_a_binary_of_another_format_is_refused() -> None:
    with pytest.raises(NodeError) as caught:
        resolve_attr_path(packed({"a": 1}, tag="json"), path("a"), node_id="n0")
    assert caught.value.detail == (
        "Unsupported format 'json' found for literal value.\nPlease ensure the serialization format is supported."
    )


def test_a_path_through_a_literal_map_continues_inside_the_dataclass(point_literal: Literal) -> None:
    assert resolve_attr_path(lmap(p=point_literal), path("p", "y", 0)) == integer(4)


def test_go_value_prints_maps_sorted() -> None:
    assert go_value({"b": [1, 2.5], "a": {2: None, 1: b"\x01"}}) == "map[a:map[1:[1] 2:<nil>] b:[1 2.5]]"


# -- output resolution -------------------------------------------------------------------------------------

OUTPUTS = literals_pb2.LiteralMap(literals={"o0": integer(1), "array": collection(integer(7), integer(8))})
FILE_PB = "s3://b/meta/n1/data/0/outputs.pb"


def test_an_output_is_picked_by_name_or_alias() -> None:
    assert output_of(OUTPUTS, FILE_PB, "n1", "o0") == integer(1)
    assert output_of(OUTPUTS, FILE_PB, "n1", "sum", [workflow_pb2.Alias(var="o0", alias="sum")]) == integer(1)
    assert output_of(OUTPUTS, FILE_PB, "n1", "sum", {"sum": "o0"}) == integer(1)
    assert output_of(OUTPUTS, FILE_PB, "n1", "[1].array") == integer(8)


@pytest.mark.parametrize(
    ("outputs", "var", "text"),
    [
        (
            None,
            "o0",
            f"CausedByError: Failed to GetPrevious data from outputDir [{FILE_PB}], caused by: path:{FILE_PB}: not found",
        ),
        (literals_pb2.LiteralMap(), "o0", f"OutputsNotFoundError: Outputs not found at [{FILE_PB}]"),
        (OUTPUTS, "o9", "OutputsNotFoundError: Failed to find [n1].[o9]"),
        (OUTPUTS, "[5].array", "OutputsNotFoundError: Failed to find [n1[5].array]"),
        (
            OUTPUTS,
            "[0].other",
            "BadSpecificationError: Output of array tasks is expected to be a single literal map entry named "
            "'array' of type LiteralCollection.",
        ),
        (
            OUTPUTS,
            "[0].o0",
            "BadSpecificationError: Output of array tasks of key 'array' is of type [*core.Literal_Scalar]. "
            "LiteralCollection is expected.",
        ),
    ],
)
def test_output_errors_are_flytes(outputs: literals_pb2.LiteralMap | None, var: str, text: str) -> None:
    with pytest.raises(NodeError) as caught:
        output_of(outputs, FILE_PB, "n1", var)
    assert str(caught.value) == f"failed at Node[n1]. {text}"


@pytest.mark.parametrize(
    ("var", "expected"), [("o0", (None, "o0")), ("[12].array", (12, "array")), ("my_out", (None, "my_out"))]
)
def test_var_names(var: str, expected: tuple[int | None, str]) -> None:
    assert parse_var_name(var) == expected


def make_promise(node: str, var: str, *attrs: str | int) -> literals_pb2.BindingData:
    return literals_pb2.BindingData(
        promise=types_pb2.OutputReference(node_id=node, var=var, attr_path=path(*attrs))
    )


def reader(outputs: dict[str, literals_pb2.LiteralMap | None]) -> typing.Callable[[str, str], Literal]:
    def read(node: str, var: str) -> Literal:
        if node not in outputs:
            raise undefined_node(node)
        return output_of(outputs[node], f"s3://b/{node}/outputs.pb", node, var)

    return read


@pytest.mark.parametrize(
    ("var", "cause"),
    [("a-b", "unexpected number of matches [2]"), ("é", "unexpected number of matches [0]")],
)
def test_a_malformed_var_fails_the_binding(var: str, cause: str) -> None:
    with pytest.raises(BindingError) as caught:
        resolve_binding(make_promise("n1", var), reader({"n1": OUTPUTS}), node_id="n2", var="a")
    assert (
        str(caught.value)
        == f"failed at Node[n2]. BindingResolutionError: Error binding Var [wf].[a], caused by: {cause}"
    )


# -- bindings ----------------------------------------------------------------------------------------------


def test_constants_collections_maps_and_promises_resolve() -> None:
    read = reader({"n1": OUTPUTS, "start-node": literals_pb2.LiteralMap(literals={"x": string("hi")})})
    data = literals_pb2.BindingData(
        collection=literals_pb2.BindingDataCollection(
            bindings=[
                literals_pb2.BindingData(scalar=integer(5).scalar),
                make_promise("n1", "o0"),
                literals_pb2.BindingData(
                    map=literals_pb2.BindingDataMap(bindings={"k": make_promise("start-node", "x")})
                ),
            ]
        )
    )
    assert resolve_binding(data, read, node_id="n2", var="a") == collection(
        integer(5), integer(1), lmap(k=string("hi"))
    )


def test_a_promise_feeding_an_optional_passes_the_literal_unwrapped() -> None:
    union = literals_pb2.UnionInfo(targetType=types_pb2.LiteralType(simple=types_pb2.SimpleType.INTEGER))
    data = make_promise("n1", "o0")
    data.union.CopyFrom(union)
    assert resolve_binding(data, reader({"n1": OUTPUTS}), node_id="n2", var="a") == integer(1)


def test_a_missing_output_fails_the_node_with_a_system_binding_error() -> None:
    with pytest.raises(BindingError) as caught:
        resolve_binding(make_promise("n1", "o9"), reader({"n1": OUTPUTS}), node_id="n2", var="a")
    err = caught.value.error
    assert (err.kind, err.code) == (ErrorKind.SYSTEM, "BindingResolutionFailure")
    assert err.message == (
        "failed at Node[n2]. BindingResolutionError: Error binding Var [wf].[a], caused by: "
        "failed at Node[n1]. OutputsNotFoundError: Failed to find [n1].[o9]"
    )


def test_a_promise_without_a_node_or_to_an_unknown_node_fails() -> None:
    with pytest.raises(
        BindingError, match=r"caused by: failed at Node\[missing\]. BadSpecificationError: No nodeId"
    ):
        resolve_binding(make_promise("", "o0"), reader({}), node_id="n2", var="a")
    with pytest.raises(BindingError) as caught:
        resolve_binding(make_promise("n9", "o0"), reader({}), node_id="n2", var="a")
    assert str(caught.value.cause) == (
        "failed at Node[id]. IllegalStateError: n9%!(EXTRA string=Undefined node in Workflow)"
    )


def test_an_offloaded_or_empty_binding_is_an_empty_literal() -> None:
    offloaded = literals_pb2.BindingData(
        offloaded_metadata=literals_pb2.LiteralOffloadedMetadata(uri="s3://x")
    )
    assert resolve_binding(offloaded, reader({}), node_id="n2", var="a") == Literal()
    assert resolve_binding(literals_pb2.BindingData(), reader({}), node_id="n2", var="a") == Literal()


def test_resolve_inputs_names_the_failing_var() -> None:
    bindings = [
        literals_pb2.Binding(var="a", binding=make_promise("n1", "o0")),
        literals_pb2.Binding(var="b", binding=make_promise("n1", "array", 5)),
    ]
    with pytest.raises(BindingError) as caught:
        resolve_inputs(bindings, reader({"n1": OUTPUTS}), "n2")
    assert caught.value.var == "b"
    assert "caused by: failed at Node[n1]. PromiseAttributeResolveError: index [5] is out of range of" in str(
        caught.value
    )
    resolved = resolve_inputs(bindings[:1], reader({"n1": OUTPUTS}), "n2")
    assert dict(resolved.literals) == {"a": integer(1)}


def test_a_flytekit_workflow_s_attribute_promise_feeds_the_real_task(point_literal: Literal) -> None:
    from flytekit import task, workflow
    from flytekit.configuration import ImageConfig, SerializationSettings
    from flytekit.core.context_manager import FlyteContextManager
    from flytekit.models.literals import LiteralMap
    from flytekit.tools.translator import get_serializable

    @task
    def mk_point(a: int) -> Point:
        return Point(x=a, y=[a, a + 1])

    @task
    def double(a: int) -> int:
        return 2 * a

    @workflow
    def wf(a: int) -> int:
        p = mk_point(a=a)
        return double(a=p.y[1])

    settings = SerializationSettings(
        image_config=ImageConfig.auto_default_image(), project="p", domain="d", version="v"
    )
    template = get_serializable(OrderedDict(), settings, wf).template.to_flyte_idl()
    n1 = next(n for n in template.nodes if n.id == "n1")
    outputs = {"n0": literals_pb2.LiteralMap(literals={"o0": point_literal})}
    inputs = resolve_inputs(n1.inputs, reader(outputs), "n1")
    assert dict(inputs.literals) == {"a": integer(5)}
    ctx = FlyteContextManager.current_context()
    result = double.dispatch_execute(ctx, LiteralMap.from_flyte_idl(inputs))
    assert result.to_flyte_idl().literals["o0"] == integer(10)


# -- failure node err input --------------------------------------------------------------------------------


def test_the_failure_node_error_literal_has_flytes_shape() -> None:
    literal = failure_node_error_literal("boom", "fn0")
    union = literal.scalar.union
    assert union.value.scalar.error == types_pb2.Error(message="boom", failed_node_id="fn0")
    assert union.type == types_pb2.LiteralType(
        simple=types_pb2.SimpleType.ERROR, structure=types_pb2.TypeStructure(tag="FlyteError")
    )


def test_a_flytekit_failure_node_task_reads_it_as_a_flyte_error() -> None:
    from flytekit import task
    from flytekit.core.context_manager import FlyteContextManager
    from flytekit.models.literals import LiteralMap

    seen: list[FlyteError | None] = []

    @task
    def clean_up(a: int, err: typing.Optional[FlyteError] = None) -> None:  # noqa: UP045 (flytekit's idiom)
        seen.append(err)

    inputs = literals_pb2.LiteralMap(
        literals={"a": integer(1), "err": failure_node_error_literal("it broke", "fn0")}
    )
    clean_up.dispatch_execute(FlyteContextManager.current_context(), LiteralMap.from_flyte_idl(inputs))
    assert len(seen) == 1 and seen[0] is not None
    assert (seen[0].message, seen[0].failed_node_id) == ("it broke", "fn0")
