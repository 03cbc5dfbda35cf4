"""Plain scalar values read as Flyte's primitive types: integers, floats, booleans, strings, times, durations.

What ``pyflyte run`` and the console's launch form accept, with the bounds Flyte's literals have: an
integer fits in 64 bits, a time in a protobuf ``Timestamp``, a duration in a protobuf ``Duration``
(±10,000 years). ``strict`` readers accept only a value already of the type (how a union chooses its
variant before it tries conversions); the others also convert (``3`` to a float, ``"3"`` to an integer, an
RFC 3339 string to a time, ``"1h30m"`` to a duration). A value that does not fit is a :class:`SpecError`
naming its path, never an ``OverflowError``.
"""

from __future__ import annotations

import math
import re
import reprlib
from datetime import UTC, date, datetime, timedelta
from fractions import Fraction
from typing import Any, Final

from taskplug.core._errors import SpecError

__all__ = [
    "DURATION_MAX_SECONDS",
    "format_duration",
    "key_text",
    "read_bool",
    "read_date",
    "read_datetime",
    "read_duration",
    "read_float",
    "read_int",
    "read_str",
    "shown",
    "what",
]

INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1
DURATION_MAX_SECONDS: Final = 315_576_000_000
"""A protobuf ``Duration`` spans at most ±10,000 years."""
_NS_PER_SECOND: Final = 1_000_000_000

_EXPLICIT_NON_FINITE = {"inf", "+inf", "-inf", "infinity", "+infinity", "-infinity", "nan", "+nan", "-nan"}


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother, _REPR.maxlong = 3, 60, 60, 40


def shown(value: Any) -> str:
    """``repr(value)`` cut short: bounded in length and nesting, whatever the value."""
    try:
        return _REPR.repr(value)
    except (ValueError, RecursionError):  # an int too long for str(), a pathological object
        return f"a {type(value).__name__}"


def key_text(key: Any) -> str:
    """A mapping's key as it appears in a path."""
    return key if isinstance(key, str) else shown(key)


def what(value: Any) -> str:
    return f"{shown(value)} ({type(value).__name__})"


def read_int(value: Any, path: str, *, strict: bool = False) -> int:
    """An INTEGER: an int (or, not strict, a string of one) within int64."""
    if isinstance(value, bool) or not isinstance(value, int | str) or (strict and isinstance(value, str)):
        raise SpecError(path, f"expected an integer, got {what(value)}")
    try:
        number = int(value)
    except ValueError as e:
        raise SpecError(path, f"expected an integer, got {what(value)}") from e
    if not INT64_MIN <= number <= INT64_MAX:
        raise SpecError(path, f"{shown(value)} does not fit in a 64-bit integer (Flyte's INTEGER)")
    return number


def read_float(value: Any, path: str, *, strict: bool = False) -> float:
    """A FLOAT: a float (or, not strict, an int or a numeral string) that fits in a double.

    Infinity and NaN are doubles, and Flyte carries them (flytekit's float, ``pyflyte run``'s ``inf``,
    protobuf JSON's ``"Infinity"``), so YAML's ``.inf``/``.nan`` and the strings ``inf``/``nan`` are
    accepted; a numeral too large for a double (``1e400``) is refused rather than silently made infinite.
    """
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise SpecError(path, f"expected a number, got {what(value)}")
    if strict and not isinstance(value, float):
        raise SpecError(path, f"expected a float, got {what(value)}")
    if isinstance(value, float):
        return value
    try:
        number = float(value)
    except OverflowError as e:
        raise SpecError(path, f"{shown(value)} is too large for a 64-bit float (Flyte's FLOAT)") from e
    except ValueError as e:
        raise SpecError(path, f"expected a number, got {what(value)}") from e
    if not math.isfinite(number) and not (
        isinstance(value, str) and value.strip().lower() in _EXPLICIT_NON_FINITE
    ):
        raise SpecError(path, f"{shown(value)} is too large for a 64-bit float (Flyte's FLOAT)")
    return number


def read_bool(value: Any, path: str, *, strict: bool = False) -> bool:
    """A BOOLEAN: ``true`` or ``false``, never a string or a number."""
    if not isinstance(value, bool):
        raise SpecError(path, f"expected true or false, got {what(value)}")
    return value


def read_str(value: Any, path: str, *, strict: bool = False) -> str:
    """A STRING: text, never a number (YAML reads ``x: 3`` as a number: quote it)."""
    if not isinstance(value, str):
        hint = " (quote it in YAML to give it as text)" if not isinstance(value, list | dict) else ""
        raise SpecError(path, f"expected a string, got {what(value)}{hint}")
    return value


def read_datetime(value: Any, path: str, *, strict: bool = False) -> datetime:
    """A DATETIME, in UTC: a time (or a date, at midnight) or, not strict, an RFC 3339 string.

    A time without a zone is UTC (as YAML reads one), never the machine's local time.
    """
    if isinstance(value, str) and not strict:
        try:
            value = datetime.fromisoformat(value)
        except ValueError as e:
            raise SpecError(
                path, f"expected an RFC 3339 time such as 2024-05-06T07:08:09Z, got {shown(value)}"
            ) from e
    if isinstance(value, date) and not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day, tzinfo=UTC)
    if not isinstance(value, datetime):
        raise SpecError(path, f"expected a time, got {what(value)}")
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError as e:
        raise SpecError(path, f"{value.isoformat()} is out of the range of times") from e


