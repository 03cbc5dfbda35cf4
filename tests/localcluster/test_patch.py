from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from taskplug.k8s import KubeApiError
from taskplug.localcluster._patch import json_patch, merge_patch, strategic_merge_patch

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=3), children, max_size=3)
    ),
    max_leaves=10,
)
json_objects = st.dictionaries(st.text(max_size=3), json_values, max_size=4)


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    return value


@given(json_objects)
def test_merge_patch_with_an_empty_patch_is_the_identity(doc: dict[str, Any]) -> None:
    assert merge_patch(doc, {}) == doc


@given(json_objects, json_objects)
def test_merge_patch_applied_twice_is_the_same_as_once(doc: dict[str, Any], patch: dict[str, Any]) -> None:
    once = merge_patch(doc, patch)
    assert merge_patch(once, patch) == once


def test_merge_patch_removes_keys_set_to_null_and_replaces_lists() -> None:
    doc = {"metadata": {"labels": {"a": "1", "b": "2"}, "finalizers": ["x", "y"]}}
    patched = merge_patch(doc, {"metadata": {"labels": {"a": None, "c": "3"}, "finalizers": ["z"]}})
    assert patched == {"metadata": {"labels": {"b": "2", "c": "3"}, "finalizers": ["z"]}}
    assert doc["metadata"]["labels"] == {"a": "1", "b": "2"}  # the input is untouched


def test_strategic_merge_patch_merges_containers_by_name_and_replaces_finalizers() -> None:
    doc = {
        "metadata": {"finalizers": ["a", "b"]},
        "spec": {"containers": [{"name": "main", "image": "x"}, {"name": "side", "image": "y"}]},
    }
    patched = strategic_merge_patch(
        doc,
        {
            "metadata": {"finalizers": []},
            "spec": {"containers": [{"name": "side", "image": "z"}, {"name": "new", "image": "n"}]},
        },
    )
    assert patched["metadata"]["finalizers"] == []
    assert patched["spec"]["containers"] == [
        {"name": "main", "image": "x"},
        {"name": "side", "image": "z"},
        {"name": "new", "image": "n"},
    ]


def test_strategic_merge_patch_honours_delete_directives() -> None:
    doc = {
        "metadata": {"finalizers": ["a", "b"]},
        "spec": {"containers": [{"name": "main"}, {"name": "side"}]},
    }
    patched = strategic_merge_patch(
        doc,
        {
            "metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]},
            "spec": {"containers": [{"name": "side", "$patch": "delete"}]},
        },
    )
    assert patched == {"metadata": {"finalizers": ["b"]}, "spec": {"containers": [{"name": "main"}]}}


def test_json_patch_applies_rfc6902_operations_in_order() -> None:
    doc = {"metadata": {"labels": {"a": "1"}, "finalizers": ["f1", "f2"]}}
    patched = json_patch(
        doc,
        [
            {"op": "test", "path": "/metadata/labels/a", "value": "1"},
            {"op": "add", "path": "/metadata/labels/b", "value": "2"},
            {"op": "remove", "path": "/metadata/finalizers/0"},
            {"op": "replace", "path": "/metadata/labels/a", "value": "9"},
            {"op": "copy", "from": "/metadata/labels/b", "path": "/metadata/labels/c"},
            {"op": "move", "from": "/metadata/labels/c", "path": "/metadata/labels/d"},
            {"op": "add", "path": "/metadata/finalizers/-", "value": "f3"},
        ],
    )
    assert patched == {"metadata": {"labels": {"a": "9", "b": "2", "d": "2"}, "finalizers": ["f2", "f3"]}}


def test_json_patch_failing_a_test_is_a_422() -> None:
    with pytest.raises(KubeApiError) as caught:
        json_patch({"a": 1}, [{"op": "test", "path": "/a", "value": 2}])
    assert caught.value.status == 422


def test_json_patch_on_a_missing_path_is_a_422() -> None:
    with pytest.raises(KubeApiError) as caught:
        json_patch({"a": 1}, [{"op": "remove", "path": "/b/c"}])
    assert caught.value.status == 422


def test_null_values_never_survive_a_merge_patch() -> None:
    assert merge_patch({"a": {"b": 1}}, {"a": {"b": None, "c": None}}) == _without_nulls({"a": {}})
