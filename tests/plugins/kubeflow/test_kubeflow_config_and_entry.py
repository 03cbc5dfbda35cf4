"""The ``plugins.kf-operator`` section, the three registrations, and the plugin contract check."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from kubeflow_helpers import condition, template

from taskplug.core import ConfigError, PluginRegistry
from taskplug.k8s import ErrorAggregationStrategy, K8sPlugin
from taskplug.plugins.kubeflow import (
    KF_OPERATOR_SECTION,
    MPI_JOB,
    PYTORCH_JOB,
    TF_JOB,
    KfOperatorConfig,
    MPIJobOperator,
    PyTorchJobOperator,
    PyTorchPlugin,
    TFJobOperator,
    mpi_entries,
    plugin_entries,
    pytorch_entries,
    tensorflow_entries,
)
from taskplug.testing import check_k8s_plugin, fake_plugin_setup, fake_task_context, load_k8s_plugin

TASKS: dict[str, dict[str, Any]] = {
    "pytorch": template("pytorch", {"masterReplicas": {"replicas": 1}, "workerReplicas": {"replicas": 2}}),
    "tensorflow": template("tensorflow", {"workerReplicas": {"replicas": 2}, "psReplicas": {"replicas": 1}}),
    "mpi": template(
        "mpi", {"launcherReplicas": {"replicas": 1}, "workerReplicas": {"replicas": 2}, "slots": 2}
    ),
}
BAD_TASKS: dict[str, dict[str, Any]] = {
    "pytorch": template("pytorch", {"workerReplicas": {"replicas": 0}, "elasticConfig": {}}),
    "tensorflow": template("tensorflow", {"psReplicas": {"replicas": 1}}),
    "mpi": template("mpi", {"launcherReplicas": {"replicas": 1}}),
}


def observed(kind: str, *conditions: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": kind,
        "metadata": {
            "name": "exec1-n0-0",
            "namespace": "testproject-development",
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {},
        "status": {"startTime": "2026-01-01T00:00:01Z", "conditions": list(conditions)},
    }


def test_the_section_defaults_to_a_one_minute_timeout() -> None:
    assert KF_OPERATOR_SECTION.path == "plugins.kf-operator"
    assert KfOperatorConfig().timeout == timedelta(minutes=1)


def test_the_timeout_is_read_as_a_go_duration() -> None:
    setup = fake_plugin_setup({"plugins": {"kf-operator": {"timeout": "2m30s"}}}, entries=plugin_entries())
    assert setup.config.get(KF_OPERATOR_SECTION).timeout == timedelta(minutes=2, seconds=30)


@pytest.mark.parametrize(
    ("section", "path"),
    [
        ({"timeout": "soon"}, "plugins.kf-operator.timeout"),
        ({"timeout": "-1s"}, "plugins.kf-operator.timeout"),
        ({"timout": "1m"}, "plugins.kf-operator.timout"),
    ],
)
def test_a_bad_section_is_an_error_naming_the_key(section: dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigError) as info:
        fake_plugin_setup({"plugins": {"kf-operator": section}}, entries=plugin_entries())
    assert info.value.path == path


def test_the_three_entries_are_not_defaults_and_watch_their_kinds() -> None:
    entries = {e.id: e for e in plugin_entries()}
    assert {k: (e.registered_task_types, e.resource_to_watch, e.is_default) for k, e in entries.items()} == {
        "pytorch": (("pytorch",), PYTORCH_JOB, False),
        "tensorflow": (("tensorflow",), TF_JOB, False),
        "mpi": (("mpi",), MPI_JOB, False),
    }
    assert [type(e.local_operator()) for e in entries.values()] == [
        PyTorchJobOperator,
        TFJobOperator,
        MPIJobOperator,
    ]
    assert all(callable(e.local_operator()) for e in entries.values())
    assert all(e.config_sections == (KF_OPERATOR_SECTION,) for e in entries.values())
    assert [e.id for e in pytorch_entries() + tensorflow_entries() + mpi_entries()] == [
        "pytorch",
        "tensorflow",
        "mpi",
    ]


def test_the_installed_entry_points_register_the_three_plugins() -> None:
    registry = PluginRegistry.discover()
    ids = {e.id for e in registry.entries}
    assert {"pytorch", "tensorflow", "mpi"} <= ids
    assert KF_OPERATOR_SECTION.path in {s.path for s in registry.config_sections}


@pytest.mark.parametrize("entry", plugin_entries(), ids=lambda e: e.id)
def test_each_plugin_passes_the_contract_check(entry: Any) -> None:
    kind = entry.resource_to_watch.kind
    report = check_k8s_plugin(
        entry,
        tasks=[TASKS[entry.id]],
        bad_tasks=[BAD_TASKS[entry.id]],
        observations=[
            observed(kind, condition("Created", at="2026-01-01T00:00:01Z")),
            observed(
                kind,
                condition("Created", at="2026-01-01T00:00:01Z"),
                condition("Running", at="2026-01-01T00:00:02Z"),
            ),
            observed(
                kind,
                condition("Created", at="2026-01-01T00:00:01Z"),
                condition("Succeeded", at="2026-01-01T00:00:09Z"),
            ),
            observed(
                kind, condition("Failed", at="2026-01-01T00:00:09Z", reason=f"{kind}Failed", message="x")
            ),
        ],
    )
    report.raise_if_failed()


def test_the_identity_resource_is_the_kind_only() -> None:
    plugin = load_k8s_plugin(pytorch_entries()[0])
    assert plugin.build_identity_resource(fake_task_context(TASKS["pytorch"]).metadata) == {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
    }


@pytest.mark.parametrize(
    ("enabled", "strategy"),
    [(False, ErrorAggregationStrategy.DEFAULT), (True, ErrorAggregationStrategy.EARLIEST)],
)
def test_pytorch_asks_for_earliest_error_aggregation_when_the_platform_enables_it(
    enabled: bool, strategy: ErrorAggregationStrategy
) -> None:
    config = {"plugins": {"k8s": {"enable-distributed-error-aggregation": enabled}}}
    plugin: K8sPlugin = load_k8s_plugin(pytorch_entries()[0], config=config)
    assert isinstance(plugin, PyTorchPlugin)
    assert plugin.get_properties().error_aggregation_strategy is strategy
    worker = plugin.build_resource(fake_task_context(TASKS["pytorch"]))["spec"]["pytorchReplicaSpecs"][
        "Worker"
    ]
    names = [e["name"] for e in worker["template"]["spec"]["containers"][0]["env"]]
    assert ("_F_DES" in names) is enabled
    for other in (tensorflow_entries()[0], mpi_entries()[0]):
        properties = load_k8s_plugin(other, config=config).get_properties()
        assert properties.error_aggregation_strategy is ErrorAggregationStrategy.DEFAULT


def test_the_loaded_plugin_reads_the_timeout_and_the_global_log_config() -> None:
    config = {
        "plugins": {
            "kf-operator": {"timeout": "5m"},
            "logs": {
                "kubernetes-enabled": False,
                "templates": [{"displayName": "X", "templateUris": ["u/{{ .podName }}"]}],
            },
        }
    }
    plugin = load_k8s_plugin(pytorch_entries()[0], config=config)
    assert isinstance(plugin, PyTorchPlugin)
    assert plugin.config.timeout == timedelta(minutes=5)
    assert [t.display_name for t in plugin.log_config.templates] == ["X"]
