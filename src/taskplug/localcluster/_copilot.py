"""flyte-copilot's contract, which the process kubelet runs for the co-pilot containers of raw-container tasks.

Follows flytecopilot at Flyte's reference commit: ``cmd/root.go`` (flags, the error document),
``cmd/download.go``, ``cmd/sidecar.go``, ``cmd/containerwatcher/`` (the signal watcher), ``data/download.go``,
``data/upload.go``, ``data/utils.go``, and ``flyteidl/clients/go/coreutils/literals.go``
(``MakeLiteralForSimpleType``, ``MakeLiteralForBlob``). Run as ``python -m taskplug.localcluster._copilot
<flyte-copilot's arguments>``.

``download`` (the ``downloader`` init container) reads the inputs LiteralMap at ``--from-remote`` and lays it
out in ``--to-local-dir``: a primitive becomes a file named by its variable holding its text (``42``,
``true``, ``1.5``, RFC 3339 times, Go durations such as ``1h2m3s``, ``null`` for none), a blob is downloaded
to that path (a multipart blob as a folder), a list is a folder of ``0``, ``1``, …, a map a folder by key;
``inputs.pb`` holds the LiteralMap with blob URIs replaced by their local paths, and with ``--format JSON``
(YAML) ``inputs.json`` (``inputs.yaml``) holds the values as Go's ``encoding/json`` writes them (sorted keys,
``<>&`` escaped, floats in Go's shortest form, bytes in base64; a duration is ``null`` there, as Flyte's
``handlePrimitive`` loses it to a shadowed variable).

``sidecar`` (the ``uploader`` native sidecar) waits for the signal watcher's SIGTERM — the kubelet sends it
when the pod's regular containers have exited — then reads what the primary wrote into
``--from-local-dir`` by the ``--interface``'s outputs: a simple type from the file named by its variable (or
the one file ``<variable>.*``; at most 1024 bytes, trimmed of spaces, newlines and tabs, parsed as Go parses
it), a blob uploaded to ``--to-raw-output``/``<variable>`` (a folder as a multipart blob, its files
flattened by name), and writes ``outputs.pb`` (``--meta-output-name``) under ``--to-output-prefix``. A
``_ERROR`` file in the folder is the user's error. Other output types are refused, as Flyte refuses them.

Failures are handled as flyte-copilot handles them: the command writes an ``ErrorDocument`` (code
``InputDownloadFailed`` / ``OutputUploadFailed``, kind ``RECOVERABLE``) to ``--err-output-name``
(``errors.pb``) under ``--to-output-prefix`` and exits 0; it exits 1 only when that document cannot be
written, or on a bad flag or a missing ``--to-output-prefix``. Flyte's output reader looks for ``error.pb``,
so a raw-container task whose uploader failed ends ``OutputsNotFound`` there and here alike.

Deviation: the process kubelet runs this module for any container whose executable (``command[0]``, or
``args[0]`` without a command) is named ``flyte-copilot`` — whatever its image, the configured co-pilot image
or another — since the host has no ``/bin/flyte-copilot``; the data store is the executor's, any local path or
fsspec URL, so the ``--storage.*`` flags are accepted and ignored. The folders it is given are the host
folders the process kubelet maps the volumes' mount paths to, so a downloaded blob's path in ``inputs.pb`` /
``inputs.json`` is a host path (one the task's process can open), not under the container's mount path.
``inputs.yaml`` is PyYAML's rendering of the JSON document (ghodss/yaml's layout is not copied byte for byte).
Logs are plain lines (flytestdlib writes JSON), info lines only at ``--logger.level`` 4 or more, as
flytestdlib filters them. ``sidecar --timeout`` defaults to 1h, as its help says (pflag leaves Go's at 0, the
deprecated ``--start-timeout`` sharing its variable); Flyte always passes it.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import glob
import json
import math
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, Final, NoReturn, TypeVar

import fsspec
import yaml
from flyteidl.core import errors_pb2, interface_pb2, literals_pb2, tasks_pb2, types_pb2
from google.protobuf import json_format, struct_pb2, text_format
from google.protobuf.message import DecodeError

__all__ = [
    "CopilotError",
    "download_inputs",
    "go_duration_string",
    "go_json",
    "literal_for_simple_type",
    "main",
    "parse_go_duration_ns",
    "upload_outputs",
]

ERROR_FILE: Final = "_ERROR"  # cmd/sidecar.go ErrorFile: the user's error, left next to the outputs
MAX_PRIMITIVE_SIZE: Final = 1024
MAX_ERROR_FILE_SIZE: Final = 1024 * 1024
DEFAULT_TIMEOUT_NS: Final = 3600 * 10**9
DEFAULT_LOGGER_LEVEL: Final = 3  # flytestdlib's default, WarnLevel
_INFO_LEVEL: Final = 4
_MIN_TIMESTAMP: Final = -62135596800  # 0001-01-01T00:00:00Z
_MAX_TIMESTAMP: Final = 253402300800  # 10000-01-01T00:00:00Z
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MAX_INT64: Final = 2**63 - 1

_FORMATS: Final = tuple(tasks_pb2.DataLoadingConfig.LiteralMapFormat.keys())
_DOWNLOAD_MODES: Final = tuple(tasks_pb2.IOStrategy.DownloadMode.keys())
_UPLOAD_MODES: Final = tuple(tasks_pb2.IOStrategy.UploadMode.keys())
_WATCHERS: Final = ("signal", "noop")

_T = TypeVar("_T")


class CopilotError(Exception):
    """A failure flyte-copilot reports in its error document (Go's wrapped ``error``)."""

    def wrap(self, context: str) -> CopilotError:
        """``errors.Wrap``: ``context: cause``."""
        return CopilotError(f"{context}: {self}")


class _Log:
    def __init__(self, level: int) -> None:
        self.level = level

    def info(self, message: str) -> None:
        if self.level >= _INFO_LEVEL:
            print(message, file=sys.stderr, flush=True)

    def error(self, message: str) -> None:
        print(f"error: {message}", file=sys.stderr, flush=True)


# -- the data store ----------------------------------------------------------------------------------------


class _Store:
    """flytestdlib's DataStore over fsspec: a reference is a local path or any URL fsspec knows."""

    @staticmethod
    def _fs(ref: str) -> tuple[Any, str]:
        fs, path = fsspec.core.url_to_fs(ref)
        return fs, str(path)

    @staticmethod
    def join(prefix: str, *keys: str) -> str:
        """``ConstructReference``: the keys under ``prefix``."""
        return "/".join([prefix.rstrip("/"), *(k.strip("/") for k in keys)])

    def read(self, ref: str) -> bytes:
        fs, path = self._fs(ref)
        with fs.open(path, "rb") as fh:
            data: bytes = fh.read()
        return data

    def write(self, ref: str, data: bytes) -> None:
        fs, path = self._fs(ref)
        parent = path.rsplit("/", 1)[0]
        if parent:
            fs.makedirs(parent, exist_ok=True)
        with fs.open(path, "wb") as fh:
            fh.write(data)

    def exists(self, ref: str) -> bool:
        fs, path = self._fs(ref)
        return bool(fs.isfile(path))

    def download(self, ref: str, local: str) -> None:
        fs, path = self._fs(ref)
        fs.get_file(path, local)

    def upload(self, local: str, ref: str) -> None:
        fs, path = self._fs(ref)
        parent = path.rsplit("/", 1)[0]
        if parent:
            fs.makedirs(parent, exist_ok=True)
        fs.put_file(local, path)

    def list_files(self, ref: str) -> list[tuple[str, str]]:
        """Every object under ``ref`` (recursively) as ``(its reference, its path relative to ref)``."""
        fs, base = self._fs(ref)
        base = base.rstrip("/")
        found = []
        for item in sorted(fs.find(base)):
            relative = str(item)[len(base) :].lstrip("/")
            if relative:
                found.append((fs.unstrip_protocol(item) if "://" in ref else str(item), relative))
        return found


def _write_local(path: str, data: bytes) -> None:
    # os.WriteFile(path, data, os.ModePerm): 0777 less the umask.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o777)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def _error_document(code: str, message: str) -> errors_pb2.ErrorDocument:
    return errors_pb2.ErrorDocument(
        error=errors_pb2.ContainerError(
            code=code, message=message, kind=errors_pb2.ContainerError.Kind.RECOVERABLE
        )
    )


def _within(timeout_ns: int, work: Callable[[], _T]) -> _T:
    """Run ``work`` under Go's context deadline: past ``timeout_ns``, fail (the work is abandoned)."""
    if timeout_ns <= 0:
        return work()
    result: list[_T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            result.append(work())
        except BaseException as err:  # handed to the caller's thread
            failure.append(err)

    thread = threading.Thread(target=run, name="copilot-work", daemon=True)
    thread.start()
    thread.join(timeout_ns / 1e9)
    if thread.is_alive():
        raise CopilotError("context deadline exceeded")
    if failure:
        raise failure[0]
    return result[0]


# -- Go's text forms ----------------------------------------------------------------------------------------


def _go_float(value: float) -> str:
    """``encoding/json``'s float64: shortest digits, ``'f'`` form unless below 1e-6 or from 1e21 on."""
    if math.isnan(value) or math.isinf(value):
        raise CopilotError(f"json: unsupported value: {_go_format_float(value)}")
    magnitude = abs(value)
    if magnitude != 0 and (magnitude < 1e-6 or magnitude >= 1e21):
        text = repr(value)  # Python's repr is the shortest form, in 'e' notation in this range
        mantissa, _, exponent = text.partition("e")
        sign = exponent[0] if exponent[:1] in "+-" else "+"
        digits = exponent.lstrip("+-").lstrip("0") or "0"
        if sign == "+" and len(digits) < 2:
            digits = digits.rjust(2, "0")
        return f"{mantissa}e{sign}{digits}"
    return _go_format_float(value)


def _go_format_float(value: float) -> str:
    """``strconv.FormatFloat(v, 'f', -1, 64)``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    text = format(Decimal(repr(value)), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


_HTML_ESCAPES: Final = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}
_HTML_RE: Final = re.compile("[<>&\u2028\u2029]")


def _go_string(value: str) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return _HTML_RE.sub(lambda m: _HTML_ESCAPES[m.group(0)], text)


def go_json(value: Any) -> str:
    """``json.Marshal`` of the Go values copilot collects (maps with sorted keys, slices, strings, bools,
    int64, float64, ``[]byte`` in base64, nil)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _go_float(value)
    if isinstance(value, str):
        return _go_string(value)
    if isinstance(value, bytes):
        return _go_string(base64.b64encode(value).decode())
    if isinstance(value, list):
        return "[" + ",".join(go_json(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{_go_string(k)}:{go_json(value[k])}" for k in sorted(value)) + "}"
    raise TypeError(f"no Go JSON form for {type(value).__name__}")


def _rfc3339_nano(seconds: int, nanos: int) -> str:
    """``time.Time.Format(time.RFC3339Nano)`` of a UTC time (what ``ptypes.Timestamp`` gives)."""
    if not _MIN_TIMESTAMP <= seconds < _MAX_TIMESTAMP or not 0 <= nanos < 10**9:
        raise CopilotError(f"timestamp: seconds:{seconds} nanos:{nanos} is out of the range 0001-9999")
    moment = _EPOCH + timedelta(seconds=seconds)
    fraction = f".{nanos:09d}".rstrip("0") if nanos else ""
    return (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T"
        f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}{fraction}Z"
    )


def _fraction(value: int, unit: int) -> str:
    whole, rest = divmod(value, unit)
    if not rest:
        return str(whole)
    return f"{whole}." + f"{rest:0{len(str(unit)) - 1}d}".rstrip("0")


def go_duration_string(nanoseconds: int) -> str:
    """Go's ``time.Duration.String()``, exactly: ``0s``, ``1.5µs``, ``300ms``, ``1h0m0s``, ``-2m3.5s``."""
    if nanoseconds == 0:
        return "0s"
    sign = "-" if nanoseconds < 0 else ""
    u = abs(nanoseconds)
    if u < 1000:
        return f"{sign}{u}ns"
    if u < 1_000_000:
        return f"{sign}{_fraction(u, 1000)}µs"
    if u < 1_000_000_000:
        return f"{sign}{_fraction(u, 1_000_000)}ms"
    seconds = _fraction(u % 60_000_000_000, 1_000_000_000) + "s"
    minutes = u // 60_000_000_000
    if minutes:
        seconds = f"{minutes % 60}m{seconds}"
        if minutes // 60:
            seconds = f"{minutes // 60}h{seconds}"
    return sign + seconds


_UNITS_NS: Final = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "μs": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_DURATION_PART: Final = re.compile(r"([0-9]*)(?:\.([0-9]*))?([^0-9.]*)")


def parse_go_duration_ns(text: str) -> int:
    """Go's ``time.ParseDuration``, to nanoseconds: ``300ms``, ``-1.5h``, ``2h45m``, ``0``."""
    original, rest = text, text
    invalid = CopilotError(f'time: invalid duration "{original}"')
    negative = rest[:1] == "-"
    if rest[:1] in "+-" and rest:
        rest = rest[1:]
    if rest == "0":
        return 0
    if not rest:
        raise invalid
    total = 0
    while rest:
        match = _DURATION_PART.match(rest)
        if match is None:  # pragma: no cover - the pattern matches any text
            raise invalid
        whole, frac, unit_text = match.group(1), match.group(2), match.group(3)
        if not whole and not frac:
            raise invalid
        if not unit_text:
            raise CopilotError(f'time: missing unit in duration "{original}"')
        unit_name = unit_text
        unit = _UNITS_NS.get(unit_name)
        if unit is None:
            raise CopilotError(f'time: unknown unit "{unit_name}" in duration "{original}"')
        value = int(whole or "0") * unit
        if frac:
            value += int(float(int(frac)) * (unit / 10 ** len(frac)))
        total += value
        if total > _MAX_INT64 + (1 if negative else 0):
            raise invalid
        rest = rest[len(whole) + (len(frac) + 1 if frac is not None else 0) + len(unit_name) :]
    return -total if negative else total


_RFC3339_RE: Final = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:[.,](\d+))?(Z|[+-]\d{2}:\d{2})"
)


