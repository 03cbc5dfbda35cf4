"""Pod status interpretation (the ``Demystify*`` functions of Flyte's flytek8s/pod_helper.go) and the pod
plugin's phase (plugins/k8s/pod/plugin.go)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from flyteidl.core import identifier_pb2, tasks_pb2

from taskplug.core._context import TaskExecutionID, TaskExecutionMetadata
from taskplug.core._phase import ErrorKind, Phase, PhaseInfo, TaskInfo, TaskLog
from taskplug.k8s._config import K8sPluginConfig, LogConfig
from taskplug.k8s._observed import ObservedObjectError
from taskplug.k8s._plugin import PluginState
from taskplug.k8s._pod_status import (
    demystify_failure,
    demystify_pending,
    demystify_pod_status,
    demystify_success,
    determine_primary_container_phase,
    get_last_transition_occurred_at,
    get_reported_at,
    get_task_phase_with_logs,
)

NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
EARLIER = NOW - timedelta(hours=1)
CONFIG = K8sPluginConfig()
INFO = TaskInfo(logs=(TaskLog(uri="http://logs", name="Kubernetes Logs (User)"),), occurred_at=EARLIER)


def ts(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def ago(**kwargs: float) -> str:
    return ts(NOW - timedelta(**kwargs))


def cond(ctype: str, status: str, at: str | None, reason: str = "", message: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {"type": ctype, "status": status, "reason": reason, "message": message}
    if at is not None:
        out["lastTransitionTime"] = at
    return out


def waiting(name: str, reason: str, message: str = "", ready: bool = False) -> dict[str, Any]:
    return {"name": name, "ready": ready, "state": {"waiting": {"reason": reason, "message": message}}}


def running(name: str, started_at: str = "2024-05-01T11:00:00Z") -> dict[str, Any]:
    return {"name": name, "ready": True, "state": {"running": {"startedAt": started_at}}}


def terminated(
    name: str, exit_code: int, reason: str = "", message: str = "", finished_at: str = "2024-05-01T11:30:00Z"
) -> dict[str, Any]:
    return {
        "name": name,
        "ready": False,
        "state": {
            "terminated": {
                "exitCode": exit_code,
                "reason": reason,
                "message": message,
                "finishedAt": finished_at,
            }
        },
    }


def not_ready(at: str | None, *statuses: dict[str, Any]) -> dict[str, Any]:
    """A Pending pod status whose Ready condition is False (ContainersNotReady)."""
    return {
        "phase": "Pending",
        "conditions": [
            cond("Ready", "False", at, "ContainersNotReady", "containers with unready status: [primary]")
        ],
        "containerStatuses": list(statuses),
    }


# Flyte's flytek8s/testdata/imagepull-failurepod.json, trimmed to what is read: a pending pod whose image
# can't be pulled. The Ready condition is the one that changes; its time is set by each test.
IMAGE_PULL_FAILURE_POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "fdf98e4ed2b524dc3bf7-get-flyte-id-task-0",
        "namespace": "flytesnacks-development",
        "annotations": {"primary_container_name": "fdf98e4ed2b524dc3bf7-get-flyte-id-task-0"},
        "creationTimestamp": "2020-04-13T22:23:38Z",
    },
    "spec": {"containers": [{"name": "fdf98e4ed2b524dc3bf7-get-flyte-id-task-0", "image": "image"}]},
    "status": {
        "phase": "Pending",
        "qosClass": "Burstable",
        "startTime": "2020-04-13T22:23:38Z",
        "conditions": [
            cond("Initialized", "True", "2020-04-13T22:23:38Z"),
            cond(
                "Ready",
                "False",
                None,
                "ContainersNotReady",
                "containers with unready status: [fdf98e4ed2b524dc3bf7-get-flyte-id-task-0]",
            ),
            cond(
                "ContainersReady",
                "False",
                None,
                "ContainersNotReady",
                "containers with unready status: [fdf98e4ed2b524dc3bf7-get-flyte-id-task-0]",
            ),
            cond("PodScheduled", "True", "2020-04-13T22:23:38Z"),
        ],
        "containerStatuses": [
            {
                "name": "fdf98e4ed2b524dc3bf7-get-flyte-id-task-0",
                "image": "image",
                "imageID": "",
                "lastState": {},
                "ready": False,
                "restartCount": 0,
                "started": False,
                "state": {
                    "waiting": {
                        "message": 'Back-off pulling image "image"',
                        "reason": "ImagePullBackOff",
                    }
                },
            }
        ],
    },
}


def image_pull_failure_pod(ready_changed_at: datetime) -> dict[str, Any]:
    pod = copy.deepcopy(IMAGE_PULL_FAILURE_POD)
    for c in pod["status"]["conditions"]:
        if c["type"] in ("Ready", "ContainersReady"):
            c["lastTransitionTime"] = ts(ready_changed_at)
    return pod


# -- DemystifyPending ------------------------------------------------------------------------------------


class TestDemystifyPending:
    def test_a_pod_without_conditions_is_queued_with_flytes_misspelled_default_reason(self) -> None:
        p = demystify_pending({"phase": "Pending"}, INFO, config=CONFIG, now=NOW)
        assert p.phase is Phase.QUEUED
        assert p.reason == "Demistify Pending"
        assert p.version == 0
        assert p.info == INFO

    def test_a_pod_without_occurred_at_gets_the_injected_now(self) -> None:
        p = demystify_pending({"phase": "Pending"}, TaskInfo(), config=CONFIG, now=NOW)
        assert p.info is not None
        assert p.info.occurred_at == NOW

    def test_pod_scheduled_false_is_queued_with_reason_and_message(self) -> None:
        status = {
            "conditions": [
                cond("PodScheduled", "False", ago(minutes=1), "Unschedulable", "0/1 nodes are available")
            ]
        }
        p = demystify_pending(status, INFO, config=CONFIG, now=NOW)
        assert p.phase is Phase.QUEUED
        assert p.reason == "Unschedulable:0/1 nodes are available"
        assert p.info == INFO

    def test_pod_scheduled_true_alone_keeps_the_default_reason(self) -> None:
        status = {"conditions": [cond("PodScheduled", "True", ago(minutes=1))]}
        assert demystify_pending(status, INFO, config=CONFIG, now=NOW).reason == "Demistify Pending"

    @pytest.mark.parametrize("status", ["True", "False", "Unknown"])
    def test_an_unschedulable_condition_type_is_queued_whatever_its_status(self, status: str) -> None:
        conditions = [cond("Unschedulable", status, ago(minutes=1), "Unschedulable", "no nodes")]
        p = demystify_pending({"conditions": conditions}, INFO, config=CONFIG, now=NOW)
        assert (p.phase, p.reason) == (Phase.QUEUED, "Unschedulable:no nodes")

    @pytest.mark.parametrize("reason", ["ErrImagePull", "ContainerCreating", "PodInitializing"])
    def test_normal_waiting_reasons_are_initializing_with_bracketed_reason(self, reason: str) -> None:
        at = NOW - timedelta(hours=5)
        status = not_ready(ts(at), waiting("primary", reason, "pulling"))
        p = demystify_pending(status, INFO, config=CONFIG, now=NOW)
        assert p.phase is Phase.INITIALIZING
        assert p.version == 0
        assert p.reason == (
            f"[ContainersNotReady|{reason}]: containers with unready status: [primary]|pulling"
        )
        # Flyte builds a fresh TaskInfo: OccurredAt is the condition's time and the logs are dropped.
        assert p.info == TaskInfo(occurred_at=at)

    def test_image_pull_backoff_within_the_grace_period_is_initializing(self) -> None:
        pod = image_pull_failure_pod(NOW - timedelta(minutes=2, seconds=59))
        p = demystify_pending(pod["status"], INFO, config=CONFIG, now=NOW)
        assert p.phase is Phase.INITIALIZING
        assert p.reason == (
            "[ContainersNotReady|ImagePullBackOff]: containers with unready status: "
            '[fdf98e4ed2b524dc3bf7-get-flyte-id-task-0]|Back-off pulling image "image"'
        )

    def test_image_pull_backoff_past_the_grace_period_is_a_retryable_user_failure_with_cleanup(self) -> None:
        changed = NOW - timedelta(minutes=3)
        pod = image_pull_failure_pod(changed)
        p = demystify_pending(pod["status"], INFO, config=CONFIG, now=NOW)
        assert p.phase is Phase.RETRYABLE_FAILURE
        assert p.cleanup_on_failure
        assert p.err is not None
        assert p.err.kind is ErrorKind.USER
        assert p.err.code == "ContainersNotReady|ImagePullBackOff"
        assert p.err.message == (
            "Grace period [3m0s] exceeded|containers with unready status: "
            '[fdf98e4ed2b524dc3bf7-get-flyte-id-task-0]|Back-off pulling image "image"'
        )
        # t is the Ready condition's time: the walk stops at the condition that decides.
        assert p.info == TaskInfo(occurred_at=changed)

    def test_the_grace_period_is_measured_from_the_deciding_conditions_own_time(self) -> None:
        status = {
            "conditions": [
                cond("PodScheduled", "True", ago(hours=2)),
                cond("Ready", "False", ago(minutes=1), "ContainersNotReady", "m"),
            ],
            "containerStatuses": [waiting("primary", "ImagePullBackOff")],
        }
        assert demystify_pending(status, INFO, config=CONFIG, now=NOW).phase is Phase.INITIALIZING

    def test_image_pull_backoff_grace_period_comes_from_config(self) -> None:
        config = K8sPluginConfig(image_pull_backoff_grace_period=timedelta(minutes=10))
        status = not_ready(ago(minutes=5), waiting("primary", "ImagePullBackOff"))
        assert demystify_pending(status, INFO, config=config, now=NOW).phase is Phase.INITIALIZING
        status = not_ready(ago(minutes=10), waiting("primary", "ImagePullBackOff"))
        p = demystify_pending(status, INFO, config=config, now=NOW)
        assert p.err is not None
        assert p.err.message.startswith("Grace period [10m0s] exceeded|")

    def test_create_container_error_within_grace_is_initializing_then_a_permanent_failure(self) -> None:
        before = not_ready(ago(minutes=2), waiting("primary", "CreateContainerError", "no command"))
        assert demystify_pending(before, INFO, config=CONFIG, now=NOW).phase is Phase.INITIALIZING
        after = not_ready(ago(minutes=3), waiting("primary", "CreateContainerError", "no command"))
        p = demystify_pending(after, INFO, config=CONFIG, now=NOW)
        assert p.phase is Phase.PERMANENT_FAILURE
        assert p.cleanup_on_failure
        assert p.err is not None
        assert p.err.kind is ErrorKind.USER
        assert p.err.code == "ContainersNotReady|CreateContainerError"
        assert p.err.message == (
            "Grace period [3m0s] exceeded|containers with unready status: [primary]|no command"
        )

    def test_create_container_config_error_fails_at_once_with_the_default_zero_grace(self) -> None:
        status = not_ready(ts(NOW), waiting("primary", "CreateContainerConfigError", "secret missing"))
        p = demystify_pending(status, INFO, config=CONFIG, now=NOW)
        assert p.phase is Phase.PERMANENT_FAILURE
        assert p.cleanup_on_failure
        assert p.err is not None
        assert p.err.kind is ErrorKind.USER
        assert p.err.code == "ContainersNotReady|CreateContainerConfigError"
        assert p.err.message == (
            "Grace period [0s] exceeded|containers with unready status: [primary]|secret missing"
        )

    def test_create_container_config_error_waits_for_a_configured_grace_period(self) -> None:
        config = K8sPluginConfig(create_container_config_error_grace_period=timedelta(minutes=1))
        status = not_ready(ago(seconds=30), waiting("primary", "CreateContainerConfigError"))
        assert demystify_pending(status, INFO, config=config, now=NOW).phase is Phase.INITIALIZING

    def test_invalid_image_name_is_an_immediate_permanent_failure_without_grace_text(self) -> None:
        status = not_ready(ts(NOW), waiting("primary", "InvalidImageName", "bad ref"))
        p = demystify_pending(status, INFO, config=CONFIG, now=NOW)
        assert p.phase is Phase.PERMANENT_FAILURE
        assert p.cleanup_on_failure
        assert p.err is not None
        assert p.err.kind is ErrorKind.USER
        assert p.err.code == "ContainersNotReady|InvalidImageName"
        assert p.err.message == "containers with unready status: [primary]|bad ref"

    @pytest.mark.parametrize("reason", ["RegistryUnavailable", "CrashLoopBackOff", "SomethingNew"])
    def test_unknown_waiting_reasons_are_immediate_system_retryable_failures_with_cleanup(
        self, reason: str
    ) -> None:
        at = NOW - timedelta(seconds=1)
        status = not_ready(ts(at), waiting("primary", reason, "oops"))
        p = demystify_pending(status, INFO, config=CONFIG, now=NOW)
        assert p.phase is Phase.RETRYABLE_FAILURE
        assert p.cleanup_on_failure
        assert p.err is not None
        assert p.err.kind is ErrorKind.SYSTEM
        assert p.err.code == f"ContainersNotReady|{reason}"
        assert p.err.message == "containers with unready status: [primary]|oops"
        assert p.info == TaskInfo(occurred_at=at)

    def test_ready_containers_and_containers_without_waiting_state_are_skipped(self) -> None:
        status = not_ready(
            ago(minutes=1),
            waiting("ready-one", "CrashLoopBackOff", ready=True),
            running("runner") | {"ready": False},
            waiting("primary", "ContainerCreating"),
        )
        p = demystify_pending(status, INFO, config=CONFIG, now=NOW)
        assert p.phase is Phase.INITIALIZING
        assert "|ContainerCreating]" in p.reason

    def test_the_first_qualifying_container_decides(self) -> None:
        status = not_ready(
            ago(minutes=1), waiting("a", "ContainerCreating"), waiting("b", "CrashLoopBackOff")
        )
        assert demystify_pending(status, INFO, config=CONFIG, now=NOW).phase is Phase.INITIALIZING

    def test_init_container_statuses_are_ignored(self) -> None:
        status = not_ready(ago(minutes=1))
        status["initContainerStatuses"] = [waiting("init", "CrashLoopBackOff")]
        p = demystify_pending(status, INFO, config=CONFIG, now=NOW)
        assert (p.phase, p.reason) == (Phase.QUEUED, "Demistify Pending")

    def test_ready_false_without_a_qualifying_container_moves_on_to_the_next_condition(self) -> None:
        status = {
            "conditions": [
                cond("Ready", "False", ago(minutes=1), "ContainersNotReady", "m"),
                cond("PodScheduled", "False", ago(minutes=1), "Unschedulable", "full"),
            ],
            "containerStatuses": [running("primary")],
        }
        p = demystify_pending(status, INFO, config=CONFIG, now=NOW)
        assert (p.phase, p.reason) == (Phase.QUEUED, "Unschedulable:full")

    def test_conditions_are_walked_in_order(self) -> None:
        scheduled_false = cond("PodScheduled", "False", ago(minutes=10), "Unschedulable", "full")
        ready_false = cond("Ready", "False", ago(minutes=10), "ContainersNotReady", "m")
        statuses = [waiting("primary", "CrashLoopBackOff")]
        first = {"conditions": [scheduled_false, ready_false], "containerStatuses": statuses}
        assert demystify_pending(first, INFO, config=CONFIG, now=NOW).phase is Phase.QUEUED
        second = {"conditions": [ready_false, scheduled_false], "containerStatuses": statuses}
        assert demystify_pending(second, INFO, config=CONFIG, now=NOW).phase is Phase.RETRYABLE_FAILURE

    def test_the_pending_timeout_fails_a_queued_pod_from_the_last_conditions_time(self) -> None:
        config = K8sPluginConfig(pod_pending_timeout=timedelta(minutes=5))
        last = NOW - timedelta(minutes=5)
        status = {
            "conditions": [cond("Initialized", "True", ago(hours=1)), cond("PodScheduled", "True", ts(last))]
        }
        p = demystify_pending(status, INFO, config=config, now=NOW)
        assert p.phase is Phase.RETRYABLE_FAILURE
        assert p.cleanup_on_failure
        assert p.err is not None
        assert p.err.kind is ErrorKind.USER
        assert (p.err.code, p.err.message) == ("PodPendingTimeout", "Demistify Pending")
        assert p.info == TaskInfo(occurred_at=last)

    def test_the_pending_timeout_is_not_reached_one_second_early(self) -> None:
        config = K8sPluginConfig(pod_pending_timeout=timedelta(minutes=5))
        status = {"conditions": [cond("PodScheduled", "True", ago(minutes=4, seconds=59))]}
        assert demystify_pending(status, INFO, config=config, now=NOW).phase is Phase.QUEUED

    def test_the_pending_timeout_message_is_the_initializing_reason(self) -> None:
        config = K8sPluginConfig(pod_pending_timeout=timedelta(minutes=5))
        status = not_ready(ago(minutes=6), waiting("primary", "ContainerCreating", "pulling"))
        p = demystify_pending(status, INFO, config=config, now=NOW)
        assert p.err is not None
        assert p.err.code == "PodPendingTimeout"
        assert (
            p.err.message
            == "[ContainersNotReady|ContainerCreating]: containers with unready status: [primary]|pulling"
        )

    def test_the_pending_timeout_does_not_replace_a_terminal_result(self) -> None:
        config = K8sPluginConfig(pod_pending_timeout=timedelta(minutes=1))
        status = not_ready(ago(minutes=6), waiting("primary", "InvalidImageName"))
        p = demystify_pending(status, INFO, config=config, now=NOW)
        assert p.phase is Phase.PERMANENT_FAILURE
        assert p.err is not None
        assert p.err.code == "ContainersNotReady|InvalidImageName"

    def test_a_zero_pending_timeout_never_fires(self) -> None:
        status = {"conditions": [cond("PodScheduled", "True", "2000-01-01T00:00:00Z")]}
        assert demystify_pending(status, INFO, config=CONFIG, now=NOW).phase is Phase.QUEUED

    def test_a_condition_without_a_transition_time_counts_as_changing_now(self) -> None:
        # Deviation from Go (zero time): the grace period has not started, rather than long exceeded.
        status = not_ready(None, waiting("primary", "ImagePullBackOff"))
        p = demystify_pending(status, INFO, config=CONFIG, now=NOW)
        assert p.phase is Phase.INITIALIZING
        assert p.info == TaskInfo(occurred_at=NOW)


# -- DemystifySuccess ------------------------------------------------------------------------------------


class TestDemystifySuccess:
    def test_a_clean_pod_is_a_success_carrying_the_info(self) -> None:
        p = demystify_success({"containerStatuses": [terminated("primary", 0, "Completed")]}, INFO)
        assert (p.phase, p.info) == (Phase.SUCCESS, INFO)

    @pytest.mark.parametrize(
        "key", ["initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses"]
    )
    def test_an_oom_killed_container_anywhere_makes_it_a_retryable_user_failure(self, key: str) -> None:
        p = demystify_success({key: [terminated("c", 0, "OOMKilled")]}, INFO)
        assert p.phase is Phase.RETRYABLE_FAILURE
        assert p.err is not None
        assert p.err.kind is ErrorKind.USER
        assert (p.err.code, p.err.message) == ("OOMKilled", "Pod reported success despite being OOMKilled")

    def test_oom_killed_matches_as_a_substring(self) -> None:
        p = demystify_success({"containerStatuses": [terminated("c", 0, "ContainerOOMKilled")]}, INFO)
        assert p.phase is Phase.RETRYABLE_FAILURE

    def test_only_the_current_state_counts_not_the_last_termination(self) -> None:
        status = terminated("c", 0, "Completed")
        status["lastState"] = {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}
        assert demystify_success({"containerStatuses": [status]}, INFO).phase is Phase.SUCCESS


# -- DeterminePrimaryContainerPhase ----------------------------------------------------------------------


class TestDeterminePrimaryContainerPhase:
    @pytest.mark.parametrize("status", [waiting("primary", "ContainerCreating"), running("primary")])
    def test_a_waiting_or_running_primary_is_running_v0(self, status: dict[str, Any]) -> None:
        p = determine_primary_container_phase("primary", [terminated("other", 1), status], INFO)
        assert (p.phase, p.version, p.info) == (Phase.RUNNING, 0, INFO)

    def test_a_primary_that_exited_zero_is_a_success(self) -> None:
        p = determine_primary_container_phase("primary", [terminated("primary", 0, "Completed")], INFO)
        assert p.phase is Phase.SUCCESS

    def test_a_nonzero_exit_is_a_retryable_user_failure_coded_by_the_reason(self) -> None:
        p = determine_primary_container_phase("primary", [terminated("primary", 1, "Error", "boom")], INFO)
        assert p.phase is Phase.RETRYABLE_FAILURE
        assert p.err is not None
        assert p.err.kind is ErrorKind.USER
        assert p.err.code == "Error"
        assert (
            p.err.message == "\r\n[primary] terminated with exit code (1). Reason [Error]. Message: \nboom."
        )

    @pytest.mark.parametrize("exit_code", [0, 137, 1])
    def test_oom_killed_is_checked_first_and_is_the_users_fault(self, exit_code: int) -> None:
        p = determine_primary_container_phase(
            "primary", [terminated("primary", exit_code, "OOMKilled")], INFO
        )
        assert p.phase is Phase.RETRYABLE_FAILURE
        assert p.err is not None
        assert (p.err.kind, p.err.code) == (ErrorKind.USER, "OOMKilled")

    @pytest.mark.parametrize("exit_code", [137, 247])
    def test_a_sigkill_exit_is_a_retryable_system_failure(self, exit_code: int) -> None:
        p = determine_primary_container_phase(
            "primary", [terminated("primary", exit_code, "Error", "m")], INFO
        )
        assert p.phase is Phase.RETRYABLE_FAILURE
        assert p.err is not None
        assert (p.err.kind, p.err.code) == (ErrorKind.SYSTEM, "Error")
        assert p.err.message == (
            f"\r\n[primary] terminated with exit code ({exit_code}). Reason [Error]. Message: \nm."
        )

    def test_a_missing_primary_is_a_permanent_failure(self) -> None:
        p = determine_primary_container_phase("primary", [running("sidecar")], INFO)
        assert p.phase is Phase.PERMANENT_FAILURE
        assert p.err is not None
        assert p.err.kind is ErrorKind.USER
        assert p.err.code == "PrimaryContainerNotFound"
        assert p.err.message == "Primary container [primary] not found in pod's container statuses"

    def test_a_primary_status_without_any_state_counts_as_missing(self) -> None:
        p = determine_primary_container_phase("primary", [{"name": "primary", "state": {}}], INFO)
        assert p.err is not None
        assert p.err.code == "PrimaryContainerNotFound"


# -- DemystifyFailure ------------------------------------------------------------------------------------


class TestDemystifyFailure:
    def test_no_reason_is_an_unknown_error_reported_as_a_system_interruption(self) -> None:
        p = demystify_failure({"phase": "Failed"}, INFO, "primary")
        assert p.phase is Phase.RETRYABLE_FAILURE
        assert p.err is not None
        assert p.err.kind is ErrorKind.SYSTEM
        assert p.err.code == "Interrupted"
        assert p.err.message == "Pod failed. No message received from kubernetes."

    def test_a_pod_reason_is_a_retryable_user_failure_with_the_pods_message(self) -> None:
        status = {"phase": "Failed", "reason": "Evicted", "message": "low on memory"}
        p = demystify_failure(status, INFO, "primary")
        assert p.err is not None
        assert (p.err.kind, p.err.code, p.err.message) == (ErrorKind.USER, "Evicted", "low on memory")
        assert p.info == INFO

    @pytest.mark.parametrize("reason", ["Shutdown", "Terminated", "NodeShutdown", "NodeAffinity"])
    def test_node_going_away_reasons_are_system_interruptions(self, reason: str) -> None:
        p = demystify_failure({"reason": reason, "message": "node gone"}, INFO, "primary")
        assert p.err is not None
        assert (p.err.kind, p.err.code, p.err.message) == (ErrorKind.SYSTEM, "Interrupted", "node gone")

    def test_container_terminations_are_appended_init_then_regular_then_ephemeral(self) -> None:
        status = {
            "reason": "Error",
            "message": "failed",
            "initContainerStatuses": [terminated("init", 0, "Completed")],
            "containerStatuses": [terminated("primary", 2, "Error", "bad"), running("sidecar")],
            "ephemeralContainerStatuses": [terminated("debug", 0)],
        }
        p = demystify_failure(status, INFO, "primary")
        assert p.err is not None
        assert p.err.kind is ErrorKind.USER
        assert p.err.code == "Error"
        assert p.err.message == (
            "failed"
            "\r\n[init] terminated with ExitCode 0."
            "\r\n[primary] terminated with exit code (2). Reason [Error]. Message: \nbad."
            "\r\n[debug] terminated with ExitCode 0."
        )

    def test_an_oom_killed_container_sets_the_code(self) -> None:
        p = demystify_failure(
            {"reason": "Error", "containerStatuses": [terminated("c", 137, "OOMKilled")]}, INFO, ""
        )
        assert p.err is not None
        assert (p.err.kind, p.err.code) == (ErrorKind.USER, "OOMKilled")

    def test_a_sigkilled_sidecar_sets_interrupted_but_stays_the_users_failure(self) -> None:
        status = {"reason": "Error", "containerStatuses": [terminated("sidecar", 247, "Error")]}
        p = demystify_failure(status, INFO, "primary")
        assert p.err is not None
        assert (p.err.kind, p.err.code) == (ErrorKind.USER, "Interrupted")

    def test_a_sigkilled_primary_is_a_system_interruption(self) -> None:
        status = {"reason": "Error", "containerStatuses": [terminated("primary", 137, "Error")]}
        p = demystify_failure(status, INFO, "primary")
        assert p.err is not None
        assert (p.err.kind, p.err.code) == (ErrorKind.SYSTEM, "Interrupted")

    def test_later_containers_overwrite_the_code_but_not_the_system_flag(self) -> None:
        status = {
            "reason": "Error",
            "containerStatuses": [terminated("primary", 137, "Error"), terminated("other", 1, "OOMKilled")],
        }
        p = demystify_failure(status, INFO, "primary")
        assert p.err is not None
        assert (p.err.kind, p.err.code) == (ErrorKind.SYSTEM, "Interrupted")
        status = {
            "reason": "Error",
            "containerStatuses": [terminated("sidecar", 137, "Error"), terminated("primary", 1, "OOMKilled")],
        }
        p = demystify_failure(status, INFO, "primary")
        assert p.err is not None
        assert (p.err.kind, p.err.code) == (ErrorKind.USER, "OOMKilled")

    def test_the_last_termination_state_is_preferred_over_the_current_one(self) -> None:
        status = running("primary")
        status["lastState"] = {"terminated": {"exitCode": 3, "reason": "Error", "message": "crashed"}}
        current = terminated("other", 0, "Completed")
        current["lastState"] = {"terminated": {"exitCode": 0, "reason": "Completed"}}
        current["state"]["terminated"]["exitCode"] = 9
        p = demystify_failure({"reason": "Error", "containerStatuses": [status, current]}, INFO, "primary")
        assert p.err is not None
        assert p.err.message == (
            "Pod failed. No message received from kubernetes."
            "\r\n[primary] terminated with exit code (3). Reason [Error]. Message: \ncrashed."
            "\r\n[other] terminated with ExitCode 0."
        )


# -- DemystifyPodStatus ----------------------------------------------------------------------------------


def pod(
    phase: str,
    *,
    primary: str | None = None,
    statuses: list[dict[str, Any]] | None = None,
    init_statuses: list[dict[str, Any]] | None = None,
    containers: tuple[str, ...] = ("primary",),
    conditions: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "exec-n0-0", "namespace": "ns", "uid": "uid-1"}
    if primary is not None:
        metadata["annotations"] = {"primary_container_name": primary}
    status: dict[str, Any] = {"phase": phase}
    if statuses is not None:
        status["containerStatuses"] = statuses
    if init_statuses is not None:
        status["initContainerStatuses"] = init_statuses
    if conditions is not None:
        status["conditions"] = conditions
    return {
        "metadata": metadata,
        "spec": {"containers": [{"name": n} for n in containers]},
        "status": status,
    }


NO_LOGS = TaskInfo(occurred_at=EARLIER)


class TestDemystifyPodStatus:
    def test_succeeded_uses_demystify_success(self) -> None:
        p = demystify_pod_status(
            pod("Succeeded", statuses=[terminated("primary", 0, "OOMKilled")]), INFO, config=CONFIG, now=NOW
        )
        assert p.err is not None
        assert p.err.message == "Pod reported success despite being OOMKilled"

    def test_failed_uses_the_primary_container_from_the_annotation(self) -> None:
        failed = pod("Failed", primary="primary", statuses=[terminated("primary", 137, "Error")])
        failed["status"]["reason"] = "Error"
        p = demystify_pod_status(failed, INFO, config=CONFIG, now=NOW)
        assert p.err is not None
        assert p.err.kind is ErrorKind.SYSTEM

    def test_failed_without_an_annotation_has_no_primary(self) -> None:
        failed = pod("Failed", statuses=[terminated("primary", 137, "Error")])
        failed["status"]["reason"] = "Error"
        p = demystify_pod_status(failed, INFO, config=CONFIG, now=NOW)
        assert p.err is not None
        assert (p.err.kind, p.err.code) == (ErrorKind.USER, "Interrupted")

    def test_pending_uses_demystify_pending_with_config_and_now(self) -> None:
        pending = image_pull_failure_pod(NOW - timedelta(minutes=4))
        p = demystify_pod_status(pending, INFO, config=CONFIG, now=NOW)
        assert p.phase is Phase.RETRYABLE_FAILURE

    def test_the_unschedulable_pseudo_phase_is_queued(self) -> None:
        p = demystify_pod_status(pod("Unschedulable"), INFO, config=CONFIG, now=NOW)
        assert (p.phase, p.version, p.reason, p.info) == (Phase.QUEUED, 0, "pod unschedulable", INFO)

    @pytest.mark.parametrize("phase", ["Running", "Unknown", ""])
    def test_without_annotation_a_running_container_means_running_bumped_to_v1_by_logs(
        self, phase: str
    ) -> None:
        p = demystify_pod_status(pod(phase, statuses=[running("primary")]), INFO, config=CONFIG, now=NOW)
        assert (p.phase, p.version) == (Phase.RUNNING, 1)
        p = demystify_pod_status(pod(phase, statuses=[running("primary")]), NO_LOGS, config=CONFIG, now=NOW)
        assert (p.phase, p.version) == (Phase.RUNNING, 0)

    def test_without_annotation_all_containers_exited_zero_is_success_before_the_pod_says_so(self) -> None:
        running_pod = pod(
            "Running",
            statuses=[terminated("a", 0), terminated("b", 0)],
            init_statuses=[terminated("init", 0)],
        )
        assert demystify_pod_status(running_pod, INFO, config=CONFIG, now=NOW).phase is Phase.SUCCESS

    def test_without_annotation_the_early_success_still_checks_for_oom(self) -> None:
        running_pod = pod("Running", statuses=[terminated("a", 0, "OOMKilled")])
        assert (
            demystify_pod_status(running_pod, INFO, config=CONFIG, now=NOW).phase is Phase.RETRYABLE_FAILURE
        )

    @pytest.mark.parametrize(
        ("statuses", "init_statuses"),
        [
            pytest.param([], [], id="no container statuses"),
            pytest.param([terminated("a", 0), terminated("b", 1)], [], id="one failed"),
            pytest.param([terminated("a", 0)], [running("sidecar")], id="init sidecar still running"),
            pytest.param([terminated("a", 0)], [terminated("init", 2)], id="init failed"),
            pytest.param([terminated("a", 0), waiting("b", "ContainerCreating")], [], id="one waiting"),
        ],
    )
    def test_without_annotation_anything_short_of_all_exited_zero_is_running(
        self, statuses: list[dict[str, Any]], init_statuses: list[dict[str, Any]]
    ) -> None:
        running_pod = pod("Running", statuses=statuses, init_statuses=init_statuses)
        assert demystify_pod_status(running_pod, INFO, config=CONFIG, now=NOW).phase is Phase.RUNNING

    def test_with_annotation_a_running_primary_is_bumped_to_v1_only_when_there_are_logs(self) -> None:
        running_pod = pod("Running", primary="primary", statuses=[running("primary")])
        assert demystify_pod_status(running_pod, INFO, config=CONFIG, now=NOW).version == 1
        assert demystify_pod_status(running_pod, NO_LOGS, config=CONFIG, now=NOW).version == 0

    def test_with_annotation_the_primary_decides_even_while_sidecars_run(self) -> None:
        running_pod = pod(
            "Running", primary="primary", statuses=[running("sidecar"), terminated("primary", 0)]
        )
        p = demystify_pod_status(running_pod, INFO, config=CONFIG, now=NOW)
        assert (p.phase, p.version) == (Phase.SUCCESS, 0)

    def test_a_primary_without_status_but_in_the_spec_is_running_v0_even_with_logs(self) -> None:
        running_pod = pod(
            "Running", primary="primary", statuses=[running("sidecar")], containers=("primary", "sidecar")
        )
        p = demystify_pod_status(running_pod, INFO, config=CONFIG, now=NOW)
        assert (p.phase, p.version, p.err) == (Phase.RUNNING, 0, None)

    def test_a_primary_neither_in_statuses_nor_in_the_spec_is_a_permanent_failure(self) -> None:
        running_pod = pod("Running", primary="ghost", statuses=[running("primary")])
        p = demystify_pod_status(running_pod, INFO, config=CONFIG, now=NOW)
        assert p.phase is Phase.PERMANENT_FAILURE
        assert p.err is not None
        assert p.err.code == "PrimaryContainerNotFound"

    def test_an_empty_primary_annotation_is_still_a_primary(self) -> None:
        running_pod = pod("Running", primary="", statuses=[terminated("a", 0)])
        p = demystify_pod_status(running_pod, INFO, config=CONFIG, now=NOW)
        assert p.err is not None
        assert p.err.code == "PrimaryContainerNotFound"


# -- Times -----------------------------------------------------------------------------------------------


class TestTimes:
    def test_last_transition_is_the_latest_start_or_finish_across_regular_and_init(self) -> None:
        p = pod(
            "Running",
            statuses=[
                running("a", "2024-05-01T10:00:00Z"),
                terminated("b", 0, finished_at="2024-05-01T10:05:00Z"),
            ],
            init_statuses=[terminated("init", 0, finished_at="2024-05-01T10:07:00Z")],
        )
        assert get_last_transition_occurred_at(p, NOW) == datetime(2024, 5, 1, 10, 7, tzinfo=UTC)

    def test_last_transition_compares_whole_seconds_so_the_first_in_a_second_wins(self) -> None:
        p = pod(
            "Running",
            statuses=[running("a", "2024-05-01T10:00:00.100Z")],
            init_statuses=[terminated("init", 0, finished_at="2024-05-01T10:00:00.900Z")],
        )
        assert get_last_transition_occurred_at(p, NOW) == datetime(2024, 5, 1, 10, 0, 0, 100000, tzinfo=UTC)

    def test_last_transition_ignores_waiting_containers_and_falls_back_to_now(self) -> None:
        assert get_last_transition_occurred_at(pod("Pending", statuses=[waiting("a", "X")]), NOW) == NOW
        assert get_last_transition_occurred_at(pod("Pending"), NOW) == NOW

    def test_reported_at_is_the_latest_ready_false_pod_completed_condition(self) -> None:
        p = pod(
            "Succeeded",
            conditions=[
                cond("Ready", "False", "2024-05-01T10:00:00Z", "PodCompleted"),
                cond("Ready", "False", "2024-05-01T10:09:00Z", "PodCompleted"),
                cond("ContainersReady", "False", "2024-05-01T10:30:00Z", "PodCompleted"),
                cond("Ready", "True", "2024-05-01T10:40:00Z", "PodCompleted"),
                cond("Ready", "False", "2024-05-01T10:50:00Z", "ContainersNotReady"),
            ],
        )
        assert get_reported_at(p) == datetime(2024, 5, 1, 10, 9, tzinfo=UTC)

    def test_reported_at_is_none_without_a_completion_condition(self) -> None:
        assert get_reported_at(pod("Running")) is None

    def test_a_malformed_timestamp_is_an_error_naming_the_field_not_a_guess(self) -> None:
        with pytest.raises(ObservedObjectError, match="RFC 3339") as caught:
            get_last_transition_occurred_at(pod("Running", statuses=[running("a", "yesterday")]), NOW)
        assert caught.value.path == "status.containerStatuses[0].state.running.startedAt"


# -- GetTaskPhaseWithLogs --------------------------------------------------------------------------------


class _TaskReader:
    def __init__(self, template: tasks_pb2.TaskTemplate) -> None:
        self._template = template

    @property
    def path(self) -> str:
        return "s3://bucket/task.pb"

    def read(self) -> tasks_pb2.TaskTemplate:
        return self._template


class _PluginContext:
    """Just what get_task_phase_with_logs reads from Flyte's PluginContext."""

    def __init__(self, state: PluginState | None = None, config: dict[str, str] | None = None) -> None:
        ident = identifier_pb2.TaskExecutionIdentifier(
            task_id=identifier_pb2.Identifier(name="my-task", project="p", domain="d", version="1"),
            retry_attempt=2,
        )
        self.metadata = TaskExecutionMetadata(
            task_execution_id=TaskExecutionID("gen-name", ident, "n0-0-n0"), namespace="ns"
        )
        self.task_reader = _TaskReader(tasks_pb2.TaskTemplate(type="python-task", config=config or {}))
        self.input_reader: Any = None
        self.output_writer: Any = None
        self.plugin_state = state or PluginState()
        self.now = NOW


