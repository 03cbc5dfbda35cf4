"""Quantity: Kubernetes' resource quantity semantics (apimachinery resource/quantity.go)."""

from __future__ import annotations

import copy
import pickle

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from taskplug.core import Quantity, QuantityError, QuantityFormat

NANO = 10**9


@pytest.mark.parametrize(
    ("text", "nanos", "fmt"),
    [
        ("100m", 100_000_000, QuantityFormat.DECIMAL_SI),
        ("1.5Gi", 3 * 2**29 * NANO, QuantityFormat.BINARY_SI),
        ("1e3", 1000 * NANO, QuantityFormat.DECIMAL_EXPONENT),
        ("1E3", 1000 * NANO, QuantityFormat.DECIMAL_EXPONENT),
        ("1e-3", 1_000_000, QuantityFormat.DECIMAL_EXPONENT),
        ("12e+6", 12_000_000 * NANO, QuantityFormat.DECIMAL_EXPONENT),
        (".5", NANO // 2, QuantityFormat.DECIMAL_SI),
        ("+1", NANO, QuantityFormat.DECIMAL_SI),
        ("-1", -NANO, QuantityFormat.DECIMAL_SI),
        ("1n", 1, QuantityFormat.DECIMAL_SI),
        ("1u", 1000, QuantityFormat.DECIMAL_SI),
        ("2", 2 * NANO, QuantityFormat.DECIMAL_SI),
        ("5.", 5 * NANO, QuantityFormat.DECIMAL_SI),
        ("0", 0, QuantityFormat.DECIMAL_SI),
        ("1k", 1000 * NANO, QuantityFormat.DECIMAL_SI),
        ("1M", 10**6 * NANO, QuantityFormat.DECIMAL_SI),
        ("1G", 10**9 * NANO, QuantityFormat.DECIMAL_SI),
        ("1T", 10**12 * NANO, QuantityFormat.DECIMAL_SI),
        ("1P", 10**15 * NANO, QuantityFormat.DECIMAL_SI),
        ("1E", 10**18 * NANO, QuantityFormat.DECIMAL_SI),
        ("1Ki", 1024 * NANO, QuantityFormat.BINARY_SI),
        ("1Mi", 1024**2 * NANO, QuantityFormat.BINARY_SI),
        ("1Ti", 1024**4 * NANO, QuantityFormat.BINARY_SI),
        ("1Pi", 1024**5 * NANO, QuantityFormat.BINARY_SI),
        ("1Ei", 1024**6 * NANO, QuantityFormat.BINARY_SI),
    ],
)
def test_every_valid_form_parses_to_its_exact_value_and_format(
    text: str, nanos: int, fmt: QuantityFormat
) -> None:
    q = Quantity(text)
    assert q.nanos == nanos
    assert q.format is fmt
    assert Quantity.parse(text) == q


@pytest.mark.parametrize(
    "text",
    ["1K", "1.2.3", "e3", "", "1e", "1ki", "abc", "1 m", "Mi", "--1", "1Gi1", "1e1.5", "1.5.Gi", "+", "."],
)
def test_invalid_forms_are_rejected(text: str) -> None:
    with pytest.raises(QuantityError):
        Quantity(text)


def test_quantity_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        Quantity("1K")


@pytest.mark.parametrize("value", [1.5, 2.0, True, None, [1]])
def test_non_string_non_integer_values_are_rejected(value: object) -> None:
    with pytest.raises(QuantityError):
        Quantity(value)  # type: ignore[arg-type]


def test_an_integer_is_a_whole_number_of_units() -> None:
    assert Quantity(3) == Quantity("3")
    assert str(Quantity(2000)) == "2k"


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("1", "1000m"),
        ("1Ki", "1024"),
        ("1k", "1000"),
        ("1e3", "1k"),
        ("0.5Gi", "512Mi"),
        ("1G", "1e9"),
        ("0", "0Gi"),
    ],
)
def test_quantities_compare_by_value(a: str, b: str) -> None:
    assert Quantity(a) == Quantity(b)
    assert hash(Quantity(a)) == hash(Quantity(b))
    assert Quantity(a) == b


