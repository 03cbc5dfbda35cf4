"""The ``plugins.k8s``, ``plugins.logs`` and ``plugins`` sections (Flyte's flytek8s/config/config.go and
logs/config.go, and its testdata config files)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import yaml

from taskplug.core import ConfigError, Quantity, load_platform_config
from taskplug.k8s import K8S_SECTION, LOGS_SECTION, PLUGINS_ROOT_SECTION
from taskplug.k8s._config import (
    CoPilotConfig,
    K8sPluginConfig,
    LogConfig,
    NodeSelectorRequirement,
    Toleration,
)

SECTIONS = [PLUGINS_ROOT_SECTION, K8S_SECTION, LOGS_SECTION]


def load(document: dict[str, Any]):
    return load_platform_config(document, SECTIONS)


def k8s(**keys: Any) -> K8sPluginConfig:
    return load({"plugins": {"k8s": keys}}).get(K8S_SECTION)


# -- defaults --------------------------------------------------------------------------------------------

DEFAULTS = K8sPluginConfig()


@pytest.mark.parametrize(
    ("attribute", "default"),
    [
        ("inject_finalizer", False),
        ("default_annotations", {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}),
        ("default_labels", {}),
        ("default_env_vars", {}),
        ("default_env_vars_from_env", {}),
        ("default_env_from_configmaps", []),
        ("default_env_from_secrets", []),
        ("default_cpus", Quantity("1000m")),
        ("default_memory", Quantity("1024Mi")),
        ("default_tolerations", []),
        ("default_node_selector", {}),
        ("default_affinity", None),
        ("scheduler_name", ""),
        ("interruptible_tolerations", []),
        ("interruptible_node_selector", {}),
        ("interruptible_node_selector_requirement", None),
        ("non_interruptible_node_selector_requirement", None),
        ("resource_tolerations", {}),
        ("delete_resource_on_finalize", False),
        ("create_container_error_grace_period", timedelta(minutes=3)),
        ("create_container_config_error_grace_period", timedelta(0)),
        ("image_pull_backoff_grace_period", timedelta(minutes=3)),
        ("image_pull_policy", ""),
        ("pod_pending_timeout", timedelta(0)),
        ("gpu_device_node_label", "k8s.amazonaws.com/accelerator"),
        ("gpu_partition_size_node_label", "k8s.amazonaws.com/gpu-partition-size"),
        ("gpu_unpartitioned_node_selector_requirement", None),
        ("gpu_unpartitioned_toleration", None),
        ("gpu_resource_name", "nvidia.com/gpu"),
        ("default_pod_security_context", None),
        ("default_security_context", None),
        ("enable_host_networking_pod", None),
        ("default_pod_dns_config", None),
        ("default_pod_template_name", ""),
        ("default_pod_template_resync", timedelta(seconds=30)),
        ("send_object_events", False),
        ("update_base_backoff_duration", 10),
        ("update_backoff_retries", 5),
        ("add_tolerations_for_extended_resources", []),
        ("enable_distributed_error_aggregation", False),
    ],
)
def test_every_k8s_key_has_flytes_default(attribute: str, default: Any) -> None:
    assert getattr(DEFAULTS, attribute) == default
    assert getattr(load({}).get(K8S_SECTION), attribute) == default


def test_default_cpu_and_memory_print_as_flyte_writes_them() -> None:
    assert str(DEFAULTS.default_cpus) == "1"
    assert DEFAULTS.default_cpus.milli_value() == 1000
    assert str(DEFAULTS.default_memory) == "1Gi"


@pytest.mark.parametrize(
    ("attribute", "default"),
    [
        ("name", "flyte-copilot-"),
        ("image", "cr.flyte.org/flyteorg/flytecopilot:v0.0.15"),
        ("default_input_path", "/var/flyte/inputs"),
        ("default_output_path", "/var/flyte/outputs"),
        ("input_vol_name", "flyte-inputs"),
        ("output_vol_name", "flyte-outputs"),
        ("start_timeout", timedelta(0)),
        ("timeout", timedelta(hours=1)),
        ("cpu", "500m"),
        ("memory", "128Mi"),
        ("storage", ""),
    ],
)
def test_co_pilot_defaults_are_flytes(attribute: str, default: Any) -> None:
    assert getattr(DEFAULTS.co_pilot, attribute) == default
    assert getattr(CoPilotConfig(), attribute) == default


# -- every key by its Flyte name ------------------------------------------------------------------------

TOLERATION = {"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}
REQUIREMENT = {"key": "x/interruptible", "operator": "In", "values": ["true"]}


@pytest.mark.parametrize(
    ("key", "value", "attribute", "expected"),
    [
        ("inject-finalizer", True, "inject_finalizer", True),
        ("default-annotations", {"a": "b"}, "default_annotations", {"a": "b"}),
        ("default-labels", [{"l1": "v1"}, {"l2": "v2"}], "default_labels", {"l1": "v1", "l2": "v2"}),
        ("default-env-vars", {"N": 5}, "default_env_vars", {"N": "5"}),
        ("default-env-vars-from-env", {"A": "HOST_A"}, "default_env_vars_from_env", {"A": "HOST_A"}),
        ("default-env-from-configmaps", ["cm"], "default_env_from_configmaps", ["cm"]),
        ("default-env-from-secrets", ["s"], "default_env_from_secrets", ["s"]),
        ("default-cpus", "1024m", "default_cpus", Quantity("1024m")),
        ("default-cpus", 2, "default_cpus", Quantity("2")),
        ("default-memory", "2Gi", "default_memory", Quantity("2Gi")),
        ("default-node-selector", {"user": "default"}, "default_node_selector", {"user": "default"}),
        ("default-affinity", {"nodeAffinity": {}}, "default_affinity", {"nodeAffinity": {}}),
        ("scheduler-name", "flyte-scheduler", "scheduler_name", "flyte-scheduler"),
        (
            "interruptible-node-selector",
            {"x/interruptible": "true"},
            "interruptible_node_selector",
            {"x/interruptible": "true"},
        ),
        ("delete-resource-on-finalize", True, "delete_resource_on_finalize", True),
        (
            "create-container-error-grace-period",
            "5m",
            "create_container_error_grace_period",
            timedelta(minutes=5),
        ),
        (
            "create-container-config-error-grace-period",
            "30s",
            "create_container_config_error_grace_period",
            timedelta(seconds=30),
        ),
        ("image-pull-backoff-grace-period", "1h", "image_pull_backoff_grace_period", timedelta(hours=1)),
        ("image-pull-policy", "Always", "image_pull_policy", "Always"),
        ("pod-pending-timeout", "30m", "pod_pending_timeout", timedelta(minutes=30)),
        ("gpu-device-node-label", "gpu/device", "gpu_device_node_label", "gpu/device"),
        ("gpu-partition-size-node-label", "gpu/part", "gpu_partition_size_node_label", "gpu/part"),
        ("gpu-resource-name", "amd.com/gpu", "gpu_resource_name", "amd.com/gpu"),
        (
            "default-pod-security-context",
            {"runAsUser": 1000},
            "default_pod_security_context",
            {"runAsUser": 1000},
        ),
        (
            "default-security-context",
            {"allowPrivilegeEscalation": False},
            "default_security_context",
            {"allowPrivilegeEscalation": False},
        ),
        ("enable-host-networking-pod", False, "enable_host_networking_pod", False),
        (
            "default-pod-dns-config",
            {"nameservers": ["8.8.8.8"]},
            "default_pod_dns_config",
            {"nameservers": ["8.8.8.8"]},
        ),
        ("default-pod-template-name", "base", "default_pod_template_name", "base"),
        ("default-pod-template-resync", "1m", "default_pod_template_resync", timedelta(minutes=1)),
        ("send-object-events", True, "send_object_events", True),
        ("update-base-backoff-duration", 20, "update_base_backoff_duration", 20),
        ("update-backoff-retries", 7, "update_backoff_retries", 7),
        (
            "add-tolerations-for-extended-resources",
            ["nvidia.com/gpu"],
            "add_tolerations_for_extended_resources",
            ["nvidia.com/gpu"],
        ),
        ("enable-distributed-error-aggregation", True, "enable_distributed_error_aggregation", True),
    ],
)
def test_every_k8s_key_is_read_by_its_flyte_name(key: str, value: Any, attribute: str, expected: Any) -> None:
    assert getattr(k8s(**{key: value}), attribute) == expected


def test_tolerations_and_requirements_keep_the_kubernetes_json_names() -> None:
    cfg = k8s(
        **{
            "default-tolerations": [{**TOLERATION, "tolerationSeconds": 30}],
            "interruptible-tolerations": [TOLERATION],
            "interruptible-node-selector-requirement": REQUIREMENT,
            "non-interruptible-node-selector-requirement": {
                "key": "x/interruptible",
                "operator": "DoesNotExist",
            },
            "gpu-unpartitioned-node-selector-requirement": {"key": "p", "operator": "Exists"},
            "gpu-unpartitioned-toleration": {"key": "p", "operator": "Exists", "effect": "NoSchedule"},
        }
    )
    assert cfg.default_tolerations[0].k8s == {**TOLERATION, "tolerationSeconds": 30}
    assert cfg.interruptible_tolerations == [Toleration(**TOLERATION)]
    assert cfg.interruptible_node_selector_requirement == NodeSelectorRequirement(**REQUIREMENT)
    assert cfg.interruptible_node_selector_requirement.k8s == REQUIREMENT
    assert cfg.non_interruptible_node_selector_requirement is not None
    assert cfg.non_interruptible_node_selector_requirement.k8s == {
        "key": "x/interruptible",
        "operator": "DoesNotExist",
    }
    assert cfg.gpu_unpartitioned_node_selector_requirement is not None
    assert cfg.gpu_unpartitioned_toleration is not None
    assert cfg.gpu_unpartitioned_toleration.k8s == {"key": "p", "operator": "Exists", "effect": "NoSchedule"}


def test_co_pilot_keys() -> None:
    cfg = k8s(
        **{
            "co-pilot": {
                "name": "cp-",
                "image": "img:1",
                "start-timeout": "10s",
                "timeout": "2h",
                "cpu": "1",
                "memory": "1Gi",
                "storage": "2Gi",
            }
        }
    )
    assert cfg.co_pilot.name == "cp-"
    assert cfg.co_pilot.image == "img:1"
    assert cfg.co_pilot.start_timeout == timedelta(seconds=10)
    assert cfg.co_pilot.timeout == timedelta(hours=2)
    assert (cfg.co_pilot.cpu, cfg.co_pilot.memory, cfg.co_pilot.storage) == ("1", "1Gi", "2Gi")
    assert cfg.co_pilot.input_vol_name == "flyte-inputs"  # untouched keys keep their defaults


# -- strictness ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("keys", "path"),
    [
        ({"no-such-key": 1}, "plugins.k8s.no-such-key"),
        ({"default_cpus": "1"}, "plugins.k8s.default_cpus"),
        ({"co-pilot": {"nope": "x"}}, "plugins.k8s.co-pilot.nope"),
        (
            {"default-tolerations": [{"key": "a", "tolerance": 1}]},
            "plugins.k8s.default-tolerations.0.tolerance",
        ),
        (
            {"interruptible-node-selector-requirement": {"key": "a", "operator": "In", "value": "x"}},
            "plugins.k8s.interruptible-node-selector-requirement.value",
        ),
    ],
)
def test_an_unknown_k8s_key_is_an_error_naming_the_full_path(keys: dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigError) as err:
        k8s(**keys)
    assert err.value.path == path
    assert "unknown key" in str(err.value)


@pytest.mark.parametrize(
    ("keys", "path"),
    [
        ({"default-cpus": "1K"}, "plugins.k8s.default-cpus"),
        ({"default-cpus": "lots"}, "plugins.k8s.default-cpus"),
        ({"default-cpus": 1.5}, "plugins.k8s.default-cpus"),
        ({"default-cpus": "-1"}, "plugins.k8s.default-cpus"),
        ({"default-memory": "1.2.3Gi"}, "plugins.k8s.default-memory"),
        (
            {"create-container-error-grace-period": "3 minutes"},
            "plugins.k8s.create-container-error-grace-period",
        ),
        ({"image-pull-backoff-grace-period": ""}, "plugins.k8s.image-pull-backoff-grace-period"),
        ({"pod-pending-timeout": "1d"}, "plugins.k8s.pod-pending-timeout"),
        ({"co-pilot": {"timeout": "x"}}, "plugins.k8s.co-pilot.timeout"),
        (
            {"default-tolerations": [{"key": "a", "effect": "Sometimes"}]},
            "plugins.k8s.default-tolerations.0.effect",
        ),
        (
            {"default-tolerations": [{"key": "a", "operator": "Like"}]},
            "plugins.k8s.default-tolerations.0.operator",
        ),
        (
            {"resource-tolerations": {"gpu": {"key": "a", "effect": "Bad"}}},
            "plugins.k8s.resource-tolerations.gpu.0.effect",
        ),
        (
            {"interruptible-node-selector-requirement": {"key": "a", "operator": "Maybe"}},
            "plugins.k8s.interruptible-node-selector-requirement.operator",
        ),
        (
            {"interruptible-node-selector-requirement": {"operator": "In"}},
            "plugins.k8s.interruptible-node-selector-requirement.key",
        ),
        ({"image-pull-policy": "Sometimes"}, "plugins.k8s.image-pull-policy"),
        ({"enable-host-networking-pod": "maybe"}, "plugins.k8s.enable-host-networking-pod"),
        ({"default-env-vars": [{"a": {"b": 1}}]}, "plugins.k8s.default-env-vars.a"),
        ({"default-env-vars": ["a"]}, "plugins.k8s.default-env-vars"),
        ({"default-affinity": "near"}, "plugins.k8s.default-affinity"),
        ({"update-backoff-retries": -1}, "plugins.k8s.update-backoff-retries"),
        ({"update-base-backoff-duration": "ten"}, "plugins.k8s.update-base-backoff-duration"),
    ],
)
def test_a_bad_k8s_value_is_an_error_naming_the_path(keys: dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigError) as err:
        k8s(**keys)
    assert err.value.path == path
    assert str(err.value).startswith(path + ": ")


# -- Flyte's testdata (flyteplugins/go/tasks/testdata, flytek8s/testdata) --------------------------------

FLYTE_TESTDATA_CONFIG = """
plugins:
  # Set of enabled plugins at root level
  enabled-plugins:
    - container
  k8s:
    inject-finalizer: true
    default-annotations:
      - annotationKey1: annotationValue1
      - annotationKey2: annotationValue2
    default-labels:
      - label1: labelValue1
      - label2: labelValue2
    resource-tolerations:
      nvidia.com/gpu:
        key: flyte/gpu
        value: dedicated
        operator: Equal
        effect: NoSchedule
      storage:
        - key: storage
          value: special
          operator: Equal
          effect: PreferNoSchedule
    interruptible-node-selector:
      - x/interruptible: "true"
    interruptible-tolerations:
      - key: x/flyte
        value: interruptible
        operator: Equal
        effect: NoSchedule
    default-env-vars:
      - AWS_METADATA_SERVICE_TIMEOUT: 5
      - AWS_METADATA_SERVICE_NUM_ATTEMPTS: 20
      - FLYTE_AWS_ENDPOINT: "http://minio.flyte:9000"
      - FLYTE_AWS_ACCESS_KEY_ID: minio
      - FLYTE_AWS_SECRET_ACCESS_KEY: miniostorage
    default-pod-security-context:
      runAsUser: 1000
      runAsGroup: 3000
      fsGroup: 2000
    default-security-context:
      allowPrivilegeEscalation: false
    enable-host-networking-pod: true
    default-pod-dns-config:
      options:
        - name: "ndots"
          value: "1"
        - name: "single-request-reopen"
        - name: "timeout"
          value: "1"
        - name: "attempts"
          value: "3"
      nameservers:
        - "8.8.8.8"
        - "8.8.4.4"
      searches:
        - "ns1.svc.cluster-domain.example"
        - "my.dns.search.suffix"
  # plugins.spark is left out: its section belongs to the spark plugin, not to the core sections.
  logs:
    kubernetes-enabled: true
    kubernetes-url: "http://localhost:30082"