LOGS = LogConfig()


class TestGetTaskPhaseWithLogs:
    def test_a_running_pod_reports_user_logs_times_and_version_one(self) -> None:
        running_pod = pod("Running", primary="primary", statuses=[running("primary", "2024-05-01T11:00:00Z")])
        p = get_task_phase_with_logs(_PluginContext(), running_pod, config=CONFIG, log_config=LOGS)
        assert (p.phase, p.version) == (Phase.RUNNING, 1)
        assert p.info is not None
        started = datetime(2024, 5, 1, 11, tzinfo=UTC)
        assert (p.info.occurred_at, p.info.reported_at) == (started, started)
        assert p.info.logs == (
            TaskLog(
                uri="http://localhost:30082/#!/log/ns/exec-n0-0/pod?namespace=ns",
                name="Kubernetes Logs (User)",
                message_format="JSON",
            ),
        )

    def test_the_log_suffix_and_task_variables_reach_the_links(self) -> None:
        logs = LogConfig.model_validate(
            {
                "kubernetes-enabled": False,
                "templates": [
                    {"displayName": "Tmpl", "templateUris": ["https://l/{{ .taskID }}/{{.taskRetryAttempt}}"]}
                ],
            }
        )
        running_pod = pod("Running", statuses=[running("primary")])
        p = get_task_phase_with_logs(
            _PluginContext(), running_pod, config=CONFIG, log_config=logs, log_suffix=" (Driver)"
        )
        assert p.info is not None
        assert [(log.uri, log.name) for log in p.info.logs] == [("https://l/my-task/2", "Tmpl (Driver)")]

    def test_a_completed_pod_reports_the_completion_condition_time(self) -> None:
        done = pod(
            "Succeeded",
            primary="primary",
            statuses=[terminated("primary", 0, finished_at="2024-05-01T11:30:00Z")],
            conditions=[cond("Ready", "False", "2024-05-01T11:31:00Z", "PodCompleted")],
        )
        p = get_task_phase_with_logs(_PluginContext(), done, config=CONFIG, log_config=LOGS)
        assert p.phase is Phase.SUCCESS
        assert p.info is not None
        assert p.info.occurred_at == datetime(2024, 5, 1, 11, 30, tzinfo=UTC)
        assert p.info.reported_at == datetime(2024, 5, 1, 11, 31, tzinfo=UTC)

    def test_the_version_is_bumped_when_the_reason_changes_within_the_same_phase(self) -> None:
        pending = pod(
            "Pending", conditions=[cond("PodScheduled", "False", ago(minutes=1), "Unschedulable", "x")]
        )
        state = PluginState(Phase.QUEUED, 3, "Demistify Pending")
        p = get_task_phase_with_logs(_PluginContext(state), pending, config=CONFIG, log_config=LOGS)
        assert (p.phase, p.version, p.reason) == (Phase.QUEUED, 4, "Unschedulable:x")

    def test_the_version_is_kept_when_the_reason_is_unchanged(self) -> None:
        pending = pod(
            "Pending", conditions=[cond("PodScheduled", "False", ago(minutes=1), "Unschedulable", "x")]
        )
        state = PluginState(Phase.QUEUED, 3, "Unschedulable:x")
        p = get_task_phase_with_logs(_PluginContext(state), pending, config=CONFIG, log_config=LOGS)
        assert p.version == 0

    def test_the_config_and_now_drive_the_pending_grace_period(self) -> None:
        pctx = _PluginContext()
        p = get_task_phase_with_logs(
            pctx, image_pull_failure_pod(NOW - timedelta(minutes=3)), config=CONFIG, log_config=LOGS
        )
        assert p.phase is Phase.RETRYABLE_FAILURE
        assert p.cleanup_on_failure
        longer = K8sPluginConfig(image_pull_backoff_grace_period=timedelta(minutes=30))
        p = get_task_phase_with_logs(
            pctx, image_pull_failure_pod(NOW - timedelta(minutes=3)), config=longer, log_config=LOGS
        )
        assert p.phase is Phase.INITIALIZING

    def test_dynamic_log_links_follow_the_task_templates_link_type(self) -> None:
        logs = LogConfig.model_validate(
            {
                "kubernetes-enabled": False,
                "dynamic-log-links": [
                    {
                        "vscode": {
                            "displayName": "VS Code",
                            "templateUris": ["https://vs:{{ .taskConfig.port }}/x"],
                        }
                    }
                ],
            }
        )
        pctx = _PluginContext(config={"link_type": "vscode", "port": "8080"})
        p = get_task_phase_with_logs(
            pctx, pod("Running", statuses=[running("primary")]), config=CONFIG, log_config=logs
        )
        assert p.info is not None
        assert [(log.uri, log.name) for log in p.info.logs] == [("https://vs:8080/x", "VS Code (User)")]