def test_ordering_is_by_value() -> None:
    assert Quantity("999m") < Quantity("1")
    assert Quantity("1Ki") > Quantity("1k")
    assert Quantity("1") <= Quantity("1000m") <= Quantity("1")
    assert Quantity("-1") < Quantity("0")
    assert max(Quantity("1Gi"), Quantity("1G")) == Quantity("1Gi")


def test_equality_with_an_invalid_string_is_false() -> None:
    assert Quantity("1") != "one"


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("1.5", "1500m"),
        ("2000", "2k"),
        ("0.5Gi", "512Mi"),
        ("1536Mi", "1536Mi"),
        ("1.5Gi", "1536Mi"),
        ("1024Ki", "1Mi"),
        ("2048", "2048"),
        ("1e3", "1e3"),
        ("1E3", "1e3"),
        ("1.5e3", "1500"),
        ("1e-3", "1e-3"),
        ("12e6", "12e6"),
        ("0.0000000001", "1n"),
        ("-0.0000000001", "-1n"),
        ("1.1e-10", "1e-9"),
        ("100000m", "100"),
        ("100m", "100m"),
        (".5", "500m"),
        ("+1", "1"),
        ("-1", "-1"),
        ("5.", "5"),
        ("0", "0"),
        ("0Gi", "0"),
        ("1000000000", "1G"),
        ("1023", "1023"),
        ("0.5Ki", "512"),
        ("1.5Ki", "1536"),
        ("1Ki", "1Ki"),
        ("1n", "1n"),
        ("1u", "1u"),
        ("1000u", "1m"),
        ("10Mi", "10Mi"),
    ],
)
def test_canonical_form_is_the_one_kubernetes_prints(text: str, canonical: str) -> None:
    assert str(Quantity(text)) == canonical


def test_a_binary_value_without_a_binary_suffix_reparses_as_decimal() -> None:
    # Kubernetes does the same: 1.953125Ki is 2000 (shown as "2000"), and "2000" parses as DecimalSI "2k".
    q = Quantity("1.953125Ki")
    assert str(q) == "2000"
    assert str(Quantity(str(q))) == "2k"
    assert Quantity(str(q)) == q


@pytest.mark.parametrize(
    ("text", "value", "milli"),
    [
        ("1", 1, 1000),
        ("1.5", 2, 1500),
        ("100m", 1, 100),
        ("1n", 1, 1),
        ("1500u", 1, 2),
        ("0", 0, 0),
        ("1Ki", 1024, 1024000),
        # Kubernetes rounds away from zero (negativeScaleInt64).
        ("-1.5", -2, -1500),
        ("-1n", -1, -1),
    ],
)
def test_value_and_milli_value_round_up(text: str, value: int, milli: int) -> None:
    q = Quantity(text)
    assert q.value() == value
    assert q.milli_value() == milli


def test_is_zero_and_truthiness() -> None:
    assert Quantity("0").is_zero()
    assert Quantity("0Mi").is_zero()
    assert not Quantity("1n").is_zero()
    assert not Quantity("0")
    assert Quantity("1m")


def test_arithmetic_is_exact() -> None:
    assert Quantity("100m") + Quantity("900m") == Quantity("1")
    assert Quantity("1Gi") - Quantity("512Mi") == Quantity("512Mi")
    assert -Quantity("1") == Quantity("-1")
    assert str(Quantity("1Gi") + Quantity("1Gi")) == "2Gi"


def test_adding_to_zero_takes_the_other_format() -> None:
    # Kubernetes' Add: "If the current value is zero, the format of the quantity will be updated to the format of y."
    assert str(Quantity("0") + Quantity("1Gi")) == "1Gi"
    assert str(Quantity(0) + Quantity("1536Mi") + Quantity("512Mi")) == "2Gi"
    assert str(Quantity("0") - Quantity("1Gi")) == "-1Gi"


def test_adding_to_a_non_zero_quantity_keeps_its_format() -> None:
    assert str(Quantity("1k") + Quantity("24")) == "1024"
    assert str(Quantity("1Ki") + Quantity("1k")) == "2024"  # BinarySI not a multiple of 1024 → plain digits


