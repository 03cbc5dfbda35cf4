"""Nothing a pod holds can stop the embedded cluster.

The malformed pods here are written into the store through the controllers' own write path, which does not
validate, so they reach the scheduler and the kubelet even though the API would refuse them: survival is
proven apart from validation. Each pod that cannot run fails alone — with the container state a kubelet
gives when a process cannot start (``StartError`` with the OS's words), or ``UnexpectedAdmissionError``
naming the error — and a normal pod runs afterwards. A handler's unexpected error is a JSON 500 ``Status``,
and a controller that stops all the same turns every API answer into a 500 naming it instead of a silent
hang.
"""

from __future__ import annotations

import asyncio
import logging
import stat
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from support.cluster_http import cluster_session
from taskplug.core import FakeClock
from taskplug.k8s import POD, KubeApiError
from taskplug.localcluster import ANNOTATION_DURATION, ANNOTATION_EXIT_CODE, LocalCluster

pytestmark = pytest.mark.integration

Obj = dict[str, Any]
Mutation = Callable[[Obj], None]


def good_pod(name: str, command: list[str] | None = None, *, restart: str = "Never") -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": restart,
            "containers": [
                {"name": "main", "image": "busybox", "command": command or ["sh", "-c", "echo ran"]}
            ],
        },
    }


async def inject(cluster: LocalCluster, pod: Obj, mutate: Mutation, *, bind: bool) -> None:
    """Store ``pod`` with ``mutate`` applied, past validation: created valid and out of every controller's
    reach, then changed by a controller's (unvalidated) write that hands it to the kubelet (``bind``) or to
    the scheduler."""
    pod["spec"]["schedulerName"] = "nobody"
    await cluster.client().create(POD, pod)
    name = pod["metadata"]["name"]

    def corrupt(obj: Obj) -> None:
        obj["spec"]["schedulerName"] = "default-scheduler"
        if bind:
            obj["spec"]["nodeName"] = "local-node"
        mutate(obj)

    assert cluster.store.update(POD, "default", name, corrupt) is not None


def _finished(obj: Obj) -> bool:
    status = obj.get("status")
    return isinstance(status, dict) and status.get("phase") in ("Succeeded", "Failed")


async def runs_a_pod(cluster: LocalCluster, name: str = "after") -> None:
    await cluster.client().create(POD, good_pod(name))
    done = await cluster.wait_for(POD, "default", name, _finished, within=30)
    assert done["status"]["phase"] == "Succeeded"
    if cluster.mode == "process":
        assert cluster.logs("default", name) == "ran\n"


def _set_in_container(key: str, value: Any) -> Mutation:
    return lambda obj: obj["spec"]["containers"][0].__setitem__(key, value)


@pytest.fixture
async def proc() -> AsyncIterator[LocalCluster]:
    async with LocalCluster(mode="process") as cluster:
        yield cluster


