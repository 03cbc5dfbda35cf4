"""The ``plugins.dask`` section, the plugin's registration and the contract
check."""

from __future__ import annotations

import pytest
import yaml
from dask_helpers import dask_custom, dask_template

from taskplug.core import ConfigError, FakeClock, PlatformConfig, load_platform_config
from taskplug.k8s import K8S_SECTION, LOGS_SECTION, PLUGINS_ROOT_SECTION, K8sPluginProperties, K8sPluginSetup
from taskplug.plugins.dask import (
    DASK_JOB,
    DASK_SECTION,
    DaskConfig,
    DaskLocalOperator,
    DaskPlugin,
    plugin_entries,
)
from taskplug.testing import check_k8s_plugin

SECTIONS = [PLUGINS_ROOT_SECTION, K8S_SECTION, LOGS_SECTION, DASK_SECTION]


def load(text: str) -> PlatformConfig:
    return load_platform_config(yaml.safe_load(text), SECTIONS)


def test_the_default_log_config_is_the_global_default_a_kubernetes_link() -> None:
    logs = DaskConfig().logs
    assert logs.kubernetes_enabled is True
    assert logs.kubernetes_template_uri == (
        "http://localhost:30082/#!/log/{{ .namespace }}/{{ .podName }}/pod?namespace={{ .namespace }}"
    )
    assert not logs.cloudwatch_enabled and not logs.stackdriver_enabled


def test_the_section_loads_flytes_log_keys() -> None:
    dask = load(
        """
plugins:
  dask:
    logs:
      kubernetes-enabled: false
      cloudwatch-enabled: true
      cloudwatch-template-uri: "https://cw/{{ .podName }}"
"""
    ).get(DASK_SECTION)
    assert dask.logs.kubernetes_enabled is False
    assert dask.logs.cloudwatch_template_uri == "https://cw/{{ .podName }}"


@pytest.mark.parametrize(
    "text",
    [
        "plugins:\n  dask:\n    log: {}\n",
        "plugins:\n  dask:\n    logs: {kubernetes-enabled: maybe}\n",
        "plugins:\n  dask:\n    logs: {everything: true}\n",
    ],
)
def test_unknown_keys_and_bad_values_are_rejected_naming_the_path(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        load(text)
    assert str(info.value).startswith("plugins.dask")


def test_the_entry_registers_task_type_dask_watching_dask_jobs_not_by_default() -> None:
    [entry] = plugin_entries()
    entry.validate()
    assert (entry.id, entry.registered_task_types, entry.is_default) == ("dask", ("dask",), False)
    assert entry.resource_to_watch == DASK_JOB
    assert (DASK_JOB.api_version, DASK_JOB.kind, DASK_JOB.plural) == (
        "kubernetes.dask.org/v1",
        "DaskJob",
        "daskjobs",
    )
    assert entry.config_sections == (DASK_SECTION,)
    assert entry.custom_kube_client is None
    assert entry.local_operator is not None and isinstance(entry.local_operator(), DaskLocalOperator)


def test_the_loaded_plugin_reads_its_section_and_has_zero_properties() -> None:
    [entry] = plugin_entries()
    config = load("plugins:\n  dask:\n    logs: {kubernetes-enabled: false}\n")
    plugin = entry.load_plugin(K8sPluginSetup(config, clock=FakeClock()))
    assert isinstance(plugin, DaskPlugin)
    assert plugin.config.logs.kubernetes_enabled is False
    assert plugin.get_properties() == K8sPluginProperties()
    assert plugin.build_identity_resource(None) == {  # type: ignore[arg-type]
        "apiVersion": "kubernetes.dask.org/v1",
        "kind": "DaskJob",
    }


def test_the_plugin_passes_the_k8s_plugin_contract_check() -> None:
    [entry] = plugin_entries()
    report = check_k8s_plugin(
        entry,
        tasks=[dask_template(dask_custom(workers=2))],
        bad_tasks=[dask_template(None), dask_template({"workers": {"numberOfWorkers": "many"}})],
        observations=[
            {"status": {"jobStatus": "JobCreated"}},
            {"status": {"jobStatus": "ClusterCreated", "jobRunnerPodName": "x-runner", "clusterName": "x"}},
            {"status": {"jobStatus": "Running"}},
            {"status": {"jobStatus": "Successful"}},
            {"status": {"jobStatus": "Failed"}},
        ],
    )
    report.raise_if_failed()
    assert "rejects-bad-task[bad task 2]" in report.names(failed=False)
