"""The process kubelet: real processes, kubelet-shaped statuses. Processes take real time: every wait is a
watch with a bounded deadline, never a sleep."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from taskplug.core import Quantity
from taskplug.k8s import EVENT, POD
from taskplug.localcluster import LocalCluster

from .conftest import condition, phase_in, pod_manifest

DONE = phase_in("Succeeded", "Failed")


def py(code: str) -> list[str]:
    return ["python", "-c", code]


def terminated(pod: dict[str, Any], index: int = 0, field: str = "containerStatuses") -> dict[str, Any]:
    state: dict[str, Any] = pod["status"][field][index]["state"]["terminated"]
    return state


def waiting_reason(pod: dict[str, Any]) -> str | None:
    statuses = (pod.get("status") or {}).get("containerStatuses") or [{}]
    reason: str | None = statuses[0].get("state", {}).get("waiting", {}).get("reason")
    return reason


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie no longer runs; only its exit status is left to collect.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


async def test_a_succeeding_command_completes_with_exit_0_and_its_logs(proc: LocalCluster) -> None:
    await proc.client().create(POD, pod_manifest("ok", command=py("print('hello')")))
    pod = await proc.wait_for(POD, "default", "ok", DONE, within=30)
    state = terminated(pod)
    assert pod["status"]["phase"] == "Succeeded"
    assert (state["exitCode"], state["reason"]) == (0, "Completed")
    assert state["startedAt"] and state["finishedAt"] and state["containerID"].startswith("taskplug://")
    assert "message" not in state
    assert proc.logs("default", "ok") == "hello\n"
    assert condition(pod, "Ready")["reason"] == "PodCompleted"  # type: ignore[index]
    assert condition(pod, "Initialized")["status"] == "True"  # type: ignore[index]
    assert pod["status"]["startTime"] and pod["status"]["hostIP"] == "127.0.0.1" and pod["status"]["podIP"]


async def test_a_failing_command_reports_its_log_tail_as_the_message(proc: LocalCluster) -> None:
    code = "import sys\nfor i in range(100): print(f'line {i}')\nsys.exit(3)"
    await proc.client().create(
        POD, pod_manifest("bad", command=py(code), terminationMessagePolicy="FallbackToLogsOnError")
    )
    pod = await proc.wait_for(POD, "default", "bad", DONE, within=30)
    state = terminated(pod)
    assert pod["status"]["phase"] == "Failed"
    assert (state["exitCode"], state["reason"]) == (3, "Error")
    lines = state["message"].splitlines()
    assert len(lines) == 80 and lines[0] == "line 20" and lines[-1] == "line 99"


async def test_without_fallback_a_failure_has_no_message(proc: LocalCluster) -> None:
    await proc.client().create(POD, pod_manifest("bad", command=py("print('x'); raise SystemExit(2)")))
    state = terminated(await proc.wait_for(POD, "default", "bad", DONE, within=30))
    assert state["exitCode"] == 2 and "message" not in state


async def test_the_termination_message_file_wins_over_the_logs(proc: LocalCluster) -> None:
    code = "import os, sys\nopen(os.environ['TERMINATION_MESSAGE_PATH'], 'w').write('custom reason')\nsys.exit(1)"
    await proc.client().create(
        POD, pod_manifest("msg", command=py(code), terminationMessagePolicy="FallbackToLogsOnError")
    )
    state = terminated(await proc.wait_for(POD, "default", "msg", DONE, within=30))
    assert state["message"] == "custom reason"


async def test_the_containers_env_is_visible_to_the_process(proc: LocalCluster) -> None:
    env = [
        {"name": "GREETING", "value": "hi"},
        {"name": "WHO", "value": "$(GREETING) there"},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
    ]
    code = "import os; print(os.environ['WHO'], os.environ['POD_NAME'], os.environ['POD_NS'], 'HOME' in os.environ)"
    await proc.client().create(POD, pod_manifest("env", command=["python", "-c", code], env=env))
    await proc.wait_for(POD, "default", "env", phase_in("Succeeded"), within=30)
    assert proc.logs("default", "env") == "hi there env default True\n"


async def test_command_and_args_expand_env_references(proc: LocalCluster) -> None:
    pod = pod_manifest(
        "args",
        command=["python", "-c"],
        args=["print('$(MSG)', '$$(MSG)')"],
        env=[{"name": "MSG", "value": "v"}],
    )
    await proc.client().create(POD, pod)
    await proc.wait_for(POD, "default", "args", phase_in("Succeeded"), within=30)
    assert proc.logs("default", "args") == "v $(MSG)\n"


async def test_init_containers_run_in_order_before_the_containers(proc: LocalCluster) -> None:
    pod = pod_manifest("init", command=py("print(open('trail').read())"))
    pod["spec"]["initContainers"] = [
        {"name": "first", "image": "python:3.11", "command": py("open('trail', 'w').write('1')")},
        {"name": "second", "image": "python:3.11", "command": py("open('trail', 'a').write('2')")},
    ]
    await proc.client().create(POD, pod)
    done = await proc.wait_for(POD, "default", "init", DONE, within=30)
    assert done["status"]["phase"] == "Succeeded"
    assert proc.logs("default", "init") == "12\n"
    assert [s["name"] for s in done["status"]["initContainerStatuses"]] == ["first", "second"]
    assert terminated(done, 0, "initContainerStatuses")["reason"] == "Completed"


async def test_a_failed_init_container_fails_the_pod_and_the_containers_never_start(
    proc: LocalCluster,
) -> None:
    pod = pod_manifest("init-fail", command=py("print('never')"))
    pod["spec"]["initContainers"] = [
        {"name": "setup", "image": "python:3.11", "command": py("raise SystemExit(4)")}
    ]
    await proc.client().create(POD, pod)
    failed = await proc.wait_for(POD, "default", "init-fail", DONE, within=30)
    assert failed["status"]["phase"] == "Failed"
    assert terminated(failed, 0, "initContainerStatuses")["exitCode"] == 4
    assert waiting_reason(failed) == "PodInitializing"
    assert condition(failed, "Initialized")["message"] == "containers with incomplete status: [setup]"  # type: ignore[index]


async def test_a_sidecar_keeps_running_after_the_primary_and_dies_with_the_pod(proc: LocalCluster) -> None:
    pod = pod_manifest("pair", command=py("print('primary done')"))
    sidecar = py("import os, time; print(os.getpid(), flush=True); time.sleep(300)")
    pod["spec"]["containers"].append({"name": "sidecar", "image": "python:3.11", "command": sidecar})
    await proc.client().create(POD, pod)

    def primary_done_sidecar_running(obj: dict[str, Any]) -> bool:
        states = {s["name"]: s["state"] for s in obj["status"].get("containerStatuses", [])}
        return "terminated" in states.get("main", {}) and "running" in states.get("sidecar", {})

    both = await proc.wait_for(POD, "default", "pair", primary_done_sidecar_running, within=30)
    assert both["status"]["phase"] == "Running"
    assert condition(both, "Ready")["message"] == "containers with unready status: [main]"  # type: ignore[index]
    pid = await _logged_pid(proc, "pair", "sidecar")
    assert alive(pid)
    await proc.client().delete(POD, "default", "pair")
    await _until(lambda: not alive(pid))


async def test_a_process_over_its_memory_limit_is_oom_killed(proc: LocalCluster) -> None:
    grow = "import time\nblocks = []\nwhile True:\n    blocks.append(b'x' * (8 << 20))\n    time.sleep(0.01)"
    resources = {"limits": {"memory": "50Mi"}}
    await proc.client().create(POD, pod_manifest("hungry", command=py(grow), resources=resources))
    pod = await proc.wait_for(POD, "default", "hungry", DONE, within=60)
    state = terminated(pod)
    assert pod["status"]["phase"] == "Failed"
    assert (state["exitCode"], state["reason"]) == (137, "OOMKilled")
    assert Quantity("50Mi").value() == 50 * 1024 * 1024


async def test_an_image_that_fails_to_pull_backs_off_and_stays_pending(tmp_path: Path) -> None:
    async with LocalCluster(mode="process", image_pull_failures=["ghcr.io/missing/*"]) as cluster:
        await cluster.client().create(POD, pod_manifest("pull", image="ghcr.io/missing/app:1"))
        pod = await cluster.wait_for(
            POD, "default", "pull", lambda o: waiting_reason(o) == "ImagePullBackOff", within=30
        )
        assert pod["status"]["phase"] == "Pending"
        ready = condition(pod, "Ready")
        assert ready is not None
        assert (ready["status"], ready["reason"], ready["message"]) == (
            "False",
            "ContainersNotReady",
            "containers with unready status: [main]",
        )
        events, _ = await cluster.client().list(EVENT, "default", field_selector="regarding.name=pull")
        notes = [(e["reason"], e["note"]) for e in events]
        assert ("Pulling", 'Pulling image "ghcr.io/missing/app:1"') in notes
        assert ("BackOff", 'Back-off pulling image "ghcr.io/missing/app:1"') in notes
        assert any(
            reason == "Failed" and note.startswith('Failed to pull image "ghcr.io/missing/app:1"')
            for reason, note in notes
        )


async def test_an_invalid_image_name_is_invalid_image_name(proc: LocalCluster) -> None:
    await proc.client().create(POD, pod_manifest("bad-image", image="Not A Valid/Image"))
    pod = await proc.wait_for(
        POD,
        "default",
        "bad-image",
        lambda o: waiting_reason(o) is not None and waiting_reason(o) != "ContainerCreating",
        within=30,
    )
    assert waiting_reason(pod) == "InvalidImageName"
    assert pod["status"]["phase"] == "Pending"


async def test_a_container_without_a_command_cannot_run(proc: LocalCluster) -> None:
    pod = pod_manifest("empty")
    del pod["spec"]["containers"][0]["command"]
    await proc.client().create(POD, pod)
    state = terminated(await proc.wait_for(POD, "default", "empty", DONE, within=30))
    assert (state["exitCode"], state["reason"]) == (128, "ContainerCannotRun")


async def test_a_missing_executable_is_a_start_error(proc: LocalCluster) -> None:
    await proc.client().create(POD, pod_manifest("missing", command=["no-such-binary-anywhere"]))
    state = terminated(await proc.wait_for(POD, "default", "missing", DONE, within=30))
    assert (state["exitCode"], state["reason"]) == (128, "StartError")
    assert '"no-such-binary-anywhere"' in state["message"]


async def test_node_shutdown_kills_its_pods_as_failed_node_shutdown(proc: LocalCluster) -> None:
    await proc.client().create(
        POD,
        pod_manifest(
            "victim", command=py("import os, time; print(os.getpid(), flush=True); time.sleep(300)")
        ),
    )
    pid = await _logged_pid(proc, "victim", "main")
    proc.shutdown_node("local-node")
    pod = await proc.wait_for(POD, "default", "victim", DONE, within=30)
    assert (pod["status"]["phase"], pod["status"]["reason"]) == ("Failed", "NodeShutdown")
    assert terminated(pod)["exitCode"] == 137
    await _until(lambda: not alive(pid))
    await proc.client().create(POD, pod_manifest("after"))
    stuck = await proc.wait_for(
        POD, "default", "after", lambda o: condition(o, "PodScheduled") is not None, within=30
    )
    assert (
        condition(stuck, "PodScheduled")["message"]
        == "0/1 nodes are available: 1 node(s) were unschedulable."
    )  # type: ignore[index]
    proc.restore_node("local-node")
    await proc.wait_for(POD, "default", "after", phase_in("Succeeded"), within=30)


async def test_deleting_a_pod_with_a_finalizer_stops_it_and_reports_the_containers(
    proc: LocalCluster,
) -> None:
    pod = pod_manifest("held", command=py("import time; time.sleep(300)"))
    pod["metadata"]["finalizers"] = ["taskplug.io/test"]
    await proc.client().create(POD, pod)
    await proc.wait_for(POD, "default", "held", phase_in("Running"), within=30)
    await proc.client().delete(POD, "default", "held")
    stopped = await proc.wait_for(POD, "default", "held", DONE, within=30)
    assert stopped["metadata"]["deletionTimestamp"]
    assert terminated(stopped)["exitCode"] == 143  # SIGTERM
    events, _ = await proc.client().list(
        EVENT, "default", field_selector="regarding.name=held,reason=Killing"
    )
    assert [e["note"] for e in events] == ["Stopping container main"]


async def test_leaving_the_cluster_kills_every_process() -> None:
    async with LocalCluster(mode="process") as cluster:
        await cluster.client().create(
            POD,
            pod_manifest(
                "forever", command=py("import os, time; print(os.getpid(), flush=True); time.sleep(300)")
            ),
        )
        pid = await _logged_pid(cluster, "forever", "main")
        assert alive(pid)
    assert not alive(pid)


async def _until(check: Any, within: float = 30) -> None:
    import asyncio

    async with asyncio.timeout(within):
        while not check():
            await asyncio.sleep(0.02)


async def _logged_pid(cluster: LocalCluster, pod: str, container: str) -> int:
    await _until(lambda: cluster.logs("default", pod, container).strip().isdigit())
    return int(cluster.logs("default", pod, container).strip())


@pytest.mark.parametrize("policy", ["OnFailure"])
async def test_on_failure_restarts_a_failed_process(proc: LocalCluster, policy: str) -> None:
    await proc.client().create(POD, pod_manifest("flaky", command=py("raise SystemExit(1)"), restart=policy))
    pod = await proc.wait_for(
        POD,
        "default",
        "flaky",
        lambda o: any(s.get("restartCount") for s in o["status"].get("containerStatuses", [])),
        within=30,
    )
    status = pod["status"]["containerStatuses"][0]
    assert status["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert status["lastState"]["terminated"]["exitCode"] == 1


async def test_the_in_process_client_reads_pod_logs_as_the_api_does(proc: LocalCluster) -> None:
    from taskplug.k8s import ReadsPodLogs

    client = proc.client()
    assert isinstance(client, ReadsPodLogs)
    await client.create(POD, pod_manifest("logged", command=py("print('one'); print('two')")))
    await proc.wait_for(POD, "default", "logged", DONE, within=30)
    assert await client.pod_log("default", "logged") == "one\ntwo\n"
    assert await client.pod_log("default", "logged", tail_lines=1) == "two\n"
