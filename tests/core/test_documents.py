"""The bounded document reader: a size cap, UTF-8 only, JSON's values from the YAML safe schema, aliases and
nesting within bounds counted as the document is built."""

from __future__ import annotations

from pathlib import Path

import pytest

from taskplug.core import MAX_DOCUMENT_BYTES, DocumentError, load_document, load_documents


def test_json_and_yaml_documents_are_read() -> None:
    assert load_document(b'{"a": [1, 2]}', "f") == {"a": [1, 2]}
    assert load_document(b"a: [1, 2]\nb: {c: d}\n", "f") == {"a": [1, 2], "b": {"c": "d"}}
    assert load_document(b"", "f") is None


def test_aliases_within_the_bound_are_expanded() -> None:
    assert load_document(b"a: &x [1, 2]\nb: *x\n", "f") == {"a": [1, 2], "b": [1, 2]}
    assert load_document(b"base: &b {x: 1}\nc: {<<: *b, y: 2}\n", "f")["c"] == {"x": 1, "y": 2}


def _bomb(levels: int, width: int = 9) -> bytes:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    refs = ", ".join(["*a{}"] * width)
    lines += [f"a{i}: &a{i} [{refs.format(*[i - 1] * width)}]" for i in range(1, levels)]
    return "\n".join(lines).encode()


def test_an_alias_bomb_is_refused_naming_the_source_and_where() -> None:
    with pytest.raises(DocumentError) as caught:
        load_document(_bomb(12), "spec.yaml", max_nodes=250_000)
    assert caught.value.path == "spec.yaml"
    assert "expands to more than 250000 values" in caught.value.reason
    assert "line " in caught.value.reason


def test_an_alias_bomb_just_within_the_bound_loads_its_shared_values() -> None:
    value = load_document(_bomb(3, width=2), "f", max_nodes=100)
    assert value["a2"] == [value["a1"], value["a1"]]


@pytest.mark.parametrize(
    "data",
    [b"a: &a [*a]\n", b"a: &a {b: *a}\n", b"a: &a [1, [2, *a]]\n"],
    ids=["list", "map", "nested"],
)
def test_a_recursive_alias_is_refused(data: bytes) -> None:
    with pytest.raises(DocumentError, match="refers to itself"):
        load_document(data, "f")


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"[" * 50_000 + b"]" * 50_000, id="deep-flow-list"),
        pytest.param(b"{a: " * 3000 + b"1" + b"}" * 3000, id="deep-flow-map"),
        pytest.param(b"".join(b"  " * i + b"a:\n" for i in range(600)), id="deep-block-map"),
        pytest.param(b"".join(b"  " * i + b"-\n" for i in range(600)), id="deep-block-list"),
        pytest.param(
            b"a: &x " + b"[" * 180 + b"]" * 180 + b"\nb: " + b"[" * 25 + b"*x" + b"]" * 25 + b"\n",
            id="deep-through-aliases",
        ),
    ],
)
def test_a_document_nested_too_deep_is_refused(data: bytes) -> None:
    with pytest.raises(DocumentError, match=r"nests deeper than 200 levels"):
        load_document(data, "f")


def test_a_long_document_is_refused_once_it_passes_the_bound_of_values() -> None:
    with pytest.raises(DocumentError, match=r"holds more than 1000 values \(line 1, column"):
        load_document(b"[" + b"1, " * 5000 + b"1]", "f", max_nodes=1000)


def test_json_only_documents_have_the_same_bounds() -> None:
    with pytest.raises(DocumentError, match="deeper than"):
        load_document(b"[" * 300 + b"]" * 300, "body", yaml_allowed=False)
    with pytest.raises(DocumentError, match="more than 10 values"):
        load_document(b"[" + b"1," * 20 + b"1]", "body", yaml_allowed=False, max_nodes=10)
    with pytest.raises(DocumentError, match="not valid JSON"):
        load_document(b"a: 1", "body", yaml_allowed=False)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        pytest.param(b"\xff\xfe\x00a: 1", r"not UTF-8 text \(byte 0 is 0xff\)", id="binary"),
        pytest.param(b"a: caf\xc3", r"not UTF-8 text \(byte 6 is 0xc3\)", id="truncated-utf8"),
        pytest.param(b"!!python/object/apply:os.system ['true']", "not valid YAML", id="python-tag"),
        pytest.param(b"a: !!binary aGVsbG8=", "not a JSON value", id="binary-tag"),
        pytest.param(b"a: !!set {x, y}", "not a JSON value", id="set"),
        pytest.param(b"a: !!omap [{x: 1}]", "not a JSON value", id="omap"),
        pytest.param(b"a: [1, 2", "not valid YAML", id="unterminated"),
        pytest.param(b"a: 1\x00\n", "not valid YAML", id="nul"),
        pytest.param(b"a: \x07\n", "not valid YAML", id="control-character"),
        pytest.param(b"? [a]\n: 1\n", "not valid YAML", id="list-key"),
    ],
)
def test_unreadable_documents_are_refused_with_the_reason(data: bytes, reason: str) -> None:
    with pytest.raises(DocumentError, match=reason):
        load_document(data, "f")


def test_a_timestamp_stays_the_text_it_was_written_as() -> None:
    value = load_document(b"a: 2024-01-02\nb: 2001-12-14t21:59:43.10-05:00\n", "f")
    assert value == {"a": "2024-01-02", "b": "2001-12-14t21:59:43.10-05:00"}


