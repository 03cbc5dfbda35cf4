"""How a node's inputs are computed from its bindings: constants, upstream outputs and attribute paths.

Follows flytepropeller/pkg/controller/nodes/resolve.go (``ResolveBindingData``, ``Resolve``,
``ResolveErrorInputLiteralData``), output_resolver.go with var_name_parser.go (reading one output of an
upstream node) and attr_path_resolver.go (``promise.a["b"][0]`` over literal maps and collections, msgpack
dataclasses and protobuf Structs), with the error texts of nodes/errors. Pure: the caller reads an upstream
node's ``outputs.pb`` and hands it to :func:`output_of`; nothing here touches the data store.

Error texts quote values the way Go's ``%v`` prints them (maps with sorted keys, literals in compact
protobuf text); Flyte's own protobuf text is randomly spaced, so only the content is stable.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, cast

import msgpack  # type: ignore[import-untyped]
from flyteidl.core import literals_pb2, types_pb2, workflow_pb2
from google.protobuf import struct_pb2
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from taskplug.core import ErrorKind, ExecutionError, TaskplugError, go_format_float

__all__ = [
    "BINDING_RESOLUTION_FAILURE",
    "MESSAGEPACK",
    "BindingError",
    "NodeError",
    "failure_node_error_literal",
    "go_type",
    "go_value",
    "output_of",
    "parse_var_name",
    "resolve_attr_path",
    "resolve_binding",
    "resolve_inputs",
    "undefined_node",
]

BINDING_RESOLUTION_FAILURE: Final = "BindingResolutionFailure"  # the failed node's error code (preExecute)
MESSAGEPACK: Final = "msgpack"  # the Binary tag flytekit writes for dataclasses and Pydantic models

# nodes/errors codes used here.
_BAD_SPECIFICATION: Final = "BadSpecificationError"
_BINDING_RESOLUTION: Final = "BindingResolutionError"
_CAUSED_BY: Final = "CausedByError"
_ILLEGAL_STATE: Final = "IllegalStateError"
_INVALID_PRIMITIVE: Final = "InvalidPrimitiveType"
_OUTPUTS_NOT_FOUND: Final = "OutputsNotFoundError"
_ATTRIBUTE: Final = "PromiseAttributeResolveError"

_INT64_MAX: Final = (1 << 63) - 1
# ``[<index>].<var>`` (legacy array task outputs) or ``<var>``; Go's \d and \w are ASCII.
_VAR_NAME: Final = re.compile(r"(\[(?P<index>\d+)\]\.)?(?P<var>\w+)", re.ASCII)


class NodeError(TaskplugError):
    """One of propeller's node errors (``nodes/errors.NodeError``): a code, the node it concerns and a message,
    optionally wrapping a cause. Prints as ``failed at Node[<node>]. <code>: <message>[, caused by: <cause>]``.
    """

    def __init__(self, code: str, node: str, message: str, *, cause: object = None) -> None:
        self.node = node
        self.detail = message
        self.cause = cause
        text = f"failed at Node[{node}]. {code}: {message}"
        if cause is not None:
            text += f", caused by: {cause}"
        super().__init__(text, code=code)


class BindingError(TaskplugError):
    """A node's inputs cannot be resolved: the node fails with this ``{SYSTEM, BindingResolutionFailure,
    message}`` before it runs. ``cause`` is the underlying error (a :class:`NodeError` or a plain text)."""

    code = BINDING_RESOLUTION_FAILURE
    kind = ErrorKind.SYSTEM

    def __init__(self, node_id: str, var: str, cause: object) -> None:
        self.node_id = node_id
        self.var = var
        self.cause = cause
        super().__init__(
            f"failed at Node[{node_id}]. {_BINDING_RESOLUTION}: Error binding Var [wf].[{var}], caused by: {cause}"
        )

    @property
    def error(self) -> ExecutionError:
        """The failed node's error, as a phase carries it."""
        return ExecutionError(code=self.code, message=self.message, kind=self.kind)