def _parse_rfc3339(text: str) -> tuple[int, int]:
    """``time.Parse(time.RFC3339, s)`` then ``ptypes.TimestampProto``: (seconds, nanos) since the epoch."""
    failure = CopilotError(
        f'failed to parse Datetime in RFC3339 format: parsing time "{text}" as "2006-01-02T15:04:05Z07:00": '
        "cannot parse"
    )
    match = _RFC3339_RE.fullmatch(text)
    if match is None:
        raise failure
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    nanos = int((match.group(7) or "0")[:9].ljust(9, "0"))
    zone = match.group(8)
    offset = 0
    if zone != "Z":
        hours, minutes = int(zone[1:3]), int(zone[4:6])
        if hours >= 24 or minutes >= 60:
            raise failure
        offset = (hours * 60 + minutes) * (1 if zone[0] == "+" else -1)
    try:
        local = datetime(max(year, 1), month, day, hour, minute, second, tzinfo=UTC)
    except ValueError as err:
        raise failure from err
    seconds = int((local - _EPOCH).total_seconds()) - offset * 60
    if year == 0 or not _MIN_TIMESTAMP <= seconds < _MAX_TIMESTAMP:
        raise CopilotError(f"failed to convert datetime to proto: timestamp out of range for {text}")
    return seconds, nanos


