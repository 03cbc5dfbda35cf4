"""The BatchJob plugin, tested the way a plugin author tests: taskplug.testing's fake contexts and its
contract check."""

from __future__ import annotations

import re
from typing import Any

import pytest
from taskplug_batchjob import BATCH_JOB, FAILED_ERROR_CODE, plugin_entries

from taskplug.core import BadTaskSpecification, ConfigError, ErrorKind, Phase
from taskplug.k8s import PluginState
from taskplug.testing import (
    check_k8s_plugin,
    fake_plugin_context,
    fake_task_context,
    load_k8s_plugin,
)

ENTRY = plugin_entries()[0]


def batchjob_task(custom: dict[str, Any] | None = None, **template: Any) -> dict[str, Any]:
    task: dict[str, Any] = {
        "id": {"resourceType": "TASK", "project": "p", "domain": "d", "name": "shards", "version": "v1"},
        "type": "batchjob",
        "container": {
            "image": "python:3.11-slim",
            "args": ["python", "-m", "shards", "--inputs", "{{.input}}"],
            "resources": {"requests": [{"name": "CPU", "value": "1"}]},
        },
        **template,
    }
    if custom is not None:
        task["custom"] = custom
    return task


def observed(phase: str = "", message: str = "", **status: Any) -> dict[str, Any]:
    job: dict[str, Any] = {
        "apiVersion": BATCH_JOB.api_version,
        "kind": BATCH_JOB.kind,
        "metadata": {"name": "exec1-n0-0", "namespace": "testproject-development"},
        "spec": {"parallelism": 2},
    }
    if phase:
        job["status"] = {"phase": phase, "message": message, **status}
    return job


def test_the_plugin_keeps_the_k8s_plugin_contract() -> None:
    report = check_k8s_plugin(
        ENTRY,
        config={"plugins": {"batchjob": {"default-parallelism": 2}}},
        tasks=[batchjob_task(), batchjob_task({"parallelism": 4})],
        bad_tasks=[
            batchjob_task({"parallelism": 0}),
            batchjob_task({"parallelism": 1000}),
            batchjob_task({"parallelism": "many"}),
            batchjob_task({"replicas": 2}),
            {"type": "batchjob"},  # no container
        ],
        observations=[
            observed("Pending", "creating 2 pod(s)"),
            observed("Running", "2 pod(s) running", active=2),
            observed("Succeeded", "2/2 pod(s) succeeded", succeeded=2),
            observed("Failed", "pod 1 exited 3", failed=1),
            observed("Evicting", "a phase from a newer operator"),
        ],
    )
    report.raise_if_failed()
    assert report.check("task-phase[observation 4]").message.startswith("RetryableFailure")


def test_parallelism_comes_from_the_task_else_from_the_config() -> None:
    plugin = load_k8s_plugin(ENTRY, config={"plugins": {"batchjob": {"default-parallelism": 3}}})
    assert plugin.build_resource(fake_task_context(batchjob_task()))["spec"]["parallelism"] == 3
    job = plugin.build_resource(fake_task_context(batchjob_task({"parallelism": 5})))
    assert job["spec"]["parallelism"] == 5


def test_the_pod_template_goes_through_the_platform_pod_configuration() -> None:
    config = {
        "plugins": {
            "k8s": {
                "default-cpus": "250m",
                "default-memory": "128Mi",
                "interruptible-tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
                "default-labels": {"team": "data"},
            }
        }
    }
    plugin = load_k8s_plugin(ENTRY, config=config)
    tctx = fake_task_context(batchjob_task(), interruptible=True)
    template = plugin.build_resource(tctx)["spec"]["podTemplate"]
    container = template["spec"]["containers"][0]
    # The task asked for a CPU; memory comes from the platform default; limits follow the requests.
    assert container["resources"] == {
        "requests": {"cpu": "1", "memory": "128Mi"},
        "limits": {"cpu": "1", "memory": "128Mi"},
    }
    assert (
        container["args"][-1]
        == "s3://taskplug-testing/data/metadata/testproject/development/exec1/n0/inputs.pb"
    )
    assert {"key": "spot", "operator": "Exists", "effect": "NoSchedule"} in template["spec"]["tolerations"]
    assert template["spec"]["restartPolicy"] == "Never"
    assert template["metadata"]["labels"]["team"] == "data"
    assert template["metadata"]["labels"]["execution-id"] == "exec1"
    assert template["metadata"]["annotations"]["primary_container_name"] == container["name"]


@pytest.mark.parametrize(
    ("custom", "message"),
    [
        ({"parallelism": 0}, "between 1 and 100"),
        ({"parallelism": 2.5}, "must be an integer"),
        ({"parallelism": True}, "must be an integer"),
        ({"shards": 2}, "unknown custom field(s) ['shards']"),
    ],
)
def test_a_bad_custom_is_a_bad_task_specification(custom: dict[str, Any], message: str) -> None:
    plugin = load_k8s_plugin(ENTRY)
    with pytest.raises(BadTaskSpecification, match=re.escape(message)):
        plugin.build_resource(fake_task_context(batchjob_task(custom)))


def test_a_bad_config_names_the_key() -> None:
    with pytest.raises(ConfigError, match=r"plugins\.batchjob"):
        load_k8s_plugin(ENTRY, config={"plugins": {"batchjob": {"default-paralelism": 2}}})
    with pytest.raises(ConfigError, match="exceeds max-parallelism"):
        load_k8s_plugin(
            ENTRY, config={"plugins": {"batchjob": {"default-parallelism": 9, "max-parallelism": 4}}}
        )


@pytest.mark.parametrize(
    ("job", "phase", "reason"),
    [
        (observed(), Phase.QUEUED, "BatchJob created, waiting for the operator"),
        (observed("Pending", "creating 2 pod(s)"), Phase.INITIALIZING, "creating 2 pod(s)"),
        (observed("Running", active=2), Phase.RUNNING, ""),
        (observed("Succeeded", succeeded=2), Phase.SUCCESS, ""),
        (observed("Failed", "pod 1 exited 3"), Phase.RETRYABLE_FAILURE, ""),
    ],
)
def test_status_phases_map_to_task_phases(job: dict[str, Any], phase: Phase, reason: str) -> None:
    info = load_k8s_plugin(ENTRY).get_task_phase(fake_plugin_context(batchjob_task()), job)
    assert info.phase is phase
    assert info.reason == reason


def test_a_failed_batch_job_is_a_retryable_user_failure_with_the_operator_message() -> None:
    info = load_k8s_plugin(ENTRY).get_task_phase(
        fake_plugin_context(batchjob_task()), observed("Failed", "pod 1 exited 3", failed=1)
    )
    assert info.err is not None
    assert (info.err.code, info.err.message, info.err.kind) == (
        FAILED_ERROR_CODE,
        "pod 1 exited 3",
        ErrorKind.USER,
    )
    assert info.info is not None
    assert info.info.custom_info == {"active": 0, "succeeded": 0, "failed": 1}


def test_a_new_pending_message_bumps_the_phase_version() -> None:
    plugin = load_k8s_plugin(ENTRY)
    last = PluginState(Phase.INITIALIZING, 0, "creating 2 pod(s)")
    pctx = fake_plugin_context(batchjob_task(), state=last)
    info = plugin.get_task_phase(pctx, observed("Pending", "1/2 pod(s) scheduled"))
    assert (info.phase, info.version) == (Phase.INITIALIZING, 1)
