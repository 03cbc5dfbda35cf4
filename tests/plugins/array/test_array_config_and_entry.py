"""``plugins.k8s-array`` (Flyte's array/k8s/config.go) and the plugin's registration and
loading (Flyte's ``GetNewExecutorPlugin``)."""

from __future__ import annotations

from typing import Any

import pytest
from array_helpers import FakeKube

from taskplug.core import (
    ConfigError,
    ErrorCode,
    FakeClock,
    PluginError,
    PluginKind,
    PluginRegistry,
    SetupContext,
    load_plugin,
)
from taskplug.executor import Platform
from taskplug.plugins.array import (
    ARRAY_TASK_TYPE,
    K8S_ARRAY_SECTION,
    PLUGIN_ID,
    ArrayPlugin,
    K8sArrayConfig,
    plugin_entries,
)


def config_of(section: dict[str, Any]) -> K8sArrayConfig:
    return Platform.load(document={"plugins": {"k8s-array": section}}).config.get(K8S_ARRAY_SECTION)


def test_defaults_are_flytes() -> None:
    config = config_of({})
    assert config.scheduler == ""
    assert (config.max_error_length, config.max_array_job_size) == (1000, 5000)
    assert not config.resource_config.is_set
    assert not config.remote_cluster_config.enabled
    assert (config.node_selector, config.tolerations, config.namespace_template) == ({}, [], "")
    for assembler in (config.output_assembler, config.error_assembler):
        assert (assembler.workers, assembler.max_retries, assembler.max_items) == (10, 5, 100000)
    # The log links default to Flyte's global default: a Kubernetes dashboard link.
    assert config.logs.config.kubernetes_enabled
    assert "{{ .podName }}" in config.logs.config.kubernetes_template_uri


def test_every_key_is_read_by_flytes_name() -> None:
    config = config_of(
        {
            "scheduler": "volcano",
            "maxErrorLength": 200,
            "maxArrayJobSize": 10,
            "resourceConfig": {"primaryLabel": "pods", "limit": 4},
            "remoteClusterConfig": {
                "name": "other",
                "endpoint": "https://other:6443",
                "auth": {"type": "token", "tokenPath": "/t", "certPath": "/c"},
                "enabled": False,
            },
            "node-selector": {"pool": "arrays"},
            "tolerations": [{"key": "arrays", "operator": "Exists", "effect": "NoSchedule"}],
            "namespaceTemplate": "{{.namespace}}-maps",
            "OutputAssembler": {"workers": 2, "maxRetries": 1, "maxItems": 50},
            "ErrorAssembler": {"workers": 3, "maxRetries": 0, "maxItems": 60},
            "logs": {"config": {"kubernetes-enabled": False, "cloudwatch-enabled": True}},
        }
    )
    assert (config.scheduler, config.max_error_length, config.max_array_job_size) == ("volcano", 200, 10)
    assert (config.resource_config.primary_label, config.resource_config.limit) == ("pods", 4)
    assert config.resource_config.is_set
    assert config.remote_cluster_config.auth.token_path == "/t"
    assert config.node_selector == {"pool": "arrays"}
    assert [t.k8s for t in config.tolerations] == [
        {"key": "arrays", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert config.namespace_template == "{{.namespace}}-maps"
    assert (config.output_assembler.workers, config.output_assembler.max_retries) == (2, 1)
    assert (config.error_assembler.max_items, config.error_assembler.max_retries) == (60, 0)
    assert (config.logs.config.kubernetes_enabled, config.logs.config.cloudwatch_enabled) == (False, True)


@pytest.mark.parametrize(
    ("section", "path"),
    [
        ({"maxArraySize": 3}, "plugins.k8s-array.maxArraySize"),
        ({"max-array-job-size": 3}, "plugins.k8s-array.max-array-job-size"),  # Flyte's key is camelCase
        ({"OutputAssembler": {"maxItems": 0}}, "plugins.k8s-array.OutputAssembler.maxItems"),
        ({"resourceConfig": {"limit": "many"}}, "plugins.k8s-array.resourceConfig.limit"),
        ({"tolerations": [{"operator": "Sometimes"}]}, "plugins.k8s-array.tolerations.0.operator"),
    ],
)
def test_bad_keys_and_values_name_their_path(section: dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigError) as raised:
        config_of(section)
    assert raised.value.path == path


@pytest.mark.parametrize(
    ("section", "is_set"),
    [
        ({}, False),
        ({"primaryLabel": "pods"}, True),
        ({"limit": 3}, True),
        ({"primaryLabel": "", "limit": 0}, False),
    ],
)
def test_a_resource_config_is_set_when_either_key_is(section: dict[str, Any], is_set: bool) -> None:
    assert config_of({"resourceConfig": section}).resource_config.is_set is is_set


def test_the_plugin_is_registered_through_its_entry_point_as_a_core_plugin() -> None:
    registry = PluginRegistry.discover()
    [entry] = [e for e in registry.entries if e.id == PLUGIN_ID]
    assert entry.kind is PluginKind.CORE
    assert entry.registered_task_types == (ARRAY_TASK_TYPE,) == ("container_array",)
    assert not entry.is_default
    assert K8S_ARRAY_SECTION in entry.config_sections


class Registrar:
    def __init__(self) -> None:
        self.quotas: list[tuple[str, int]] = []

    async def register_resource_quota(self, namespace: str, quota: int) -> None:
        self.quotas.append((namespace, quota))


def setup(section: dict[str, Any], **values: Any) -> SetupContext:
    platform = Platform.load(document={"plugins": {"k8s-array": section}})
    return SetupContext(
        enqueue_owner=lambda ns, name: None,
        kube_client=values.pop("kube_client", FakeKube()),
        config=platform.config,
        clock=FakeClock(),
        **values,
    )


async def test_loading_registers_the_resource_quota() -> None:
    registrar = Registrar()
    [entry] = plugin_entries()
    plugin = await load_plugin(
        entry, setup({"resourceConfig": {"primaryLabel": "pods", "limit": 7}}, resource_registrar=registrar)
    )
    assert isinstance(plugin, ArrayPlugin)
    assert registrar.quotas == [("pods", 7)]
    assert plugin.get_properties().disable_node_level_caching
    await plugin.aclose()


async def test_loading_without_a_resource_config_registers_nothing() -> None:
    registrar = Registrar()
    [entry] = plugin_entries()
    plugin = await load_plugin(entry, setup({}, resource_registrar=registrar))
    assert registrar.quotas == []
    assert isinstance(plugin, ArrayPlugin)
    await plugin.aclose()


@pytest.mark.parametrize(
    ("section", "values", "message"),
    [
        (
            {"resourceConfig": {"primaryLabel": "pods", "limit": 2}},
            {},
            "resourceConfig needs a resource manager",
        ),
        ({"remoteClusterConfig": {"enabled": True}}, {}, "remote cluster"),
        ({}, {"kube_client": None}, "needs a Kubernetes client"),
    ],
)
async def test_loading_fails_for_what_it_cannot_do(
    section: dict[str, Any], values: dict[str, Any], message: str
) -> None:
    [entry] = plugin_entries()
    with pytest.raises(PluginError) as raised:
        await load_plugin(entry, setup(section, **values))
    assert raised.value.code == ErrorCode.PLUGIN_INITIALIZATION_FAILED
    assert message in raised.value.message


def test_the_k8s_array_plugin_is_enabled_by_a_config_that_names_it() -> None:
    platform = Platform.load(
        document={"tasks": {"task-plugins": {"enabled-plugins": ["container", "k8s-array"]}}}
    )
    assert PLUGIN_ID in [e.id for e in platform.enabled_entries()]