class _PlainError(Exception):
    """An error Go returns without a code (a regexp or msgpack failure); it prints as its text alone."""


ReadOutput = Callable[[str, str], literals_pb2.Literal]
LoadOffloaded = Callable[[literals_pb2.Literal], literals_pb2.Literal]


# -- whole input maps and single bindings ------------------------------------------------------------------


def resolve_inputs(
    bindings: Iterable[literals_pb2.Binding],
    read_output: ReadOutput,
    node_id: str,
    *,
    load_offloaded: LoadOffloaded | None = None,
) -> literals_pb2.LiteralMap:
    """``Resolve``: the node's input map, one literal per binding (keyed by the binding's var). The first
    binding that cannot be resolved raises :class:`BindingError`; inputs without a binding are simply absent
    (flytekit applies their defaults)."""
    resolved = literals_pb2.LiteralMap()
    for binding in bindings:
        literal = resolve_binding(
            binding.binding, read_output, node_id=node_id, var=binding.var, load_offloaded=load_offloaded
        )
        resolved.literals[binding.var].CopyFrom(literal)
    return resolved


def resolve_binding(
    binding_data: literals_pb2.BindingData,
    read_output: ReadOutput,
    *,
    node_id: str,
    var: str,
    load_offloaded: LoadOffloaded | None = None,
) -> literals_pb2.Literal:
    """``ResolveBindingData`` for input ``var`` of node ``node_id``.

    ``read_output(producer_node_id, output_var)`` returns an upstream output, normally through
    :func:`output_of`; a :class:`NodeError` it raises becomes the cause of the :class:`BindingError` (other
    exceptions pass through: the caller decides what a storage failure is). ``load_offloaded`` reads an
    offloaded literal met on an attribute path.
    """
    try:
        return _resolve(binding_data, read_output, load_offloaded)
    except (NodeError, _PlainError) as e:
        raise BindingError(node_id, var, e) from e


def _resolve(
    data: literals_pb2.BindingData, read_output: ReadOutput, load_offloaded: LoadOffloaded | None
) -> literals_pb2.Literal:
    which = data.WhichOneof("value")
    if which == "scalar":
        # A union scalar already carries its type and tag; the sibling ``union`` field is not consulted.
        return literals_pb2.Literal(scalar=data.scalar)
    if which == "collection":
        return literals_pb2.Literal(
            collection=literals_pb2.LiteralCollection(
                literals=[_resolve(b, read_output, load_offloaded) for b in data.collection.bindings]
            )
        )
    if which == "map":
        return literals_pb2.Literal(
            map=literals_pb2.LiteralMap(
                literals={k: _resolve(b, read_output, load_offloaded) for k, b in data.map.bindings.items()}
            )
        )
    if which == "promise":
        promise = data.promise
        if not promise.node_id:
            raise NodeError(
                _BAD_SPECIFICATION, "missing", "No nodeId (missing) specified for binding in Workflow."
            )
        literal = read_output(promise.node_id, promise.var)
        if promise.attr_path:
            literal = resolve_attr_path(
                literal, promise.attr_path, node_id=promise.node_id, load_offloaded=load_offloaded
            )
        return literal
    # Propeller has no case for an offloaded binding (or none at all): the input is an empty literal.
    return literals_pb2.Literal()


def undefined_node(node_id: str) -> NodeError:
    """The error a promise naming a node the workflow does not have gets (its text keeps Flyte's misplaced
    format argument), for a ``read_output`` that cannot find the producer."""
    return NodeError(_ILLEGAL_STATE, "id", f"{node_id}%!(EXTRA string=Undefined node in Workflow)")


# -- one output of an upstream node ------------------------------------------------------------------------


