"""API-server semantics of the object store, through the in-process client."""

from __future__ import annotations

import pytest

from taskplug.k8s import POD, KubeApiError, ResourceType, is_already_exists, is_conflict, is_not_found
from taskplug.localcluster import NAMESPACE, LocalCluster

from .conftest import pod_manifest

WIDGET = ResourceType("example.com/v1", "Widget", "widgets")
GADGET = ResourceType("example.com/v1", "Gadget", "gadgets", namespaced=False)


def widget(name: str, **metadata: object) -> dict[str, object]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": name, **metadata},
        "spec": {"n": 1},
    }


async def test_every_write_gets_a_higher_resource_version_across_types(sim: LocalCluster) -> None:
    client = sim.client()
    a = await client.create(WIDGET, widget("a"))
    b = await client.create(POD, pod_manifest("b"))
    c = await client.patch(WIDGET, "default", "a", {"spec": {"n": 2}})
    versions = [int(o["metadata"]["resourceVersion"]) for o in (a, b, c)]
    assert versions == sorted(versions)
    assert len(set(versions)) == 3
    assert all(isinstance(o["metadata"]["resourceVersion"], str) for o in (a, b, c))


async def test_create_assigns_uid_creation_timestamp_and_generation(sim: LocalCluster) -> None:
    created = await sim.client().create(WIDGET, widget("a"))
    meta = created["metadata"]
    assert len(meta["uid"]) == 36
    assert meta["creationTimestamp"] == "2026-01-01T00:00:00Z"  # the fake clock's time, second resolution
    assert meta["generation"] == 1
    assert meta["namespace"] == "default"


async def test_generate_name_appends_five_random_characters(sim: LocalCluster) -> None:
    client = sim.client()
    first = await client.create(WIDGET, {"metadata": {"generateName": "job-"}})
    second = await client.create(WIDGET, {"metadata": {"generateName": "job-"}})
    for obj in (first, second):
        assert obj["metadata"]["name"].startswith("job-")
        assert len(obj["metadata"]["name"]) == len("job-") + 5
    assert first["metadata"]["name"] != second["metadata"]["name"]


async def test_creating_an_existing_name_is_409_already_exists_with_the_real_message(
    sim: LocalCluster,
) -> None:
    client = sim.client()
    await client.create(POD, pod_manifest("x"))
    with pytest.raises(KubeApiError) as caught:
        await client.create(POD, pod_manifest("x"))
    err = caught.value
    assert (err.status, err.reason, err.message) == (409, "AlreadyExists", 'pods "x" already exists')
    assert err.details == {"name": "x", "kind": "pods"}
    assert is_already_exists(err)


async def test_a_custom_resource_error_names_its_group(sim: LocalCluster) -> None:
    with pytest.raises(KubeApiError) as caught:
        await sim.client().get(WIDGET, "default", "nope")
    assert caught.value.message == 'widgets.example.com "nope" not found'
    assert caught.value.details == {"name": "nope", "kind": "widgets", "group": "example.com"}


async def test_getting_a_missing_object_is_404_not_found(sim: LocalCluster) -> None:
    with pytest.raises(KubeApiError) as caught:
        await sim.client().get(POD, "default", "x")
    assert (caught.value.status, caught.value.reason, caught.value.message) == (
        404,
        "NotFound",
        'pods "x" not found',
    )
    assert is_not_found(caught.value)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            "",
            'Pod "" is invalid: metadata.name: Required value: name or generateName is required',
        ),
        (
            "Bad_Name",
            'Pod "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain '
            "must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an "
            "alphanumeric character (e.g. 'example.com', regex used for validation is "
            "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        ),
    ],
)
async def test_a_missing_or_invalid_name_is_422_invalid(sim: LocalCluster, name: str, message: str) -> None:
    with pytest.raises(KubeApiError) as caught:
        await sim.client().create(POD, pod_manifest(name))
    assert (caught.value.status, caught.value.reason) == (422, "Invalid")
    assert caught.value.message == message
    assert caught.value.details["causes"][0]["field"] == "metadata.name"


