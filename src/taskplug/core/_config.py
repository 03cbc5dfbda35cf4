"""Config primitives: strict models, Go durations, Flyte's map shapes, and the sectioned loader.

Flyte reads one YAML file whose sections (``plugins.k8s``, ``tasks``, ``plugins.connector-service`` …) are
registered by the packages that own them (flytestdlib/config). Here each layer declares a
:class:`ConfigSection` and the caller hands the loader the sections it knows about; nothing is global.

Strictness: an unknown key anywhere, or a value of the wrong shape, fails with the dotted key path.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import itertools
import math
import os
import re
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Generic, TypeVar, cast

import orjson
from pydantic import BaseModel, BeforeValidator, ConfigDict, PlainSerializer, ValidationError

from taskplug.core._documents import DocumentError, load_document
from taskplug.core._errors import ConfigError, QuantityError
from taskplug.core._quantity import Quantity

__all__ = [
    "ConfigSection",
    "GoDuration",
    "PlatformConfig",
    "QuantityField",
    "StrMap",
    "StrictModel",
    "field_docs",
    "format_go_duration",
    "kebab",
    "list_of_maps_to_map",
    "load_config_file",
    "load_platform_config",
    "parse_go_duration",
]


def kebab(name: str) -> str:
    return name.replace("_", "-")


class StrictModel(BaseModel):
    """Frozen, unknown keys rejected, fields known by their Flyte key (kebab-case unless aliased).

    Every field is documented by a docstring under it (what it does, its unit); :func:`field_docs` reads
    them and ``scripts/config_doc.py`` renders them into docs/config.md. They are read from the source on
    demand rather than by pydantic's ``use_attribute_docstrings``, which parses each model's module when the
    class is created: about 30 ms on every command for text only the documentation needs.

    A config file is validated in pydantic's strict mode (:func:`load_platform_config`): every field of
    every section takes a value of its own type only — a string where a list is expected, a list where a
    string is, ``"5"`` for an integer or ``"yes"`` for a boolean is an error naming the key. Conversions a
    field wants (a Go duration, a quantity, Flyte's list-of-maps for a map, numbers in a string map) are
    its ``BeforeValidator``'s, which run first.

    Deviation: Flyte's config reader (viper + mapstructure, weakly typed) converts a value of another type
    (``"5"`` for an integer, ``"yes"`` for a boolean) and takes a single value for a one-element list; that
    conversion hides mistakes (``enabled-plugins: a,b`` is one plugin named ``a,b``), so taskplug refuses it.
    """

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        populate_by_name=True,
        alias_generator=kebab,
        arbitrary_types_allowed=True,
        # A model's validator is built when it first validates, not when its class is defined: every command
        # imports every plugin's config model, few validate more than a handful.
        defer_build=True,
    )


def field_docs(model: type[BaseModel]) -> dict[str, str]:
    """The docstring under each field of ``model`` (and of the models it inherits from), by field name."""
    docs: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)) or cls is BaseModel:
            continue
        try:
            source = textwrap.dedent(inspect.getsource(cls))
        except (OSError, TypeError):
            continue
        body = ast.parse(source).body[0]
        if not isinstance(body, ast.ClassDef):
            continue
        statements = body.body
        for statement, following in itertools.pairwise(statements):
            if (
                isinstance(statement, ast.AnnAssign)
                and isinstance(statement.target, ast.Name)
                and isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
            ):
                docs[statement.target.id] = inspect.cleandoc(following.value.value)
    return docs


# -- Go durations ------------------------------------------------------------------------------------------

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


_MAX_NANOSECONDS = 2**63 - 1
_RANGE = "(a Go duration is at most 2562047h47m16.854775807s: int64 nanoseconds)"


def parse_go_duration(value: Any) -> timedelta:
    """Parse Go's duration syntax (``3m``, ``1h30m``, ``500ms``, ``0``); numbers are nanoseconds, as in Flyte.

    A duration Go cannot hold (more than int64 nanoseconds, about 292 years) is a ValueError, as Go's
    ``time.ParseDuration`` refuses it, never an OverflowError from ``timedelta``."""
    if isinstance(value, timedelta):
        return value
    if isinstance(value, bool):
        raise ValueError(f"expected a duration such as '30s', got {value!r}")
    if isinstance(value, int | float):
        if not math.isfinite(value) or abs(value) > _MAX_NANOSECONDS:
            raise ValueError(f"duration {value!r} (nanoseconds) is out of range {_RANGE}")
        return timedelta(microseconds=value / 1000)
    if not isinstance(value, str):
        raise ValueError(f"expected a duration such as '30s', got {value!r}")
    text = value.strip()
    sign = 1
    if text[:1] in ("+", "-"):
        sign = -1 if text[0] == "-" else 1
        text = text[1:]
    if text == "0":
        return timedelta(0)
    pos, total = 0, 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if pos != len(text) or not text:
        raise ValueError(f"invalid duration {value!r} (use Go syntax such as '30s', '3m', '1h30m')")
    if not total * 1e9 <= _MAX_NANOSECONDS:  # also false for inf (a unit after 400 digits)
        raise ValueError(f"duration {value!r} is out of range {_RANGE}")
    return timedelta(seconds=sign * total)


def format_go_duration(value: timedelta) -> str:
    """Go's ``Duration.String()``: ``3m0s``, ``1h0m0s``, ``1.5s``, ``500ms``, ``0s``."""
    total_ns = round(value.total_seconds() * 1e9)
    if total_ns == 0:
        return "0s"
    sign = "-" if total_ns < 0 else ""
    ns = abs(total_ns)
    if ns < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if ns >= size:
                return sign + _trim(ns / size) + unit
    hours, rem = divmod(ns, 3_600_000_000_000)
    minutes, rem = divmod(rem, 60_000_000_000)
    seconds = _trim(rem / 1e9)
    if hours:
        return f"{sign}{hours}h{minutes}m{seconds}s"
    if minutes:
        return f"{sign}{minutes}m{seconds}s"
    return f"{sign}{seconds}s"


def _trim(x: float) -> str:
    text = f"{x:.9f}".rstrip("0").rstrip(".")
    return text or "0"


GoDuration = Annotated[
    timedelta,
    BeforeValidator(parse_go_duration),
    PlainSerializer(format_go_duration, return_type=str),
]


def _to_quantity(value: Any) -> Quantity:
    if isinstance(value, Quantity):
        return value
    if isinstance(value, int | str) and not isinstance(value, bool):
        try:
            return Quantity(value)
        except QuantityError as e:
            raise ValueError(str(e)) from e
    raise ValueError(f"expected a quantity such as '500m' or '1Gi', got {value!r}")


QuantityField = Annotated[Quantity, BeforeValidator(_to_quantity), PlainSerializer(str, return_type=str)]


# -- Flyte's map shapes -----------------------------------------------------------------------------------


def list_of_maps_to_map(value: Any) -> Any:
    """Flyte configs write maps either as maps or as lists of single-key maps (viper merges them)."""
    if isinstance(value, list):
        merged: dict[Any, Any] = {}
        for i, item in enumerate(value):
            if not isinstance(item, Mapping):
                raise ValueError(f"item {i} must be a single-key mapping, got {item!r}")
            merged.update(item)
        return merged
    return value


def _scalar_to_str(value: Any) -> Any:
    # YAML numbers and booleans in string maps load as strings, as viper does.
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return value


StrValue = Annotated[str, BeforeValidator(_scalar_to_str)]
StrMap = Annotated[dict[str, StrValue], BeforeValidator(list_of_maps_to_map)]


# -- sections and the loader ----------------------------------------------------------------------------

M = TypeVar("M", bound=BaseModel)


class ConfigSection(Generic[M]):
    """A config section at a dotted path (``plugins.k8s``) parsed into ``model``.

    ``model`` is the model class, or where it is defined (``"package.module:Class"``), imported when the
    section is first parsed or read. Every command discovers every plugin and so knows every plugin's section
    (its path is what tells a misspelt key from another plugin's); a plugin that names its model this way
    costs a command that never reads its section no import of the model (its pydantic classes).
    """

    __slots__ = ("_model", "path")

    def __init__(self, path: str, model: type[M] | str) -> None:
        self.path = path
        self._model: type[M] | str = model

    @property
    def model(self) -> type[M]:
        if isinstance(self._model, str):
            module, _, name = self._model.partition(":")
            found = getattr(importlib.import_module(module), name)
            if not (isinstance(found, type) and issubclass(found, BaseModel)):
                raise TypeError(f"config section {self.path!r}: {self._model!r} is not a pydantic model")
            self._model = cast("type[M]", found)
        return self._model

    def keys(self) -> tuple[str, ...]:
        return tuple(self.path.split("."))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ConfigSection):
            return NotImplemented
        return self.path == other.path and self.model is other.model

    def __hash__(self) -> int:
        return hash(self.path)

    def __repr__(self) -> str:
        model = self._model if isinstance(self._model, str) else self._model.__qualname__
        return f"ConfigSection(path={self.path!r}, model={model})"


