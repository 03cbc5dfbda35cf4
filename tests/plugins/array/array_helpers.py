"""Shared builders for the k8s array plugin tests: templates, the plugin over a fake cluster, rounds.

``FakeKube`` is a small in-memory :class:`taskplug.k8s.KubeClient` (the plugin's own seam): it stores what is
created, answers 404 / 409 as the API does, lets a test script errors per verb and pod name, set a pod's
status, and counts every call; the end-to-end tests use the embedded cluster instead.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from flyteidl.core import literals_pb2

from taskplug.core import (
    AllocationStatus,
    FakeClock,
    PluginStateHolder,
    ResourceConstraintsSpec,
    StaticTaskExecutionContext,
    Transition,
    WatchEvent,
)
from taskplug.executor import Platform
from taskplug.k8s import POD, KubeApiError, PlatformPodConfig, ResourceType
from taskplug.plugins.array import K8S_ARRAY_SECTION, ArrayPlugin, ArrayState
from taskplug.testing import fake_task_context, next_round

PARENT = "exec1-n0-0"
"""The generated name of the helpers' map task (execution ``exec1``, node ``n0``, attempt 0)."""
INT = {"simple": "INTEGER"}
INT_LIST = {"collectionType": INT}

SQUARE = """
import os
from pathlib import Path
from flyteidl.core import literals_pb2
i = int(os.environ[os.environ["BATCH_JOB_ARRAY_INDEX_VAR_NAME"]])
inputs = literals_pb2.LiteralMap.FromString(Path("{{.input}}").read_bytes())
x = inputs.literals["x"].collection.literals[i].scalar.primitive.integer
if x < 0:
    raise SystemExit(3)
out = Path("{{.outputPrefix}}") / str(i)
out.mkdir(parents=True, exist_ok=True)
lm = literals_pb2.LiteralMap()
lm.literals["o0"].scalar.primitive.integer = x * x
(out / "outputs.pb").write_bytes(lm.SerializeToString())
"""
"""A sub-task as flytekit's ``pyflyte-map-execute`` behaves: reads its index from the environment, its element
of ``x`` from the map task's inputs, writes ``o0 = x*x`` to ``{outputPrefix}/{index}/outputs.pb``; a negative
element exits 3."""