_GO_BOOLS: Final = {
    **dict.fromkeys(("1", "t", "T", "TRUE", "true", "True"), True),
    **dict.fromkeys(("0", "f", "F", "FALSE", "false", "False"), False),
}
_DECIMAL_FLOAT_RE: Final = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_HEX_FLOAT_RE: Final = re.compile(r"[+-]?0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+")
_SPECIAL_FLOAT_RE: Final = re.compile(r"[+-]?(?:inf|infinity)|nan", re.IGNORECASE)


def _parse_go_int(text: str) -> int:
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        raise CopilotError(
            f'failed to parse integer value: strconv.ParseInt: parsing "{text}": invalid syntax'
        )
    value = int(text)
    if not -(2**63) <= value <= _MAX_INT64:
        raise CopilotError(
            f'failed to parse integer value: strconv.ParseInt: parsing "{text}": value out of range'
        )
    return value


def _parse_go_float(text: str) -> float:
    if _SPECIAL_FLOAT_RE.fullmatch(text):
        return float(text)
    if _DECIMAL_FLOAT_RE.fullmatch(text):
        value = float(text)
    elif _HEX_FLOAT_RE.fullmatch(text):
        sign = -1.0 if text.startswith("-") else 1.0
        try:
            value = sign * float.fromhex(text.lstrip("+-"))
        except OverflowError:
            value = sign * math.inf
    else:
        raise CopilotError(
            f'failed to parse Float value: strconv.ParseFloat: parsing "{text}": invalid syntax'
        )
    if math.isinf(value):
        raise CopilotError(
            f'failed to parse Float value: strconv.ParseFloat: parsing "{text}": value out of range'
        )
    return value


