"""Kubernetes resource quantities with the API server's exact semantics.

Follows k8s.io/apimachinery/pkg/api/resource/quantity.go. A quantity is held as an integer number of
nano-units (Kubernetes rounds anything finer than 1n *up* when parsing) plus the format it was written in,
so comparison and addition are exact and cheap, and ``str()`` gives the same canonical text that
``kubectl get -o json`` shows: ``1.5`` → ``1500m``, ``2000`` → ``2k``, ``1536Mi`` stays ``1536Mi``,
``0.5Gi`` → ``512Mi``, a binary value below 1024 or with a fraction is shown in decimal form.
"""

from __future__ import annotations

import enum
import functools
import re
from typing import Final

from taskplug.core._errors import QuantityError

__all__ = ["Quantity", "QuantityFormat"]

_NANO: Final = 10**9


class QuantityFormat(enum.Enum):
    """How a :class:`Quantity` was written, which decides how it prints (apimachinery's
    ``resource.Format``)."""

    DECIMAL_EXPONENT = "DecimalExponent"  # 12e6
    BINARY_SI = "BinarySI"  # 12Mi
    DECIMAL_SI = "DecimalSI"  # 12M


# Kubernetes' regular expression for the whole quantity, written out: sign, digits with at most one
# point, then a suffix (binary, decimal SI, or an exponent).
_QUANTITY_RE = re.compile(
    r"^([+-]?)([0-9]*)(?:\.([0-9]*))?(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+|)$"
)

_DECIMAL_SUFFIX_EXPONENT: Final = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_EXPONENT_DECIMAL_SUFFIX: Final = {e: s for s, e in _DECIMAL_SUFFIX_EXPONENT.items()}
_BINARY_SUFFIX_POWER: Final = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_POWER_BINARY_SUFFIX: Final = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")


class Quantity:
    """An immutable resource quantity; construct with :meth:`parse` (or ``Quantity("100m")``)."""

    __slots__ = ("_canonical", "format", "nanos")

    nanos: int
    format: QuantityFormat
    _canonical: str | None

    def __new__(cls, text: str | int | Quantity = 0) -> Quantity:
        if type(text) is str:  # the common case first: parsing is cached per text
            return _parse(text)
        if isinstance(text, Quantity):
            return text
        if isinstance(text, bool):
            raise QuantityError(f"quantity must be a string or an integer, not {text!r}")
        if isinstance(text, int):
            return cls.from_nanos(text * _NANO, QuantityFormat.DECIMAL_SI)
        if isinstance(text, float):  # type: ignore[unreachable]  # YAML numbers arrive as floats
            raise QuantityError(
                f"quantity {text!r} is a float; write it as a string such as '{text}' to keep it exact"
            )
        if not isinstance(text, str):
            raise QuantityError(f"quantity must be a string or an integer, not {type(text).__name__}")
        return _parse(text)

    @classmethod
    def parse(cls, text: str | int | Quantity) -> Quantity:
        return cls(text)

    @classmethod
    def from_json(cls, value: object) -> Quantity:
        """A quantity as it stands in a Kubernetes JSON or YAML document: a string, or a number, which the
        API server reads by its text (``cpu: 2``, ``cpu: 0.5``). A protobuf Struct holds every number as a
        double, so whole doubles count as integers."""
        if type(value) is str:  # the common case first (parsing is cached per text)
            return _parse(value)
        if isinstance(value, float):
            value = int(value) if value.is_integer() else repr(value)
        return cls(value)  # type: ignore[arg-type]  # anything else is rejected by the constructor

    @classmethod
    def from_nanos(cls, nanos: int, fmt: QuantityFormat = QuantityFormat.DECIMAL_SI) -> Quantity:
        q = object.__new__(cls)
        object.__setattr__(q, "nanos", nanos)
        object.__setattr__(q, "format", fmt)
        object.__setattr__(q, "_canonical", None)
        return q

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Quantity is immutable")

    # -- values --------------------------------------------------------------------------------------
    def is_zero(self) -> bool:
        return self.nanos == 0

    def value(self) -> int:
        """Whole units, rounded up (Kubernetes' ``Value()``: away from zero, so ``-1.5`` gives ``-2``)."""
        return _scaled(self.nanos, _NANO)

    def milli_value(self) -> int:
        """Milli-units, rounded up (Kubernetes' ``MilliValue()``, away from zero)."""
        return _scaled(self.nanos, 10**6)

    # Kubernetes' Add and Sub: a zero quantity takes the other's format (so sums started at 0 keep "Gi").
    def __add__(self, other: Quantity) -> Quantity:
        return Quantity.from_nanos(self.nanos + other.nanos, other.format if self.nanos == 0 else self.format)

    def __sub__(self, other: Quantity) -> Quantity:
        return Quantity.from_nanos(self.nanos - other.nanos, other.format if self.nanos == 0 else self.format)

    def __neg__(self) -> Quantity:
        return Quantity.from_nanos(-self.nanos, self.format)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Quantity):
            return self.nanos == other.nanos
        if isinstance(other, str | int) and not isinstance(other, bool):
            try:
                return self.nanos == Quantity(other).nanos
            except QuantityError:
                return False
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.nanos)

    def __lt__(self, other: Quantity) -> bool:
        return self.nanos < other.nanos

    def __le__(self, other: Quantity) -> bool:
        return self.nanos <= other.nanos

    def __gt__(self, other: Quantity) -> bool:
        return self.nanos > other.nanos

    def __ge__(self, other: Quantity) -> bool:
        return self.nanos >= other.nanos

    def __bool__(self) -> bool:
        return self.nanos != 0

    # -- text ----------------------------------------------------------------------------------------
    def __str__(self) -> str:
        canonical = self._canonical
        if canonical is None:
            canonical = _canonicalize(self.nanos, self.format)
            object.__setattr__(self, "_canonical", canonical)
        return canonical

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r})"

    def __reduce__(self) -> tuple[type[Quantity], tuple[str]]:
        return (Quantity, (str(self),))

    def __deepcopy__(self, memo: object) -> Quantity:
        return self

    def __copy__(self) -> Quantity:
        return self