@pytest.fixture
def not_executable(tmp_path: Path) -> Path:
    """A file marked executable that is no program (no ELF header, no #!): exec gives ENOEXEC."""
    path = tmp_path / "not-a-program"
    path.write_bytes(b"\x00\x01\x02 not a program\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.mark.parametrize(
    ("mutate", "words"),
    [
        pytest.param(
            _set_in_container("command", ["/no/such/program"]), "no such file or directory", id="missing-path"
        ),
        pytest.param(
            _set_in_container("command", ["no-such-program-anywhere"]),
            "executable file not found in $PATH",
            id="missing-on-path",
        ),
        pytest.param(
            _set_in_container("command", ["echo", "a\x00b"]), "embedded null byte", id="nul-in-argument"
        ),
        pytest.param(
            _set_in_container("env", [{"name": "A=B", "value": "x"}]),
            "illegal environment variable name",
            id="equals-in-env-name",
        ),
        pytest.param(
            _set_in_container("env", [{"name": "A", "value": "a\x00b"}]),
            "embedded null byte",
            id="nul-in-env-value",
        ),
    ],
)
async def test_a_container_that_cannot_start_is_a_start_error_and_the_pod_fails_alone(
    proc: LocalCluster, mutate: Mutation, words: str
) -> None:
    await inject(proc, good_pod("broken"), mutate, bind=True)
    failed = await proc.wait_for(POD, "default", "broken", _finished, within=30)
    assert failed["status"]["phase"] == "Failed"
    terminated = failed["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (128, "StartError")
    assert words in terminated["message"]
    assert terminated["message"].startswith("failed to create containerd task")
    await runs_a_pod(proc)


async def test_an_exec_format_error_is_reported_in_the_kernels_words(
    proc: LocalCluster, not_executable: Path
) -> None:
    await inject(proc, good_pod("broken"), _set_in_container("command", [str(not_executable)]), bind=True)
    failed = await proc.wait_for(POD, "default", "broken", _finished, within=30)
    terminated = failed["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (failed["status"]["phase"], terminated["reason"]) == ("Failed", "StartError")
    assert "exec format error" in terminated["message"]
    await runs_a_pod(proc)


async def test_a_restarting_container_that_cannot_start_waits_with_run_container_error(
    proc: LocalCluster,
) -> None:
    pod = good_pod("broken", ["/no/such/program"], restart="Always")
    await proc.client().create(POD, pod)

    def waiting_to_retry(obj: Obj) -> bool:
        statuses = obj["status"].get("containerStatuses") or []
        return bool(statuses) and "waiting" in statuses[0]["state"] and bool(statuses[0]["lastState"])

    retrying = await proc.wait_for(POD, "default", "broken", waiting_to_retry, within=30)
    status = retrying["status"]["containerStatuses"][0]
    assert status["state"]["waiting"]["reason"] == "RunContainerError"
    assert "no such file or directory" in status["state"]["waiting"]["message"]
    assert status["lastState"]["terminated"]["reason"] == "StartError"
    await runs_a_pod(proc)


@pytest.mark.parametrize(
    ("mutate", "error"),
    [
        pytest.param(_set_in_container("name", 5), "TypeError", id="container-name-an-integer"),
        pytest.param(_set_in_container("env", "A=B"), "AttributeError", id="env-a-string"),
        pytest.param(
            lambda obj: obj["spec"].__setitem__("containers", "main"), "TypeError", id="containers-a-string"
        ),
        pytest.param(
            _set_in_container("resources", {"limits": ["memory"]}), "AttributeError", id="limits-a-list"
        ),
        pytest.param(
            _set_in_container("env", [{"name": "A", "valueFrom": {"fieldRef": "metadata.name"}}]),
            "AttributeError",
            id="field-ref-a-string",
        ),
    ],
)
async def test_a_pod_the_kubelet_cannot_handle_fails_alone_naming_the_error(
    proc: LocalCluster, mutate: Mutation, error: str, caplog: pytest.LogCaptureFixture
) -> None:
    await inject(proc, good_pod("broken"), mutate, bind=True)
    failed = await proc.wait_for(POD, "default", "broken", _finished, within=30)
    assert failed["status"]["phase"] == "Failed"
    assert failed["status"]["reason"] == "UnexpectedAdmissionError"
    assert f"the kubelet could not run it: {error}" in failed["status"]["message"]
    assert any("default/broken" in r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR)
    await runs_a_pod(proc)


async def test_the_simulated_kubelet_survives_the_same_pods_and_wild_annotations() -> None:
    async with LocalCluster(mode="simulated", clock=FakeClock()) as sim:
        await inject(
            sim, good_pod("broken"), lambda obj: obj["spec"].__setitem__("containers", "main"), bind=True
        )
        failed = await sim.wait_for(POD, "default", "broken", _finished, within=30)
        assert (failed["status"]["phase"], failed["status"]["reason"]) == (
            "Failed",
            "UnexpectedAdmissionError",
        )
        wild = good_pod("wild")
        wild["metadata"]["annotations"] = {ANNOTATION_EXIT_CODE: "9" * 40, ANNOTATION_DURATION: "nan"}
        await sim.client().create(POD, wild)
        done = await sim.wait_for(POD, "default", "wild", _finished, within=30)
        code = done["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"]
        assert done["status"]["phase"] == "Failed" and 0 < code < 256
        await runs_a_pod(sim)


@pytest.mark.parametrize(
    "mutate",
    [
        pytest.param(
            lambda obj: obj["spec"].__setitem__("nodeSelector", ["disk=ssd"]), id="node-selector-a-list"
        ),
        pytest.param(
            lambda obj: obj["spec"].__setitem__(
                "affinity",
                {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [7]}
                    }
                },
            ),
            id="selector-term-a-number",
        ),
        pytest.param(
            lambda obj: obj["spec"].__setitem__("affinity", {"nodeAffinity": ["required"]}),
            id="affinity-a-list",
        ),
        pytest.param(
            lambda obj: obj["spec"]["containers"][0].__setitem__("resources", {"requests": "lots"}),
            id="requests-a-string",
        ),
    ],
)
async def test_a_pod_the_scheduler_cannot_handle_fails_alone(
    proc: LocalCluster, mutate: Mutation, caplog: pytest.LogCaptureFixture
) -> None:
    await inject(proc, good_pod("broken"), mutate, bind=False)
    failed = await proc.wait_for(POD, "default", "broken", _finished, within=30)
    assert (failed["status"]["phase"], failed["status"]["reason"]) == ("Failed", "SchedulerError")
    assert failed["status"]["message"].startswith("the scheduler could not handle this pod: ")
    assert any("default/broken" in r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR)
    assert "nodeName" not in failed["spec"]
    await runs_a_pod(proc)


