"""Naming what is wrong in a JSON document: a validation error's field path and a plain reason.

The observed-object model (``_observed_model``), the task's pod spec (``_pod_builder``) and PodTemplate
manifests (``_pod_template``) are all checked by pydantic models; their errors are reported the same way,
as ``status.containerStatuses[0].state.terminated.exitCode: must be an integer, got a string 'x'``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from pydantic import ValidationError

__all__ = ["INT32_MAX", "INT32_MIN", "first_error", "format_path", "json_type", "shown"]

INT32_MIN: Final = -(2**31)
INT32_MAX: Final = 2**31 - 1
_PLAIN_KEY: Final = re.compile(r"[A-Za-z0-9_-]+")


def first_error(error: ValidationError, prefix: Sequence[str | int] = ()) -> tuple[str, str]:
    """The path (:func:`format_path`, after ``prefix``) and a plain reason of a validation's first error."""
    first = error.errors(include_url=False)[0]
    loc = (*prefix, *first["loc"])
    if loc and loc[-1] == "[key]":
        return format_path(loc[:-2]), f"has a key that is not a string: {shown(first['input'])}"
    return format_path(loc), _reason(first)


def format_path(loc: Sequence[str | int]) -> str:
    """``("status", "containerStatuses", 0, "name")`` as ``status.containerStatuses[0].name``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY.fullmatch(part):
            out += f".{part}" if out else part
        else:
            # Annotation keys hold dots and slashes (flyte.org/x): bracket them so the path stays readable.
            out += f"[{part!r}]"
    return out


def _reason(error: Any) -> str:
    kind = error["type"]
    value = error.get("input")
    expected = {
        "model_type": "a mapping (JSON object)",
        "model_attributes_type": "a mapping (JSON object)",
        "dict_type": "a mapping (JSON object)",
        "list_type": "a list",
        "sequence_str": "a list",  # a str given for a Sequence field
        "string_type": "a string",
        "int_type": "an integer",
        "bool_type": "true or false",
    }.get(kind)
    if expected is not None:
        got = json_type(value) if isinstance(value, dict | list) else shown(value)
        return f"must be {expected}, got {got}"
    if kind in ("greater_than_equal", "less_than_equal"):
        return f"must be a 32-bit integer ({INT32_MIN} to {INT32_MAX}), got {shown(value)}"
    if kind == "missing":
        return "required"
    if kind == "string_too_short":
        return "must not be empty"
    return str(error["msg"]).removeprefix("Value error, ")


def json_type(value: Any) -> str:
    """How a JSON reader would name the type of ``value`` ("a list", "an integer", "null")."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__


def shown(value: Any) -> str:
    """``value`` as an error message shows it: its JSON type and its repr, cut at 60 characters."""
    if value is None:
        return "null"
    text = repr(value)
    return f"{json_type(value)} {text if len(text) <= 60 else text[:57] + '...'}"
