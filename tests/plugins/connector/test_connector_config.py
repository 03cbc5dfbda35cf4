"""The plugins.connector-service section: defaults, Flyte's key names and map shapes, timeouts."""

from __future__ import annotations

from datetime import timedelta

import pytest

from taskplug.core import ConfigError, ResourceConstraintsSpec, load_platform_config
from taskplug.plugins.connector import (
    CONNECTOR_SECTION,
    DEFAULT_SERVICE_CONFIG,
    ConnectorConfig,
    ConnectorPlugin,
    Deployment,
    FakeConnectorClient,
    plugin_entries,
)


def load(section: dict[str, object]) -> ConnectorConfig:
    return load_platform_config({"plugins": {"connector-service": section}}, [CONNECTOR_SECTION]).get(
        CONNECTOR_SECTION
    )


def test_defaults_match_flyte_connector_defaults() -> None:
    cfg = ConnectorConfig()
    assert cfg.default_connector.endpoint == ""
    assert cfg.default_connector.insecure is True
    assert cfg.default_connector.default_timeout == timedelta(seconds=10)
    assert cfg.default_connector.default_service_config == DEFAULT_SERVICE_CONFIG
    assert cfg.default_connector.timeouts == {}
    assert cfg.supported_task_types == ("task_type_3", "task_type_4")
    assert cfg.connectors == {}
    assert cfg.connector_for_task_types == {}
    assert cfg.poll_interval == timedelta(seconds=10)


def test_the_default_connector_is_what_validating_its_values_gives() -> None:
    validated = Deployment.model_validate(
        {
            "endpoint": "",
            "insecure": True,
            "defaultServiceConfig": DEFAULT_SERVICE_CONFIG,
            "defaultTimeout": "10s",
        }
    )
    assert ConnectorConfig().default_connector == validated
    assert ConnectorConfig().default_connector.model_dump(mode="json", by_alias=True) == validated.model_dump(
        mode="json", by_alias=True
    )


def test_web_api_defaults_are_the_connector_ones() -> None:
    web = ConnectorConfig().web_api
    assert web.resource_quotas == {"default": 1000}
    assert (web.read_rate_limiter.qps, web.read_rate_limiter.burst) == (10, 100)
    assert (web.write_rate_limiter.qps, web.write_rate_limiter.burst) == (10, 100)
    assert web.caching.size == 500000
    assert web.caching.resync_interval == timedelta(seconds=30)
    assert web.caching.workers == 10
    assert web.caching.max_system_failures == 5


def test_an_absent_section_yields_the_defaults() -> None:
    cfg = load_platform_config({}, [CONNECTOR_SECTION]).get(CONNECTOR_SECTION)
    assert cfg == ConnectorConfig()


def test_config_round_trips_through_its_dumped_form() -> None:
    cfg = load(
        {
            "defaultConnector": {"endpoint": "dns:///c:8000", "timeouts": {"GetTask": "1ms"}},
            "connectors": {"x": {"endpoint": "x:80", "insecure": True}},
            "connectorForTaskTypes": {"spark": "x"},
            "pollInterval": "1m",
        }
    )
    dumped = cfg.model_dump(mode="json", by_alias=True)
    assert load(dumped) == cfg


def test_partial_web_api_keeps_the_other_connector_defaults() -> None:
    cfg = load({"webApi": {"caching": {"workers": 3}, "readRateLimiter": {"qps": 50}}})
    assert cfg.web_api.caching.workers == 3
    assert cfg.web_api.caching.size == 500000
    assert cfg.web_api.read_rate_limiter.qps == 50
    assert cfg.web_api.read_rate_limiter.burst == 100
    assert cfg.web_api.resource_quotas == {"default": 1000}


def test_resource_quotas_may_be_a_list_of_single_key_maps_and_replace_the_default() -> None:
    cfg = load({"webApi": {"resourceQuotas": [{"test": 1000}, {"other": 5}]}})
    assert cfg.web_api.resource_quotas == {"test": 1000, "other": 5}


def test_partial_default_connector_keeps_its_defaults() -> None:
    cfg = load({"defaultConnector": {"endpoint": "c:8000"}})
    assert cfg.default_connector.endpoint == "c:8000"
    assert cfg.default_connector.insecure is True
    assert cfg.default_connector.default_timeout == timedelta(seconds=10)
    assert cfg.default_connector.default_service_config == DEFAULT_SERVICE_CONFIG


def test_connector_map_entries_get_go_zero_values_for_missing_keys() -> None:
    cfg = load({"connectors": [{"x": {"endpoint": "x:80"}}, {"y": {"endpoint": "y:80", "insecure": True}}]})
    assert list(cfg.connectors) == ["x", "y"]
    assert cfg.connectors["x"] == Deployment(endpoint="x:80")
    assert cfg.connectors["x"].insecure is False
    assert cfg.connectors["x"].timeout_for("GetTask") is None
    assert cfg.connectors["y"].insecure is True