async def test_a_pod_whose_events_the_api_refuses_still_runs(proc: LocalCluster) -> None:
    # 253 characters is the longest pod name; "<name>.<hex>" is too long for an event, which is dropped.
    name = "a" * 253
    await proc.client().create(POD, good_pod(name))
    done = await proc.wait_for(POD, "default", name, _finished, within=30)
    assert done["status"]["phase"] == "Succeeded"
    await runs_a_pod(proc)


async def test_a_selector_that_cannot_read_a_stored_object_does_not_break_writes(proc: LocalCluster) -> None:
    watch = proc.client().watch(POD, "default", label_selector="team=a")
    seen: list[str] = []

    async def follow() -> None:
        async for event in watch:
            seen.append(event.object["metadata"]["name"])

    follower = asyncio.create_task(follow())
    try:
        await inject(
            proc, good_pod("odd"), lambda obj: obj["metadata"].__setitem__("labels", ["team=a"]), bind=False
        )
        labelled = good_pod("labelled")
        labelled["metadata"]["labels"] = {"team": "a"}
        await proc.client().create(POD, labelled)
        await proc.wait_for(POD, "default", "labelled", _finished, within=30)
        await runs_a_pod(proc)
    finally:
        follower.cancel()
        await asyncio.gather(follower, return_exceptions=True)
    assert "labelled" in seen and "odd" not in seen


async def test_an_unexpected_error_in_a_handler_is_a_json_500_and_the_server_goes_on(
    proc: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = await proc.serve_http()

    def broken_list(*args: object, **kwargs: object) -> object:
        raise RuntimeError("the store is on fire")

    async with cluster_session(proc) as session:
        with monkeypatch.context() as patch:
            patch.setattr(proc.store, "list", broken_list)
            async with session.get(f"{url}/api/v1/namespaces/default/pods") as response:
                assert response.status == 500
                assert response.headers["Content-Type"] == "application/json"
                status = await response.json()
        assert (status["kind"], status["reason"]) == ("Status", "InternalError")
        assert status["message"] == "Internal error occurred: RuntimeError: the store is on fire"
        async with session.post(
            f"{url}/api/v1/namespaces/default/pods",
            data=orjson.dumps(good_pod("served")),
            headers={"Content-Type": "application/json"},
        ) as response:
            assert response.status == 201
        async with session.get(f"{url}/api/v1/namespaces/default/pods") as response:
            assert response.status == 200
            assert [p["metadata"]["name"] for p in (await response.json())["items"]] == ["served"]
    done = await proc.wait_for(POD, "default", "served", _finished, within=30)
    assert done["status"]["phase"] == "Succeeded"


async def test_a_controller_that_stops_all_the_same_makes_every_answer_a_500_naming_it() -> None:
    cluster = LocalCluster(mode="simulated", clock=FakeClock())

    async def dies() -> None:
        raise RuntimeError("out of luck")

    cluster.scheduler.run = dies  # type: ignore[method-assign]
    async with cluster:
        url = await cluster.serve_http()
        for _ in range(100):
            try:
                await cluster.client().list(POD)
            except KubeApiError:
                break
            await asyncio.sleep(0.01)
        with pytest.raises(KubeApiError) as caught:
            await cluster.client().create(POD, good_pod("p"))
        assert caught.value.status == 500
        assert caught.value.message == (
            "Internal error occurred: the embedded cluster's scheduler stopped: RuntimeError: out of luck"
        )
        async with cluster_session(cluster) as session, session.get(f"{url}/api/v1/pods") as response:
            assert response.status == 500
            assert "the embedded cluster's scheduler stopped" in (await response.json())["message"]
