"""check_k8s_plugin: the built-in plugins keep the contract, and a deliberately broken plugin is caught for
each kind of breakage."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from google.protobuf import json_format

from taskplug.core import (
    BadTaskSpecification,
    Phase,
    PhaseInfo,
    TaskExecutionContext,
    TaskExecutionMetadata,
)
from taskplug.k8s import (
    K8sPluginEntry,
    K8sPluginProperties,
    K8sPluginSetup,
    PluginContext,
    ResourceType,
    maybe_update_phase_version,
)
from taskplug.plugins.pod import plugin_entries as pod_entries
from taskplug.plugins.spark import plugin_entries as spark_entries
from taskplug.testing import ContractReport, check_k8s_plugin

# -- the built-in plugins ------------------------------------------------------------------------------

POD_META = {"name": "exec1-n0-0", "namespace": "testproject-development"}


def pod(phase: str, **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {**POD_META, "annotations": {"primary_container_name": "exec1-n0-0"}},
        "spec": {"containers": [{"name": "exec1-n0-0", "image": "img"}]},
        "status": {"phase": phase, **status},
    }


POD_OBSERVATIONS = [
    pod(
        "Pending",
        conditions=[
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/1 nodes are available",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ],
    ),
    pod(
        "Running",
        containerStatuses=[
            {"name": "exec1-n0-0", "ready": True, "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}
        ],
    ),
    pod(
        "Succeeded",
        containerStatuses=[
            {"name": "exec1-n0-0", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
        ],
    ),
    pod("Failed", reason="Error", message="boom"),
]


@pytest.mark.parametrize("entry", pod_entries(), ids=lambda e: e.id)
def test_the_pod_plugin_keeps_the_contract(entry: K8sPluginEntry) -> None:
    sidecar_task = {
        "type": "sidecar",
        "custom": {
            "podSpec": {"containers": [{"name": "main", "image": "img"}]},
            "primaryContainerName": "main",
        },
    }
    tasks = [sidecar_task] if "sidecar" in entry.registered_task_types else []
    report = check_k8s_plugin(entry, tasks=tasks, observations=POD_OBSERVATIONS)
    report.raise_if_failed()
    if entry.id == "container":
        assert report.check("task-phase[observation 3]").message.startswith("Success")
        assert "phase-version[observation 1]" in report.names(failed=False)
        assert "phase-version[observation 2]" not in report.names()  # Running is exempt


def test_the_spark_plugin_keeps_the_contract_given_a_task_it_accepts() -> None:
    spark = spark_entries()[0]
    report = check_k8s_plugin(spark)
    # Its minimal tasks lack a SparkJob and are rejected, as they should be; but nothing was built.
    assert report.names(failed=True) == ["builds-something"]
    job = {
        "type": "spark",
        "container": {"image": "spark:1", "args": ["run"]},
        "custom": {"mainApplicationFile": "local:///app.py", "sparkConf": {"spark.executor.instances": "2"}},
    }
    observed = {
        "apiVersion": "sparkoperator.k8s.io/v1beta2",
        "kind": "SparkApplication",
        "metadata": POD_META,
        "status": {"applicationState": {"state": "FAILED", "errorMessage": "driver OOM"}},
    }
    report = check_k8s_plugin(spark, tasks=[job], observations=[observed])
    report.raise_if_failed()


# -- a plugin broken on purpose ------------------------------------------------------------------------

WIDGET = ResourceType("example.com/v1", "Widget", "widgets")


class WidgetPlugin:
    """A small, correct plugin for ``widget`` tasks; each name in ``breaks`` breaks it in one way."""

    def __init__(self, breaks: frozenset[str]) -> None:
        self.breaks = breaks

    def get_properties(self) -> K8sPluginProperties:
        if "short-generated-names" in self.breaks:
            return K8sPluginProperties(generated_name_max_length=4)
        return K8sPluginProperties()

    def build_identity_resource(self, meta: TaskExecutionMetadata) -> dict[str, Any]:
        identity: dict[str, Any] = {"apiVersion": WIDGET.api_version, "kind": "widget"}  # any case will do
        if "identity-wrong-kind" in self.breaks:
            identity["kind"] = "Gadget"
        if "identity-with-spec" in self.breaks:
            identity["spec"] = {"size": 1}
        if "identity-per-task" in self.breaks:
            identity["metadata"] = {"labels": {"interruptible": str(meta.interruptible).lower()}}
        return identity

    def build_resource(self, tctx: TaskExecutionContext) -> dict[str, Any]:
        template = tctx.task_reader.read()
        if "rejects-everything" in self.breaks:
            raise BadTaskSpecification("no")
        custom = json_format.MessageToDict(template.custom) if template.HasField("custom") else {}
        size = custom.get("size", 1)
        if "crashes-on-bad-tasks" in self.breaks:
            size = int(size) + int(custom.get("parallelism", 0))  # ValueError on the odd custom
        elif "accepts-anything" not in self.breaks and (
            set(custom) - {"size"} or not isinstance(size, int | float) or size < 1
        ):
            raise BadTaskSpecification(f"invalid widget task: {custom}")
        if not template.HasField("container"):
            raise BadTaskSpecification("a widget task needs a container")
        if "mutates-template" in self.breaks:
            template.container.image += "-changed"
        spec: dict[str, Any] = {"image": template.container.image, "size": int(size)}
        widget: dict[str, Any] = {"apiVersion": WIDGET.api_version, "kind": WIDGET.kind, "spec": spec}
        if "not-json" in self.breaks:
            spec["created"] = datetime.now(UTC)
        if "wrong-kind" in self.breaks:
            widget["kind"] = "Gadget"
        if "random" in self.breaks:
            spec["nonce"] = uuid.uuid4().hex
        if "labels-not-a-map" in self.breaks:
            widget["metadata"] = {"labels": ["a", "b"]}
        if "metadata-not-a-map" in self.breaks:
            widget["metadata"] = "widget-1"
        return widget

    def get_task_phase(self, pctx: PluginContext, resource: dict[str, Any]) -> PhaseInfo:
        if "phase-reads-status-blindly" in self.breaks:
            state = resource["status"]["state"]
        else:
            state = (resource.get("status") or {}).get("state", "")
        if "phase-returns-a-dict" in self.breaks:
            return {"phase": "Queued"}  # type: ignore[return-value]
        if state == "":
            if "undefined-when-new" in self.breaks:
                return PhaseInfo()
            if "done-before-start" in self.breaks:
                return PhaseInfo.success()
            info = PhaseInfo.queued(pctx.now, 0, "widget created")
        elif state == "Building":
            info = PhaseInfo.initializing(0, "building", None)
        elif state == "Ready":
            info = PhaseInfo.success()
        elif "failure-without-error" in self.breaks:
            info = PhaseInfo.failed(Phase.PERMANENT_FAILURE, None)
        else:
            info = PhaseInfo.failure("WidgetBroken", str(resource["status"].get("message", "")))
        if "no-version-bump" in self.breaks:
            return info
        if "always-bump" in self.breaks:
            return info.with_version(pctx.plugin_state.phase_version + 1)
        return maybe_update_phase_version(info, pctx.plugin_state)


def widget_entry(*breaks: str, **changes: Any) -> K8sPluginEntry:
    broken = frozenset(breaks)

    def load(setup: K8sPluginSetup) -> Any:
        if "loader-raises" in broken:
            raise RuntimeError("cannot load")
        if "loader-returns-junk" in broken:
            return object()
        return WidgetPlugin(broken)

    entry = K8sPluginEntry(
        id="widget", registered_task_types=("widget",), resource_to_watch=WIDGET, load_plugin=load
    )
    return dataclasses.replace(entry, **changes)


WIDGET_TASK = {"type": "widget", "container": {"image": "widget:1"}, "custom": {"size": 3}}
BAD_WIDGET_TASK = {"type": "widget", "container": {"image": "widget:1"}, "custom": {"size": -1}}


def observed(state: str, message: str = "") -> dict[str, Any]:
    return {
        "apiVersion": WIDGET.api_version,
        "kind": WIDGET.kind,
        "metadata": POD_META,
        "status": {"state": state, "message": message},
    }


OBSERVATIONS = [observed("Building"), observed("Ready"), observed("Broken", "gear jammed")]


def check(entry: K8sPluginEntry) -> ContractReport:
    return check_k8s_plugin(
        entry, tasks=[WIDGET_TASK], bad_tasks=[BAD_WIDGET_TASK], observations=OBSERVATIONS
    )


def test_the_unbroken_widget_plugin_passes_every_check() -> None:
    report = check(widget_entry())
    report.raise_if_failed()
    assert report.passed
    assert report.names(failed=True) == []
    assert {name.split("[")[0] for name in report.names()} == {
        "entry",
        "load",
        "properties",
        "build-resource",
        "deterministic",
        "builds-something",
        "identity-resource",
        "rejects-bad-task",
        "task-phase",
        "phase-version",
    }


@pytest.mark.parametrize(
    ("entry", "failed_check", "message"),
    [
        # The entry.
        (widget_entry(registered_task_types="widget"), "entry", "write a tuple"),
        (widget_entry(id=""), "entry", "needs an id"),
        (widget_entry(resource_to_watch=WIDGET.kind), "entry", "resource_to_watch is str"),
        (widget_entry(resource_to_watch=ResourceType("example.com/v1", "Widget", "")), "entry", "plural"),
        (widget_entry(local_operator=lambda: "not an operator"), "entry", "operator(event, client)"),
        # Loading and properties.
        (widget_entry("loader-raises"), "load", "RuntimeError: cannot load"),
        (widget_entry("loader-returns-junk"), "load", "lacks the K8sPlugin methods"),
        (widget_entry("short-generated-names"), "properties", "at least 8"),
        # The identity resource.
        (widget_entry("identity-wrong-kind"), "identity-resource", "kind 'Gadget'"),
        (widget_entry("identity-with-spec"), "identity-resource", "also gave ['spec']"),
        (widget_entry("identity-per-task"), "identity-resource", "different objects for different tasks"),
        # Building.
        (widget_entry("not-json"), "build-resource[task 1]", "not plain JSON"),
        (widget_entry("wrong-kind"), "build-resource[task 1]", "kind 'Gadget'"),
        (widget_entry("labels-not-a-map"), "build-resource[task 1]", "metadata.labels"),
        (widget_entry("metadata-not-a-map"), "build-resource[task 1]", "metadata that is not a mapping"),
        (
            widget_entry("crashes-on-bad-tasks"),
            "build-resource[widget task with an unexpected custom]",
            "ValueError",
        ),
        (widget_entry("random"), "deterministic[task 1]", "different objects"),
        (widget_entry("mutates-template"), "deterministic[task 1]", "changed the task template"),
        (widget_entry("rejects-everything"), "builds-something", "pass tasks="),
        (widget_entry("rejects-everything"), "build-resource[task 1]", "rejected a task it must build"),
        (widget_entry("accepts-anything"), "rejects-bad-task[bad task 1]", "built a dict"),
        # Phases.
        (widget_entry("phase-reads-status-blindly"), "task-phase[empty status]", "KeyError"),
        (widget_entry("phase-returns-a-dict"), "task-phase[empty status]", "not PhaseInfo"),
        (widget_entry("undefined-when-new"), "task-phase[empty status]", "Undefined"),
        (widget_entry("done-before-start"), "task-phase[empty status]", "no status yet"),
        (widget_entry("failure-without-error"), "task-phase[observation 3]", "must carry an error"),
        (widget_entry("no-version-bump"), "phase-version[observation 1]", "maybe_update_phase_version"),
        (widget_entry("always-bump"), "phase-version[empty status]", "only move when the reason changes"),
    ],
)
def test_each_kind_of_breakage_is_caught(entry: K8sPluginEntry, failed_check: str, message: str) -> None:
    report = check(entry)
    assert not report.passed
    assert failed_check in report.names(failed=True), str(report)
    assert message in report.check(failed_check).message, str(report)
    with pytest.raises(AssertionError, match=f"FAIL {failed_check.replace('[', '.').replace(']', '.')}"):
        report.raise_if_failed()


def test_the_report_reads_as_a_list_of_checks() -> None:
    report = check(widget_entry("wrong-kind"))
    text = str(report)
    assert text.splitlines()[0].startswith("k8s plugin [widget]: ")
    assert "  PASS entry: [widget] handles widget, watches Widget.example.com/v1" in text
    assert "  FAIL build-resource[task 1]: build_resource gave kind 'Gadget'" in text
    with pytest.raises(KeyError):
        report.check("no such check")