def literal_for_simple_type(simple: int, raw: bytes) -> literals_pb2.Literal:
    """``coreutils.MakeLiteralForSimpleType``: the literal a file's text gives for a simple type."""
    raw = raw.strip(b" \n\t")
    literal = literals_pb2.Literal()
    scalar = literal.scalar
    if simple == types_pb2.BINARY:
        scalar.binary.value = raw
        scalar.binary.tag = "msgpack"
        return literal
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise CopilotError("string field contains invalid UTF-8") from err
    if simple == types_pb2.STRUCT:
        try:
            json_format.Parse(text, scalar.generic, ignore_unknown_fields=True)
        except json_format.ParseError as err:
            raise CopilotError(f"failed to load generic type as json.: {err}") from err
    elif simple == types_pb2.ERROR:
        scalar.error.message = text
    elif simple == types_pb2.NONE:
        scalar.none_type.SetInParent()
    elif simple == types_pb2.INTEGER:
        scalar.primitive.integer = _parse_go_int(text)
    elif simple == types_pb2.FLOAT:
        scalar.primitive.float_value = _parse_go_float(text)
    elif simple == types_pb2.BOOLEAN:
        if text not in _GO_BOOLS:
            raise CopilotError(
                f'failed to parse Bool value: strconv.ParseBool: parsing "{text}": invalid syntax'
            )
        scalar.primitive.boolean = _GO_BOOLS[text]
    elif simple == types_pb2.STRING:
        scalar.primitive.string_value = text
    elif simple == types_pb2.DURATION:
        try:
            nanoseconds = parse_go_duration_ns(text)
        except CopilotError as err:
            raise err.wrap("failed to parse Duration, valid formats: e.g. 300ms, -1.5h, 2h45m") from err
        seconds, nanos = divmod(abs(nanoseconds), 10**9)
        sign = -1 if nanoseconds < 0 else 1
        scalar.primitive.duration.seconds, scalar.primitive.duration.nanos = sign * seconds, sign * nanos
    elif simple == types_pb2.DATETIME:
        seconds, nanos = _parse_rfc3339(text)
        scalar.primitive.datetime.seconds, scalar.primitive.datetime.nanos = seconds, nanos
    else:
        raise CopilotError(f"unsupported type {types_pb2.SimpleType.Name(simple)}")
    return literal


# -- download (data/download.go) ----------------------------------------------------------------------------


def _go_struct(message: struct_pb2.Struct) -> dict[str, Any]:
    """``json.Marshal`` of a Go ``*structpb.Struct`` value (not protojson: the Go struct's own fields)."""
    fields = {key: _go_struct_value(value) for key, value in message.fields.items()}
    return {"fields": fields} if fields else {}


def _go_struct_value(value: struct_pb2.Value) -> dict[str, Any]:
    kind = value.WhichOneof("kind")
    if kind is None:
        return {"Kind": None}
    if kind == "null_value":
        return {"Kind": {"NullValue": 0}}
    if kind == "number_value":
        return {"Kind": {"NumberValue": value.number_value}}
    if kind == "string_value":
        return {"Kind": {"StringValue": value.string_value}}
    if kind == "bool_value":
        return {"Kind": {"BoolValue": value.bool_value}}
    if kind == "struct_value":
        return {"Kind": {"StructValue": _go_struct(value.struct_value)}}
    values = [_go_struct_value(v) for v in value.list_value.values]
    return {"Kind": {"ListValue": {"values": values} if values else {}}}