def read_date(value: Any, path: str, *, strict: bool = False) -> date:
    """A date (a dataclass's ``datetime.date`` field): a date or, not strict, an ISO 8601 date string."""
    if isinstance(value, datetime):
        raise SpecError(path, f"expected a date such as 2024-05-06, got the time {value.isoformat()}")
    if isinstance(value, str) and not strict:
        try:
            return date.fromisoformat(value)
        except ValueError as e:
            raise SpecError(path, f"expected a date such as 2024-05-06, got {shown(value)}") from e
    if not isinstance(value, date):
        raise SpecError(path, f"expected a date, got {what(value)}")
    return value


# -- durations ------------------------------------------------------------------------------------------------

_NUMBER = r"(?:\d+(?:[.,]\d*)?|[.,]\d+)"
_GO_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_GO_UNIT_NS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "μs": 1_000,
    "ms": 1_000_000,
    "s": _NS_PER_SECOND,
    "m": 60 * _NS_PER_SECOND,
    "h": 3600 * _NS_PER_SECOND,
}
_ISO = re.compile(
    rf"P(?:(?P<W>{_NUMBER})W)?(?:(?P<D>{_NUMBER})D)?"
    rf"(?:T(?=[\d.,])(?:(?P<H>{_NUMBER})H)?(?:(?P<M>{_NUMBER})M)?(?:(?P<S>{_NUMBER})S)?)?",
    re.IGNORECASE,
)
_ISO_UNIT_NS = {"W": 7 * 86400 * _NS_PER_SECOND, "D": 86400 * _NS_PER_SECOND, "H": 3600 * _NS_PER_SECOND}
_ISO_UNIT_NS |= {"M": 60 * _NS_PER_SECOND, "S": _NS_PER_SECOND}
_DURATION_SYNTAX = "seconds as a number, Go's syntax ('90s', '1h30m') or ISO 8601 ('PT1H30M')"


def _go_ns(text: str) -> int | None:
    if text == "0":
        return 0
    total, pos = Fraction(0), 0
    for match in _GO_PART.finditer(text):
        if match.start() != pos:
            return None
        total += Fraction(match.group(1)) * _GO_UNIT_NS[match.group(2)]
        pos = match.end()
    return int(total) if pos == len(text) and pos else None


def _iso_ns(text: str) -> int | None:
    match = _ISO.fullmatch(text)
    if match is None or not any(match.groupdict().values()):
        return None
    total = Fraction(0)
    for unit, number in match.groupdict().items():
        if number:
            total += Fraction(number.replace(",", ".")) * _ISO_UNIT_NS[unit]
    return int(total)


def read_duration(value: Any, path: str, *, strict: bool = False) -> tuple[int, int]:
    """A DURATION as protobuf's ``(seconds, nanos)``: a timedelta or, not strict, seconds as a number, Go's
    syntax (``90s``, ``1h30m``, ``1.5h``) or ISO 8601 (``PT1H30M``, ``P1DT2H``; no years or months, which
    have no fixed length). Refused when it does not fit a protobuf ``Duration`` (±10,000 years)."""
    if isinstance(value, timedelta):
        ns = (value.days * 86400 + value.seconds) * _NS_PER_SECOND + value.microseconds * 1000
    elif strict or isinstance(value, bool) or not isinstance(value, int | float | str):
        raise SpecError(path, f"expected a duration ({_DURATION_SYNTAX}), got {what(value)}")
    elif isinstance(value, int | float):
        if not math.isfinite(value):
            raise SpecError(path, f"{shown(value)} is not a duration")
        ns = round(Fraction(value) * _NS_PER_SECOND)
    else:
        text = value.strip()
        sign = -1 if text[:1] == "-" else 1
        body = text[1:] if text[:1] in "+-" and text else text
        try:
            found = _iso_ns(body) if body[:1].upper() == "P" else _go_ns(body)
        except (ValueError, ZeroDivisionError):  # a numeral longer than int() converts
            found = None
        if found is None:
            calendar = body.upper().partition("T")[0]
            if calendar[:1] == "P" and ("Y" in calendar or "M" in calendar):
                raise SpecError(
                    path, f"{shown(value)}: years and months have no fixed length; use days (P30D)"
                )
            raise SpecError(path, f"expected a duration ({_DURATION_SYNTAX}), got {shown(value)}")
        ns = sign * found
    seconds, nanos = divmod(abs(ns), _NS_PER_SECOND)
    if seconds > DURATION_MAX_SECONDS:
        raise SpecError(path, f"{shown(value)} is longer than a Flyte duration can be (10,000 years)")
    sign = -1 if ns < 0 else 1
    return sign * seconds, sign * nanos


def format_duration(seconds: int, nanos: int) -> str:
    """Go's ``Duration.String()`` of a protobuf duration: ``1h30m0s``, ``1.5s``, ``500ms``, ``0s`` — the
    syntax :func:`read_duration` reads back."""
    ns = seconds * _NS_PER_SECOND + nanos
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    if ns < _NS_PER_SECOND:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if ns >= size:
                return sign + _decimal(ns, size) + unit
    hours, rest = divmod(ns, 3600 * _NS_PER_SECOND)
    minutes, rest = divmod(rest, 60 * _NS_PER_SECOND)
    text = _decimal(rest, _NS_PER_SECOND) + "s"
    if hours or minutes:
        text = f"{minutes}m{text}"
    if hours:
        text = f"{hours}h{text}"
    return sign + text


def _decimal(numerator: int, denominator: int) -> str:
    whole, frac = divmod(numerator, denominator)
    if not frac:
        return str(whole)
    digits = len(str(denominator)) - 1
    return f"{whole}.{frac:0{digits}d}".rstrip("0")