def test_only_jsons_types_come_out() -> None:
    value = load_document(b"a: [1, 1.5, .inf, true, null, x, {1: y}]\n", "f")
    kinds = {type(v) for v in value["a"]}
    assert kinds == {int, float, bool, type(None), str, dict}


# -- files -----------------------------------------------------------------------------------------------


def test_a_file_is_read_and_named_in_its_errors(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_bytes(b"a: 1\n")
    assert load_document(path) == {"a": 1}
    path.write_bytes(b"a: \xff\n")
    with pytest.raises(DocumentError) as caught:
        load_document(path, what="config file")
    assert caught.value.path == str(path)
    assert str(caught.value) == f"{path}: is not UTF-8 text (byte 3 is 0xff)"


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(DocumentError) as caught:
        load_document(tmp_path / "nope.yaml", what="execution spec")
    assert caught.value.path == str(tmp_path / "nope.yaml")
    assert "cannot read execution spec: No such file or directory" in caught.value.reason


def test_a_file_over_the_size_bound_is_refused_having_read_one_byte_more(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_bytes(b"a: 1\n" + b"#" * 100)
    with pytest.raises(DocumentError, match="larger than 50 bytes"):
        load_document(path, max_bytes=50)
    assert load_document(path, max_bytes=105) == {"a": 1}


def test_an_endless_file_is_refused_at_once() -> None:
    with pytest.raises(DocumentError, match="larger than 1024 bytes") as caught:
        load_document(Path("/dev/zero"), what="execution spec", max_bytes=1024)
    assert caught.value.path == "/dev/zero"


def test_bytes_over_the_size_bound_are_refused() -> None:
    with pytest.raises(DocumentError, match="larger than 4 bytes"):
        load_document(b"a: 12", "body", max_bytes=4)


# -- multi-document streams --------------------------------------------------------------------------


def test_a_multi_document_stream_gives_each_document_in_order() -> None:
    data = b"# templates\n---\na: 1\n---\n---\nb: [2]\n...\n---\nc: x\n"
    assert load_documents(data, "f") == [{"a": 1}, None, {"b": [2]}, {"c": "x"}]
    assert load_documents(b"", "f") == []
    assert load_documents(b'{"a": 1}', "f", yaml_allowed=False) == [{"a": 1}]


def test_a_separator_inside_a_block_scalar_does_not_split_the_document() -> None:
    data = b"a: |\n  text\n  --- not a separator when indented\n---\nb: 2\n"
    assert load_documents(data, "f") == [{"a": "text\n--- not a separator when indented\n"}, {"b": 2}]


def test_errors_in_a_later_document_give_the_line_in_the_whole_file() -> None:
    with pytest.raises(DocumentError) as caught:
        load_documents(b"a: 1\n---\nb: 2\n---\nc: [unclosed\n", "t.yaml")
    assert caught.value.path == "t.yaml"
    assert "line 5" in caught.value.reason or "line 6" in caught.value.reason


def test_the_bound_of_values_holds_for_all_documents_together() -> None:
    # Each document alone is within the bound; together they pass it: a long stream is no way around it.
    one = b"- [x, x, x, x, x, x, x, x, x]\n"
    data = b"---\n".join([one * 2] * 5)
    assert len(load_documents(data, "f", max_nodes=200)) == 5
    with pytest.raises(DocumentError) as caught:
        load_documents(data, "f", max_nodes=80)
    assert "more than 80 values" in caught.value.reason


def test_an_alias_bomb_split_over_documents_is_refused() -> None:
    bomb = _bomb(12)
    with pytest.raises(DocumentError) as caught:
        load_documents(b"a: 1\n---\n" + bomb, "t.yaml")
    assert "expands to more than" in caught.value.reason
    # Expansion is counted across documents too: two halves of the bound are one bound.
    half = _bomb(3, width=6)  # 11 + 67 + 403 values, 3 keys and the map: 485, within 500 alone
    assert len(load_documents(half, "f", max_nodes=500)) == 1
    with pytest.raises(DocumentError) as caught:
        load_documents(half + b"\n---\n" + half, "f", max_nodes=500)
    assert "more than 500 values with the documents before it" in caught.value.reason


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        pytest.param(b"a: 1\n---\n\xff\n", "is not UTF-8 text", id="not-utf8"),
        pytest.param(b"a: 1\n---\n!!python/object:os.system x\n", "is not valid YAML", id="python-tag"),
        pytest.param(b"a: 1\n---\nb: !!binary aGk=\n", "is not a JSON value", id="binary"),
        pytest.param(b"a: 1\n---\n" + b"[" * 300 + b"]" * 300, "nests deeper than", id="deep"),
        pytest.param(b"---\na: &a [*a]\n", "refers to itself", id="recursive"),
    ],
)
def test_every_document_of_a_stream_has_the_single_documents_rules(data: bytes, reason: str) -> None:
    with pytest.raises(DocumentError) as caught:
        load_documents(data, "t.yaml")
    assert caught.value.path == "t.yaml"
    assert reason in caught.value.reason


def test_a_stream_file_is_read_within_the_size_bound(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_bytes(b"a: 1\n---\n" + b"#" * MAX_DOCUMENT_BYTES)
    with pytest.raises(DocumentError) as caught:
        load_documents(path, what="pod templates")
    assert caught.value.path == str(path)
    assert f"pod templates is larger than {MAX_DOCUMENT_BYTES} bytes" in caught.value.reason
    with pytest.raises(DocumentError) as caught:
        load_documents("/dev/zero")
    assert "larger than" in caught.value.reason