class _Downloader:
    def __init__(self, store: _Store, log: _Log) -> None:
        self.store = store
        self.log = log

    def _blob(self, blob: literals_pb2.Blob, to_path: str) -> Any:
        uri = blob.uri
        if not uri:
            raise CopilotError("Blob uri incorrectly formatted: empty reference")
        dimensionality = blob.metadata.type.dimensionality
        if dimensionality == types_pb2.BlobType.MULTIPART:
            items = self.store.list_files(uri)
            if not items:
                # Go returns (nil, nil) for an empty listing: nothing is written and the value is nil.
                self.log.error(f"failed to collect items from multipart blob [{uri}]")
                return None
            failed = 0
            for ref, relative in items:
                target = os.path.join(to_path, relative)
                try:
                    os.makedirs(os.path.dirname(target), mode=0o777, exist_ok=True)
                    self.store.download(ref, target)
                except OSError as err:
                    self.log.error(f"Failed to download from ref [{ref}]: {err}")
                    failed += 1
            if failed:
                raise CopilotError(
                    f"Failed to copy {failed} out of {len(items)} remote files from [{uri}] to local [{to_path}]."
                )
            return to_path
        if dimensionality == types_pb2.BlobType.SINGLE:
            if not self.store.exists(uri):
                raise CopilotError("incorrect blob reference, does not exist")
            try:
                self.store.download(uri, to_path)
            except OSError as err:
                raise CopilotError(f"failed to write remote data to local filesystem: {err}") from err
            return to_path
        raise CopilotError("unexpected Blob type encountered")

    def _primitive(self, primitive: literals_pb2.Primitive, to_path: str) -> Any:
        kind = primitive.WhichOneof("value")
        value: Any
        if kind == "string_value":
            value, text = primitive.string_value, primitive.string_value
        elif kind == "boolean":
            value, text = primitive.boolean, "true" if primitive.boolean else "false"
        elif kind == "integer":
            value, text = primitive.integer, str(primitive.integer)
        elif kind == "float_value":
            value, text = primitive.float_value, _go_format_float(primitive.float_value)
        elif kind == "datetime":
            value = text = _rfc3339_nano(primitive.datetime.seconds, primitive.datetime.nanos)
        elif kind == "duration":
            seconds, nanos = primitive.duration.seconds, primitive.duration.nanos
            total = seconds * 10**9 + nanos
            if (seconds < 0 < nanos) or (nanos < 0 < seconds) or not -(2**63) <= total <= _MAX_INT64:
                raise CopilotError(
                    f"duration: seconds:{seconds} nanos:{nanos} is out of range for time.Duration"
                )
            # Flyte's handlePrimitive shadows ``v`` here: the file holds the duration, the JSON value is nil.
            value, text = None, go_duration_string(total)
        else:
            value, text = None, "null"
        _write_local(to_path, text.encode())
        return value

    def _scalar(self, scalar: literals_pb2.Scalar, to_path: str) -> tuple[Any, literals_pb2.Scalar]:
        kind = scalar.WhichOneof("value")
        out = literals_pb2.Scalar()
        out.CopyFrom(scalar)
        if kind == "primitive":
            return self._primitive(scalar.primitive, to_path), out
        if kind == "blob":
            value = self._blob(scalar.blob, to_path)
            out.blob.uri = to_path
            return value, out
        if kind == "schema":
            multipart = literals_pb2.Blob(uri=scalar.schema.uri)
            multipart.metadata.type.dimensionality = types_pb2.BlobType.MULTIPART
            value = self._blob(multipart, to_path)
            out.schema.uri = to_path
            return value, out
        if kind == "binary":
            _write_local(to_path, scalar.binary.value)
            return scalar.binary.value, out
        if kind == "error":
            _write_local(to_path, scalar.error.message.encode())
            return scalar.error.message, out
        if kind == "generic":
            _write_local(to_path, json_format.MessageToJson(scalar.generic, indent=None).encode())
            return _go_struct(scalar.generic), out
        if kind == "union":
            value, literal = self._literal(scalar.union.value, to_path)
            out.union.value.CopyFrom(literal)
            return value, out
        if kind == "none_type":
            _write_local(to_path, b"null")
            return None, out
        shown = f"*core.Scalar_{_go_name(kind)}" if kind else "<nil>"
        raise CopilotError(f"unsupported scalar type [{shown}]")

    def _literal(self, literal: literals_pb2.Literal, path: str) -> tuple[Any, literals_pb2.Literal]:
        kind = literal.WhichOneof("value")
        out = literals_pb2.Literal()
        if kind == "scalar":
            value, scalar = self._scalar(literal.scalar, path)
            out.scalar.CopyFrom(scalar)
            return value, out
        if kind == "collection":
            os.makedirs(path, mode=0o777, exist_ok=True)
            values = []
            out.collection.SetInParent()
            for index, item in enumerate(literal.collection.literals):
                value, child = self._literal(item, os.path.join(path, str(index)))
                values.append(value)
                out.collection.literals.append(child)
            return values, out
        if kind == "map":
            os.makedirs(path, mode=0o777, exist_ok=True)
            values_map, literal_map = self.recursive_download(literal.map, path)
            out.map.SetInParent()
            if literal_map is not None:
                out.map.CopyFrom(literal_map)
            return values_map, out
        shown = f"*core.Literal_{_go_name(kind)}" if kind else "<nil>"
        raise CopilotError(f"unsupported literal type [{shown}]")

    def recursive_download(
        self, inputs: literals_pb2.LiteralMap, folder: str
    ) -> tuple[dict[str, Any], literals_pb2.LiteralMap | None]:
        if not inputs.literals:
            return {}, None
        values: dict[str, Any] = {}
        out = literals_pb2.LiteralMap()
        for variable in sorted(inputs.literals):
            literal = inputs.literals[variable]
            if literal.HasField("offloaded_metadata"):
                uri = literal.offloaded_metadata.uri
                try:
                    literal = literals_pb2.Literal.FromString(self.store.read(uri))
                except (OSError, DecodeError) as err:
                    raise CopilotError(
                        f"Failed to  read the object at location [{uri}] with error [{err}]"
                    ) from err
                self.log.info(f"read object at location [{uri}]")
            try:
                value, child = self._literal(literal, os.path.join(folder, variable))
            except (CopilotError, OSError) as err:
                raise CopilotError(f"variable [{variable}] download/store failed: {err}") from err
            values[variable] = value
            out.literals[variable].CopyFrom(child)
            self.log.info(f"Completed persisting [{variable}]")
        return values, out