class PlatformConfig:
    """The parsed config: one frozen model per known section (its defaults when the file omits it)."""

    def __init__(
        self,
        values: Mapping[str, BaseModel],
        document: Mapping[str, Any],
        sections: Iterable[ConfigSection[Any]] = (),
    ) -> None:
        self._values = dict(values)
        self.document = document
        # Sections the file omits take their defaults when first asked for: a command that reads three
        # sections never builds the validators of the rest (pydantic builds a model's schema on first use).
        self._absent = {s.path: s for s in sections if s.path not in self._values}

    def get(self, section: ConfigSection[M]) -> M:
        value = self._values.get(section.path)
        if value is None:
            value = _defaults_of(section.model)
            self._values[section.path] = value
        assert isinstance(value, section.model)
        return value

    def with_section(self, section: ConfigSection[M], value: M) -> PlatformConfig:
        values = dict(self._values)
        values[section.path] = value
        return PlatformConfig(values, self.document, self._absent.values())

    def effective(self) -> dict[str, Any]:
        """Every known section with its defaults filled in, in the file's layout."""
        for section in list(self._absent.values()):
            self.get(section)
        out: dict[str, Any] = {}
        for path in sorted(self._values):
            node = out
            *parents, leaf = path.split(".")
            for key in parents:
                node = node.setdefault(key, {})
            dumped = self._values[path].model_dump(mode="json", by_alias=True)
            existing = node.get(leaf)
            node[leaf] = {**existing, **dumped} if isinstance(existing, dict) else dumped
        return out


