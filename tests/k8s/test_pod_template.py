"""Pod templates: the store and Flyte's merge rules (Flyte's flytek8s/pod_template_store.go and the
``MergeWithBasePodTemplate`` family of flytek8s/pod_helper.go)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from taskplug.core import BadTaskSpecification, ConfigError, DocumentError, SpecError
from taskplug.k8s import K8sPluginConfig, PlatformPodConfig, to_k8s_pod_spec
from taskplug.k8s._pod_template import (
    PodTemplateStore,
    deep_copy,
    deep_merge,
    merge_base_pod_spec_onto_template,
    merge_overlay_pod_spec_onto_base,
)
from taskplug.testing import fake_task_context

# -- deep_merge (mergo WithOverride + WithAppendSlice) -----------------------------------------------


@pytest.mark.parametrize(
    ("base", "overlay", "expected"),
    [
        pytest.param({"a": "x"}, {"a": "y"}, {"a": "y"}, id="non-empty-scalar-overrides"),
        pytest.param({"a": "x"}, {"a": ""}, {"a": "x"}, id="empty-string-ignored"),
        pytest.param({"a": 3}, {"a": 0}, {"a": 3}, id="zero-ignored"),
        pytest.param({"a": True}, {"a": False}, {"a": True}, id="false-ignored"),
        pytest.param({"a": "x"}, {"a": None}, {"a": "x"}, id="none-ignored"),
        pytest.param({"a": [1]}, {"a": []}, {"a": [1]}, id="empty-list-ignored"),
        pytest.param({"a": {"b": 1}}, {"a": {}}, {"a": {"b": 1}}, id="empty-map-ignored"),
        pytest.param({}, {"a": "y"}, {"a": "y"}, id="new-key-added"),
        pytest.param(
            {"m": {"a": "1", "b": "2"}},
            {"m": {"b": "3", "c": "4"}},
            {"m": {"a": "1", "b": "3", "c": "4"}},
            id="maps-unioned-overlay-wins",
        ),
        pytest.param({"l": [1, 2]}, {"l": [3]}, {"l": [1, 2, 3]}, id="lists-appended-base-first"),
        pytest.param(
            {"a": {"b": {"c": 1}}}, {"a": {"b": {"d": 2}}}, {"a": {"b": {"c": 1, "d": 2}}}, id="nested"
        ),
    ],
)
def test_deep_merge_overrides_non_empty_values_and_appends_lists(
    base: dict[str, Any], overlay: dict[str, Any], expected: dict[str, Any]
) -> None:
    assert deep_merge(base, overlay) == expected


def test_deep_merge_merges_in_place_into_the_base() -> None:
    base: dict[str, Any] = {"l": [1], "m": {"a": 1}}
    merged = deep_merge(base, {"l": [2], "m": {"b": 2}})
    assert merged is base
    assert base == {"l": [1, 2], "m": {"a": 1, "b": 2}}


_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=4))
_JSON = st.recursive(
    _SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=12,
)
_JSON_OBJECTS = st.dictionaries(st.text(max_size=4), _JSON, max_size=5)


@given(_JSON_OBJECTS)
def test_deep_merge_with_an_empty_overlay_is_identity(x: dict[str, Any]) -> None:
    original = copy.deepcopy(x)
    assert deep_merge(x, {}) == original


@given(_JSON)
def test_deep_copy_is_an_equal_independent_copy(x: Any) -> None:
    assert deep_copy(x) == x


# -- MergeBasePodSpecOntoTemplate -------------------------------------------------------------------------


def test_merge_refuses_a_missing_spec() -> None:
    for template, base in (({}, None), (None, {})):
        with pytest.raises(ValueError, match=r"^neither the templatePodSpec or the basePodSpec can be nil$"):
            merge_base_pod_spec_onto_template(template, base, "primary")


def names(containers: list[dict[str, Any]]) -> list[str]:
    return [c["name"] for c in containers]


@pytest.mark.parametrize(
    ("template_containers", "base_containers", "primary", "expected"),
    [
        pytest.param(
            [{"name": "default", "image": "tmpl"}],
            [{"name": "main"}, {"name": "side", "image": "own"}],
            "main",
            [{"name": "main", "image": "tmpl"}, {"name": "side", "image": "own"}],
            id="default-is-the-base-of-every-container",
        ),
        pytest.param(
            [{"name": "primary", "image": "p", "workingDir": "/w"}],
            [{"name": "main"}, {"name": "side"}],
            "main",
            [{"name": "main", "image": "p", "workingDir": "/w"}, {"name": "side"}],
            id="primary-template-only-on-primary",
        ),
        pytest.param(
            [{"name": "default", "image": "d", "workingDir": "/d"}, {"name": "primary", "image": "p"}],
            [{"name": "main"}, {"name": "side"}],
            "main",
            [
                {"name": "main", "image": "p", "workingDir": "/d"},
                {"name": "side", "image": "d", "workingDir": "/d"},
            ],
            id="primary-on-top-of-default",
        ),
        pytest.param(
            [{"name": "default", "image": "d"}, {"name": "side", "image": "s", "workingDir": "/s"}],
            [{"name": "main"}, {"name": "side"}],
            "main",
            [{"name": "main", "image": "d"}, {"name": "side", "image": "s", "workingDir": "/s"}],
            id="same-name-template-merged",
        ),
        pytest.param(
            [{"name": "main", "image": "same-name"}, {"name": "primary", "image": "p"}],
            [{"name": "main"}],
            "main",
            [{"name": "main", "image": "p"}],
            id="primary-does-not-take-same-name-template",
        ),
        pytest.param(
            [{"name": "default", "image": "d", "env": [{"name": "T", "value": "1"}]}],
            [{"name": "default", "env": [{"name": "B", "value": "2"}]}],
            "main",
            [
                {
                    "name": "default",
                    "image": "d",
                    "env": [{"name": "T", "value": "1"}, {"name": "B", "value": "2"}],
                }
            ],
            id="container-named-default-merged-once",
        ),
        pytest.param(
            [{"name": "orphan", "image": "o"}, {"name": "primary", "image": "p"}],
            [{"name": "main"}],
            "main",
            [{"name": "main", "image": "p"}],
            id="unmatched-template-containers-dropped",
        ),
        pytest.param(
            [{"name": "default", "image": "d"}],
            [],
            "main",
            [],
            id="empty-base-yields-no-containers",
        ),
        pytest.param(
            [{"name": "primary", "image": "tmpl", "env": [{"name": "T", "value": "1"}], "args": ["a"]}],
            [{"name": "main", "image": "own", "env": [{"name": "B", "value": "2"}], "args": ["b"]}],
            "main",
            [
                {
                    "name": "main",
                    "image": "own",
                    "env": [{"name": "T", "value": "1"}, {"name": "B", "value": "2"}],
                    "args": ["a", "b"],
                }
            ],
            id="base-wins-scalars-lists-appended-template-first",
        ),
        pytest.param(
            [{"name": "primary", "resources": {"limits": {"cpu": "2", "memory": "1Gi"}}}],
            [{"name": "main", "resources": {"limits": {"cpu": "1"}}}],
            "main",
            [{"name": "main", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}],
            id="maps-unioned-base-wins",
        ),
    ],
)
def test_containers_are_rebuilt_from_the_base_containers(
    template_containers: list[dict[str, Any]],
    base_containers: list[dict[str, Any]],
    primary: str,
    expected: list[dict[str, Any]],
) -> None:
    merged = merge_base_pod_spec_onto_template(
        {"containers": template_containers}, {"containers": base_containers}, primary
    )
    assert merged["containers"] == expected


@pytest.mark.parametrize(
    ("template_inits", "base_inits", "primary_init", "expected"),
    [
        pytest.param(
            [{"name": "default-init", "image": "di"}, {"name": "primary-init", "image": "pi"}],
            [{"name": "fetch"}, {"name": "other"}],
            "fetch",
            [{"name": "fetch", "image": "pi"}, {"name": "other", "image": "di"}],
            id="default-init-and-primary-init",
        ),
        pytest.param(
            [
                {"name": "default", "image": "regular-default"},
                {"name": "primary", "image": "regular-primary"},
            ],
            [{"name": "fetch"}],
            "fetch",
            [{"name": "fetch"}],
            id="regular-templates-not-used-for-init",
        ),
        pytest.param(
            [{"name": "fetch", "image": "same"}],
            [{"name": "fetch"}],
            "",
            [{"name": "fetch", "image": "same"}],
            id="same-name-init-template",
        ),
    ],
)
def test_init_containers_merge_with_init_templates(
    template_inits: list[dict[str, Any]],
    base_inits: list[dict[str, Any]],
    primary_init: str,
    expected: list[dict[str, Any]],
) -> None:
    merged = merge_base_pod_spec_onto_template(
        {"initContainers": template_inits},
        {"containers": [], "initContainers": base_inits},
        "main",
        primary_init,
    )
    assert merged["initContainers"] == expected


def test_template_init_containers_without_base_init_containers_are_dropped() -> None:
    merged = merge_base_pod_spec_onto_template(
        {"initContainers": [{"name": "default-init", "image": "x"}]},
        {"containers": [{"name": "main"}]},
        "main",
    )
    assert "initContainers" not in merged


@pytest.mark.parametrize(
    ("template", "base", "expected"),
    [
        pytest.param(
            {"schedulerName": "t"},
            {"schedulerName": "b"},
            {"schedulerName": "b"},
            id="base-non-empty-scalar-wins",
        ),
        pytest.param(
            {"schedulerName": "t"}, {"schedulerName": ""}, {"schedulerName": "t"}, id="template-scalar-kept"
        ),
        pytest.param(
            {"hostNetwork": True}, {"hostNetwork": False}, {"hostNetwork": True}, id="false-does-not-override"
        ),
        pytest.param(
            {"nodeSelector": {"a": "t", "b": "t"}},
            {"nodeSelector": {"b": "b", "c": "b"}},
            {"nodeSelector": {"a": "t", "b": "b", "c": "b"}},
            id="maps-unioned-base-wins",
        ),
        pytest.param(
            {"tolerations": [{"key": "t"}], "volumes": [{"name": "tv"}]},
            {"tolerations": [{"key": "b"}], "volumes": [{"name": "bv"}]},
            {"tolerations": [{"key": "t"}, {"key": "b"}], "volumes": [{"name": "tv"}, {"name": "bv"}]},
            id="slices-template-then-base",
        ),
        pytest.param(
            {"securityContext": {"runAsUser": 1, "fsGroup": 2}},
            {"securityContext": {"runAsUser": 5}},
            {"securityContext": {"runAsUser": 5, "fsGroup": 2}},
            id="nested-structs-merged",
        ),
    ],
)
def test_pod_level_fields_merge_base_over_template(
    template: dict[str, Any], base: dict[str, Any], expected: dict[str, Any]
) -> None:
    merged = merge_base_pod_spec_onto_template(template, base, "main")
    merged.pop("containers")
    assert merged == expected


def test_one_template_container_serving_several_containers_gives_independent_copies() -> None:
    template = {
        "containers": [{"name": "default", "env": [{"name": "T"}], "resources": {"limits": {"cpu": "1"}}}]
    }
    merged = merge_base_pod_spec_onto_template(
        template, {"containers": [{"name": "a"}, {"name": "b", "env": [{"name": "B"}]}]}, "a"
    )
    first, second = merged["containers"]
    first["env"].append({"name": "X"})
    first["resources"]["limits"]["cpu"] = "9"
    assert second == {
        "name": "b",
        "env": [{"name": "T"}, {"name": "B"}],
        "resources": {"limits": {"cpu": "1"}},
    }
    assert template["containers"][0] == {
        "name": "default",
        "env": [{"name": "T"}],
        "resources": {"limits": {"cpu": "1"}},
    }


def test_a_consumed_template_container_is_copied_for_all_but_its_last_merge() -> None:
    default = {"name": "default", "env": [{"name": "T"}], "resources": {"limits": {"cpu": "1"}}}
    primary = {"name": "primary", "securityContext": {"runAsUser": 1}}
    merged = merge_base_pod_spec_onto_template(
        {"containers": [default, primary]},
        {"containers": [{"name": "a"}, {"name": "b", "env": [{"name": "B"}]}]},
        "a",
        consume_template_containers=True,
    )
    first, second = merged["containers"]
    # The default template serves both: a copy for the first, the template's own dict for the last.
    assert first is not default
    assert second is default
    first["env"].append({"name": "X"})
    first["resources"]["limits"]["cpu"] = "9"
    first["securityContext"]["runAsUser"] = 2
    assert second == {
        "name": "b",
        "env": [{"name": "T"}, {"name": "B"}],
        "resources": {"limits": {"cpu": "1"}},
    }
    assert first["name"] == "a"


_NON_EMPTY_SCALARS = st.one_of(st.integers(1, 5), st.text(min_size=1, max_size=4), st.just(True))
_NON_EMPTY_JSON = st.recursive(
    _NON_EMPTY_SCALARS,
    lambda children: st.one_of(
        st.lists(children, min_size=1, max_size=3),
        st.dictionaries(st.text(max_size=4), children, min_size=1, max_size=3),
    ),
    max_leaves=10,
)
_POD_FIELDS = st.dictionaries(
    st.text(min_size=1, max_size=6).filter(lambda k: k not in ("containers", "initContainers")),
    _NON_EMPTY_JSON,
    max_size=4,
)
_CONTAINERS = st.lists(
    st.fixed_dictionaries(
        {"name": st.sampled_from(["main", "side", "extra"])},
        optional={"image": st.text(min_size=1, max_size=4)},
    ),
    max_size=3,
)


@given(pod=_POD_FIELDS, containers=_CONTAINERS)
def test_a_template_with_an_empty_container_list_leaves_the_task_pod_unchanged(
    pod: dict[str, Any], containers: list[dict[str, Any]]
) -> None:
    base = {**pod, "containers": containers}
    expected = copy.deepcopy(base)
    assert merge_base_pod_spec_onto_template({"containers": []}, base, "main") == expected


# -- MergeOverlayPodSpecOntoBase (spark driver / executor pods) -------------------------------------------


def test_overlay_merge_keeps_base_containers_and_appends_overlay_slices() -> None:
    base = {
        "containers": [{"name": "spark", "image": "b", "args": ["x"], "env": [{"name": "A"}]}],
        "nodeSelector": {"a": "b"},
        "schedulerName": "base",
    }
    overlay = {
        "containers": [{"name": "spark", "image": "o", "args": ["x"]}, {"name": "unmatched", "image": "u"}],
        "nodeSelector": {"a": "o", "c": "o"},
        "schedulerName": "overlay",
    }
    merged = merge_overlay_pod_spec_onto_base(base, overlay)
    assert merged == {
        "containers": [{"name": "spark", "image": "o", "args": ["x", "x"], "env": [{"name": "A"}]}],
        "nodeSelector": {"a": "o", "c": "o"},
        "schedulerName": "overlay",
    }


# -- PodTemplateStore --------------------------------------------------------------------------------------


def pod_template(name: str, namespace: str | None, image: str = "img") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": meta,
        "template": {"spec": {"containers": [{"name": "default", "image": image}]}},
    }


def image_of(template: dict[str, Any] | None) -> str | None:
    if template is None:
        return None
    return template["template"]["spec"]["containers"][0]["image"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("namespace", "name", "expected"),
    [
        pytest.param("team-a", "base", "a", id="exact-namespace"),
        pytest.param("team-b", "base", "flyte", id="falls-back-to-default-namespace"),
        pytest.param("team-a", "only-default", "only-default", id="default-namespace-only"),
        pytest.param("team-a", "missing", None, id="unknown-name"),
        pytest.param("team-a", "", None, id="empty-name"),
    ],
)
def test_store_loads_by_namespace_then_the_default_namespace(
    namespace: str, name: str, expected: str | None
) -> None:
    store = PodTemplateStore(default_namespace="flyte")
    store.store(pod_template("base", "team-a", "a"))
    store.store(pod_template("base", "flyte", "flyte"))
    store.store(pod_template("only-default", None, "only-default"))
    assert image_of(store.load_or_default(namespace, name)) == expected


def test_store_overwrites_and_deletes_per_namespace() -> None:
    store = PodTemplateStore(default_namespace="flyte")
    store.store(pod_template("base", "team-a", "one"))
    store.store(pod_template("base", "team-a", "two"))
    assert image_of(store.load_or_default("team-a", "base")) == "two"
    store.store(pod_template("base", "flyte", "fallback"))
    store.delete("base", "team-a")
    assert image_of(store.load_or_default("team-a", "base")) == "fallback"
    store.delete("base", "flyte")
    assert store.load_or_default("team-a", "base") is None


def test_store_returns_a_copy_callers_may_change() -> None:
    store = PodTemplateStore()
    store.store(pod_template("base", "ns"))
    loaded = store.load_or_default("ns", "base")
    assert loaded is not None
    loaded["template"]["spec"]["containers"][0]["image"] = "changed"
    assert image_of(store.load_or_default("ns", "base")) == "img"


def test_store_needs_a_name() -> None:
    with pytest.raises(ConfigError):
        PodTemplateStore().store({"kind": "PodTemplate", "metadata": {}})


def test_store_loads_manifests_from_files_and_folders(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(
        "apiVersion: v1\nkind: PodTemplate\nmetadata: {name: one, namespace: ns}\ntemplate: {spec: {containers: []}}\n"
        "---\n"
        "apiVersion: v1\nkind: List\nitems:\n"
        "- {apiVersion: v1, kind: PodTemplate, metadata: {name: two}, template: {spec: {containers: []}}}\n"
    )
    (tmp_path / "ignored.txt").write_text("not a manifest")
    store = PodTemplateStore.from_paths([tmp_path], default_namespace="flyte")
    assert store.names() == [("one", "ns"), ("two", "flyte")]


def test_store_rejects_other_kinds(tmp_path: Path) -> None:
    (tmp_path / "pod.yaml").write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n")
    with pytest.raises(ConfigError, match="expected a PodTemplate manifest"):
        PodTemplateStore.from_paths([tmp_path / "pod.yaml"])


def test_store_refuses_a_container_without_a_name() -> None:
    manifest = pod_template("base", "ns")
    del manifest["template"]["spec"]["containers"][0]["name"]
    with pytest.raises(ConfigError) as caught:
        PodTemplateStore().store(manifest)
    assert (caught.value.path, caught.value.reason) == ("template.spec.containers[0].name", "required")


# -- files -------------------------------------------------------------------------------------------------


def test_a_multi_document_file_reports_errors_at_the_line_of_the_file(tmp_path: Path) -> None:
    (tmp_path / "t.yaml").write_text(
        "apiVersion: v1\nkind: PodTemplate\nmetadata: {name: one}\ntemplate: {spec: {}}\n"
        "---\n"
        "apiVersion: v1\nkind: PodTemplate\nmetadata: {name: [two}\n"
    )
    with pytest.raises(DocumentError, match=r"(?s)t\.yaml: is not valid YAML: .*line 8, column 18") as caught:
        PodTemplateStore.from_paths([tmp_path / "t.yaml"])
    assert caught.value.path == str(tmp_path / "t.yaml")


def test_document_markers_inside_a_block_scalar_do_not_split_the_file(tmp_path: Path) -> None:
    (tmp_path / "t.yaml").write_text(
        "apiVersion: v1\nkind: PodTemplate\nmetadata:\n  name: one\n  annotations:\n    note: |\n"
        "      ---\n      ...\n"
        "template: {spec: {}}\n"
        "...\n"
        "%YAML 1.1\n---\n"
        "{apiVersion: v1, kind: PodTemplate, metadata: {name: two}, template: {}}\n"
    )
    store = PodTemplateStore.from_paths([tmp_path / "t.yaml"], default_namespace="flyte")
    assert store.names() == [("one", "flyte"), ("two", "flyte")]
    loaded = store.load_or_default("flyte", "one")
    assert loaded is not None
    assert loaded["metadata"]["annotations"]["note"] == "---\n...\n"


def test_a_list_kind_error_names_the_item(tmp_path: Path) -> None:
    (tmp_path / "t.yaml").write_text(
        "apiVersion: v1\nkind: List\nitems:\n"
        "- {kind: PodTemplate, metadata: {name: a}, template: {spec: {containers: [{name: x}]}}}\n"
        "- {kind: PodTemplate, metadata: {name: b}, template: {spec: {nodeSelector: [gpu]}}}\n"
    )
    with pytest.raises(ConfigError) as caught:
        PodTemplateStore.from_paths([tmp_path / "t.yaml"])
    assert caught.value.path == f"{tmp_path / 't.yaml'}[0].items[1].template.spec.nodeSelector"


# -- fidelity: Flyte's rules for named templates and images ---------------------------------------------------


def test_a_folder_without_manifests_is_an_empty_store_not_an_error(tmp_path: Path) -> None:
    # Flyte's templates come from an informer over the cluster's PodTemplates (pod_template_store.go): none
    # there is an empty store. A task naming one then fails in getBasePodTemplate (pod_helper.go).
    (tmp_path / "notes.txt").write_text("no manifests here")
    store = PodTemplateStore.from_paths([tmp_path])
    assert len(store) == 0
    assert store.load_or_default("ns", "foo") is None


def _task_context(image: str, *, override: str = "", pod_template_name: str = "") -> Any:
    container: dict[str, Any] = {"args": ["a"]}
    if image:
        container["image"] = image
    template: dict[str, Any] = {"type": "container", "container": container}
    if pod_template_name:
        template["metadata"] = {"podTemplateName": pod_template_name}
    execution = {"overrides": {"containerImage": override}} if override else None
    return fake_task_context({"template": template}, execution=execution)


def _platform(*templates: dict[str, Any]) -> PlatformPodConfig:
    store = PodTemplateStore(default_namespace="flyte")
    for t in templates:
        store.store(t)
    return PlatformPodConfig(K8sPluginConfig(), store, {})


def test_a_named_template_missing_from_an_empty_folder_does_not_exist_as_flyte_says(tmp_path: Path) -> None:
    # flytek8s/pod_helper.go getBasePodTemplate: BadTaskSpecification "PodTemplate '%s' does not exist".
    platform = PlatformPodConfig(K8sPluginConfig(), PodTemplateStore.from_paths([tmp_path]), {})
    with pytest.raises(BadTaskSpecification) as caught:
        to_k8s_pod_spec(_task_context("img", pod_template_name="foo"), platform)
    assert caught.value.message == "PodTemplate 'foo' does not exist"


def test_an_image_override_applies_to_a_template_without_an_image() -> None:
    # flytek8s/pod_helper_test.go TestToK8sPodContainerImage: dummyTaskTemplate has no image; the override
    # "foo:latest" is the container's image (ApplyFlytePodConfiguration → ApplyContainerImageOverride).
    raw = to_k8s_pod_spec(_task_context("", override="foo:latest"), _platform())
    assert [c["image"] for c in raw.spec["containers"]] == ["foo:latest"]


def test_a_pod_templates_image_fills_a_task_without_one_and_the_override_still_wins() -> None:
    # MergeBasePodSpecOntoTemplate merges with mergo: an empty image in the task does not replace the
    # template's; the image override comes after the merge (ApplyFlytePodConfiguration step 8).
    base = pod_template("base", "flyte", image="from-template")
    platform = _platform(base)
    assert (
        to_k8s_pod_spec(_task_context("", pod_template_name="base"), platform).spec["containers"][0]["image"]
        == "from-template"
    )
    overridden = to_k8s_pod_spec(_task_context("", override="o:1", pod_template_name="base"), platform)
    assert overridden.spec["containers"][0]["image"] == "o:1"


def test_a_spec_without_an_image_loads_when_an_override_or_a_pod_template_can_give_one() -> None:
    # The spec loader leaves a missing image to the override or the template (Flyte applies the override to
    # a template without an image); with neither, nothing could run it, and the field is named.
    template: dict[str, Any] = {"type": "container", "container": {"args": ["a"]}}
    override = {"overrides": {"containerImage": "foo:latest"}}
    assert (
        fake_task_context({"template": template}, execution=override).task_reader.read().container.image == ""
    )
    named = {**template, "metadata": {"podTemplateName": "base"}}
    assert fake_task_context({"template": named}).task_reader.read().metadata.pod_template_name == "base"
    with pytest.raises(SpecError) as caught:
        fake_task_context({"template": template})
    assert caught.value.path == "template.container.image"


def test_render_of_a_spec_without_an_image_uses_the_override(tmp_path: Path) -> None:
    # End to end through the CLI's path: load_spec, then the exact object the plugin manager would create.
    from taskplug.executor import Platform, load_spec, render_object

    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(
        "template: {type: container, container: {args: [echo, hi]}}\n"
        "execution: {id: {name: noimage}, overrides: {containerImage: 'foo:latest'}}\n"
    )
    spec = load_spec(spec_file)
    pod = render_object(Platform.load(), spec, data_root=str(tmp_path / "data"))
    assert [c["image"] for c in pod["spec"]["containers"]] == ["foo:latest"]