def parse_var_name(var: str) -> tuple[int | None, str]:
    """``ParseVarName``: ``o0`` → ``(None, "o0")``; ``[2].array`` → ``(2, "array")`` (a legacy array task's
    element). Anything else (``a-b``, ``x[1]``) is an error, as in Flyte."""
    matches = list(_VAR_NAME.finditer(var))
    if len(matches) != 1:
        raise _PlainError(f"unexpected number of matches [{len(matches)}]")
    index_text = matches[0].group("index")
    index: int | None = None
    if index_text is not None:
        index = int(index_text)
        if index > _INT64_MAX:
            raise _PlainError(f'strconv.Atoi: parsing "{index_text}": value out of range')
    return index, matches[0].group("var")


def output_of(
    outputs: literals_pb2.LiteralMap | None,
    outputs_file: str,
    node_id: str,
    var: str,
    aliases: Iterable[workflow_pb2.Alias] | Mapping[str, str] = (),
    *,
    read_error: str = "not found",
) -> literals_pb2.Literal:
    """Output ``var`` of node ``node_id`` from its ``outputs.pb`` (``outputs``; ``None`` when the file could not
    be read, ``read_error`` saying why), as ``remoteFileOutputResolver.ExtractOutput`` picks it: an alias
    (the node's ``output_aliases``, or a mapping alias → var) names the real output; ``[i].name`` picks
    element ``i`` of a collection output. The attribute path is applied by the caller
    (:func:`resolve_binding` does). Raises :class:`NodeError` with Flyte's texts."""
    index, name = parse_var_name(var)
    alias_to_var: dict[str, str]
    if isinstance(aliases, Mapping):
        alias_to_var = dict(aliases)
    else:
        alias_to_var = {a.alias: a.var for a in cast("Iterable[workflow_pb2.Alias]", aliases)}
    name = alias_to_var.get(name, name)
    if outputs is None:
        raise NodeError(
            _CAUSED_BY,
            node_id,
            f"Failed to GetPrevious data from outputDir [{outputs_file}]",
            cause=f"path:{outputs_file}: {read_error}",
        )
    if not outputs.literals:  # an empty map reads back as Go's nil map
        raise NodeError(_OUTPUTS_NOT_FOUND, node_id, f"Outputs not found at [{outputs_file}]")
    if name not in outputs.literals:
        if index is None:
            raise NodeError(_OUTPUTS_NOT_FOUND, node_id, f"Failed to find [{node_id}].[{name}]")
        raise NodeError(
            _BAD_SPECIFICATION,
            node_id,
            "Output of array tasks is expected to be a single literal map entry named 'array' of type "
            "LiteralCollection.",
        )
    literal = outputs.literals[name]
    if index is None:
        return literal
    if literal.WhichOneof("value") != "collection":
        raise NodeError(
            _BAD_SPECIFICATION,
            node_id,
            f"Output of array tasks of key 'array' is of type [{_go_literal_type(literal)}]. "
            "LiteralCollection is expected.",
        )
    if index >= len(literal.collection.literals):
        raise NodeError(_OUTPUTS_NOT_FOUND, node_id, f"Failed to find [{node_id}[{index}].{name}]")
    return literal.collection.literals[index]


def _go_literal_type(literal: literals_pb2.Literal) -> str:
    which: str | None = literal.WhichOneof("value")
    if which is None:
        return "<nil>"
    return "*core.Literal_" + {"offloaded_metadata": "OffloadedMetadata"}.get(which, which.capitalize())


# -- attribute paths ---------------------------------------------------------------------------------------