def _defaults_of(model: type[M]) -> M:
    """``model()``, the model holding its defaults, made without building the model's validator when nothing
    but the defaults could run: a section nobody wrote costs no pydantic schema on a command that reads it.

    pydantic validates no default (unless ``validate_default``), so only a model validator could make
    ``model()`` differ from the defaults laid in place. A ``before`` model validator is called as ``model()``
    would call it, with ``{}``; one that gives ``{}`` back changes nothing. A model with any other model
    validator, a ``before`` one that changes ``{}``, or ``validate_default`` (its own or a field's) is built as
    ``model()``. A field whose default is another model (``default_factory=SubModel``) gets that model's
    defaults the same way. As with ``model()``, no field counts as set (``model_fields_set``)."""
    if (
        model.model_config.get("validate_default")
        or any(info.validate_default for info in model.model_fields.values())
        or not all(
            _keeps_empty_input(validator)
            for validator in model.__pydantic_decorators__.model_validators.values()
        )
    ):
        return model()
    nested: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        factory = info.default_factory
        if isinstance(factory, type) and issubclass(factory, BaseModel):
            nested[name] = _defaults_of(factory)
    return model.model_construct(_fields_set=set(), **nested)


def _keeps_empty_input(validator: Any) -> bool:
    """Whether a model validator is a ``before`` one taking the input alone that gives ``{}`` back as ``{}``."""
    if validator.info.mode != "before" or len(inspect.signature(validator.func).parameters) != 1:
        return False
    try:
        return bool(validator.func({}) == {})
    except Exception:
        return False  # model() raises it as the ValidationError it is


