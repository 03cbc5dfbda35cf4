"""Flyte's dns_test.go and encoder behaviour, as parametrized cases."""

from __future__ import annotations

import pytest

from taskplug.k8s._names import (
    convert_camel_case_to_kebab_case,
    convert_to_dns1123_subdomain_compatible,
    fixed_length_unique_id,
    is_dns1123_label,
    is_dns1123_subdomain,
)

_DIGITS_70 = "0123456789" * 7
_DIGITS_280 = "0123456789" * 28


@pytest.mark.parametrize(
    ("name", "want"),
    [
        ("orgflyteexamplesHelloWorldTask-0", "orgflyteexamples-hello-world-task-0"),
        ("t7vyqhzju1-fib-5-0", "t7vyqhzju1-fib-5-0"),
        ("t7v.yqh.zju1-fib-5-0", "t7v.yqh.zju1-fib-5-0"),
        ("-t7vyqhzju1-fib-5-0", "t7vyqhzju1-fib-5-0"),
        (".t7vyqhzju1-fib-5-0", "t7vyqhzju1-fib-5-0"),
        ("t7vyqhzju1-fib-5-0-", "t7vyqhzju1-fib-5-0"),
        ("t7vyqhzju1-fib-5-0.", "t7vyqhzju1-fib-5-0"),
        (_DIGITS_70, _DIGITS_70),
        (_DIGITS_280, _DIGITS_280[:232] + "-fbbrvh4i"),
        ("---..t7vyqhzjJcI==u1-HelloWorldTask[].-.-.", "t7vyqhzj-jc-iu1-hello-world-task"),
    ],
)
def test_names_are_made_dns1123_subdomain_compatible_as_flyte_does(name: str, want: str) -> None:
    got = convert_to_dns1123_subdomain_compatible(name)
    assert got == want
    assert is_dns1123_subdomain(got)


@pytest.mark.parametrize(
    ("name", "want"),
    [
        ("orgflyteexamplesHelloWorldTask", "orgflyteexamples-hello-world-task"),
        ("t7vyqhzju1-fib-5-0", "t7vyqhzju1-fib-5-0"),
    ],
)
def test_camel_case_becomes_kebab_case(name: str, want: str) -> None:
    assert convert_camel_case_to_kebab_case(name) == want


def test_fixed_length_unique_id_keeps_short_ids_and_hashes_long_ones() -> None:
    assert fixed_length_unique_id("short", 20) == "short"
    hashed = fixed_length_unique_id("x" * 40, 20)
    assert hashed.startswith("f")
    assert len(hashed) == 8
    with pytest.raises(ValueError, match="too small"):
        fixed_length_unique_id("x" * 40, 5)


@pytest.mark.parametrize(
    ("name", "subdomain", "label"),
    [
        ("a", True, True),
        ("a.b", True, False),
        ("A", False, False),
        ("-a", False, False),
        ("a" * 64, True, False),
    ],
)
def test_dns1123_validity_checks(name: str, subdomain: bool, label: bool) -> None:
    assert is_dns1123_subdomain(name) is subdomain
    assert is_dns1123_label(name) is label