async def test_a_pod_without_containers_is_422(sim: LocalCluster) -> None:
    pod = pod_manifest("x")
    pod["spec"]["containers"] = []
    with pytest.raises(KubeApiError) as caught:
        await sim.client().create(POD, pod)
    assert caught.value.message == 'Pod "x" is invalid: spec.containers: Required value'


async def test_a_container_without_name_and_image_lists_both_causes(sim: LocalCluster) -> None:
    pod = pod_manifest("x")
    pod["spec"]["containers"] = [{"command": ["true"]}]
    with pytest.raises(KubeApiError) as caught:
        await sim.client().create(POD, pod)
    assert caught.value.status == 422
    assert caught.value.message == (
        'Pod "x" is invalid: [spec.containers[0].name: Required value, spec.containers[0].image: Required value]'
    )
    assert [c["field"] for c in caught.value.details["causes"]] == [
        "spec.containers[0].name",
        "spec.containers[0].image",
    ]


async def test_replace_with_a_stale_resource_version_is_409_conflict(sim: LocalCluster) -> None:
    client = sim.client()
    first = await client.create(WIDGET, widget("a"))
    await client.patch(WIDGET, "default", "a", {"spec": {"n": 2}})
    first["spec"]["n"] = 3
    with pytest.raises(KubeApiError) as caught:
        await client.replace(WIDGET, first)
    assert caught.value.status == 409
    assert caught.value.reason == "Conflict"
    assert caught.value.message == (
        'Operation cannot be fulfilled on widgets.example.com "a": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    assert is_conflict(caught.value)


async def test_replace_with_the_current_version_succeeds_and_bumps_generation_on_spec_change(
    sim: LocalCluster,
) -> None:
    client = sim.client()
    current = await client.create(WIDGET, widget("a"))
    current["spec"]["n"] = 5
    replaced = await client.replace(WIDGET, current)
    assert replaced["spec"]["n"] == 5
    assert replaced["metadata"]["generation"] == 2
    assert replaced["metadata"]["uid"] == current["metadata"]["uid"]


async def test_a_no_op_patch_keeps_the_resource_version(sim: LocalCluster) -> None:
    client = sim.client()
    created = await client.create(WIDGET, widget("a"))
    same = await client.patch(WIDGET, "default", "a", {"spec": {"n": 1}})
    assert same["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


async def test_merge_json_and_strategic_patches_all_apply(sim: LocalCluster) -> None:
    client = sim.client()
    await client.create(WIDGET, widget("a", labels={"x": "1"}))
    await client.patch(WIDGET, "default", "a", {"metadata": {"labels": {"y": "2"}}})
    await client.patch(
        WIDGET, "default", "a", [{"op": "replace", "path": "/spec/n", "value": 7}], patch_type="json"
    )
    patched = await client.patch(
        WIDGET, "default", "a", {"metadata": {"labels": {"x": None}}}, patch_type="strategic"
    )
    assert patched["metadata"]["labels"] == {"y": "2"}
    assert patched["spec"]["n"] == 7


async def test_delete_without_finalizers_removes_the_object_and_returns_it(sim: LocalCluster) -> None:
    client = sim.client()
    await client.create(WIDGET, widget("a"))
    deleted = await client.delete(WIDGET, "default", "a")
    assert deleted is not None and deleted["metadata"]["name"] == "a"
    with pytest.raises(KubeApiError):
        await client.get(WIDGET, "default", "a")


async def test_delete_with_finalizers_sets_deletion_timestamp_until_the_last_finalizer_goes(
    sim: LocalCluster,
) -> None:
    client = sim.client()
    created = await client.create(WIDGET, widget("a", finalizers=["one", "two"]))
    rv = created["metadata"]["resourceVersion"]
    marked = await client.delete(WIDGET, "default", "a")
    assert marked is not None
    assert marked["metadata"]["deletionTimestamp"] == "2026-01-01T00:00:00Z"
    still = await client.get(WIDGET, "default", "a")
    assert still["metadata"]["finalizers"] == ["one", "two"]
    await client.patch(WIDGET, "default", "a", {"metadata": {"finalizers": ["two"]}})
    assert (await client.get(WIDGET, "default", "a"))["metadata"]["deletionTimestamp"]
    await client.patch(WIDGET, "default", "a", {"metadata": {"finalizers": []}}, patch_type="strategic")
    with pytest.raises(KubeApiError) as caught:
        await client.get(WIDGET, "default", "a")
    assert caught.value.status == 404
    events = []
    async for event in client.watch(WIDGET, "default", resource_version=rv, timeout_seconds=1):
        events.append((event.type, event.object["metadata"].get("finalizers")))
        if event.type == "DELETED":
            break
    assert events == [("MODIFIED", ["one", "two"]), ("MODIFIED", ["two"]), ("DELETED", [])]


async def test_a_write_cannot_clear_a_deletion_timestamp(sim: LocalCluster) -> None:
    client = sim.client()
    await client.create(WIDGET, widget("a", finalizers=["f"]))
    await client.delete(WIDGET, "default", "a")
    patched = await client.patch(WIDGET, "default", "a", {"metadata": {"deletionTimestamp": None}})
    assert patched["metadata"]["deletionTimestamp"]


async def test_returned_objects_never_alias_the_stored_ones(sim: LocalCluster) -> None:
    client = sim.client()
    created = await client.create(WIDGET, widget("a"))
    created["spec"]["n"] = 99
    fetched = await client.get(WIDGET, "default", "a")
    fetched["metadata"]["labels"] = {"mutated": "yes"}
    items, _ = await client.list(WIDGET, "default")
    items[0]["spec"]["n"] = 42
    again = await client.get(WIDGET, "default", "a")
    assert again["spec"] == {"n": 1}
    assert "labels" not in again["metadata"]


async def test_list_filters_by_namespace_labels_and_fields_and_carries_the_list_version(
    sim: LocalCluster,
) -> None:
    client = sim.client()
    await client.create(WIDGET, widget("a", labels={"team": "x", "tier": "1"}))
    await client.create(WIDGET, widget("b", labels={"team": "y"}))
    await client.create(WIDGET, widget("c", namespace="other", labels={"team": "x"}))
    every, rv = await client.list(WIDGET)
    assert sorted(o["metadata"]["name"] for o in every) == ["a", "b", "c"]
    assert int(rv) >= max(int(o["metadata"]["resourceVersion"]) for o in every)
    in_default, _ = await client.list(WIDGET, "default")
    assert sorted(o["metadata"]["name"] for o in in_default) == ["a", "b"]
    team_x, _ = await client.list(WIDGET, label_selector="team in (x),!missing")
    assert sorted(o["metadata"]["name"] for o in team_x) == ["a", "c"]
    named, _ = await client.list(WIDGET, field_selector="metadata.name=c")
    assert [o["metadata"]["namespace"] for o in named] == ["other"]
    by_ns, _ = await client.list(WIDGET, field_selector="metadata.namespace=other")
    assert [o["metadata"]["name"] for o in by_ns] == ["c"]


async def test_namespaces_appear_on_first_use(sim: LocalCluster) -> None:
    client = sim.client()
    await client.create(WIDGET, widget("a", namespace="team-a"))
    names = sorted(o["metadata"]["name"] for o in (await client.list(NAMESPACE))[0])
    assert names == ["default", "team-a"]


async def test_cluster_scoped_objects_have_no_namespace(sim: LocalCluster) -> None:
    client = sim.client()
    created = await client.create(GADGET, {"metadata": {"name": "g", "namespace": "ignored"}})
    assert "namespace" not in created["metadata"]
    assert (await client.get(GADGET, "", "g"))["metadata"]["name"] == "g"


async def test_create_with_a_resource_version_is_refused(sim: LocalCluster) -> None:
    with pytest.raises(KubeApiError) as caught:
        await sim.client().create(WIDGET, widget("a", resourceVersion="5"))
    assert caught.value.status == 500
    assert "resourceVersion should not be set on objects to be created" in caught.value.message