def array_template(
    *,
    custom: Mapping[str, Any] | None = None,
    version: int = 1,
    outputs: bool = True,
    inputs: Mapping[str, Any] | None = None,
    script: str = SQUARE,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``container_array`` template: ``x: List[int]`` in, ``o0: List[int]`` out (unless ``outputs=False``)."""
    template: dict[str, Any] = {
        "id": {"resourceType": "TASK", "project": "p", "domain": "d", "name": "squares", "version": "v1"},
        "type": "container_array",
        "taskTypeVersion": version,
        "interface": {
            "inputs": {"variables": {k: {"type": v} for k, v in (inputs or {"x": INT_LIST}).items()}},
            "outputs": {"variables": {"o0": {"type": INT_LIST}} if outputs else {}},
        },
        "container": {
            "image": "python:3.11",
            "command": ["python", "-c"],
            "args": [script],
            "resources": {
                "requests": [{"name": "CPU", "value": "100m"}, {"name": "MEMORY", "value": "32Mi"}]
            },
        },
    }
    if custom is not None:
        template["custom"] = dict(custom)
    template.update(extra or {})
    return template


def task_context(
    tmp_path: Path,
    template: Mapping[str, Any] | None = None,
    *,
    xs: list[int] | None = None,
    inputs: Mapping[str, Any] | None = None,
    max_attempts: int = 1,
    **execution: Any,
) -> StaticTaskExecutionContext:
    """The first round's context for ``template`` (default :func:`array_template`) over ``x = xs``."""
    values = dict(inputs) if inputs is not None else {"x": xs if xs is not None else [1, 2, 3]}
    return fake_task_context(
        dict(template or array_template()),
        inputs=values,
        data_root=str(tmp_path / "data"),
        execution={
            "id": {"project": "p", "domain": "d", "name": "exec1", "nodeId": "n0"},
            "maxAttempts": max_attempts,
            **execution,
        },
    )


def with_resource_manager(tctx: StaticTaskExecutionContext, manager: Any) -> StaticTaskExecutionContext:
    tctx.resource_manager = manager
    return tctx


def make_plugin(
    kube: FakeKube,
    *,
    config: Mapping[str, Any] | None = None,
    k8s: Mapping[str, Any] | None = None,
    clock: FakeClock | None = None,
    wakes: list[tuple[str, str]] | None = None,
) -> ArrayPlugin:
    """The plugin over ``kube`` with ``plugins.k8s-array`` = ``config`` and ``plugins.k8s`` = ``k8s``; its
    wake-ups are appended to ``wakes``."""
    platform = Platform.load(document={"plugins": {"k8s-array": dict(config or {}), "k8s": dict(k8s or {})}})
    sink = wakes if wakes is not None else []
    return ArrayPlugin(
        platform.config.get(K8S_ARRAY_SECTION),
        platform=PlatformPodConfig.from_config(platform.config, environ={}),
        kube_client=kube,
        enqueue_owner=lambda ns, name: sink.append((ns, name)),
        clock=clock or FakeClock(),
        watch_pods=False,
    )


async def run_round(
    plugin: ArrayPlugin, tctx: StaticTaskExecutionContext
) -> tuple[Transition, StaticTaskExecutionContext]:
    """One round: the transition, and the context of the round after it."""
    transition = await plugin.handle(tctx)
    return transition, next_round(tctx)


def state_of(tctx: StaticTaskExecutionContext) -> ArrayState:
    _, raw = tctx.plugin_state.get()
    return ArrayState.from_json(raw)


def with_state(tctx: StaticTaskExecutionContext, state: ArrayState) -> StaticTaskExecutionContext:
    tctx.plugin_state = PluginStateHolder(0, state.to_json())
    return tctx


async def rounds_until_checking(
    plugin: ArrayPlugin, tctx: StaticTaskExecutionContext
) -> StaticTaskExecutionContext:
    """Start → PreLaunch → Launch → CheckingSubTaskExecutions: the context of the first launching round."""
    for _ in range(3):
        _, tctx = await run_round(plugin, tctx)
    return tctx


def outputs_literal(o0: int) -> bytes:
    lm = literals_pb2.LiteralMap()
    lm.literals["o0"].scalar.primitive.integer = o0
    return lm.SerializeToString()


def write_outputs(tctx: StaticTaskExecutionContext, index: int, o0: int) -> None:
    path = Path(tctx.output_writer.output_prefix) / str(index) / "outputs.pb"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(outputs_literal(o0))


# -- the fake cluster ---------------------------------------------------------------------------------------


def _status_error(status: int, reason: str, message: str) -> KubeApiError:
    return KubeApiError(status, reason, message)


def not_found(name: str) -> KubeApiError:
    return _status_error(404, "NotFound", f'pods "{name}" not found')


class FakeKube:
    """An in-memory KubeClient for pods (see the module docstring)."""

    def __init__(self) -> None:
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}
        self.calls: list[tuple[str, str]] = []  # (verb, name)
        self.created: list[str] = []
        self.deleted: list[str] = []
        self._errors: dict[tuple[str, str | None], list[KubeApiError]] = {}
        self._rv = 0

    # scripting ---------------------------------------------------------------------------------------
    def fail(self, verb: str, error: KubeApiError, *, name: str | None = None, times: int = 1) -> None:
        self._errors.setdefault((verb, name), []).extend([error] * times)

    def _check(self, verb: str, name: str) -> None:
        self.calls.append((verb, name))
        for key in ((verb, name), (verb, None)):
            queue = self._errors.get(key)
            if queue:
                raise queue.pop(0)

    def pod(self, name: str) -> dict[str, Any]:
        for (_, n), pod in self.pods.items():
            if n == name:
                return pod
        raise KeyError(name)

    def names(self) -> list[str]:
        return sorted(n for _, n in self.pods)

    def set_phase(self, name: str, phase: str, *, exit_code: int = 0) -> None:
        """Give the pod a status: ``Running``, ``Succeeded``, ``Failed`` (its container exited ``exit_code``)
        or ``Pending``."""
        pod = self.pod(name)
        container = pod["spec"]["containers"][0]["name"]
        if phase == "Running":
            state: dict[str, Any] = {"running": {"startedAt": "2026-01-01T00:00:01Z"}}
        elif phase in ("Succeeded", "Failed"):
            state = {
                "terminated": {
                    "exitCode": exit_code,
                    "reason": "Completed" if exit_code == 0 else "Error",
                    "finishedAt": "2026-01-01T00:00:02Z",
                }
            }
        else:
            state = {"waiting": {"reason": "ContainerCreating"}}
        pod["status"] = {"phase": phase, "containerStatuses": [{"name": container, "state": state}]}
        if phase == "Pending":
            pod["status"] = {"phase": "Pending"}
        self._bump(pod)

    def _bump(self, pod: dict[str, Any]) -> None:
        self._rv += 1
        pod["metadata"]["resourceVersion"] = str(self._rv)

    # KubeClient ----------------------------------------------------------------------------------------
    async def create(self, rtype: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        self._check("create", meta["name"])
        key = (meta["namespace"], meta["name"])
        if key in self.pods:
            raise _status_error(409, "AlreadyExists", f'pods "{meta["name"]}" already exists')
        stored = copy.deepcopy(obj)
        stored.setdefault("metadata", {})["uid"] = f"uid-{meta['name']}"
        stored["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
        stored["status"] = {"phase": "Pending"}  # as the API server stores a new pod
        self._bump(stored)
        self.pods[key] = stored
        self.created.append(meta["name"])
        return copy.deepcopy(stored)

    async def get(self, rtype: ResourceType, namespace: str, name: str) -> dict[str, Any]:
        self._check("get", name)
        pod = self.pods.get((namespace, name))
        if pod is None:
            raise not_found(name)
        return copy.deepcopy(pod)

    async def list(
        self, rtype: ResourceType, namespace: str | None = None, *, label_selector: str | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        self._check("list", "")
        wanted = dict(part.split("=", 1) for part in (label_selector or "").split(",") if part)
        found = [
            copy.deepcopy(p)
            for (ns, _), p in self.pods.items()
            if (namespace is None or ns == namespace)
            and all((p["metadata"].get("labels") or {}).get(k) == v for k, v in wanted.items())
        ]
        return found, str(self._rv)

    async def watch(
        self, rtype: ResourceType, namespace: str | None = None, **_: Any
    ) -> AsyncIterator[WatchEvent]:
        raise NotImplementedError("the unit tests run the plugin without its pod watch")
        yield  # pragma: no cover

    async def patch(
        self,
        rtype: ResourceType,
        namespace: str,
        name: str,
        patch: Mapping[str, Any],
        *,
        patch_type: str = "merge",
    ) -> dict[str, Any]:
        self._check("patch", name)
        pod = self.pods.get((namespace, name))
        if pod is None:
            raise not_found(name)
        for key, value in (patch.get("metadata") or {}).items():
            pod["metadata"][key] = copy.deepcopy(value)
        self._bump(pod)
        self._collect(namespace, name)
        return copy.deepcopy(pod)

    async def replace(self, rtype: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    async def delete(self, rtype: ResourceType, namespace: str, name: str) -> dict[str, Any] | None:
        self._check("delete", name)
        pod = self.pods.get((namespace, name))
        if pod is None:
            raise not_found(name)
        self.deleted.append(name)
        pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:03Z"
        self._bump(pod)
        self._collect(namespace, name)
        return None

    def _collect(self, namespace: str, name: str) -> None:
        # Gone once it is being deleted and holds no finalizer, as the API server does.
        pod = self.pods.get((namespace, name))
        if (
            pod is not None
            and pod["metadata"].get("deletionTimestamp")
            and not pod["metadata"].get("finalizers")
        ):
            del self.pods[(namespace, name)]

    async def close(self) -> None:
        return None


assert POD.plural == "pods"


class FakeResourceManager:
    """Allocation tokens under one quota per namespace, as the in-process resource manager grants them."""

    def __init__(self, quotas: Mapping[str, int]) -> None:
        self.quotas = dict(quotas)
        self.tokens: dict[str, set[str]] = {ns: set() for ns in quotas}
        self.log: list[tuple[str, str, str]] = []

    def get_id(self) -> str:
        return "fake"

    async def allocate_resource(
        self, namespace: str, token: str, constraints: ResourceConstraintsSpec
    ) -> AllocationStatus:
        self.log.append(("allocate", namespace, token))
        held = self.tokens[namespace]
        if token in held:
            return AllocationStatus.GRANTED
        if len(held) >= self.quotas[namespace]:
            return AllocationStatus.EXHAUSTED
        held.add(token)
        return AllocationStatus.GRANTED

    async def release_resource(self, namespace: str, token: str) -> None:
        self.log.append(("release", namespace, token))
        self.tokens[namespace].discard(token)
