"""Node ids and launch-plan child names (pluginmachinery/encoding/encoder_test.go, nodes/common/utils_test.go,
nodes/subworkflow/util_test.go and the launch-plan vectors propeller's naming gives)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from taskplug.executor.nodes._ids import (
    child_execution_name,
    fixed_length_unique_id_for_parts,
    unique_node_id,
)
from taskplug.k8s import fixed_length_unique_id

MANY = ["x", "y", "z", "m", "n", "y", "z", "m", "n", "y", "z", "m", "n"]


@pytest.mark.parametrize(
    ("parts", "max_length", "hash_bits", "expected"),
    [
        (["x", "y", "z"], 10, 32, "x-y-z"),
        (["x"], 2, 32, "x"),
        (MANY, 15, 32, "fe63sz6y"),
        (MANY, 15, 64, "fwp4bky2kucex5"),
        ([*MANY, "z", "m", "n", "y", "z", "m", "n"], 30, 128, "fbmesl15enghpjepzjm5cp1zfqe"),
        (["", "", "n3"], 20, 32, "n3"),
        (["n4", "0", "n1"], 20, 32, "n4-0-n1"),
        (["n0-0-n1-0-n2-0-n3-0-n4"], 20, 32, "fxzpz2jy"),
        (["a", "", "b"], 20, 32, "a--b"),  # only leading empty parts lose their dash
    ],
)
def test_parts_are_joined_or_hashed_with_the_chosen_fnv_width(
    parts: list[str], max_length: int, hash_bits: int, expected: str
) -> None:
    assert fixed_length_unique_id_for_parts(max_length, parts, hash_bits=hash_bits) == expected


@pytest.mark.parametrize(
    ("text", "max_length", "expected"),
    [("x", 5, "x"), ("xxxxx", 10, "xxxxx"), ("x" * 24, 20, "fuaa3aji")],
)
def test_fixed_length_unique_id_matches_flytes_table(text: str, max_length: int, expected: str) -> None:
    assert fixed_length_unique_id(text, max_length) == expected


def test_a_hash_that_does_not_fit_is_refused() -> None:
    # Flyte returns fz2jizji with an error; the error is what a caller sees.
    with pytest.raises(ValueError, match="too small"):
        fixed_length_unique_id_for_parts(1, ["x", "y"])
    with pytest.raises(ValueError, match="bits"):
        fixed_length_unique_id("x" * 30, 20, hash_bits=48)


@pytest.mark.parametrize(
    ("parent", "attempt", "node", "expected"),
    [
        (None, 0, "n3", "n3"),
        (None, 5, "n3", "n3"),  # no parent: the attempt is not part of the id
        ("u1", 2, "n1", "u1-2-n1"),
        ("u1111111111323131231asdadasd", 2, "n1", "fraibbty"),
        ("n1", 0, "n0", "n1-0-n0"),  # sub-workflow child
        ("n4", 0, "n4-n0", "n4-0-n4-n0"),  # branch child
        ("n7", 0, "dn0", "n7-0-dn0"),  # dynamic child
        ("n0-0-n1-0-n2-0-n3", 0, "n4", "fxzpz2jy"),
        (None, 0, "a-node-id-longer-than-twenty", fixed_length_unique_id("a-node-id-longer-than-twenty", 20)),
    ],
)
def test_unique_node_id_follows_the_parent_lineage(
    parent: str | None, attempt: int, node: str, expected: str
) -> None:
    assert unique_node_id(parent, attempt, node) == expected


@pytest.mark.parametrize(
    ("execution", "node", "attempt", "expected"),
    [
        ("abc", "n5", 0, "abc-n5-0"),
        ("f6f2d3a4b5c6d7e8f9a0", "n5", 0, "fttxqlskxjdn6y"),
        ("f6f2d3a4b5c6d7e8f9a0", "n4-0-n1", 0, "fp622x1xcchf6e"),
    ],
)
def test_child_execution_name_hashes_with_fnv64(
    execution: str, node: str, attempt: int, expected: str
) -> None:
    assert child_execution_name(execution, node, attempt) == expected


def test_definition_version_0_names_children_with_fnv32() -> None:
    # util_test.go: execution first-name-is-pretty-large, node hello-world, attempt 1.
    assert (
        child_execution_name("first-name-is-pretty-large", "hello-world", 1, definition_version=0)
        == "fav2uxxi"
    )
    assert len(child_execution_name("first-name-is-pretty-large", "hello-world", 1)) == 14


@given(
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=40),
    st.integers(0, 99),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=40),
)
def test_a_unique_node_id_is_the_lineage_or_its_8_character_hash(
    parent: str, attempt: int, node: str
) -> None:
    joined = f"{parent}-{attempt}-{node}"
    uid = unique_node_id(parent, attempt, node)
    assert uid == joined if len(joined) <= 20 else (len(uid) == 8 and uid.startswith("f"))