def load_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a YAML config document through the bounded reader (:func:`~taskplug.core.load_document`): a
    missing, oversized, non-UTF-8 or malformed file is a ConfigError whose ``path`` is the file, as is a
    document that is not a mapping."""
    p = Path(path)
    try:
        document = load_document(p, what="config file")
    except DocumentError as e:
        raise ConfigError(e.path, e.reason) from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise ConfigError("", f"config file {str(p)!r} must hold a mapping at the top level")
    return document


def merge_documents(base: Mapping[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    """Overlay one config document on another: mappings merge key by key, anything else is replaced."""
    out = dict(base)
    for key, value in overlay.items():
        current = out.get(key)
        if isinstance(current, Mapping) and isinstance(value, Mapping):
            out[key] = merge_documents(current, value)
        else:
            out[key] = value
    return out


def load_platform_config(
    document: Mapping[str, Any], sections: Iterable[ConfigSection[Any]], *, source: str = ""
) -> PlatformConfig:
    """Validate ``document`` against ``sections``; raise ConfigError naming the first bad key path (and
    ``source``, the file the document was read from, when given)."""
    try:
        return _load_platform_config(document, sections)
    except ConfigError as e:
        if not source:
            raise
        raise ConfigError(e.path, f"{e.reason} (in config file {source!r})") from None


def _load_platform_config(
    document: Mapping[str, Any], sections: Iterable[ConfigSection[Any]]
) -> PlatformConfig:
    by_path = {s.path: s for s in sections}
    _reject_unknown_keys(document, by_path, ())
    values: dict[str, BaseModel] = {}
    for path, section in by_path.items():
        node: Any = document
        # The dotted path itself: a ConfigSection is not a mapping, so `for key in section` fails.
        for key in section.path.split("."):
            node = node.get(key) if isinstance(node, Mapping) else None
            if node is None:
                break
        if node is None:
            continue  # its defaults, made when first asked for (PlatformConfig.get)
        if not isinstance(node, Mapping):
            raise ConfigError(path, f"must be a mapping, got {type(node).__name__}")
        own = {
            k: v
            for k, v in node.items()
            if f"{path}.{k}" not in by_path and not _is_parent(f"{path}.{k}", by_path)
        }
        try:
            # Keys are Flyte's (kebab-case) only: a Python field name in a file is an unknown key, as in Flyte.
            # Strict, as JSON: a value of another type is refused, never converted (no "5" for 5, no "yes"
            # for true, no string for a list nor a list for a string; see StrictModel), while what JSON
            # cannot write (a tuple, an enum) is read from its JSON form.
            values[path] = section.model.model_validate_json(
                _as_json(own, path), by_alias=True, by_name=False, strict=True
            )
        except ValidationError as e:
            raise _config_error(path, e) from None
    return PlatformConfig(values, document, by_path.values())


_INT_RANGE = (-(2**63), 2**64 - 1)


def _as_json(section: Mapping[str, Any], path: str) -> bytes:
    """A section as JSON for strict validation; a value no field can hold (a float that is not finite, an
    integer beyond 64 bits, an object JSON cannot write) is an error naming its key."""
    stack: list[tuple[Any, str]] = [(section, path)]
    while stack:
        value, where = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(where, f"must be a finite number, got {value!r}")
        if (
            isinstance(value, int)
            and not isinstance(value, bool)
            and not _INT_RANGE[0] <= value <= _INT_RANGE[1]
        ):
            raise ConfigError(where, "is out of range (integers in a config hold 64 bits)")
        if isinstance(value, Mapping):
            stack.extend((v, f"{where}.{k}") for k, v in value.items())
        elif isinstance(value, list | tuple):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(value))
    try:
        return orjson.dumps(section, default=_json_default, option=orjson.OPT_NON_STR_KEYS)
    except orjson.JSONEncodeError as e:
        raise ConfigError(path, f"holds a value that is not JSON ({e})") from None


def _json_default(value: Any) -> Any:
    # Documents built in Python (Platform.load(document=...), defaults) may hold the values fields produce.
    if isinstance(value, timedelta):
        return format_go_duration(value)
    if isinstance(value, Quantity | Path):
        return str(value)
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not a JSON type")


def _is_parent(path: str, by_path: Mapping[str, ConfigSection[Any]]) -> bool:
    return any(p.startswith(path + ".") for p in by_path)


def _reject_unknown_keys(
    node: Mapping[str, Any], by_path: Mapping[str, ConfigSection[Any]], prefix: Sequence[str]
) -> None:
    for key in node:
        path = ".".join([*prefix, str(key)])
        if path in by_path:
            continue
        if _is_parent(path, by_path):
            child = node[key]
            if child is None:
                continue
            if not isinstance(child, Mapping):
                raise ConfigError(path, f"must be a mapping, got {type(child).__name__}")
            _reject_unknown_keys(child, by_path, [*prefix, str(key)])
            continue
        parent = ".".join(prefix)
        if parent in by_path:
            continue  # a key of a section's own model; the model decides
        known = sorted(
            {p.split(".")[len(prefix)] for p in by_path if p.startswith(parent + ".") or not parent}
        )
        raise ConfigError(path, f"unknown key (known here: {', '.join(known)})")


def _config_error(section_path: str, error: ValidationError) -> ConfigError:
    first = error.errors()[0]
    loc = [str(part) for part in first["loc"] if not str(part).startswith("function-")]
    path = ".".join([section_path, *loc])
    kind = first["type"]
    if kind == "extra_forbidden":
        return ConfigError(path, "unknown key")
    message = first["msg"].removeprefix("Value error, ")
    return ConfigError(path, message)
