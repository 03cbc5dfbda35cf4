"""``taskplug status``: the PhaseInfo the task's plugin reports for an observed object, as JSON.

The observed pods are written by the tests: one waiting in ImagePullBackOff since a known time (so ``--now``
decides between "still initializing" and "grace period exceeded"), one unschedulable, one finished.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from .conftest import EXAMPLES, HELLO, assert_bad_input, invoke, write_json

NAME, NAMESPACE = "hello-1-n0-0", "demo-development"
SINCE = "2026-01-01T00:00:00Z"


def _pod(status: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": NAME, "namespace": NAMESPACE, "annotations": {"primary_container_name": NAME}},
        "spec": {"containers": [{"name": NAME, "image": "python:3.11-slim"}]},
        "status": status,
    }


IMAGE_PULL_BACKOFF = _pod(
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
                "state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image"}},
            }
        ],
    }
)

UNSCHEDULABLE = _pod(
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
)

SUCCEEDED = _pod(
    {
        "phase": "Succeeded",
        "containerStatuses": [
            {
                "name": NAME,
                "ready": False,
                "state": {
                    "terminated": {
                        "exitCode": 0,
                        "reason": "Completed",
                        "startedAt": SINCE,
                        "finishedAt": "2026-01-01T00:00:05Z",
                    }
                },
            }
        ],
    }
)


def _status(runner: CliRunner, resource: Path, *args: str | Path) -> dict[str, Any]:
    result = invoke(runner, "status", HELLO, "--resource", resource, *args)
    assert result.exit_code == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    assert list(document) == ["phase", "version", "reason", "error", "cleanupOnFailure", "info"]
    return document


def test_a_finished_pod_is_success_at_the_containers_finish_time(runner: CliRunner, tmp_path: Path) -> None:
    document = _status(runner, write_json(tmp_path / "pod.json", SUCCEEDED), "--now", "2026-01-01T00:01:00Z")
    assert (document["phase"], document["version"], document["error"]) == ("Success", 0, None)
    assert document["info"]["occurredAt"] == "2026-01-01T00:00:05Z"


def test_now_within_the_image_pull_grace_period_is_initializing(runner: CliRunner, tmp_path: Path) -> None:
    pod = write_json(tmp_path / "pod.json", IMAGE_PULL_BACKOFF)
    document = _status(runner, pod, "--now", "2026-01-01T00:01:00Z")
    assert (document["phase"], document["version"], document["error"]) == ("Initializing", 0, None)
    assert document["reason"] == (
        "[ContainersNotReady|ImagePullBackOff]: containers with unready status|Back-off pulling image"
    )
    assert document["info"]["occurredAt"] == SINCE


def test_now_past_the_image_pull_grace_period_is_a_retryable_failure_with_cleanup(
    runner: CliRunner, tmp_path: Path
) -> None:
    pod = write_json(tmp_path / "pod.json", IMAGE_PULL_BACKOFF)
    # A time zone offset is accepted as well as Z: 01:10+01:00 is 00:10 UTC, 10 minutes after the change.
    document = _status(runner, pod, "--now", "2026-01-01T01:10:00+01:00")
    assert document["phase"] == "RetryableFailure"
    assert document["cleanupOnFailure"] is True
    assert document["error"] == {
        "code": "ContainersNotReady|ImagePullBackOff",
        "message": "Grace period [3m0s] exceeded|containers with unready status|Back-off pulling image",
        "kind": "USER",
    }


def test_the_grace_period_comes_from_the_config(runner: CliRunner, tmp_path: Path) -> None:
    pod = write_json(tmp_path / "pod.json", IMAGE_PULL_BACKOFF)
    config = tmp_path / "config.yaml"
    config.write_text("plugins:\n  k8s:\n    image-pull-backoff-grace-period: 30s\n")
    document = _status(runner, pod, "--now", "2026-01-01T00:01:00Z", "--config", config)
    assert document["phase"] == "RetryableFailure"
    assert document["error"]["message"].startswith("Grace period [30s] exceeded|")


def test_a_new_reason_in_the_same_phase_as_the_last_state_bumps_the_version(
    runner: CliRunner, tmp_path: Path
) -> None:
    pod = write_json(tmp_path / "pod.json", UNSCHEDULABLE)
    state = write_json(tmp_path / "state.json", {"phase": "Queued", "phaseVersion": 2, "reason": "earlier"})
    document = _status(runner, pod, "--now", "2026-01-01T00:01:00Z", "--state", state)
    assert (document["phase"], document["version"]) == ("Queued", 3)
    assert document["reason"] == "Unschedulable:0/3 nodes are available"


def test_the_same_reason_as_the_last_state_keeps_the_version(runner: CliRunner, tmp_path: Path) -> None:
    pod = write_json(tmp_path / "pod.json", UNSCHEDULABLE)
    state = write_json(
        tmp_path / "state.json",
        {"phase": "Queued", "phaseVersion": 2, "reason": "Unschedulable:0/3 nodes are available"},
    )
    document = _status(runner, pod, "--now", "2026-01-01T00:01:00Z", "--state", state)
    assert (document["phase"], document["version"]) == ("Queued", 0)


@pytest.mark.parametrize(
    ("state", "named"),
    [
        ({"phase": "Bogus"}, "--state.phase"),
        ({"phase": "Queued", "phaseVersion": -1}, "--state.phaseVersion"),
        (["Queued"], "--state"),
        ({"phase": ["Queued"]}, "--state.phase"),
        ({"phase": 1e400}, "--state.phase"),
        ({"phase": True}, "--state.phase"),
        ({"phase": "Queued", "phaseVersion": 2**32}, "--state.phaseVersion"),
        ({"phase": "Queued", "phaseVersion": True}, "--state.phaseVersion"),
        ({"phase": "Queued", "reason": ["a"]}, "--state.reason"),
    ],
    ids=[
        "unknown-phase",
        "negative-version",
        "not-an-object",
        "phase-a-list",
        "phase-infinite",
        "phase-a-boolean",
        "version-beyond-uint32",
        "version-a-boolean",
        "reason-a-list",
    ],
)
def test_a_bad_state_exits_2_naming_the_field(
    runner: CliRunner, tmp_path: Path, state: Any, named: str
) -> None:
    pod = write_json(tmp_path / "pod.json", UNSCHEDULABLE)
    state_file = tmp_path / "state.yaml"
    state_file.write_text(yaml.safe_dump(state) if state != {"phase": 1e400} else "phase: .inf\n")
    result = invoke(runner, "status", HELLO, "--resource", pod, "--state", state_file)
    assert_bad_input(result, named)


@pytest.mark.parametrize("now", ["yesterday", "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"])
def test_a_bad_now_exits_2_naming_the_option(runner: CliRunner, tmp_path: Path, now: str) -> None:
    pod = write_json(tmp_path / "pod.json", UNSCHEDULABLE)
    assert_bad_input(invoke(runner, "status", HELLO, "--resource", pod, "--now", now), "--now")


@pytest.mark.parametrize(
    ("content", "named"),
    [
        (b"{not: [json", "is not valid YAML"),
        (b"[1, 2]", "must be a JSON object"),
        (b"not json", "must be a JSON object"),
        (b'{"kind": "Pod", "status": {"phase": "Running"}}\xff', "is not UTF-8 text (byte 47"),
        (b"a: &a [x, x]\nb: *c\n", "is not valid YAML"),
    ],
    ids=["not-yaml", "not-an-object", "a-string", "not-utf8", "unknown-alias"],
)
def test_a_bad_resource_exits_2_naming_the_option(
    runner: CliRunner, tmp_path: Path, content: bytes, named: str
) -> None:
    pod = tmp_path / "pod.json"
    pod.write_bytes(content)
    assert_bad_input(invoke(runner, "status", HELLO, "--resource", pod), "--resource", named)


def test_an_endless_resource_is_refused_without_reading_it_all(runner: CliRunner) -> None:
    assert_bad_input(
        invoke(runner, "status", HELLO, "--resource", "/dev/zero"), "--resource", "/dev/zero", "larger than"
    )


def test_the_resource_may_be_yaml_as_kubectl_writes_it(runner: CliRunner, tmp_path: Path) -> None:
    pod = tmp_path / "pod.yaml"
    pod.write_text(yaml.safe_dump(SUCCEEDED))
    document = _status(runner, pod, "--now", "2026-01-01T00:01:00Z")
    assert document["phase"] == "Success"


def _with(document: dict[str, Any], path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(document)
    node: Any = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


@pytest.mark.parametrize(
    ("path", "value", "named"),
    [
        pytest.param(("status",), ["Succeeded"], "status: must be a mapping", id="status-a-list"),
        pytest.param(
            ("status", "conditions"), "Ready", "status.conditions: must be a list", id="conditions-a-string"
        ),
        pytest.param(
            ("status", "containerStatuses"),
            [1, 2],
            "status.containerStatuses[0]: must be a mapping",
            id="container-statuses-of-integers",
        ),
        pytest.param(
            ("status", "containerStatuses", 0, "state", "terminated", "exitCode"),
            "x",
            "status.containerStatuses[0].state.terminated.exitCode: must be an integer, got a string 'x'",
            id="exit-code-x",
        ),
        pytest.param(
            ("status", "containerStatuses", 0, "state", "terminated", "finishedAt"),
            "2026-13-01T00:00:05Z",
            "status.containerStatuses[0].state.terminated.finishedAt: is not a valid time",
            id="month-13",
        ),
        pytest.param(
            ("status", "containerStatuses", 0, "state", "terminated", "finishedAt"),
            "10000-01-01T00:00:05Z",
            "status.containerStatuses[0].state.terminated.finishedAt: must be an RFC 3339 time",
            id="year-10000",
        ),
        pytest.param(("metadata",), "hello", "metadata: must be a mapping", id="metadata-a-string"),
    ],
)
def test_a_pod_field_of_the_wrong_type_exits_2_naming_the_pod_and_the_field(
    runner: CliRunner, tmp_path: Path, path: tuple[str | int, ...], value: Any, named: str
) -> None:
    pod = write_json(tmp_path / "pod.json", _with(SUCCEEDED, path, value))
    result = invoke(runner, "status", HELLO, "--resource", pod, "--now", "2026-01-01T00:01:00Z")
    assert_bad_input(result, named)
    assert "Pod " in result.stderr


def test_a_pod_without_metadata_is_a_phase(runner: CliRunner, tmp_path: Path) -> None:
    bare = {k: v for k, v in SUCCEEDED.items() if k != "metadata"}
    document = _status(runner, write_json(tmp_path / "pod.json", bare), "--now", "2026-01-01T00:01:00Z")
    assert document["phase"] == "Success"


def test_a_custom_resource_its_plugin_cannot_read_exits_2_naming_it(
    runner: CliRunner, tmp_path: Path
) -> None:
    app = {
        "apiVersion": "sparkoperator.k8s.io/v1beta2",
        "kind": "SparkApplication",
        "metadata": {"name": "wordcount-1-n0-0", "namespace": "demo-development"},
        "status": {"applicationState": "FAILED"},
    }
    result = invoke(
        runner, "status", EXAMPLES / "spark.yaml", "--resource", write_json(tmp_path / "app.json", app)
    )
    assert_bad_input(
        result, "--resource: SparkApplication demo-development/wordcount-1-n0-0: no phase from the plugin"
    )


def test_an_unreadable_resource_exits_2_naming_the_file(runner: CliRunner, tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    assert_bad_input(invoke(runner, "status", HELLO, "--resource", missing), "--resource", str(missing))


def test_the_resource_option_is_required(runner: CliRunner) -> None:
    result = invoke(runner, "status", HELLO)
    assert result.exit_code == 2
    assert "Missing option '--resource'" in result.stderr
