"""Every object the embedded API server would store is one a real API server would: the rest is a 400 (it does
not decode: a field of the wrong JSON type, a quantity that does not parse) or a 422 ``Invalid`` listing each
cause with its field, in Kubernetes' words — over HTTP exactly as in process — and the cluster goes on running
pods afterwards. Before, these bodies were a text/plain 500, or were stored and then killed the kubelet or the
scheduler, after which no pod ever ran again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import orjson
import pytest

from support.cluster_http import cluster_session
from taskplug.k8s import POD, KubeApiError, ResourceType
from taskplug.localcluster import NAMESPACE, NODE, POD_TEMPLATE, RESOURCE_QUOTA, LocalCluster

pytestmark = pytest.mark.integration

Obj = dict[str, Any]


def good_pod(name: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c", "echo ran"]}],
        },
    }


def container(pod: Obj) -> Obj:
    first: Obj = pod["spec"]["containers"][0]
    return first


@dataclass(frozen=True)
class Case:
    mutate: Callable[[Obj], None]
    status: int
    field: str
    message: str  # a part of the Status message


def _set(path: str, value: Any) -> Callable[[Obj], None]:
    def mutate(pod: Obj) -> None:
        target: Any = pod
        keys: list[Any] = [int(k) if k.isdigit() else k for k in path.split(".")]
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value

    return mutate


def _decode(go: str) -> str:
    return f'Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal {go}'


LABEL_KEY_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)

CASES: dict[str, Case] = {
    # -- wrong JSON types: 400, never a 500 -------------------------------------------------------------
    "metadata-a-string": Case(
        _set("metadata", "p"),
        400,
        "metadata",
        _decode("string into Go struct field Pod.metadata of type v1.ObjectMeta"),
    ),
    "spec-a-list": Case(
        _set("spec", []), 400, "spec", _decode("array into Go struct field Pod.spec of type v1.PodSpec")
    ),
    "containers-a-string": Case(
        _set("spec.containers", "main"),
        400,
        "spec.containers",
        _decode("string into Go struct field PodSpec.spec.containers of type []v1.Container"),
    ),
    "container-a-number": Case(
        _set("spec.containers", [7]),
        400,
        "spec.containers[0]",
        _decode("number into Go struct field PodSpec.spec.containers of type v1.Container"),
    ),
    "container-name-an-integer": Case(
        _set("spec.containers.0.name", 5),
        400,
        "spec.containers[0].name",
        _decode("number into Go struct field Container.spec.containers.name of type string"),
    ),
    "resources-a-string": Case(
        _set("spec.containers.0.resources", "lots"),
        400,
        "spec.containers[0].resources",
        _decode(
            "string into Go struct field Container.spec.containers.resources of type v1.ResourceRequirements"
        ),
    ),
    "limits-a-list": Case(
        _set("spec.containers.0.resources", {"limits": ["cpu"]}),
        400,
        "spec.containers[0].resources.limits",
        _decode(
            "array into Go struct field ResourceRequirements.spec.containers.resources.limits of type v1.ResourceList"
        ),
    ),
    "env-a-string": Case(
        _set("spec.containers.0.env", "A=B"),
        400,
        "spec.containers[0].env",
        _decode("string into Go struct field Container.spec.containers.env of type []v1.EnvVar"),
    ),
    "env-value-a-number": Case(
        _set("spec.containers.0.env", [{"name": "A", "value": 1}]),
        400,
        "spec.containers[0].env[0].value",
        _decode("number into Go struct field EnvVar.spec.containers.env.value of type string"),
    ),
    "command-a-string": Case(
        _set("spec.containers.0.command", "echo hi"),
        400,
        "spec.containers[0].command",
        _decode("string into Go struct field Container.spec.containers.command of type []string"),
    ),
    "argument-an-object": Case(
        _set("spec.containers.0.args", ["ok", {"a": 1}]),
        400,
        "spec.containers[0].args[1]",
        _decode("object into Go struct field Container.spec.containers.args of type string"),
    ),
    "node-selector-a-list": Case(
        _set("spec.nodeSelector", ["disk=ssd"]),
        400,
        "spec.nodeSelector",
        _decode("array into Go struct field PodSpec.spec.nodeSelector of type map[string]string"),
    ),
    "node-selector-value-a-bool": Case(
        _set("spec.nodeSelector", {"disk": True}),
        400,
        "spec.nodeSelector[disk]",
        _decode("bool into Go struct field PodSpec.spec.nodeSelector of type string"),
    ),
    "tolerations-an-object": Case(
        _set("spec.tolerations", {"key": "k"}),
        400,
        "spec.tolerations",
        _decode("object into Go struct field PodSpec.spec.tolerations of type []v1.Toleration"),
    ),
    "restart-policy-a-number": Case(
        _set("spec.restartPolicy", 1),
        400,
        "spec.restartPolicy",
        _decode("number into Go struct field PodSpec.spec.restartPolicy of type string"),
    ),
    "deadline-a-fraction": Case(
        _set("spec.activeDeadlineSeconds", 1.5),
        400,
        "spec.activeDeadlineSeconds",
        _decode("number 1.5 into Go struct field PodSpec.spec.activeDeadlineSeconds of type int64"),
    ),
    "labels-a-list": Case(
        _set("metadata.labels", ["a"]),
        400,
        "metadata.labels",
        _decode("array into Go struct field ObjectMeta.metadata.labels of type map[string]string"),
    ),
    "quantity-not-a-quantity": Case(
        _set("spec.containers.0.resources", {"limits": {"cpu": "lots"}}),
        400,
        "spec.containers[0].resources.limits[cpu]",
        "quantities must match the regular expression",
    ),
    "quantity-a-bool": Case(
        _set("spec.containers.0.resources", {"limits": {"memory": True}}),
        400,
        "spec.containers[0].resources.limits[memory]",
        "quantities must match the regular expression",
    ),
    "quantity-exponent-bomb": Case(
        _set("spec.containers.0.resources", {"requests": {"cpu": "1e999999999"}}),
        400,
        "spec.containers[0].resources.requests[cpu]",
        "the exponent of a quantity must be within ±30",
    ),
    # -- decodes, but a real API server refuses it: 422 Invalid ------------------------------------------
    "name-not-a-subdomain": Case(
        _set("metadata.name", "Bad_Name"),
        422,
        "metadata.name",
        'Pod "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain',
    ),
    "generate-name-not-a-subdomain": Case(
        lambda pod: pod["metadata"].update(name="", generateName="Bad_"),
        422,
        "metadata.generateName",
        'metadata.generateName: Invalid value: "Bad_": a lowercase RFC 1123 subdomain',
    ),
    "label-key-bad": Case(
        _set("metadata.labels", {"bad key!": "v"}),
        422,
        "metadata.labels",
        f'Pod "p" is invalid: metadata.labels: Invalid value: "bad key!": {LABEL_KEY_MSG}',
    ),
    "label-key-prefix-bad": Case(
        _set("metadata.labels", {"Example.com/k": "v"}),
        422,
        "metadata.labels",
        'metadata.labels: Invalid value: "Example.com/k": prefix part a lowercase RFC 1123 subdomain',
    ),
    "label-value-bad": Case(
        _set("metadata.labels", {"k": "a value"}),
        422,
        "metadata.labels",
        'metadata.labels: Invalid value: "a value": a valid label must be an empty string or consist of',
    ),
    "label-value-too-long": Case(
        _set("metadata.labels", {"k": "v" * 64}),
        422,
        "metadata.labels",
        "must be no more than 63 bytes",
    ),
    "annotation-key-bad": Case(
        _set("metadata.annotations", {"bad key!": "v"}),
        422,
        "metadata.annotations",
        f'metadata.annotations: Invalid value: "bad key!": {LABEL_KEY_MSG}',
    ),
    "annotations-too-large": Case(
        _set("metadata.annotations", {"a": "x" * 200_000, "b": "y" * 100_000}),
        422,
        "metadata.annotations",
        "metadata.annotations: Too long: may not be more than 262144 bytes",
    ),
    "finalizer-bad": Case(
        _set("metadata.finalizers", ["not a finalizer"]),
        422,
        "metadata.finalizers",
        'metadata.finalizers: Invalid value: "not a finalizer"',
    ),
    "container-name-upper-case": Case(
        _set("spec.containers.0.name", "Main"),
        422,
        "spec.containers[0].name",
        'spec.containers[0].name: Invalid value: "Main": a lowercase RFC 1123 label must consist of',
    ),
    "container-name-with-dots": Case(
        _set("spec.containers.0.name", "a.b"),
        422,
        "spec.containers[0].name",
        'spec.containers[0].name: Invalid value: "a.b": must not contain dots',
    ),
    "container-name-twice-across-init": Case(
        _set("spec.initContainers", [{"name": "main", "image": "busybox", "command": ["true"]}]),
        422,
        "spec.initContainers[0].name",
        'Pod "p" is invalid: spec.initContainers[0].name: Duplicate value: "main"',
    ),
    "env-name-with-equals": Case(
        _set("spec.containers.0.env", [{"name": "A=B", "value": "x"}]),
        422,
        "spec.containers[0].env[0].name",
        'Pod "p" is invalid: spec.containers[0].env[0].name: Invalid value: "A=B": a valid environment variable '
        "name must consist only of printable ASCII characters other than '='",
    ),
    "env-name-empty": Case(
        _set("spec.containers.0.env", [{"name": "", "value": "x"}]),
        422,
        "spec.containers[0].env[0].name",
        "spec.containers[0].env[0].name: Required value",
    ),
    "env-value-and-value-from": Case(
        _set(
            "spec.containers.0.env",
            [{"name": "A", "value": "x", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        ),
        422,
        "spec.containers[0].env[0].valueFrom",
        'spec.containers[0].env[0].valueFrom: Invalid value: "": may not be specified when `value` is not empty',
    ),
    "env-field-ref-unsupported": Case(
        _set(
            "spec.containers.0.env", [{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "status.phase"}}}]
        ),
        422,
        "spec.containers[0].env[0].valueFrom.fieldRef.fieldPath",
        'fieldPath: Unsupported value: "status.phase": supported values: "metadata.name"',
    ),
    "env-value-with-nul": Case(
        _set("spec.containers.0.env", [{"name": "A", "value": "a\x00b"}]),
        422,
        "spec.containers[0].env[0].value",
        'spec.containers[0].env[0].value: Invalid value: "a\\x00b": must not contain a NUL character',
    ),
    "command-with-nul": Case(
        _set("spec.containers.0.command", ["echo", "a\x00b"]),
        422,
        "spec.containers[0].command[1]",
        'spec.containers[0].command[1]: Invalid value: "a\\x00b": must not contain a NUL character',
    ),
    "negative-cpu-limit": Case(
        _set("spec.containers.0.resources", {"limits": {"cpu": "-1"}}),
        422,
        "spec.containers[0].resources.limits[cpu]",
        'spec.containers[0].resources.limits[cpu]: Invalid value: "-1": must be greater than or equal to 0',
    ),
    "negative-memory-request": Case(
        _set("spec.containers.0.resources", {"requests": {"memory": "-1Gi"}}),
        422,
        "spec.containers[0].resources.requests[memory]",
        'Pod "p" is invalid: spec.containers[0].resources.requests[memory]: Invalid value: "-1Gi": must be '
        "greater than or equal to 0",
    ),
    "request-over-limit": Case(
        _set("spec.containers.0.resources", {"limits": {"cpu": "1"}, "requests": {"cpu": "2"}}),
        422,
        "spec.containers[0].resources.requests",
        'spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal to cpu limit of 1',
    ),
    "extended-resource-fraction": Case(
        _set("spec.containers.0.resources", {"limits": {"nvidia.com/gpu": "500m"}}),
        422,
        "spec.containers[0].resources.limits[nvidia.com/gpu]",
        "spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: 500m: must be an integer",
    ),
    "resource-name-not-standard": Case(
        _set("spec.containers.0.resources", {"limits": {"gpu": "1"}}),
        422,
        "spec.containers[0].resources.limits[gpu]",
        'Invalid value: "gpu": must be a standard resource for containers',
    ),
    "restart-policy-unknown": Case(
        _set("spec.restartPolicy", "Sometimes"),
        422,
        "spec.restartPolicy",
        'spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"',
    ),
    "pull-policy-unknown": Case(
        _set("spec.containers.0.imagePullPolicy", "Sometimes"),
        422,
        "spec.containers[0].imagePullPolicy",
        'Unsupported value: "Sometimes": supported values: "Always", "IfNotPresent", "Never"',
    ),
    "node-selector-key-bad": Case(
        _set("spec.nodeSelector", {"bad key!": "x"}),
        422,
        "spec.nodeSelector",
        'spec.nodeSelector: Invalid value: "bad key!"',
    ),
    "toleration-without-key-not-exists": Case(
        _set("spec.tolerations", [{"operator": "Equal", "value": "x"}]),
        422,
        "spec.tolerations[0].operator",
        "operator must be Exists when `key` is empty",
    ),
    "toleration-effect-unknown": Case(
        _set("spec.tolerations", [{"key": "k", "operator": "Exists", "effect": "Sometimes"}]),
        422,
        "spec.tolerations[0].effect",
        'Unsupported value: "Sometimes": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"',
    ),
    "affinity-in-without-values": Case(
        _set(
            "spec.affinity",
            {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "In"}]}]
                    }
                }
            },
        ),
        422,
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
        ".matchExpressions[0].values",
        "must be specified when `operator` is 'In' or 'NotIn'",
    ),
}


def _pod_for(case: Case) -> Obj:
    pod = good_pod("p")
    case.mutate(pod)
    return pod


async def _runs_a_pod(cluster: LocalCluster, name: str) -> None:
    """The cluster still runs a normal pod to completion, with its output."""
    await cluster.client().create(POD, good_pod(name))
    done = await cluster.wait_for(
        POD, "default", name, lambda o: o["status"].get("phase") in ("Succeeded", "Failed"), within=30
    )
    assert done["status"]["phase"] == "Succeeded"
    assert cluster.logs("default", name) == "ran\n"


def _fields(status: Obj) -> list[str]:
    return [c.get("field") for c in (status.get("details") or {}).get("causes") or []]


@pytest.fixture
async def cluster() -> AsyncIterator[LocalCluster]:
    async with LocalCluster(mode="process") as local:
        yield local


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
async def test_an_invalid_pod_over_http_is_a_json_status_naming_the_field_and_the_cluster_goes_on(
    cluster: LocalCluster, case: Case
) -> None:
    url = await cluster.serve_http()
    body = orjson.dumps(_pod_for(case))
    async with (
        cluster_session(cluster) as session,
        session.post(
            f"{url}/api/v1/namespaces/default/pods", data=body, headers={"Content-Type": "application/json"}
        ) as response,
    ):
        assert response.headers["Content-Type"] == "application/json"
        status = await response.json()
        assert response.status == case.status, status
    assert status["kind"] == "Status" and status["code"] == case.status
    assert status["reason"] == ("BadRequest" if case.status == 400 else "Invalid")
    assert case.field in _fields(status)
    assert case.message in status["message"]
    assert list(cluster.store.iter(POD, "default")) == []
    await _runs_a_pod(cluster, "after")


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
async def test_an_invalid_pod_in_process_is_the_same_error(cluster: LocalCluster, case: Case) -> None:
    with pytest.raises(KubeApiError) as caught:
        await cluster.client().create(POD, _pod_for(case))
    assert caught.value.status == case.status
    assert caught.value.reason == ("BadRequest" if case.status == 400 else "Invalid")
    assert case.field in _fields(caught.value.to_status())
    assert case.message in caught.value.message
    assert list(cluster.store.iter(POD, "default")) == []
    await _runs_a_pod(cluster, "after")


async def test_several_problems_are_one_422_listing_every_cause_in_order(cluster: LocalCluster) -> None:
    pod = good_pod("p")
    pod["metadata"]["labels"] = {"bad key!": "ok"}
    container(pod).update(name="Main", env=[{"name": "A=B", "value": ""}])
    with pytest.raises(KubeApiError) as caught:
        await cluster.client().create(POD, pod)
    assert caught.value.status == 422
    assert caught.value.message.startswith('Pod "p" is invalid: [metadata.labels: Invalid value: "bad key!"')
    assert _fields(caught.value.to_status()) == [
        "metadata.labels",
        "spec.containers[0].name",
        "spec.containers[0].env[0].name",
    ]


async def test_a_bad_namespace_in_the_url_is_422_on_metadata_namespace(cluster: LocalCluster) -> None:
    url = await cluster.serve_http()
    async with (
        cluster_session(cluster) as session,
        session.post(
            f"{url}/api/v1/namespaces/Bad_NS/pods",
            data=orjson.dumps(good_pod("p")),
            headers={"Content-Type": "application/json"},
        ) as response,
    ):
        status = await response.json()
    assert response.status == 422
    assert _fields(status) == ["metadata.namespace"]
    assert cluster.store.try_get(NAMESPACE, None, "Bad_NS") is None


async def test_a_json_null_reads_as_go_reads_it(cluster: LocalCluster) -> None:
    pod = good_pod("nulls")
    pod["metadata"]["labels"] = None
    container(pod).update(args=None, env=[{"name": "A", "value": None}], resources={"limits": None})
    created = await cluster.client().create(POD, pod)
    assert "labels" not in created["metadata"]
    main = created["spec"]["containers"][0]
    assert "args" not in main and main["env"] == [{"name": "A"}]
    done = await cluster.wait_for(POD, "default", "nulls", lambda o: o["status"].get("phase") == "Succeeded")
    assert done["status"]["phase"] == "Succeeded"


async def test_quantities_given_as_numbers_are_stored_as_the_api_writes_them(cluster: LocalCluster) -> None:
    pod = good_pod("numbers")
    container(pod)["resources"] = {"limits": {"cpu": 0.5, "memory": 1024}}
    created = await cluster.client().create(POD, pod)
    assert created["spec"]["containers"][0]["resources"]["limits"] == {"cpu": "500m", "memory": "1024"}


async def test_a_value_that_is_not_json_is_a_400_naming_it_in_process(cluster: LocalCluster) -> None:
    pod = good_pod("p")
    pod["spec"]["extra"] = {"when": {1, 2}}
    with pytest.raises(KubeApiError) as caught:
        await cluster.client().create(POD, pod)
    assert caught.value.status == 400
    assert _fields(caught.value.to_status()) == ["spec.extra.when"]
    deep: Any = "leaf"
    for _ in range(400):
        deep = [deep]
    pod["spec"]["extra"] = deep
    with pytest.raises(KubeApiError) as caught:
        await cluster.client().create(POD, pod)
    assert caught.value.status == 400 and "max depth" in caught.value.message
    await _runs_a_pod(cluster, "after")


# -- writes after create: a patch or a replace is judged as a create is ---------------------------------


async def test_a_merge_patch_with_a_bad_label_key_is_422_and_changes_nothing(cluster: LocalCluster) -> None:
    client = cluster.client()
    pod = good_pod("p")
    pod["spec"]["containers"][0]["command"] = ["sleep", "30"]
    await client.create(POD, pod)
    with pytest.raises(KubeApiError) as caught:
        await client.patch(POD, "default", "p", {"metadata": {"labels": {"bad key!": "x"}}})
    assert (caught.value.status, _fields(caught.value.to_status())) == (422, ["metadata.labels"])
    assert "labels" not in cluster.store.get(POD, "default", "p")["metadata"]


async def test_a_json_patch_that_breaks_the_spec_type_is_400_over_http(cluster: LocalCluster) -> None:
    url = await cluster.serve_http()
    pod = good_pod("p")
    pod["spec"]["containers"][0]["command"] = ["sleep", "30"]
    await cluster.client().create(POD, pod)
    patches = [
        ([{"op": "add", "path": "/spec/nodeSelector", "value": ["x"]}], 400, "spec.nodeSelector"),
        ([{"op": "add", "path": "/metadata/labels", "value": {"k": "a b"}}], 422, "metadata.labels"),
        ([{"op": "replace", "path": "", "value": ["not", "a", "pod"]}], 400, ""),
        ([{"op": "move", "path": "/x"}], 422, None),
        ([{"op": "add", "path": 5, "value": 1}], 422, None),
    ]
    async with cluster_session(cluster) as session:
        for patch, code, field in patches:
            async with session.patch(
                f"{url}/api/v1/namespaces/default/pods/p",
                data=orjson.dumps(patch),
                headers={"Content-Type": "application/json-patch+json"},
            ) as response:
                status = await response.json()
                assert response.status == code, (patch, status)
                assert response.headers["Content-Type"] == "application/json"
            if field:
                assert field in _fields(status)
        # Strategic merge with merge keys that cannot be keys (objects): applied, never a 500.
        async with session.patch(
            f"{url}/api/v1/namespaces/default/pods/p",
            data=orjson.dumps({"spec": {"containers": [{"name": {"x": 1}}]}}),
            headers={"Content-Type": "application/strategic-merge-patch+json"},
        ) as response:
            assert response.status == 400
            assert "spec.containers[1].name" in _fields(await response.json())
    assert cluster.store.get(POD, "default", "p")["spec"]["containers"][0]["name"] == "main"


async def test_a_status_write_of_the_wrong_shape_is_400_and_the_scheduler_is_unharmed(
    cluster: LocalCluster,
) -> None:
    url = await cluster.serve_http()
    await cluster.client().create(
        POD, {**good_pod("p"), "spec": {**good_pod("p")["spec"], "nodeSelector": {"no": "such"}}}
    )
    async with cluster_session(cluster) as session:
        async with session.patch(
            f"{url}/api/v1/namespaces/default/pods/p/status",
            data=orjson.dumps({"status": {"conditions": ["PodScheduled"]}}),
            headers={"Content-Type": "application/merge-patch+json"},
        ) as response:
            status = await response.json()
            assert response.status == 400
        assert "status.conditions[0]" in _fields(status)
        async with session.put(
            f"{url}/api/v1/namespaces/default/pods/p/status",
            data=orjson.dumps({"metadata": {"name": "p"}, "status": {"phase": 3}}),
            headers={"Content-Type": "application/json"},
        ) as response:
            assert response.status == 400
            assert "status.phase" in _fields(await response.json())
    await _runs_a_pod(cluster, "after")


# -- other kinds, each by its own rule ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rtype", "obj", "code", "field", "message"),
    [
        pytest.param(
            NAMESPACE,
            {"metadata": {"name": "a.b"}},
            422,
            "metadata.name",
            'Namespace "a.b" is invalid: metadata.name: Invalid value: "a.b": must not contain dots',
            id="namespace-name-is-a-label",
        ),
        pytest.param(
            NODE,
            {"metadata": {"name": "n1"}, "spec": {"taints": [{"key": "k", "effect": "Sometimes"}]}},
            422,
            "spec.taints[0].effect",
            'spec.taints[0].effect: Unsupported value: "Sometimes"',
            id="node-taint-effect",
        ),
        pytest.param(
            NODE,
            {"metadata": {"name": "n1"}, "spec": {"taints": "k=v:NoSchedule"}},
            400,
            "spec.taints",
            "of type []v1.Taint",
            id="node-taints-a-string",
        ),
        pytest.param(
            NODE,
            {"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "many"}}},
            400,
            "status.allocatable[cpu]",
            "quantities must match",
            id="node-allocatable-not-a-quantity",
        ),
        pytest.param(
            RESOURCE_QUOTA,
            {"metadata": {"name": "q"}, "spec": {"hard": {"pods": "-1"}}},
            422,
            "spec.hard[pods]",
            'spec.hard[pods]: Invalid value: "-1": must be greater than or equal to 0',
            id="quota-negative",
        ),
        pytest.param(
            RESOURCE_QUOTA,
            {"metadata": {"name": "q"}, "spec": {"hard": "pods=1"}},
            400,
            "spec.hard",
            "of type v1.ResourceList",
            id="quota-hard-a-string",
        ),
        pytest.param(
            POD_TEMPLATE,
            {"metadata": {"name": "t"}, "template": {"spec": {"containers": [{"name": "c"}]}}},
            422,
            "template.spec.containers[0].image",
            'PodTemplate "t" is invalid: template.spec.containers[0].image: Required value',
            id="pod-template-as-a-pod",
        ),
        pytest.param(
            ResourceType("example.com/v1", "Widget", "widgets"),
            {"metadata": {"name": "w", "labels": {"k": ["v"]}}},
            400,
            "metadata.labels[k]",
            'Widget in version "v1" cannot be handled as a Widget',
            id="custom-resource-metadata",
        ),
    ],
)
async def test_other_kinds_are_judged_by_their_own_rules(
    cluster: LocalCluster, rtype: ResourceType, obj: Obj, code: int, field: str, message: str
) -> None:
    with pytest.raises(KubeApiError) as caught:
        await cluster.client().create(rtype, obj)
    assert caught.value.status == code
    assert field in _fields(caught.value.to_status())
    assert message in caught.value.message
    await _runs_a_pod(cluster, "after")
