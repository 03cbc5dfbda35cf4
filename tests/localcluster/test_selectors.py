from __future__ import annotations

import pytest

from taskplug.k8s import KubeApiError
from taskplug.localcluster._selectors import FieldSelector, LabelSelector

LABELS = {"a": "b", "c": "x", "e": "y", "g": "1"}


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        ("", True),
        ("a=b", True),
        ("a==b", True),
        ("a=z", False),
        ("c!=d", True),
        ("c!=x", False),
        ("missing!=v", True),
        ("e in (x,y)", True),
        ("e in (x, z)", False),
        ("e notin (x,z)", True),
        ("missing notin (x)", True),
        ("!f", True),
        ("!a", False),
        ("g", True),
        ("f", False),
        ("a=b,c!=d,e in (x,y),!f,g", True),
        ("a=b,c!=d,e in (x,y),!f,zz", False),
    ],
)
def test_label_selector_follows_kubernetes_equality_and_set_rules(selector: str, matches: bool) -> None:
    assert LabelSelector.parse(selector).matches(LABELS) is matches


def test_label_selector_with_a_bad_key_is_a_400_bad_request() -> None:
    with pytest.raises(KubeApiError) as caught:
        LabelSelector.parse("bad key=1")
    assert caught.value.status == 400
    assert caught.value.reason == "BadRequest"


def test_field_selector_matches_dotted_paths_with_equality_and_inequality() -> None:
    obj = {
        "metadata": {"name": "x", "namespace": "ns"},
        "regarding": {"kind": "Pod"},
        "spec": {"nodeName": ""},
    }
    assert FieldSelector.parse("metadata.name=x,metadata.namespace==ns").matches(obj)
    assert not FieldSelector.parse("metadata.name=y").matches(obj)
    assert FieldSelector.parse("regarding.kind=Pod").matches(obj)
    assert FieldSelector.parse("spec.nodeName=").matches(obj)
    assert FieldSelector.parse("metadata.name!=y").matches(obj)


def test_field_selector_pins_a_name_for_direct_lookup() -> None:
    assert FieldSelector.parse("metadata.name=x").pinned("metadata.name") == "x"
    assert FieldSelector.parse("metadata.name!=x").pinned("metadata.name") is None
