"""Malformed observed objects: arbitrary JSON values in any node of a realistic Pod, SparkApplication,
PyTorchJob or RayJob, read as ``taskplug status --resource`` reads them (in-process, the command's own
``observed_status``). The only outcomes are a phase or a ``SpecError`` that names the field (a Pod) or the
object (any kind) — never an AttributeError, TypeError, ValueError, KeyError or OverflowError.

And the plugin manager, reading the same objects for a running task: a status it cannot read is an error of
the round naming the object (Flyte's checkResourcePhase returns GetTaskPhase's error, and the round is
retried), never a crash; the executor turns a persistent one into a system failure of the attempt, and goes
on running other executions.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from taskplug.cli._output import dump
from taskplug.cli._status import observed_status
from taskplug.core import FakeClock, PluginEntry, PluginError, PluginResolver, SpecError
from taskplug.engine.k8s._informer import InformerFactory
from taskplug.engine.k8s._plugin_manager import PLUGIN_STATE_VERSION, ManagerState, PluginManager, PluginPhase
from taskplug.executor import ExecutionSpec, Platform, parse_spec
from taskplug.executor._executor import Executor, ExecutorSettings
from taskplug.executor._store import MemoryStateStore
from taskplug.k8s import K8sPluginConfig, K8sPluginEntry, PluginState, ResourceType
from taskplug.plugins.pod import plugin_entries as pod_entries
from taskplug.plugins.spark import plugin_entries as spark_entries
from taskplug.testing import fake_task_context, load_k8s_plugin

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
NOW = datetime(2026, 1, 1, 0, 10, tzinfo=UTC)
SINCE = "2026-01-01T00:00:00Z"
NAME, NAMESPACE = "hello-1-n0-0", "demo-development"

Obj = dict[str, Any]


# -- realistic observed objects ----------------------------------------------------------------------------


def _pod(status: Obj) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": NAME,
            "namespace": NAMESPACE,
            "uid": "0f7f5c1e-0000-4000-8000-000000000001",
            "creationTimestamp": SINCE,
            "annotations": {"primary_container_name": NAME},
            "labels": {"execution-id": "hello-1"},
        },
        "spec": {"containers": [{"name": NAME, "image": "python:3.11-slim"}], "nodeName": "node-1"},
        "status": status,
    }


def _terminated(code: int, reason: str) -> Obj:
    return {
        "exitCode": code,
        "reason": reason,
        "message": "the end",
        "startedAt": SINCE,
        "finishedAt": "2026-01-01T00:00:05Z",
        "containerID": "containerd://abc",
    }


PODS: dict[str, Obj] = {
    "pending": _pod(
        {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/3 nodes are available",
                    "lastTransitionTime": SINCE,
                }
            ],
        }
    ),
    "image-pull-back-off": _pod(
        {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "Ready",
                    "status": "False",
                    "reason": "ContainersNotReady",
                    "message": "containers with unready status",
                    "lastTransitionTime": SINCE,
                }
            ],
            "containerStatuses": [
                {
                    "name": NAME,
                    "ready": False,
                    "restartCount": 0,
                    "state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image"}},
                }
            ],
        }
    ),
    "running": _pod(
        {
            "phase": "Running",
            "hostIP": "10.0.0.1",
            "podIP": "10.1.0.1",
            "startTime": SINCE,
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": SINCE}],
            "containerStatuses": [
                {
                    "name": NAME,
                    "ready": True,
                    "containerID": "containerd://abc",
                    "state": {"running": {"startedAt": SINCE}},
                }
            ],
        }
    ),
    "succeeded": _pod(
        {
            "phase": "Succeeded",
            "conditions": [
                {"type": "Ready", "status": "False", "reason": "PodCompleted", "lastTransitionTime": SINCE}
            ],
            "containerStatuses": [
                {"name": NAME, "ready": False, "state": {"terminated": _terminated(0, "Completed")}}
            ],
        }
    ),
    "failed": _pod(
        {
            "phase": "Failed",
            "reason": "",
            "message": "",
            "initContainerStatuses": [
                {"name": "init", "ready": False, "state": {"terminated": _terminated(0, "Completed")}}
            ],
            "containerStatuses": [
                {
                    "name": NAME,
                    "ready": False,
                    "restartCount": 1,
                    "state": {"terminated": _terminated(137, "OOMKilled")},
                    "lastState": {"terminated": _terminated(1, "Error")},
                }
            ],
        }
    ),
}

SPARK = {
    "apiVersion": "sparkoperator.k8s.io/v1beta2",
    "kind": "SparkApplication",
    "metadata": {"name": "wordcount-1-n0-0", "namespace": NAMESPACE, "creationTimestamp": SINCE},
    "spec": {"type": "Python", "mode": "cluster"},
    "status": {
        "applicationState": {"state": "FAILED", "errorMessage": "driver failed"},
        "driverInfo": {"podName": "wordcount-1-n0-0-driver", "webUIIngressAddress": "spark.example/ui"},
        "sparkApplicationId": "spark-123",
        "executorState": {"wordcount-1-n0-0-exec-1": "COMPLETED"},
        "terminationTime": "2026-01-01T00:05:00Z",
    },
}

PYTORCH = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "PyTorchJob",
    "metadata": {"name": "allreduce-1-n0-0", "namespace": NAMESPACE, "creationTimestamp": SINCE},
    "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 1}}},
    "status": {
        "startTime": SINCE,
        "completionTime": "2026-01-01T00:05:00Z",
        "conditions": [
            {"type": "Created", "status": "True", "lastTransitionTime": SINCE, "lastUpdateTime": SINCE},
            {
                "type": "Running",
                "status": "False",
                "lastTransitionTime": "2026-01-01T00:05:00Z",
                "lastUpdateTime": "2026-01-01T00:05:00Z",
            },
            {
                "type": "Failed",
                "status": "True",
                "reason": "PyTorchJobFailed",
                "message": "PyTorchJob allreduce-1-n0-0 has failed",
                "lastTransitionTime": "2026-01-01T00:05:00Z",
                "lastUpdateTime": "2026-01-01T00:05:00Z",
            },
        ],
        "replicaStatuses": {"Master": {"failed": 1}, "Worker": {"succeeded": 1}},
    },
}

RAY = {
    "apiVersion": "ray.io/v1",
    "kind": "RayJob",
    "metadata": {"name": "ray-sum-1-n0-0", "namespace": NAMESPACE, "creationTimestamp": SINCE},
    "spec": {},
    "status": {
        "jobId": "ray-sum-1-n0-0-x2b4d",
        "rayClusterName": "ray-sum-1-n0-0-k9fzq",
        "jobDeploymentStatus": "Running",
        "dashboardURL": "ray-sum-1-n0-0-k9fzq-head-svc.demo-development.svc.cluster.local:8265",
        "jobStatus": "RUNNING",
        "message": "Job is currently running.",
        "startTime": SINCE,
        "rayClusterStatus": {"state": "ready", "head": {"podIP": "10.1.0.2"}},
    },
}


def _spec(path: Path, name: str) -> ExecutionSpec:
    document = yaml.safe_load(path.read_text())
    document.setdefault("execution", {})["id"] = {"project": "demo", "domain": "development", "name": name}
    return parse_spec(document, base_dir=path.parent)


# Each kind: the platform that runs it, a spec of its task type, and its realistic objects.
CASES: dict[str, tuple[Path | None, Path, list[Obj]]] = {
    "Pod": (None, EXAMPLES / "hello.yaml", list(PODS.values())),
    "SparkApplication": (None, EXAMPLES / "spark.yaml", [SPARK]),
    "PyTorchJob": (EXAMPLES / "pytorch" / "config.yaml", EXAMPLES / "pytorch" / "pytorch.yaml", [PYTORCH]),
    "RayJob": (EXAMPLES / "ray" / "config.yaml", EXAMPLES / "ray" / "ray.yaml", [RAY]),
}


@pytest.fixture(scope="module")
def loaded() -> dict[str, tuple[Platform, ExecutionSpec]]:
    out: dict[str, tuple[Platform, ExecutionSpec]] = {}
    for kind, (config, spec, _) in CASES.items():
        name = spec.stem.replace("_", "-") + "-1"
        out[kind] = (Platform.load(config), _spec(spec, name))
    return out


def test_every_realistic_object_reads_as_a_phase(loaded: dict[str, tuple[Platform, ExecutionSpec]]) -> None:
    # The baseline the fuzz departs from: each object as written is a phase, not an error.
    for kind, (_, _, objects) in CASES.items():
        platform, spec = loaded[kind]
        for obj in objects:
            info = observed_status(platform, spec, copy.deepcopy(obj), now=NOW, state=PluginState())
            assert info.phase is not None, kind


# -- the fuzz ----------------------------------------------------------------------------------------------


def _paths(value: Any, prefix: tuple[str | int, ...] = ()) -> Iterator[tuple[str | int, ...]]:
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*prefix, index))


DELETED = object()
"""Instead of a value: the node is removed (a missing ``metadata``, a list one item shorter)."""


def _replaced(obj: Obj, path: tuple[str | int, ...], value: Any) -> Any:
    if not path:
        return {} if value is DELETED else value
    out = copy.deepcopy(obj)
    node: Any = out
    for key in path[:-1]:
        node = node[key]
    if value is DELETED:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return out


# What a JSON or YAML file can hold: YAML also gives inf and nan, and integers of any size.
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=20)
    | st.sampled_from(
        [
            "",
            "x",
            "Pending",
            "Running",
            "Succeeded",
            "Failed",
            "OOMKilled",
            "ImagePullBackOff",
            "CreateContainerError",
            "True",
            "False",
            "Ready",
            NAME,
            "2026-13-01T00:00:00Z",
            "10000-01-01T00:00:00Z",
            "0001-01-01T00:00:00+01:00",
            "9999-12-31T23:59:59-01:00",
            "2026-01-01T00:00:00Z",
            "2026-01-01",
            "COMPLETED",
            "FAILED",
            "SUCCEEDED",
        ]
    )
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=8,
)


@st.composite
def malformed(draw: st.DrawFn) -> tuple[str, Any]:
    # Pods are what every plugin built on the status helpers reads: half the examples.
    kind = draw(st.sampled_from(["Pod", "Pod", "Pod", *sorted(k for k in CASES if k != "Pod")]))
    obj = draw(st.sampled_from(CASES[kind][2]))
    # Deepest nodes first: examples shrink towards the first, and the root is the least interesting one.
    path = draw(st.sampled_from(list(_paths(obj))[::-1]))
    return kind, _replaced(obj, path, draw(st.just(DELETED) | JSON_VALUES))


@settings(
    max_examples=400,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(case=malformed())
def test_any_value_in_any_node_is_a_phase_or_an_error_naming_the_field_or_object(
    loaded: dict[str, tuple[Platform, ExecutionSpec]], case: tuple[str, Any]
) -> None:
    kind, obj = case
    platform, spec = loaded[kind]
    try:
        info = observed_status(platform, spec, obj, now=NOW, state=PluginState())
    except SpecError as e:
        error = e
    else:
        dump(info.to_json())  # what the command prints: must be printable too
        return
    message = str(error)
    if not isinstance(obj, dict):
        assert error.path == "--resource", message
    elif kind == "Pod":
        # The Pod's fields are checked first: the error is the field's path.
        assert error.path.split(".")[0].split("[")[0] in ("metadata", "spec", "status"), message
    else:
        # A custom resource: its plugin's own error, naming the object.
        assert error.path == "--resource", message
        named = obj.get("kind") if isinstance(obj.get("kind"), str) and obj.get("kind") else "object"
        assert message.startswith(f"--resource: {named} "), message


# -- the plugin manager: a status it cannot read ------------------------------------------------------------


class OneObjectClient:
    """A KubeClient whose API holds one object (whatever its shape) and never reports a change."""

    def __init__(self, obj: Obj) -> None:
        self.obj = obj
        self.closed = asyncio.Event()

    async def create(self, rtype: ResourceType, obj: Obj) -> Obj:
        return obj

    async def get(self, rtype: ResourceType, namespace: str, name: str) -> Obj:
        return copy.deepcopy(self.obj)

    async def list(
        self, rtype: ResourceType, namespace: str | None = None, *, label_selector: str | None = None
    ) -> tuple[list[Obj], str]:
        return [], "1"

    async def watch(
        self,
        rtype: ResourceType,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str | None = None,
        timeout_seconds: int | None = None,
    ) -> AsyncIterator[Any]:
        await self.closed.wait()
        return
        yield

    async def patch(self, rtype: ResourceType, namespace: str, name: str, patch: Any, **kw: Any) -> Obj:
        return self.obj

    async def replace(self, rtype: ResourceType, obj: Obj) -> Obj:
        return obj

    async def delete(self, rtype: ResourceType, namespace: str, name: str) -> Obj | None:
        return None

    async def close(self) -> None:
        self.closed.set()


async def _round_of(entry: K8sPluginEntry, task: Path, observed: Obj) -> Any:
    """One round of a started task whose object reads as ``observed``: the transition, or what it raised."""
    client = OneObjectClient(observed)
    clock = FakeClock()
    factory = InformerFactory(client, clock=clock)  # type: ignore[arg-type]
    document = yaml.safe_load(task.read_text())
    tctx = fake_task_context(
        document,
        state=ManagerState(PluginPhase.STARTED).to_json(),
        state_version=PLUGIN_STATE_VERSION,
    )
    async with factory:
        manager = PluginManager(
            entry,
            load_k8s_plugin(entry),
            kube_client=client,  # type: ignore[arg-type]
            informers=factory,
            config=K8sPluginConfig(),
            enqueue_owner=lambda ns, name: None,
            owner_kind="",
            clock=clock,
        )
        try:
            return await manager.handle(tctx)
        except Exception as e:
            return e
        finally:
            await client.close()


def _entry(entries: list[K8sPluginEntry], task_type: str) -> K8sPluginEntry:
    return next(e for e in entries if task_type in e.registered_task_types)


async def test_a_malformed_pod_is_a_round_error_naming_the_pod_and_the_field() -> None:
    bad = _replaced(
        PODS["failed"], ("status", "containerStatuses", 0, "state", "terminated", "exitCode"), "x"
    )
    error = await _round_of(_entry(pod_entries(), "container"), EXAMPLES / "hello.yaml", bad)
    assert isinstance(error, PluginError), error
    assert error.code == "SystemError"
    text = str(error)
    assert "failed to check status of Pod [" in text
    assert "in plugin [container]" in text
    assert (
        "status.containerStatuses[0].state.terminated.exitCode: must be an integer, got a string 'x'" in text
    )


async def test_a_custom_resource_its_plugin_cannot_read_is_a_round_error_naming_it() -> None:
    bad = _replaced(SPARK, ("status", "applicationState"), ["FAILED"])
    error = await _round_of(_entry(spark_entries(), "spark"), EXAMPLES / "spark.yaml", bad)
    assert isinstance(error, PluginError), error
    assert error.code == "SystemError"
    assert "failed to check status of SparkApplication [" in str(error)
    assert error.cause is not None and not isinstance(error.cause, PluginError)


async def test_the_same_round_with_a_readable_object_is_a_phase() -> None:
    transition = await _round_of(_entry(pod_entries(), "container"), EXAMPLES / "hello.yaml", PODS["failed"])
    assert not isinstance(transition, Exception), transition
    assert transition.info.phase.is_failure


async def test_the_executor_fails_the_attempt_as_a_system_error_and_keeps_running(tmp_path: Path) -> None:
    # The round error repeats (the object stays malformed): after the executor's round-error budget the
    # attempt is a SystemRetryableFailure naming the object, the retries are spent, and the executor is
    # still there to run the next execution.
    bad = _replaced(PODS["failed"], ("status", "conditions"), "Ready")
    entry = _entry(pod_entries(), "container")
    client = OneObjectClient(bad)
    clock = FakeClock()
    factory = InformerFactory(client, clock=clock)  # type: ignore[arg-type]
    settings = ExecutorSettings(
        data_root=str(tmp_path / "data"), workers=2, resync_period=0.001, max_round_errors=3
    )
    async with factory:
        manager = PluginManager(
            entry,
            load_k8s_plugin(entry),
            kube_client=client,  # type: ignore[arg-type]
            informers=factory,
            config=K8sPluginConfig(),
            enqueue_owner=lambda ns, name: None,
            owner_kind="",
            clock=clock,
        )
        resolver = PluginResolver(
            [(PluginEntry("container", ("container",), lambda _: manager), manager)], {}
        )
        try:
            async with Executor(resolver=resolver, store=MemoryStateStore(), settings=settings) as ex:
                first = await asyncio.wait_for(ex.run(_spec(EXAMPLES / "hello.yaml", "hello-a")), 60)
                client.obj = PODS["failed"]
                second = await asyncio.wait_for(ex.run(_spec(EXAMPLES / "hello.yaml", "hello-b")), 60)
        finally:
            await client.close()
    # Retried as a system error, then the budget is spent (RetriesExhausted over the system error's code).
    assert first.phase == "PermanentFailure", first
    assert first.attempts > 1
    assert first.error is not None
    assert first.error["code"] == "RetriesExhausted|SystemError"
    message = first.error["message"]
    assert "SYSTEM::the plugin failed 3 rounds in a row" in message
    assert "failed to check status of Pod [demo-development/hello-a-n0-" in message
    assert "status.conditions: must be a list, got a string 'Ready'" in message
    # A readable object: the same executor reads the next execution's phase (the last termination, Error).
    assert second.error is not None
    assert second.error["code"] == "RetriesExhausted|Error", second
