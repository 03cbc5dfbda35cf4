"""Command-line templating: ``{{.Inputs.x}}``, ``{{.OutputPrefix}}`` and friends in container args.

Follows flyteplugins/go/tasks/pluginmachinery/core/template/template.go: placeholders are
case-insensitive, take ``.`` or ``$`` before the name and allow spaces inside the braces; the namespace is
replaced after the paths, so it also expands inside them, and before the inputs, whose values stay verbatim.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC
from decimal import Decimal
from typing import Any

from flyteidl.core import literals_pb2

from taskplug.core._context import InputReader, OutputPaths, TaskExecutionMetadata, TaskReader
from taskplug.core._errors import ErrorCode, PluginError

__all__ = ["TemplateParameters", "format_literal", "per_retry_unique_key", "render_command"]


def _placeholder(name: str) -> re.Pattern[str]:
    return re.compile(r"(?i){{\s*[.$]" + name + r"\s*}}")


_INPUT_FILE = _placeholder("Input")
_INPUT_PREFIX = _placeholder("InputPrefix")
_OUTPUT_PREFIX = _placeholder("OutputPrefix")
_RAW_OUTPUT_PREFIX = _placeholder("RawOutputDataPrefix")
_PREV_CHECKPOINT = _placeholder("PrevCheckpointPrefix")
_CHECKPOINT = _placeholder("CheckpointOutputPrefix")
_PER_RETRY_KEY = _placeholder("PerRetryUniqueKey")
_TASK_TEMPLATE_PATH = _placeholder("TaskTemplatePath")
_NAMESPACE = _placeholder("Namespace")
_INPUT_VAR = re.compile(r"(?i){{\s*[.$]Inputs\.(?P<name>[^}\s]+)\s*}}")

_LEADING_NON_ALPHA = re.compile(r"^[^a-zA-Z_]+")
_NON_ALPHANUMERIC = re.compile(r"[^a-zA-Z0-9_]+")


@dataclass(frozen=True, slots=True)
class TemplateParameters:
    """What :func:`render_command` substitutes into a command line (Flyte's ``template.Parameters``): the
    execution's metadata, its inputs and output paths, optionally the task (for ``{{.TaskTemplatePath}}``)
    and whether to expand the console URL."""

    metadata: TaskExecutionMetadata
    inputs: InputReader | None
    output_paths: OutputPaths | None
    task: TaskReader | None = None
    include_console_url: bool = False


def per_retry_unique_key(generated_name: str) -> str:
    """A key unique per attempt that is a valid identifier (``per-retry-unique-key`` → ``per_retry_unique_key``)."""
    return _NON_ALPHANUMERIC.sub("_", _LEADING_NON_ALPHA.sub("a", generated_name))


_PathValue = Callable[[InputReader, OutputPaths, TemplateParameters, Callable[[], str]], str | None]

# The path placeholders in Go's order, each with its lowercased name (what a match needs) and what it stands
# for, computed only for a match; None leaves it as written (``{{.TaskTemplatePath}}`` without a task). The
# namespace goes last among the paths (it may be embedded in them) but before the inputs, as in Go: an
# input's value is the user's data and is never rewritten.
_PATHS: tuple[tuple[str, re.Pattern[str], _PathValue], ...] = (
    ("input", _INPUT_FILE, lambda inputs, out, params, key: inputs.input_path),
    ("outputprefix", _OUTPUT_PREFIX, lambda inputs, out, params, key: out.output_prefix),
    ("inputprefix", _INPUT_PREFIX, lambda inputs, out, params, key: inputs.input_prefix),
    ("rawoutputdataprefix", _RAW_OUTPUT_PREFIX, lambda inputs, out, params, key: out.raw_output_prefix),
    (
        "prevcheckpointprefix",
        _PREV_CHECKPOINT,
        lambda inputs, out, params, key: out.prev_checkpoint_prefix or '""',
    ),
    ("checkpointoutputprefix", _CHECKPOINT, lambda inputs, out, params, key: out.checkpoint_prefix),
    ("perretryuniquekey", _PER_RETRY_KEY, lambda inputs, out, params, key: key()),
    (
        "tasktemplatepath",
        _TASK_TEMPLATE_PATH,
        lambda inputs, out, params, key: params.task.path if params.task is not None else None,
    ),
    ("namespace", _NAMESPACE, lambda inputs, out, params, key: params.metadata.namespace),
)


def render_command(args: Sequence[str], params: TemplateParameters) -> list[str]:
    """Render every string of a command or args list; raises PluginError on a missing input."""
    if not args:
        return []
    if params.inputs is None or params.output_paths is None:
        raise PluginError(ErrorCode.BAD_TASK_SPECIFICATION, "input reader and output path cannot be nil")
    rendered: list[str] = []
    keys: list[str] = []  # the per-retry key, made when a placeholder asks for it: most commands have none

    def retry_key() -> str:
        if not keys:
            keys.append(per_retry_unique_key(params.metadata.task_execution_id.generated_name))
        return keys[0]

    for arg in args:
        rendered.append(_render_one(arg, params, retry_key) if "{{" in arg else arg)
    return rendered


def _folded(text: str) -> str | None:
    """``text`` lowercased, to tell cheaply which placeholders it cannot hold; None when it is not ASCII (the
    patterns' case-insensitive matching then folds more than ``str.lower`` does, e.g. ``ſ`` as ``s``)."""
    return text.lower() if text.isascii() else None


def _render_one(text: str, params: TemplateParameters, per_retry_key: Callable[[], str]) -> str:
    if "{{" not in text:
        return text
    inputs, out = params.inputs, params.output_paths
    assert inputs is not None
    assert out is not None
    # In Go's order: each value is substituted into the text the previous ones left. A placeholder is
    # looked for only when its lowercased name is in the (ASCII) text at all: a match needs it.
    val, low = text, _folded(text)
    for needle, pattern, value in _PATHS:
        if low is None or needle in low:

            def replace(match: re.Match[str], value: _PathValue = value) -> str:
                found = value(inputs, out, params, per_retry_key)
                return match.group(0) if found is None else found

            val = pattern.sub(replace, val)
            low = _folded(val)
    if (low is None or "inputs." in low) and _INPUT_VAR.search(val):
        literals = inputs.get()
        if literals is not None and literals.literals:
            val = _INPUT_VAR.sub(lambda m: _input_value(m.group("name"), literals, text), val)
    return val


def _input_value(name: str, literals: literals_pb2.LiteralMap, template: str) -> str:
    if name not in literals.literals:
        raise PluginError(
            ErrorCode.BAD_TASK_SPECIFICATION,
            f"requested input is not found [{name}] while processing template [{template}]",
        )
    return format_literal(literals.literals[name])


def format_literal(literal: literals_pb2.Literal) -> str:
    """Serialise a literal as Flyte does for command lines (Go ``%v`` for numbers)."""
    which = literal.WhichOneof("value")
    if which == "scalar":
        scalar = literal.scalar
        kind = scalar.WhichOneof("value")
        if kind == "primitive":
            p = scalar.primitive
            pk = p.WhichOneof("value")
            if pk == "integer":
                return str(p.integer)
            if pk == "float_value":
                return go_format_float(p.float_value)
            if pk == "string_value":
                return str(p.string_value)
            if pk == "boolean":
                return "true" if p.boolean else "false"
            if pk == "datetime":
                return _rfc3339_nano(p.datetime.seconds, p.datetime.nanos)
            raise PluginError(ErrorCode.BAD_TASK_SPECIFICATION, f"unsupported primitive type [{pk}]")
        if kind == "blob":
            return str(scalar.blob.uri)
        if kind == "schema":
            return str(scalar.schema.uri)
        if kind == "binary":
            return _format_binary(scalar.binary)
        raise PluginError(ErrorCode.BAD_TASK_SPECIFICATION, f"unsupported scalar type [{kind}]")
    if which == "collection":
        return "[" + ",".join(format_literal(v) for v in literal.collection.literals) + "]"
    raise PluginError(ErrorCode.BAD_TASK_SPECIFICATION, f"unsupported literal type [{which}]")


def _rfc3339_nano(seconds: int, nanos: int) -> str:
    from datetime import datetime

    base = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    if nanos:
        base += "." + f"{nanos:09d}".rstrip("0")
    return base + "Z"


def go_format_float(value: float) -> str:
    """Go's ``%v`` for a float64 (strconv ``'g'`` with shortest digits): ``3``, ``0.5``, ``1e+06``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign = "-" if value < 0 else ""
    dec = Decimal(repr(abs(value)))
    digits_tuple = dec.normalize().as_tuple()
    digits = "".join(map(str, digits_tuple.digits))
    exponent = int(digits_tuple.exponent)
    point = len(digits) + exponent  # position of the decimal point in the digit string
    exp10 = point - 1
    # strconv.FormatFloat(f, 'g', -1, 64): exponent form when exp < -4 or exp >= 6 (shortest uses 6).
    if exp10 < -4 or exp10 >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mantissa}e{'-' if exp10 < 0 else '+'}{abs(exp10):02d}"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return f"{sign}{digits}{'0' * (point - len(digits))}"
    return f"{sign}{digits[:point]}.{digits[point:]}"


def _format_binary(binary: literals_pb2.Binary) -> str:
    if binary.tag != "msgpack":
        raise PluginError(ErrorCode.BAD_TASK_SPECIFICATION, f"unsupported binary tag [{binary.tag}]")
    try:
        import msgpack  # type: ignore[import-untyped]
    except ImportError as e:  # pragma: no cover - msgpack ships with flytekit
        raise PluginError(ErrorCode.BAD_TASK_SPECIFICATION, "msgpack inputs need the msgpack package") from e
    return _go_v(msgpack.unpackb(binary.value, raw=False))


def _go_v(value: Any) -> str:
    """Go's ``%v`` for values decoded from msgpack."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return go_format_float(value)
    if isinstance(value, list | tuple):
        return "[" + " ".join(_go_v(v) for v in value) + "]"
    if isinstance(value, dict):
        return (
            "map["
            + " ".join(f"{_go_v(k)}:{_go_v(v)}" for k, v in sorted(value.items(), key=lambda kv: str(kv[0])))
            + "]"
        )
    if value is None:
        return "<nil>"
    return str(value)