def resolve_attr_path(
    literal: literals_pb2.Literal,
    attr_path: Sequence[types_pb2.PromiseAttribute],
    *,
    node_id: str = "",
    load_offloaded: LoadOffloaded | None = None,
) -> literals_pb2.Literal:
    """``resolveAttrPathInPromise``: follow ``attr_path`` (``promise.a["b"][0]``) from an upstream output.

    Literal maps take the attribute's string, collections its int; the first scalar ends that walk and the
    rest of the path is applied inside it: a msgpack ``Binary`` (flytekit 1.16 dataclasses) or a protobuf
    ``Struct`` (older dataclasses); any other scalar comes back as is. Raises :class:`NodeError` (mostly
    ``PromiseAttributeResolveError``) naming ``node_id``, the producer.
    """
    current = literal
    walked = 0
    for attr in attr_path:
        if current.HasField("offloaded_metadata"):
            try:
                if load_offloaded is None:
                    raise LookupError("no reader for offloaded literals")
                current = load_offloaded(current)
            except Exception as e:
                raise NodeError(_ATTRIBUTE, node_id, "failed to read offloaded metadata for promise") from e
        which = current.WhichOneof("value")
        if which == "offloaded_metadata":
            raise NodeError(_ATTRIBUTE, node_id, "unexpected offloaded metadata type")
        if which == "map":
            key = attr.string_value
            if key not in current.map.literals:
                raise NodeError(
                    _ATTRIBUTE,
                    node_id,
                    f"key [{key}] does not exist in literal {_go_literal_map(current.map.literals)}",
                )
            current = current.map.literals[key]
            walked += 1
        elif which == "collection":
            items = current.collection.literals
            index = attr.int_value
            # Deviation: Flyte indexes Go's slice with a negative index and panics; here it is out of range.
            if index >= len(items) or index < 0:
                raise NodeError(
                    _ATTRIBUTE,
                    node_id,
                    f"index [{index}] is out of range of [{' '.join(_prototext(x) for x in items)}]",
                )
            current = items[index]
            walked += 1
    if current.WhichOneof("value") == "scalar":
        scalar = current.scalar
        if scalar.HasField("binary"):
            return _resolve_in_binary(node_id, scalar.binary, attr_path[walked:])
        if scalar.HasField("generic"):
            return _resolve_in_struct(node_id, scalar.generic, attr_path[walked:])
    return current


def _resolve_in_struct(
    node_id: str, struct: struct_pb2.Struct, path: Sequence[types_pb2.PromiseAttribute]
) -> literals_pb2.Literal:
    current: Any = _struct_to_python(struct)
    for attr in path:
        if isinstance(current, dict):
            key = attr.string_value
            if key not in current:
                raise NodeError(
                    _ATTRIBUTE, node_id, f"key [{key}] does not exist in literal {go_value(current)}"
                )
            current = current[key]
        elif isinstance(current, list):
            index = attr.int_value
            if index < 0 or index >= len(current):
                raise NodeError(
                    _ATTRIBUTE, node_id, f"index [{index}] is out of range of {go_value(current)}"
                )
            current = current[index]
        # Flyte ignores the rest of the path below a string, number or bool.
    return _struct_value_literal(current)


def _struct_to_python(struct: struct_pb2.Struct) -> dict[str, Any]:
    return {k: _struct_value_to_python(v) for k, v in struct.fields.items()}


def _struct_value_to_python(value: struct_pb2.Value) -> Any:
    kind = value.WhichOneof("kind")
    if kind == "struct_value":
        return _struct_to_python(value.struct_value)
    if kind == "list_value":
        return [_struct_value_to_python(v) for v in value.list_value.values]
    if kind == "number_value":
        return value.number_value
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    return None


def _struct_value_literal(value: Any) -> literals_pb2.Literal:
    # convertInterfaceToLiteral: Struct numbers are float64, so an int field comes back as a float (flyte#5959);
    # a null matches no case and leaves the literal empty.
    if isinstance(value, dict):
        generic = struct_pb2.Struct()
        generic.update(value)
        return literals_pb2.Literal(scalar=literals_pb2.Scalar(generic=generic))
    if isinstance(value, list):
        return literals_pb2.Literal(
            collection=literals_pb2.LiteralCollection(literals=[_struct_value_literal(v) for v in value])
        )
    if value is None:
        return literals_pb2.Literal()
    return _primitive_literal(value)


def _primitive_literal(value: str | bool | int | float) -> literals_pb2.Literal:
    if isinstance(value, bool):
        primitive = literals_pb2.Primitive(boolean=value)
    elif isinstance(value, int):
        primitive = literals_pb2.Primitive(integer=value)
    elif isinstance(value, float):
        primitive = literals_pb2.Primitive(float_value=value)
    else:
        primitive = literals_pb2.Primitive(string_value=value)
    return literals_pb2.Literal(scalar=literals_pb2.Scalar(primitive=primitive))


