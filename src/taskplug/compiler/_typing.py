"""Types in the compiler: whether an upstream type casts to a downstream one, the type of a bound literal,
and the text Flyte prints for types, identifiers and bindings in its compile errors.

Castability is flytepropeller's ``AreTypesCastable`` (``compiler/validators/typing.go``); taskplug's core
already has it for launch-time input checks, so the compiler uses that one. A binding's scalar has the type
``literalTypeForScalar`` gives it (``validators/utils.go``). Flyte prints messages with Go's protobuf text
form (``String()``) and, for types, ``common/pretty_print.go LiteralTypeToStr``; :func:`go_text` writes
that text form without the random extra spaces Go inserts (``simple:INTEGER``,
``collection_type:{simple:STRING}``), so compare messages with Flyte's whitespace-insensitively.
"""

from __future__ import annotations

from flyteidl.core import literals_pb2, types_pb2
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from taskplug.core import are_types_castable, go_format_float, literal_type_for_literal

__all__ = [
    "are_types_castable",
    "go_text",
    "is_optional_type",
    "literal_type_for_scalar",
    "literal_type_to_str",
]

_NONE = types_pb2.SimpleType.NONE


def literal_type_for_scalar(scalar: literals_pb2.Scalar) -> types_pb2.LiteralType | None:
    """The type of a scalar bound to an input (``literalTypeForScalar``); None when Flyte cannot tell (a blob
    without metadata, an empty scalar)."""
    return literal_type_for_literal(literals_pb2.Literal(scalar=scalar))


def is_optional_type(variable_type: types_pb2.LiteralType) -> bool:
    """Whether an input may be left unbound (``IsOptionalType``): a union with a NONE variant.

    As in Flyte, a variant that is not a simple type reads as NONE too (Go's ``GetSimple()`` of a collection
    is the zero value), so ``Union[List[int], str]`` may also be left unbound.
    """
    if variable_type.WhichOneof("type") != "union_type":
        return False
    return any(v.simple == _NONE for v in variable_type.union_type.variants)


def literal_type_to_str(literal_type: types_pb2.LiteralType | None) -> str:
    """``LiteralTypeToStr``: Go's text form, except a STRUCT, which shows its dataclass fields only (sorted by
    name here; Go walks a map)."""
    if literal_type is None:
        return "None"
    if literal_type.WhichOneof("type") == "simple" and literal_type.simple == types_pb2.SimpleType.STRUCT:
        fields = literal_type.structure.dataclass_type
        parts = [
            f"dataclass_type:{{key:{k} value:{{{literal_type_to_str(fields[k])}}}" for k in sorted(fields)
        ]
        return f"simple: STRUCT structure{{{', '.join(parts)}}}"
    return go_text(literal_type)


def go_text(message: Message | None) -> str:
    """Go's compact protobuf text form of ``message`` (``proto.Message.String()``); ``<nil>`` for None."""
    if message is None:
        return "<nil>"
    return " ".join(_fields(message))


def _fields(message: Message) -> list[str]:
    out: list[str] = []
    descriptor = message.DESCRIPTOR
    for field in descriptor.fields:
        name = field.name
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            entries = getattr(message, name)
            value_field = field.message_type.fields_by_name["value"]
            for key in sorted(entries):
                out.append(
                    f"{name}:{{key:{_scalar(field.message_type.fields_by_name['key'], key)} "
                    f"value:{_value(value_field, entries[key])}}}"
                )
            continue
        if _is_repeated(field):
            out.extend(f"{name}:{_value(field, item)}" for item in getattr(message, name))
            continue
        if field.containing_oneof is not None:
            if message.WhichOneof(field.containing_oneof.name) != name:
                continue
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            if not message.HasField(name):
                continue
        elif getattr(message, name) == field.default_value:
            continue
        out.append(f"{name}:{_value(field, getattr(message, name))}")
    return out


def _is_repeated(field: FieldDescriptor) -> bool:
    # ``label`` is deprecated in newer protobuf releases; ``is_repeated`` is not in older ones.
    repeated = getattr(field, "is_repeated", None)
    if repeated is not None:
        return bool(repeated)
    return bool(field.label == FieldDescriptor.LABEL_REPEATED)


def _value(field: FieldDescriptor, value: object) -> str:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        assert isinstance(value, Message)
        return "{" + " ".join(_fields(value)) + "}"
    return _scalar(field, value)


def _scalar(field: FieldDescriptor, value: object) -> str:
    if field.type == FieldDescriptor.TYPE_ENUM:
        assert isinstance(value, int)
        number = field.enum_type.values_by_number.get(value)
        return number.name if number is not None else str(value)
    if field.type == FieldDescriptor.TYPE_BOOL:
        return "true" if value else "false"
    if field.type == FieldDescriptor.TYPE_STRING:
        assert isinstance(value, str)
        return _quote(value.encode())
    if field.type == FieldDescriptor.TYPE_BYTES:
        assert isinstance(value, bytes)
        return _quote(value)
    if field.type in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        assert isinstance(value, float)
        return go_format_float(value)
    return str(value)


def _quote(raw: bytes) -> str:
    """A Go text-form string: printable UTF-8 as is, quotes and backslashes escaped, the rest as ``\\xHH``."""
    text = raw.decode("utf-8", errors="surrogateescape")
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif 0xDC80 <= code <= 0xDCFF:
            out.append(f"\\x{code - 0xDC00:02x}")
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)
