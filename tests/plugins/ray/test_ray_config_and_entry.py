"""The ``plugins.ray`` section, the plugin's registration and the contract
check."""

from __future__ import annotations

import pytest
import yaml
from ray_helpers import group, ray_custom, ray_template

from taskplug.core import ConfigError, FakeClock, PlatformConfig, load_platform_config
from taskplug.k8s import K8S_SECTION, LOGS_SECTION, PLUGINS_ROOT_SECTION, K8sPluginProperties, K8sPluginSetup
from taskplug.plugins.ray import (
    GENERATED_NAME_MAX_LENGTH,
    RAY_JOB,
    RAY_SECTION,
    RayConfig,
    RayLocalOperator,
    RayPlugin,
    plugin_entries,
)
from taskplug.testing import check_k8s_plugin

SECTIONS = [PLUGINS_ROOT_SECTION, K8S_SECTION, LOGS_SECTION, RAY_SECTION]

# flyteplugins/go/tasks/plugins/k8s/ray/testdata/config.yaml
FLYTE_TESTDATA = """
plugins:
  ray:
    remoteClusterConfig:
      endpoint: 127.0.0.1
      auth:
        tokenPath: /path/token
        caCertPath: /path/cert
"""


def load(text: str) -> PlatformConfig:
    return load_platform_config(yaml.safe_load(text), SECTIONS)


def test_defaults_are_flytes() -> None:
    ray = RayConfig()
    assert (ray.shutdown_after_job_finishes, ray.ttl_seconds_after_finished) == (True, 3600)
    assert (ray.service_type, ray.enable_ingress, ray.include_dashboard, ray.dashboard_host) == (
        "NodePort",
        False,
        True,
        "0.0.0.0",
    )
    assert (ray.node_ip_address, ray.enable_usage_stats, ray.service_account) == ("", False, "")
    assert ray.defaults.head_node.start_parameters == {"disable-usage-stats": "true"}
    assert ray.defaults.worker_node.start_parameters == {"disable-usage-stats": "true"}
    assert (ray.head_ip_address(), ray.worker_ip_address()) == ("$MY_POD_IP", "$MY_POD_IP")
    assert ray.remote_cluster_config.enabled is False
    assert ray.logs_sidecar is None
    assert ray.dashboard_url_template is None
    # Ray log links are all off (unlike plugins.logs).
    assert not (ray.logs.kubernetes_enabled or ray.logs.cloudwatch_enabled or ray.logs.stackdriver_enabled)
    assert ray.logs.kubernetes_template_uri == ""


def test_flytes_testdata_loads_with_remote_cluster_disabled() -> None:
    remote = load(FLYTE_TESTDATA).get(RAY_SECTION).remote_cluster_config
    assert (remote.endpoint, remote.auth.token_path, remote.auth.ca_cert_path) == (
        "127.0.0.1",
        "/path/token",
        "/path/cert",
    )
    assert remote.enabled is False


def test_every_key_is_spelled_as_flytes_json_tags() -> None:
    ray = load(
        """
plugins:
  ray:
    shutdownAfterJobFinishes: false
    ttlSecondsAfterFinished: 0
    serviceType: ClusterIP
    enableIngress: true
    includeDashboard: false
    dashboardHost: localhost
    nodeIPAddress: 10.0.0.9
    remoteClusterConfig: {name: far, endpoint: "https://far:6443", enabled: false, auth: {tokenPath: /t, caCertPath: /c}}
    logs: {kubernetes-enabled: true, kubernetes-template-uri: "https://k8s"}
    logsSidecar: {name: logs, image: fluent-bit}
    dashboardURLTemplate: {displayName: Dashboard, templateUris: ["https://dash/{{ .rayClusterName }}"]}
    defaults:
      headNode: {startParameters: {num-cpus: "0"}, ipAddress: ""}
      workerNode: {startParameters: {}, ipAddress: $POD_IP}
    enableUsageStats: true
    serviceAccount: ray-sa
"""
    ).get(RAY_SECTION)
    assert (ray.shutdown_after_job_finishes, ray.ttl_seconds_after_finished, ray.service_type) == (
        False,
        0,
        "ClusterIP",
    )
    assert (ray.enable_ingress, ray.include_dashboard, ray.dashboard_host) == (True, False, "localhost")
    assert (ray.remote_cluster_config.name, ray.remote_cluster_config.endpoint) == ("far", "https://far:6443")
    assert ray.logs.kubernetes_enabled and ray.logs_sidecar == {"name": "logs", "image": "fluent-bit"}
    assert ray.dashboard_url_template is not None
    assert ray.dashboard_url_template.display_name == "Dashboard"
    assert ray.defaults.head_node.start_parameters == {"num-cpus": "0"}
    # The deprecated nodeIPAddress fills only an empty ipAddress.
    assert (ray.head_ip_address(), ray.worker_ip_address()) == ("10.0.0.9", "$POD_IP")
    assert (ray.enable_usage_stats, ray.service_account) == (True, "ray-sa")