def test_phase_info_from_a_failure_keeps_reason_empty() -> None:
    # Failure constructors never set a reason; MaybeUpdatePhaseVersion then compares "" with the old one.
    p = demystify_failure({"reason": "Error"}, INFO, "")
    assert p.reason == ""
    assert isinstance(p, PhaseInfo)


# -- Malformed observed pods -----------------------------------------------------------------------------
# Flyte's client decodes a Pod into v1.Pod before pod_helper.go reads it, so a field of the wrong type never
# reaches the Demystify functions; here the same check (taskplug.k8s._observed) names the field instead.


def _with(document: dict[str, Any], path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(document)
    node: Any = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


FAILED_POD = pod(
    "Failed",
    primary="primary",
    statuses=[terminated("primary", 1, "Error", "boom")],
    conditions=[cond("Ready", "False", "2024-05-01T11:31:00Z", "PodCompleted")],
)
FAILED_POD["metadata"]["creationTimestamp"] = "2024-05-01T11:00:00Z"


class TestMalformedObservedPods:
    @pytest.mark.parametrize(
        ("path", "value", "field", "reason"),
        [
            pytest.param(("status",), ["Failed"], "status", "must be a mapping", id="status-a-list"),
            pytest.param(
                ("status", "conditions"),
                "Ready",
                "status.conditions",
                "must be a list",
                id="conditions-a-string",
            ),
            pytest.param(
                ("status", "containerStatuses"),
                [1, 2],
                "status.containerStatuses[0]",
                "must be a mapping (JSON object), got an integer 1",
                id="container-statuses-of-integers",
            ),
            pytest.param(
                ("status", "containerStatuses", 0, "state", "terminated", "exitCode"),
                "x",
                "status.containerStatuses[0].state.terminated.exitCode",
                "must be an integer, got a string 'x'",
                id="exit-code-a-string",
            ),
            pytest.param(
                ("status", "containerStatuses", 0, "state", "terminated", "exitCode"),
                2**31,
                "status.containerStatuses[0].state.terminated.exitCode",
                "32-bit integer",
                id="exit-code-beyond-int32",
            ),
            pytest.param(
                ("status", "containerStatuses", 0, "state", "terminated", "exitCode"),
                1.0,
                "status.containerStatuses[0].state.terminated.exitCode",
                "must be an integer",
                id="exit-code-a-float",
            ),
            pytest.param(
                ("status", "conditions", 0, "lastTransitionTime"),
                "2024-13-01T00:00:00Z",
                "status.conditions[0].lastTransitionTime",
                "is not a valid time",
                id="month-13",
            ),
            pytest.param(
                ("metadata", "creationTimestamp"),
                "10000-01-01T00:00:00Z",
                "metadata.creationTimestamp",
                "RFC 3339",
                id="year-10000",
            ),
            pytest.param(
                ("status", "containerStatuses", 0, "state", "terminated", "finishedAt"),
                "0001-01-01T00:00:00+01:00",
                "status.containerStatuses[0].state.terminated.finishedAt",
                "is not a valid time",
                id="before-year-1-in-utc",
            ),
            pytest.param(
                ("metadata", "annotations"),
                ["primary_container_name"],
                "metadata.annotations",
                "must be a mapping",
                id="annotations-a-list",
            ),
            pytest.param(
                ("status", "message"),
                7,
                "status.message",
                "must be a string, got an integer 7",
                id="message-an-int",
            ),
            pytest.param(
                ("status", "containerStatuses", 0, "ready"),
                "true",
                "status.containerStatuses[0].ready",
                "must be true or false",
                id="ready-a-string",
            ),
            pytest.param(
                ("spec", "containers"),
                {"name": "x"},
                "spec.containers",
                "must be a list",
                id="containers-a-map",
            ),
        ],
    )
    def test_a_field_of_the_wrong_type_is_an_error_naming_its_path(
        self, path: tuple[str | int, ...], value: Any, field: str, reason: str
    ) -> None:
        bad = _with(FAILED_POD, path, value)
        with pytest.raises(ObservedObjectError) as caught:
            get_task_phase_with_logs(_PluginContext(), bad, config=CONFIG, log_config=LOGS)
        assert caught.value.path == field
        assert reason in caught.value.reason
        assert str(caught.value).startswith(f"object ns/exec-n0-0: {field}: ")

    def test_the_same_pod_with_the_right_types_is_a_phase(self) -> None:
        p = get_task_phase_with_logs(_PluginContext(), FAILED_POD, config=CONFIG, log_config=LOGS)
        assert (p.phase, p.reason) == (Phase.RETRYABLE_FAILURE, "")
        assert p.err is not None and p.err.code == "Error"

    def test_a_pod_without_metadata_is_read_as_go_reads_it(self) -> None:
        bare = {k: v for k, v in FAILED_POD.items() if k != "metadata"}
        p = get_task_phase_with_logs(_PluginContext(), bare, config=CONFIG, log_config=LOGS)
        # No primary-container annotation: without one every container must finish, and one failed.
        assert p.phase is Phase.RETRYABLE_FAILURE

    def test_nulls_read_as_go_zero_values(self) -> None:
        nulls = _with(FAILED_POD, ("status", "containerStatuses", 0, "state", "terminated", "reason"), None)
        nulls["status"]["conditions"] = None
        p = get_task_phase_with_logs(_PluginContext(), nulls, config=CONFIG, log_config=LOGS)
        assert p.err is not None
        assert "[primary] terminated with exit code (1). Reason []." in p.err.message

    def test_unknown_fields_are_ignored(self) -> None:
        extra = _with(FAILED_POD, ("status", "resize"), ["anything", {"new": "field"}])
        extra["status"]["containerStatuses"][0]["allocatedResources"] = 5
        p = get_task_phase_with_logs(_PluginContext(), extra, config=CONFIG, log_config=LOGS)
        assert p.phase is Phase.RETRYABLE_FAILURE

    @pytest.mark.parametrize(
        "call",
        [
            pytest.param(lambda st: demystify_pending(st, INFO, config=CONFIG, now=NOW), id="pending"),
            pytest.param(lambda st: demystify_success(st, INFO), id="success"),
            pytest.param(lambda st: demystify_failure(st, INFO, "primary"), id="failure"),
        ],
    )
    def test_the_status_helpers_check_the_status_they_are_given(self, call: Any) -> None:
        with pytest.raises(ObservedObjectError) as caught:
            call({"phase": "Pending", "containerStatuses": [{"state": {"waiting": "ImagePullBackOff"}}]})
        assert caught.value.path == "status.containerStatuses[0].state.waiting"

    def test_the_primary_container_helper_checks_the_statuses_it_is_given(self) -> None:
        with pytest.raises(ObservedObjectError) as caught:
            determine_primary_container_phase("primary", [{"name": ["primary"]}], INFO)
        assert caught.value.path == "status.containerStatuses[0].name"

    def test_an_annotation_key_with_dots_is_bracketed_in_the_path(self) -> None:
        bad = _with(FAILED_POD, ("metadata", "annotations"), {"flyte.org/x": 1})
        with pytest.raises(ObservedObjectError) as caught:
            demystify_pod_status(bad, INFO, config=CONFIG, now=NOW)
        assert caught.value.path == "metadata.annotations['flyte.org/x']"