"""


@pytest.fixture(scope="module")
def flyte_testdata():
    return load(yaml.safe_load(FLYTE_TESTDATA_CONFIG))


def test_flytes_testdata_config_loads_strictly(flyte_testdata) -> None:
    cfg = flyte_testdata.get(K8S_SECTION)
    assert cfg.inject_finalizer is True
    assert cfg.default_annotations == {
        "annotationKey1": "annotationValue1",
        "annotationKey2": "annotationValue2",
    }
    assert cfg.default_labels == {"label1": "labelValue1", "label2": "labelValue2"}
    assert cfg.interruptible_node_selector == {"x/interruptible": "true"}
    assert [t.k8s for t in cfg.interruptible_tolerations] == [
        {"key": "x/flyte", "operator": "Equal", "value": "interruptible", "effect": "NoSchedule"}
    ]


def test_testdata_resource_tolerations_accept_a_single_map_as_a_list(flyte_testdata) -> None:
    tolerations = flyte_testdata.get(K8S_SECTION).resource_tolerations
    assert [t.k8s for t in tolerations["nvidia.com/gpu"]] == [
        {"key": "flyte/gpu", "operator": "Equal", "value": "dedicated", "effect": "NoSchedule"}
    ]
    assert [t.k8s for t in tolerations["storage"]] == [
        {"key": "storage", "operator": "Equal", "value": "special", "effect": "PreferNoSchedule"}
    ]


def test_testdata_env_var_numbers_load_as_strings(flyte_testdata) -> None:
    assert flyte_testdata.get(K8S_SECTION).default_env_vars == {
        "AWS_METADATA_SERVICE_TIMEOUT": "5",
        "AWS_METADATA_SERVICE_NUM_ATTEMPTS": "20",
        "FLYTE_AWS_ENDPOINT": "http://minio.flyte:9000",
        "FLYTE_AWS_ACCESS_KEY_ID": "minio",
        "FLYTE_AWS_SECRET_ACCESS_KEY": "miniostorage",
    }


def test_testdata_security_contexts_host_network_and_dns(flyte_testdata) -> None:
    cfg = flyte_testdata.get(K8S_SECTION)
    assert cfg.default_pod_security_context == {"runAsUser": 1000, "runAsGroup": 3000, "fsGroup": 2000}
    assert cfg.default_security_context == {"allowPrivilegeEscalation": False}
    assert cfg.enable_host_networking_pod is True
    assert cfg.default_pod_dns_config == {
        "options": [
            {"name": "ndots", "value": "1"},
            {"name": "single-request-reopen"},
            {"name": "timeout", "value": "1"},
            {"name": "attempts", "value": "3"},
        ],
        "nameservers": ["8.8.8.8", "8.8.4.4"],
        "searches": ["ns1.svc.cluster-domain.example", "my.dns.search.suffix"],
    }


def test_testdata_keeps_the_default_cpu_and_memory(flyte_testdata) -> None:
    cfg = flyte_testdata.get(K8S_SECTION)
    assert cfg.default_cpus == Quantity("1000m")
    assert cfg.default_memory == Quantity("1024Mi")


def test_testdata_logs_and_root_enabled_plugins(flyte_testdata) -> None:
    logs = flyte_testdata.get(LOGS_SECTION)
    assert logs.kubernetes_enabled is True
    assert logs.kubernetes_url == "http://localhost:30082"
    assert flyte_testdata.get(PLUGINS_ROOT_SECTION).enabled_plugins == ["container"]


def test_an_unregistered_plugin_section_is_an_unknown_key() -> None:
    document = yaml.safe_load(FLYTE_TESTDATA_CONFIG)
    document["plugins"]["spark"] = {"spark-config-default": [{"spark.blacklist.enabled": "true"}]}
    with pytest.raises(ConfigError) as err:
        load(document)
    assert err.value.path == "plugins.spark"


def test_flytes_incorrect_config_fails_naming_the_unknown_logs_key() -> None:
    # flyteplugins/go/tasks/testdata/incorrect-config.yaml nests the log keys under an extra `config:`.
    document = {"plugins": {"logs": {"config": {"cloudwatch-enabled": True, "kubernetes-enabled": True}}}}
    with pytest.raises(ConfigError) as err:
        load(document)
    assert err.value.path == "plugins.logs.config"
    assert "plugins.logs.config" in str(err.value)


# -- plugins.logs ----------------------------------------------------------------------------------------


def test_logs_defaults_are_flytes() -> None:
    logs = LogConfig()
    assert logs.kubernetes_enabled is True
    assert logs.kubernetes_template_uri == (
        "http://localhost:30082/#!/log/{{ .namespace }}/{{ .podName }}/pod?namespace={{ .namespace }}"
    )
    assert (logs.cloudwatch_enabled, logs.stackdriver_enabled) == (False, False)
    assert logs.templates == []
    assert logs.dynamic_log_links == {}


def test_logs_keys_and_templates() -> None:
    logs = load(
        {
            "plugins": {
                "logs": {
                    "cloudwatch-enabled": True,
                    "cloudwatch-region": "us-east-1",
                    "cloudwatch-log-group": "/flyte",
                    "stackdriver-enabled": True,
                    "gcp-project": "p",
                    "stackdriver-logresourcename": "r",
                    "templates": [
                        {
                            "displayName": "Custom",
                            "templateUris": ["https://logs/{{ .podName }}"],
                            "messageFormat": "JSON",
                        }
                    ],
                    "dynamic-log-links": [
                        {"vscode": {"displayName": "VS Code", "templateUris": ["https://x"]}}
                    ],
                }
            }
        }
    ).get(LOGS_SECTION)
    assert (
        logs.cloudwatch_enabled
        and logs.cloudwatch_region == "us-east-1"
        and logs.cloudwatch_log_group == "/flyte"
    )
    assert logs.stackdriver_enabled and logs.gcp_project == "p" and logs.stackdriver_logresourcename == "r"
    assert logs.templates[0].display_name == "Custom"
    assert logs.templates[0].template_uris == ["https://logs/{{ .podName }}"]
    assert logs.templates[0].message_format == "JSON"
    assert logs.dynamic_log_links["vscode"].display_name == "VS Code"


@pytest.mark.parametrize(
    ("logs", "path"),
    [
        ({"kubernetes-enabled": "sure"}, "plugins.logs.kubernetes-enabled"),
        ({"templates": [{"displayName": "x", "uri": "y"}]}, "plugins.logs.templates.0.uri"),
        ({"templates": [{"messageFormat": "XML"}]}, "plugins.logs.templates.0.messageFormat"),
    ],
)
def test_bad_logs_values_name_the_path(logs: dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigError) as err:
        load({"plugins": {"logs": logs}})
    assert err.value.path == path


def test_the_root_plugins_section_rejects_unknown_keys() -> None:
    with pytest.raises(ConfigError) as err:
        load({"plugins": {"enabled-plugins": ["container"], "bogus": 1}})
    assert err.value.path == "plugins.bogus"


def test_effective_config_prints_flyte_keys_and_go_durations() -> None:
    effective = load({}).effective()["plugins"]["k8s"]
    assert effective["default-cpus"] == "1"
    assert effective["default-memory"] == "1Gi"
    assert effective["create-container-error-grace-period"] == "3m0s"
    assert effective["co-pilot"]["timeout"] == "1h0m0s"