def _scaled(nanos: int, unit: int) -> int:
    """``nanos / unit`` rounded away from zero (apimachinery's negativeScaleInt64)."""
    magnitude = -(-abs(nanos) // unit)
    return -magnitude if nanos < 0 else magnitude


_MAX_DIGITS = 64
"""Most digits a quantity's number may have (a longer one is refused, never parsed)."""
_MAX_NANOS_DIGITS = 64
"""Most digits a magnitude in nanos may have (1e55 base units): far beyond any real quantity, and small
enough that the arithmetic stays cheap."""


@functools.lru_cache(maxsize=4096)
def _parse(text: str) -> Quantity:
    if not isinstance(text, str):
        raise QuantityError(f"quantity must be a string, not {type(text).__name__}")
    stripped = text.strip()
    match = _QUANTITY_RE.match(stripped)
    if match is None or not stripped:
        raise QuantityError(
            f"quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {text!r}"
        )
    sign, whole, fraction, suffix = match.groups()
    fraction = fraction or ""
    if not whole and not fraction:
        raise QuantityError(f"unable to parse numeric part of quantity {text!r}")
    if len(whole) + len(fraction) > _MAX_DIGITS:
        raise QuantityError(f"quantity {text!r} has more than {_MAX_DIGITS} digits")
    digits = int(whole + fraction or "0")
    scale = -len(fraction)  # value = digits * 10**scale (before the suffix)

    if suffix in _BINARY_SUFFIX_POWER:
        fmt = QuantityFormat.BINARY_SI
        numerator = digits * 1024 ** _BINARY_SUFFIX_POWER[suffix]
        exponent10 = scale
    elif suffix[:1] in ("e", "E") and len(suffix) > 1:
        fmt = QuantityFormat.DECIMAL_EXPONENT
        numerator = digits
        exponent_text = suffix[1:]
        if len(exponent_text.lstrip("+-")) > 4:
            raise QuantityError(f"quantity {text!r} has an exponent out of range")
        exponent10 = scale + int(exponent_text)
    else:
        fmt = QuantityFormat.DECIMAL_SI
        numerator = digits
        exponent10 = scale + _DECIMAL_SUFFIX_EXPONENT[suffix]

    # nanos = numerator * 10**(exponent10 + 9), rounded up when finer than 1n.
    shift = exponent10 + 9
    if numerator and shift > 0 and len(str(numerator)) + shift > _MAX_NANOS_DIGITS:
        # Refused before 10**huge is built: a 1 KB quantity must not cost minutes of CPU.
        raise QuantityError(f"quantity {text!r} is too large")
    if shift >= 0:
        nanos = numerator * 10**shift
    elif -shift > len(str(numerator)):
        nanos = 1 if numerator else 0  # finer than 1n: rounded up, as the API server does
    else:
        nanos = -(-numerator // 10 ** (-shift))
    if sign == "-":
        nanos = -nanos
    return Quantity.from_nanos(nanos, fmt)


def _canonicalize(nanos: int, fmt: QuantityFormat) -> str:
    if nanos == 0:
        return "0"
    sign = "-" if nanos < 0 else ""
    magnitude = -nanos if nanos < 0 else nanos

    if fmt is QuantityFormat.BINARY_SI:
        # Binary form only for whole values of magnitude >= 1024; otherwise decimal avoids rounding.
        if magnitude < 1024 * _NANO or magnitude % _NANO:
            fmt = QuantityFormat.DECIMAL_SI
        else:
            amount = magnitude // _NANO
            power = 0
            while amount % 1024 == 0 and power < len(_POWER_BINARY_SUFFIX) - 1:
                amount //= 1024
                power += 1
            return f"{sign}{amount}{_POWER_BINARY_SUFFIX[power]}"

    # Decimal forms: mantissa * 10**exponent with the exponent a multiple of 3 and no trailing 000.
    mantissa, exponent = magnitude, -9
    while mantissa % 10 == 0:
        mantissa //= 10
        exponent += 1
    drop = exponent % 3
    mantissa *= 10**drop
    exponent -= drop

    if fmt is QuantityFormat.DECIMAL_SI and exponent in _EXPONENT_DECIMAL_SUFFIX:
        return f"{sign}{mantissa}{_EXPONENT_DECIMAL_SUFFIX[exponent]}"
    if exponent == 0:
        return f"{sign}{mantissa}"
    return f"{sign}{mantissa}e{exponent}"