def _go_name(snake: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in snake.split("_"))


def download_inputs(
    input_ref: str, folder: str, *, fmt: str = "JSON", log_level: int = DEFAULT_LOGGER_LEVEL
) -> None:
    """``Downloader.DownloadInputs``: the inputs at ``input_ref`` laid out in ``folder``; raises CopilotError."""
    store, log = _Store(), _Log(log_level)
    log.info(f"Downloading inputs from [{input_ref}]")
    try:
        os.makedirs(folder, mode=0o777, exist_ok=True)
    except OSError as err:
        raise CopilotError(str(err)) from err
    try:
        inputs = literals_pb2.LiteralMap.FromString(store.read(input_ref))
    except (OSError, DecodeError) as err:
        raise CopilotError(
            f"failed to download input metadata message from remote store: path:{input_ref}: {err}"
        ) from err
    try:
        values, literal_map = _Downloader(store, log).recursive_download(inputs, folder)
    except CopilotError as err:
        raise err.wrap("failed to download input variable from remote store") from err
    except OSError as err:
        raise CopilotError(f"failed to download input variable from remote store: {err}") from err
    try:
        _write_local(
            os.path.join(folder, "inputs.pb"),
            literal_map.SerializeToString() if literal_map is not None else b"",
        )
        if fmt in ("JSON", "YAML"):
            try:
                document = go_json(values)
            except CopilotError as err:
                raise err.wrap("failed to marshal out inputs") from err
            if fmt == "JSON":
                _write_local(os.path.join(folder, "inputs.json"), document.encode())
            else:
                text = yaml.safe_dump(json.loads(document), default_flow_style=False, allow_unicode=True)
                _write_local(os.path.join(folder, "inputs.yaml"), text.encode())
    except OSError as err:
        raise CopilotError(str(err)) from err
    log.info(f"Exited downloading inputs from [{input_ref}]")


# -- upload (data/upload.go) --------------------------------------------------------------------------------


def _readable(path: str) -> tuple[str, os.stat_result]:
    """``IsFileReadable(path, ignoreExtension=true)``: the path, else the one ``path.*`` there is."""
    try:
        return path, os.stat(path)
    except FileNotFoundError as err:
        matches = glob.glob(glob.escape(path) + ".*")
        if len(matches) == 1:
            try:
                return matches[0], os.stat(matches[0])
            except OSError:
                pass
        raise CopilotError(
            f"file not found at path [{path}]: stat {path}: no such file or directory"
        ) from err
    except PermissionError as err:
        raise CopilotError(
            f"unable to read file [{path}], Flyte does not have permissions: stat {path}: permission denied"
        ) from err
    except OSError as err:
        raise CopilotError(f"failed to read file: {err}") from err


def _blob_literal(uri: str, *, multipart: bool) -> literals_pb2.Literal:
    literal = literals_pb2.Literal()
    blob = literal.scalar.blob
    blob.uri = uri
    blob.metadata.type.format = ""
    blob.metadata.type.dimensionality = (
        types_pb2.BlobType.MULTIPART if multipart else types_pb2.BlobType.SINGLE
    )
    return literal


class _Uploader:
    def __init__(self, store: _Store, log: _Log) -> None:
        self.store = store
        self.log = log

    def simple(self, simple: int, path: str) -> literals_pb2.Literal:
        found, info = _readable(path)
        if os.path.isdir(found):
            raise CopilotError(
                f"expected file for type [{types_pb2.SimpleType.Name(simple)}], found dir at path [{path}]"
            )
        if info.st_size > MAX_PRIMITIVE_SIZE:
            raise CopilotError(
                f"maximum allowed filesize is [{MAX_PRIMITIVE_SIZE}], but found [{info.st_size}]"
            )
        with open(found, "rb") as fh:
            raw = fh.read()
        return literal_for_simple_type(simple, raw)

    def blob(self, path: str, to_ref: str) -> literals_pb2.Literal:
        found, _info = _readable(path)
        if not os.path.isdir(found):
            self.store.upload(found, to_ref)
            return _blob_literal(to_ref, multipart=False)
        files: list[tuple[str, str]] = []
        for folder, _dirs, names in os.walk(found):
            for name in sorted(names):
                # Flyte flattens nested folders: each file goes to <to_ref>/<its name>.
                files.append((os.path.join(folder, name), self.store.join(to_ref, name)))
        self.log.info(f"Found [{len(files)}] files for multipart blob upload from [{path}]")
        for local, ref in files:
            self.store.upload(local, ref)
        return _blob_literal(to_ref, multipart=True)