def test_quantities_are_immutable_and_copy_to_themselves() -> None:
    q = Quantity("1Gi")
    with pytest.raises(AttributeError):
        q.nanos = 1  # type: ignore[misc]
    assert copy.copy(q) is q
    assert copy.deepcopy(q) is q
    assert pickle.loads(pickle.dumps(q)) == q
    assert Quantity(q) is q


def test_repr_shows_the_canonical_text() -> None:
    assert repr(Quantity("1.5")) == "Quantity('1500m')"


# -- laws ------------------------------------------------------------------------------------------------

# Values up to 10^17 units keep every exponent within the SI suffixes (E = 10^18).
_nanos = st.integers(min_value=-(10**26), max_value=10**26)
_formats = st.sampled_from(list(QuantityFormat))
quantities = st.builds(Quantity.from_nanos, _nanos, _formats)

_suffixes = st.sampled_from(
    ["", "n", "u", "m", "k", "M", "G", "Ki", "Mi", "Gi", "Ti", "e3", "E-2", "e0", "e+6"]
)
quantity_texts = st.builds(
    lambda sign, whole, frac, suffix: f"{sign}{whole}{frac}{suffix}",
    st.sampled_from(["", "+", "-"]),
    st.integers(min_value=0, max_value=10**9).map(str),
    st.one_of(st.just(""), st.integers(min_value=0, max_value=10**6).map(lambda f: f".{f}")),
    _suffixes,
)


@given(quantities)
def test_parse_of_format_gives_back_the_same_value(q: Quantity) -> None:
    assert Quantity(str(q)) == q
    assert Quantity(str(q)).nanos == q.nanos


def _binary_shown_as_plain_digits(q: Quantity) -> bool:
    text = str(q)
    return q.format is QuantityFormat.BINARY_SI and text.lstrip("-").isdigit()


@given(quantities)
def test_format_is_idempotent(q: Quantity) -> None:
    # A BinarySI value printed without a suffix reparses as DecimalSI, in Kubernetes too (see above).
    assume(not _binary_shown_as_plain_digits(q))
    text = str(q)
    assert str(Quantity(text)) == text


@given(quantities)
def test_format_is_idempotent_after_one_reparse(q: Quantity) -> None:
    once = str(Quantity(str(q)))
    assert str(Quantity(once)) == once


@given(quantity_texts)
def test_every_generated_text_parses_and_round_trips(text: str) -> None:
    q = Quantity(text)
    assert Quantity(str(q)) == q


@given(quantities, quantities)
def test_ordering_is_consistent_with_the_numeric_value(a: Quantity, b: Quantity) -> None:
    assert (a < b) == (a.nanos < b.nanos)
    assert (a == b) == (a.nanos == b.nanos)
    assert (a > b) == (a.nanos > b.nanos)


@given(quantities, quantities, quantities)
def test_addition_is_monotone(a: Quantity, b: Quantity, c: Quantity) -> None:
    if a <= b:
        assert a + c <= b + c
    assert (a + c).nanos == a.nanos + c.nanos


@given(quantities)
def test_value_rounds_away_from_zero(q: Quantity) -> None:
    value = q.value()
    assert abs(value) * NANO >= abs(q.nanos)
    assert abs(value) * NANO - abs(q.nanos) < NANO
    if q.nanos:
        assert (value > 0) == (q.nanos > 0)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        pytest.param("1e999999999", "exponent out of range", id="huge-exponent"),
        pytest.param("1e-999999999", "exponent out of range", id="tiny-exponent"),
        pytest.param("1" * 5000, "more than 64 digits", id="five-thousand-digits"),
        pytest.param("1" * 60 + "e9", "too large", id="beyond-any-real-value"),
        pytest.param("9" * 50 + "Ei", "too large", id="huge-with-a-suffix"),
    ],
)
def test_a_hostile_quantity_is_refused_at_once_not_computed(text: str, reason: str) -> None:
    # Each of these once built 10**huge (minutes of CPU) or raised a ValueError instead of a QuantityError.
    with pytest.raises(QuantityError, match=reason):
        Quantity(text)


def test_values_finer_than_a_nano_still_round_up_without_computing_the_power() -> None:
    assert Quantity("1e-30") == Quantity("1e-10") == Quantity("1n")
    assert str(Quantity("0e-30")) == "0"
