"""The bounded document reader: UTF-8 only, the YAML safe schema, aliases and nesting within bounds."""

from __future__ import annotations

import pytest

from taskplug.core import DocumentError, load_document


def test_json_and_yaml_documents_are_read() -> None:
    assert load_document(b'{"a": [1, 2]}', "f") == {"a": [1, 2]}
    assert load_document(b"a: [1, 2]\nb: {c: d}\n", "f") == {"a": [1, 2], "b": {"c": "d"}}
    assert load_document(b"", "f") is None


def test_aliases_within_the_bound_are_expanded() -> None:
    assert load_document(b"a: &x [1, 2]\nb: *x\n", "f") == {"a": [1, 2], "b": [1, 2]}


def test_an_alias_bomb_is_refused_naming_the_source() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]" for i in range(1, 12)]
    with pytest.raises(DocumentError) as caught:
        load_document("\n".join(lines).encode(), "spec.yaml")
    assert caught.value.path == "spec.yaml"
    assert "more than" in caught.value.reason


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"[" * 5000 + b"]" * 5000, id="deep-json-like-yaml"),
        pytest.param(b"a:\n" + b"".join(b"  " * i + b"b:\n" for i in range(1, 400)), id="deep-map"),
    ],
)
def test_a_document_nested_too_deep_is_refused(data: bytes) -> None:
    with pytest.raises(DocumentError, match=r"deeper than|not valid"):
        load_document(data, "f")


def test_deep_json_is_refused_when_only_json_is_allowed() -> None:
    with pytest.raises(DocumentError):
        load_document(b"[" * 300 + b"]" * 300, "body", yaml_allowed=False)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        pytest.param(b"\xff\xfe\x00a: 1", "not UTF-8", id="binary"),
        pytest.param(b"!!python/object/apply:os.system ['true']", "not valid YAML", id="python-tag"),
        pytest.param(b"a: [1, 2", "not valid YAML", id="unterminated"),
    ],
)
def test_unreadable_documents_are_refused_with_the_reason(data: bytes, reason: str) -> None:
    with pytest.raises(DocumentError, match=reason):
        load_document(data, "f")