@pytest.mark.parametrize(
    "text",
    [
        "plugins:\n  ray:\n    shutdown-after-job-finishes: true\n",
        "plugins:\n  ray:\n    ttlSecondsAfterFinished: forever\n",
        "plugins:\n  ray:\n    ttlSecondsAfterFinished: 4294967296\n",
        "plugins:\n  ray:\n    defaults: {headNode: {startParams: {}}}\n",
        "plugins:\n  ray:\n    remoteClusterConfig: {auth: {token: x}}\n",
        "plugins:\n  ray:\n    logs: {kubernetesEnabled: true}\n",
    ],
)
def test_unknown_keys_and_bad_values_are_rejected_naming_the_path(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        load(text)
    assert str(info.value).startswith("plugins.ray")


def test_a_remote_cluster_is_refused_rather_than_ignored() -> None:
    # Deviation: the remote Ray cluster is not supported; enabling it is a config error.
    with pytest.raises(ConfigError) as info:
        load("plugins:\n  ray:\n    remoteClusterConfig: {enabled: true, endpoint: 'https://far:6443'}\n")
    assert str(info.value).startswith("plugins.ray.remoteClusterConfig.enabled")
    assert "not supported" in str(info.value)


def test_the_entry_registers_task_type_ray_watching_ray_jobs_not_by_default() -> None:
    [entry] = plugin_entries()
    entry.validate()
    assert (entry.id, entry.registered_task_types, entry.is_default) == ("ray", ("ray",), False)
    assert entry.resource_to_watch == RAY_JOB
    assert (RAY_JOB.api_version, RAY_JOB.kind, RAY_JOB.plural) == ("ray.io/v1", "RayJob", "rayjobs")
    assert entry.config_sections == (RAY_SECTION,)
    assert entry.local_operator is not None and isinstance(entry.local_operator(), RayLocalOperator)
    assert entry.custom_kube_client is None  # remote clusters: see the test above


def test_the_loaded_plugin_caps_generated_names_at_47_characters() -> None:
    [entry] = plugin_entries()
    plugin = entry.load_plugin(
        K8sPluginSetup(load("plugins:\n  ray:\n    serviceAccount: x\n"), clock=FakeClock())
    )
    assert isinstance(plugin, RayPlugin)
    assert plugin.config.service_account == "x"
    assert GENERATED_NAME_MAX_LENGTH == 47
    assert plugin.get_properties() == K8sPluginProperties(generated_name_max_length=47)
    assert plugin.build_identity_resource(None) == {"apiVersion": "ray.io/v1", "kind": "RayJob"}  # type: ignore[arg-type]


def test_the_plugin_passes_the_k8s_plugin_contract_check() -> None:
    [entry] = plugin_entries()
    report = check_k8s_plugin(
        entry,
        tasks=[ray_template(ray_custom(groups=[group()]))],
        bad_tasks=[
            ray_template(None),
            ray_template({"runtimeEnv": "x"}),
            ray_template(ray_custom(runtimeEnv="!")),
        ],
        observations=[
            {"status": {"jobDeploymentStatus": "Initializing", "jobId": "j", "rayClusterName": "c"}},
            {"status": {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}},
            {"status": {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}},
            {"status": {"jobDeploymentStatus": "Failed", "reason": "AppFailed", "message": "boom"}},
            {
                "status": {
                    "jobDeploymentStatus": "ValidationFailed",
                    "reason": "ValidationFailed",
                    "message": "bad",
                }
            },
            {"status": {"jobDeploymentStatus": "Suspended"}},
        ],
    )
    report.raise_if_failed()
    assert report.check("properties").passed