def _binary_literal(value: bytes, tag: str) -> literals_pb2.Literal:
    return literals_pb2.Literal(scalar=literals_pb2.Scalar(binary=literals_pb2.Binary(value=value, tag=tag)))


def _resolve_in_binary(
    node_id: str, binary: literals_pb2.Binary, path: Sequence[types_pb2.PromiseAttribute]
) -> literals_pb2.Literal:
    if binary.tag != MESSAGEPACK:
        raise NodeError(
            _ATTRIBUTE,
            node_id,
            f"Unsupported format '{binary.tag}' found for literal value.\n"
            "Please ensure the serialization format is supported.",
        )
    try:
        current: Any = msgpack.unpackb(binary.value, raw=False, strict_map_key=False)
    except Exception as e:  # msgpack raises several unrelated types for bad input
        raise _PlainError(f"msgpack: {e}") from e
    for attr in path:
        if isinstance(current, dict):
            if attr.WhichOneof("value") != "string_value":
                raise NodeError(
                    _ATTRIBUTE,
                    node_id,
                    f"unexpected attribute type [{_go_attr_type(attr)}] for value {_go_attr_value(attr)}",
                )
            if attr.string_value not in current:
                raise NodeError(
                    _ATTRIBUTE,
                    node_id,
                    f"key [{attr.string_value}] does not exist in literal {go_value(current)}",
                )
            current = current[attr.string_value]
        elif isinstance(current, list):
            if attr.WhichOneof("value") != "int_value":
                raise NodeError(
                    _ATTRIBUTE,
                    node_id,
                    f"unexpected attribute type [{_go_attr_type(attr)}] for value {_go_attr_value(attr)}",
                )
            index = attr.int_value
            if index < 0 or index >= len(current):
                raise NodeError(
                    _ATTRIBUTE, node_id, f"index [{index}] is out of range of {go_value(current)}"
                )
            current = current[index]
        else:
            raise NodeError(
                _ATTRIBUTE, node_id, f"unexpected type [{go_type(current)}] for value {go_value(current)}"
            )
    # A list leaf becomes a collection of msgpack values, one per element, so an ArrayNode can map over it.
    if isinstance(current, list):
        return literals_pb2.Literal(
            collection=literals_pb2.LiteralCollection(
                literals=[_binary_literal(_pack(v), binary.tag) for v in current]
            )
        )
    if isinstance(current, (str, bool, int, float)):
        if isinstance(current, int) and not isinstance(current, bool) and current > _INT64_MAX:
            # Only msgpack's uint64 holds such a value; Flyte refuses it (and does not wrap this code).
            raise NodeError(_INVALID_PRIMITIVE, node_id, "uint64 value is too large to be converted to int64")
        return _primitive_literal(current)
    # A map, nil, bytes or an extension value stays msgpack. Go re-encodes maps in random key order; the
    # order kept here is one of those.
    return _binary_literal(_pack(current), binary.tag)


def _pack(value: Any) -> bytes:
    packed: bytes = msgpack.packb(value, use_bin_type=True)
    return packed


def _go_attr_type(attr: types_pb2.PromiseAttribute) -> str:
    which = attr.WhichOneof("value")
    if which is None:
        return "<nil>"
    return "*core.PromiseAttribute_" + ("StringValue" if which == "string_value" else "IntValue")


def _go_attr_value(attr: types_pb2.PromiseAttribute) -> str:
    which = attr.WhichOneof("value")
    if which is None:
        return "<nil>"
    return "&{" + str(getattr(attr, which)) + "}"


# -- the failure node's ``err`` input ----------------------------------------------------------------------