def upload_outputs(
    outputs: interface_pb2.VariableMap,
    folder: str,
    outputs_ref: str,
    raw_prefix: str,
    *,
    log_level: int = DEFAULT_LOGGER_LEVEL,
) -> None:
    """``Uploader.RecursiveUpload``: what the task left in ``folder``, as ``outputs.pb`` at ``outputs_ref``."""
    store, log = _Store(), _Log(log_level)
    error_file = os.path.join(folder, ERROR_FILE)
    try:
        info = os.stat(error_file)
    except FileNotFoundError:
        pass
    except OSError as err:
        raise CopilotError(str(err)) from err
    else:
        if info.st_size > MAX_ERROR_FILE_SIZE:
            raise CopilotError(f"error file too large {info.st_size}")
        if os.path.isdir(error_file):
            raise CopilotError("error file is a directory")
        with open(error_file, "rb") as fh:
            raise CopilotError(f"User Error: {fh.read().decode('utf-8', 'replace')}")
    uploader = _Uploader(store, log)
    result = literals_pb2.LiteralMap()
    for name in sorted(outputs.variables):
        variable_type = outputs.variables[name].type
        path = os.path.join(folder, name)
        kind = variable_type.WhichOneof("type")
        try:
            if kind == "blob":
                literal = uploader.blob(path, store.join(raw_prefix, name))
            elif kind == "simple":
                literal = uploader.simple(variable_type.simple, path)
            else:
                shown = text_format.MessageToString(variable_type, as_one_line=True)
                raise CopilotError(f"currently CoPilot uploader does not support [{shown}], system error")
        except OSError as err:
            raise CopilotError(str(err)) from err
        result.literals[name].CopyFrom(literal)
        log.info(f"Var [{name}] completed")
    log.info(f"Uploading final outputs to [{outputs_ref}]")
    try:
        store.write(outputs_ref, result.SerializeToString())
    except OSError as err:
        raise CopilotError(str(err)) from err
    log.info(f"Uploaded final outputs to [{outputs_ref}]")


# -- the command line (cmd/) --------------------------------------------------------------------------------


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _UsageError(message)


def _duration(text: str) -> int:
    try:
        return parse_go_duration_ns(text)
    except CopilotError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


def _base64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as err:
        raise argparse.ArgumentTypeError(f"illegal base64 data: {err}") from err


def _parser() -> argparse.ArgumentParser:
    root = _Parser(prog="flyte-copilot", add_help=False)
    root.add_argument("--err-output-name", default="errors.pb")
    root.add_argument("--config", default="")
    root.add_argument("--kubeconfig", default="")
    root.add_argument("-s", "--show-source", action="store_true")
    commands = root.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def shared(parser: argparse.ArgumentParser) -> None:
        # Cobra's persistent flags also follow the subcommand.
        parser.add_argument("--err-output-name", default=argparse.SUPPRESS)
        parser.add_argument("--config", default=argparse.SUPPRESS)
        parser.add_argument("--kubeconfig", default=argparse.SUPPRESS)
        parser.add_argument("-s", "--show-source", action="store_true", default=argparse.SUPPRESS)

    download = commands.add_parser("download", add_help=False)
    shared(download)
    download.add_argument("-f", "--from-remote", default="")
    download.add_argument("--to-output-prefix", default="")
    download.add_argument("-o", "--to-local-dir", default="")
    download.add_argument("-m", "--format", default="JSON")
    download.add_argument("-d", "--download-mode", default="DOWNLOAD_EAGER")
    download.add_argument("-t", "--timeout", type=_duration, default=DEFAULT_TIMEOUT_NS)
    download.add_argument("-i", "--input-interface", type=_base64, default=None)

    sidecar = commands.add_parser("sidecar", add_help=False)
    shared(sidecar)
    sidecar.add_argument("-o", "--to-output-prefix", default="")
    sidecar.add_argument("-x", "--to-raw-output", default="")
    sidecar.add_argument("-f", "--from-local-dir", default="")
    sidecar.add_argument("-m", "--format", default="JSON")
    sidecar.add_argument("-u", "--upload-mode", default="UPLOAD_ON_EXIT")
    sidecar.add_argument("--meta-output-name", default="outputs.pb")
    sidecar.add_argument("-t", "--timeout", "--start-timeout", type=_duration, default=DEFAULT_TIMEOUT_NS)
    sidecar.add_argument("-i", "--interface", type=_base64, default=None)
    sidecar.add_argument("--start-watcher-type", default="signal")
    sidecar.add_argument("--exit-watcher-type", default="signal")
    return root