def test_connector_for_task_types_may_be_a_list_of_single_key_maps() -> None:
    cfg = load({"connectorForTaskTypes": [{"task1": "x"}, {"task2": "y"}]})
    assert cfg.connector_for_task_types == {"task1": "x", "task2": "y"}


def test_resource_constraints_use_the_go_field_names() -> None:
    cfg = load({"resourceConstraints": {"ProjectScopeResourceConstraint": {"Value": 7}}})
    assert cfg.resource_constraints.to_spec() == ResourceConstraintsSpec(
        project_scope=7, namespace_scope=None
    )
    assert ConnectorConfig().resource_constraints.to_spec() == ResourceConstraintsSpec(100, 50)


def test_an_unknown_key_is_an_error_naming_its_path() -> None:
    with pytest.raises(ConfigError) as e:
        load({"defaultConnector": {"endpont": "x"}})
    assert e.value.path == "plugins.connector-service.defaultConnector.endpont"


def test_a_bad_duration_is_an_error_naming_its_path() -> None:
    with pytest.raises(ConfigError) as e:
        load({"connectors": {"x": {"timeouts": {"GetTask": "soon"}}}})
    assert e.value.path.startswith("plugins.connector-service.connectors.x.timeouts")


def test_a_zero_poll_interval_is_rejected() -> None:
    with pytest.raises(ConfigError) as e:
        load({"pollInterval": "0s"})
    assert e.value.path == "plugins.connector-service.pollInterval"


# Flyte's connector plugin_test.go TestPlugin, "test getFinalTimeout": per-operation timeouts win,
# DeleteTask falls back to defaultTimeout.
@pytest.mark.parametrize(
    ("operation", "expected"),
    [("CreateTask", 0.001), ("GetTask", 0.001), ("ExecuteTaskSync", 0.001), ("DeleteTask", 10.0)],
)
def test_operation_timeout_prefers_its_own_entry_then_the_default(operation: str, expected: float) -> None:
    deployment = load(
        {"defaultConnector": {"timeouts": {"CreateTask": "1ms", "GetTask": "1ms", "ExecuteTaskSync": "1ms"}}}
    ).default_connector
    assert deployment.timeout_for(operation) == pytest.approx(expected)


# Flyte's connector plugin_test.go TestPlugin, "test getFinalContext": a configured timeout gives a
# deadline; an empty deployment gives none.
def test_a_zero_timeout_means_no_deadline() -> None:
    assert Deployment().timeout_for("GetTask") is None
    assert (
        Deployment(timeouts={"GetTask": timedelta(0)}, default_timeout=timedelta(seconds=3)).timeout_for(
            "GetTask"
        )
        is None
    )
    assert Deployment(default_timeout=timedelta(seconds=3)).timeout_for("GetTask") == 3.0


def test_timeout_lookup_ignores_the_case_viper_lowered() -> None:
    deployment = load({"defaultConnector": {"timeouts": {"gettask": "2s"}}}).default_connector
    assert deployment.timeout_for("GetTask") == 2.0


# Flyte's connector plugin_test.go TestPlugin: "get config".
def test_get_config_returns_the_web_api_section() -> None:
    cfg = load({"webApi": {"caching": {"size": 10}}})
    plugin = ConnectorPlugin(cfg, client=FakeConnectorClient())
    assert plugin.get_config() == cfg.web_api
    assert plugin.get_config().caching.size == 10


# Flyte's connector plugin_test.go TestPlugin: "get ResourceRequirements".
async def test_resource_requirements_are_the_default_namespace_and_the_configured_constraints() -> None:
    from connector_helpers import make_tctx
    from flyteidl.core import tasks_pb2

    plugin = ConnectorPlugin(ConnectorConfig(), client=FakeConnectorClient())
    namespace, spec = await plugin.resource_requirements(make_tctx(tasks_pb2.TaskTemplate(type="x")))
    assert namespace == "default"
    assert spec == ResourceConstraintsSpec(project_scope=100, namespace_scope=50)


# Flyte's connector plugin_test.go TestPlugin: "test newConnectorPlugin".
def test_plugin_entry_is_connector_service_with_a_loader_and_its_config_section() -> None:
    [entry] = plugin_entries()
    assert entry.id == "connector-service"
    assert entry.plugin_loader is not None
    assert entry.config_sections == (CONNECTOR_SECTION,)
    assert entry.supported_task_types == ("task_type_3", "task_type_4")
    entry.validate()