def failure_node_error_literal(message: str, failed_node_id: str) -> literals_pb2.Literal:
    """``ResolveErrorInputLiteralData``: what a failure node's ``err`` input becomes, a union holding
    ``Error{message, failed_node_id}`` typed ``ERROR`` with tag ``FlyteError`` (flytekit reads it as a
    ``FlyteError``). Propeller passes the failure node's own id as ``failed_node_id``."""
    value = literals_pb2.Literal(
        scalar=literals_pb2.Scalar(error=types_pb2.Error(message=message, failed_node_id=failed_node_id))
    )
    error_type = types_pb2.LiteralType(
        simple=types_pb2.SimpleType.ERROR, structure=types_pb2.TypeStructure(tag="FlyteError")
    )
    return literals_pb2.Literal(
        scalar=literals_pb2.Scalar(union=literals_pb2.Union(value=value, type=error_type))
    )


# -- Go's %v, for error texts ------------------------------------------------------------------------------


def go_type(value: Any) -> str:
    """The Go type (``%T``) a msgpack value decodes to in propeller, assuming the smallest encoding (which
    every msgpack writer flytekit uses picks)."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        if value >= 0:
            for bits in (8, 16, 32):
                if value < 1 << bits:
                    return f"uint{bits}"
            return "uint64"
        for bits in (8, 16, 32):
            if value >= -(1 << (bits - 1)):
                return f"int{bits}"
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bytes):
        return "[]uint8"
    if isinstance(value, list):
        return "[]interface {}"
    if isinstance(value, dict):
        return "map[interface {}]interface {}"
    return type(value).__name__


def go_value(value: Any) -> str:
    """Go's ``%v`` of a decoded msgpack or Struct value: ``map[x:4 y:[4 5]]`` (keys sorted, as fmt does)."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_format_float(value)
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return "[" + " ".join(str(b) for b in value) + "]"
    if isinstance(value, list):
        return "[" + " ".join(go_value(v) for v in value) + "]"
    if isinstance(value, dict):
        keys = sorted(
            value, key=lambda k: (go_type(k), k if isinstance(k, (int, float, str, bytes)) else str(k))
        )
        return "map[" + " ".join(f"{go_value(k)}:{go_value(value[k])}" for k in keys) + "]"
    return str(value)


def _go_literal_map(literals: Mapping[str, literals_pb2.Literal]) -> str:
    return "map[" + " ".join(f"{k}:{_prototext(literals[k])}" for k in sorted(literals)) + "]"


def _prototext(message: Message) -> str:
    """A message's Go ``String()`` (compact protobuf text), without Go's random extra spaces."""
    parts: list[str] = []
    for field in message.DESCRIPTOR.fields:
        value = getattr(message, field.name)
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            for key in sorted(value):
                entry = f"key:{_prototext_scalar(field.message_type.fields_by_name['key'], key)}"
                entry += f" value:{_prototext_scalar(value_field, value[key])}"
                parts.append(f"{field.name}:{{{entry}}}")
        elif field.is_repeated:
            parts.extend(f"{field.name}:{_prototext_scalar(field, v)}" for v in value)
        elif field.message_type is not None or field.containing_oneof is not None or field.has_presence:
            if message.HasField(field.name):
                parts.append(f"{field.name}:{_prototext_scalar(field, value)}")
        elif value != field.default_value:
            parts.append(f"{field.name}:{_prototext_scalar(field, value)}")
    return " ".join(parts)


def _prototext_scalar(field: FieldDescriptor, value: Any) -> str:
    if field.message_type is not None:
        return "{" + _prototext(value) + "}"
    if field.enum_type is not None:
        named = field.enum_type.values_by_number.get(value)
        return named.name if named is not None else str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return go_format_float(value)
    if isinstance(value, str):
        return _quote(value.encode())
    if isinstance(value, bytes):
        return _quote(value)
    return str(value)


_ESCAPES: Final = {ord('"'): '\\"', ord("\\"): "\\\\", ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t"}


def _quote(data: bytes) -> str:
    text = data.decode("utf-8", errors="backslashreplace")
    out = []
    for ch in text:
        code = ord(ch)
        if code in _ESCAPES:
            out.append(_ESCAPES[code])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'