def _split_config_flags(argv: Sequence[str]) -> tuple[list[str], int]:
    """Take out the config flags (``--storage.*``, ``--logger.*``); the logger level they set."""
    rest: list[str] = []
    level = DEFAULT_LOGGER_LEVEL
    items = iter(argv)
    for arg in items:
        key, has_value, value = arg.partition("=")
        if not key.startswith(("--storage.", "--logger.")):
            rest.append(arg)
            continue
        if key == "--storage.stow.config" and not has_value:
            next(items, None)  # its value is the next argument: key=value
        if key == "--logger.level":
            if not has_value:
                value = next(items, "")
            try:
                level = int(value)
            except ValueError as err:
                raise _UsageError(f'invalid argument "{value}" for "--logger.level" flag') from err
    return rest, level


def _possible(values: Sequence[str]) -> str:
    return "[" + " ".join(values) + "]"


def _upload_error(store: _Store, prefix: str, name: str, code: str, err: CopilotError, log: _Log) -> int:
    """``RootOptions.UploadError``: the error document under ``prefix``; 0, or 1 if it cannot be written."""
    ref = store.join(prefix, name)
    log.info(f"Uploading Error file to path [{ref}], errFile: {name}")
    try:
        store.write(ref, _error_document(code, str(err)).SerializeToString())
    except (OSError, ValueError) as write_error:
        log.error(f"Failed to write error document, err :{write_error}")
        return 1
    return 0


def _download(opts: argparse.Namespace, log: _Log) -> int:
    if not opts.to_output_prefix:
        log.error("to-output-prefix is required")
        return 1
    try:
        if not opts.to_local_dir:
            raise CopilotError("to-local-dir is required")
        if not opts.from_remote:
            raise CopilotError("from-remote is required")
        if opts.format not in _FORMATS:
            raise CopilotError(
                f"incorrect input download format specified, given [{opts.format}], "
                f"possible values [{_possible(_FORMATS)}]"
            )
        if opts.download_mode not in _DOWNLOAD_MODES:
            raise CopilotError(
                f"incorrect input download mode specified, given [{opts.download_mode}], "
                f"possible values [{_possible(_DOWNLOAD_MODES)}]"
            )
        _within(
            opts.timeout,
            lambda: download_inputs(
                opts.from_remote, opts.to_local_dir, fmt=opts.format, log_level=log.level
            ),
        )
    except CopilotError as err:
        log.error(f"Downloading failed, err {err}")
        return _upload_error(
            _Store(), opts.to_output_prefix, opts.err_output_name, "InputDownloadFailed", err, log
        )
    return 0


def _wait_for_termination(watcher: str, log: _Log) -> None:
    """The signal watcher: the primary container has exited when the kubelet sends SIGTERM."""
    if watcher == "noop":
        log.info("noop container watcher setup. assuming container exited.")
        return
    log.info("Signal Watcher waiting for termination signal")
    # The kubelet starts this process with SIGTERM blocked, so one sent before now waits here, not lost.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    signal.sigwait({signal.SIGTERM})
    log.info("Signal Watcher exiting on termination signal")


def _upload(opts: argparse.Namespace, log: _Log) -> None:
    if opts.interface is None:
        log.info("No output interface provided. Assuming Void outputs.")
        return
    try:
        iface = interface_pb2.TypedInterface.FromString(opts.interface)
    except DecodeError as err:
        raise CopilotError(
            f"Bad interface passed, failed to unmarshal, expected core.TypedInterface: {err}"
        ) from err
    if not iface.outputs.variables:
        log.info("Empty output interface received. Assuming void outputs. Sidecar will exit immediately.")
        return
    if opts.format not in _FORMATS:
        raise CopilotError(
            f"incorrect input data format specified, given [{opts.format}], possible values [{_possible(_FORMATS)}]"
        )
    if opts.upload_mode not in _UPLOAD_MODES:
        raise CopilotError(
            f"incorrect input upload mode specified, given [{opts.upload_mode}], "
            f"possible values [{_possible(_UPLOAD_MODES)}]"
        )
    if opts.start_watcher_type not in _WATCHERS:
        raise CopilotError("unsupported watcher type")
    log.info("Waiting for Container to exit.")
    _wait_for_termination(opts.start_watcher_type, log)
    log.info("Container Exited! uploading data.")
    outputs_ref = _Store.join(opts.to_output_prefix, opts.meta_output_name)
    _within(
        opts.timeout,
        lambda: upload_outputs(
            iface.outputs, opts.from_local_dir, outputs_ref, opts.to_raw_output, log_level=log.level
        ),
    )
    log.info("Uploader completed successfully!")


def _sidecar(opts: argparse.Namespace, log: _Log) -> int:
    try:
        _upload(opts, log)
    except CopilotError as err:
        log.error(f"Uploading failed, err {err}")
        return _upload_error(
            _Store(), opts.to_output_prefix, opts.err_output_name, "OutputUploadFailed", err, log
        )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """flyte-copilot's command line: ``download …`` or ``sidecar …``; the process's exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        rest, level = _split_config_flags(args)
        opts = _parser().parse_args(rest)
    except _UsageError as err:
        print(f"Error: {err}", file=sys.stderr)
        return 1
    log = _Log(level)
    if opts.command == "download":
        # Only the sidecar waits for SIGTERM; a downloader ends on it as any process does.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
        return _download(opts, log)
    return _sidecar(opts, log)


if __name__ == "__main__":
    sys.exit(main())
