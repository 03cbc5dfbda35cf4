"""Connector discovery (ListAgents), the registry rules, routing, and the background rediscovery."""

from __future__ import annotations

import logging

import pytest
from flyteidl.admin import agent_pb2

from taskplug.core import FakeClock
from taskplug.plugins.connector import (
    ConnectorConfig,
    ConnectorPlugin,
    ConnectorRpcError,
    Deployment,
    FakeConnectorClient,
    build_registry,
    discover,
)


def agent(
    *categories: str | tuple[str, int], is_sync: bool = False, deprecated: tuple[str, ...] = ()
) -> agent_pb2.Agent:
    cats = [c if isinstance(c, tuple) else (c, 0) for c in categories]
    return agent_pb2.Agent(
        name="A",
        is_sync=is_sync,
        supported_task_types=list(deprecated),
        supported_task_categories=[agent_pb2.TaskCategory(name=n, version=v) for n, v in cats],
    )


X, Y, Z = Deployment(endpoint="x:80"), Deployment(endpoint="y:80"), Deployment(endpoint="z:80")


def config(**kwargs: object) -> ConnectorConfig:
    return ConnectorConfig.model_validate(kwargs)


# Flyte's connector plugin_test.go TestInitializeConnectorRegistry.
async def test_registry_holds_discovered_categories_and_the_configured_supported_types() -> None:
    cfg = config(defaultConnector={"endpoint": "c:80"})
    client = FakeConnectorClient(agents={"c:80": [agent("task1", "task2", "task3")]})
    registry = await discover(cfg, client)
    assert {"task1", "task2", "task3", "task_type_3", "task_type_4"} <= registry.task_types
    assert registry.routes["task1"][0].deployment.endpoint == "c:80"
    assert registry.routes["task_type_3"][0].deployment == cfg.default_connector


# Flyte's connector plugin_test.go TestPlugin: "test getFinalConnector".
@pytest.mark.parametrize(
    ("task_type", "endpoint"),
    [("spark", "localhost:80"), ("foo", "default:80"), ("bar", "default:80")],
)
def test_routing_uses_the_registry_then_the_default_connector(task_type: str, endpoint: str) -> None:
    cfg = config(
        defaultConnector={"endpoint": "default:80"},
        connectors={"spark_connector": {"endpoint": "localhost:80"}},
        connectorForTaskTypes={"spark": "spark_connector", "bar": "nonexistent"},
        supportedTaskTypes=[],
    )
    registry = build_registry(cfg, [])
    assert "bar" not in registry.routes
    assert registry.select(task_type, 0, cfg.default_connector).deployment.endpoint == endpoint


def test_routing_matches_the_task_type_version() -> None:
    cfg = config(defaultConnector={"endpoint": "default:80"}, supportedTaskTypes=[])
    registry = build_registry(cfg, [(X, [agent(("sidecar", 2), is_sync=True)])])
    chosen = registry.select("sidecar", 2, cfg.default_connector)
    assert (chosen.deployment, chosen.is_sync) == (X, True)
    fallback = registry.select("sidecar", 0, cfg.default_connector)
    assert (fallback.deployment.endpoint, fallback.is_sync) == ("default:80", False)


# Flyte's connector client_test.go TestAgentForTaskTypesAlwaysOverwrite.
def test_connector_for_task_types_wins_over_discovery() -> None:
    cfg = config(
        connectors={"x": {"endpoint": "x:80"}, "y": {"endpoint": "y:80"}, "z": {"endpoint": "z:80"}},
        connectorForTaskTypes={"task1": "x"},
    )
    listings = [(d, [agent("task1", is_sync=True)]) for d in (cfg.connectors["y"], cfg.connectors["z"])]
    registry = build_registry(cfg, listings)
    forced = registry.routes["task1"][0]
    assert forced.deployment.endpoint == "x:80"
    assert forced.is_sync is False


def test_deprecated_supported_task_types_register_version_zero() -> None:
    registry = build_registry(
        config(supportedTaskTypes=[]), [(X, [agent(deprecated=("legacy",), is_sync=True)])]
    )
    assert dict(registry.routes["legacy"]) == {0: registry.routes["legacy"][0]}
    assert registry.routes["legacy"][0].is_sync is True


def test_a_later_deployment_replaces_the_version_map_of_an_earlier_one() -> None:
    registry = build_registry(
        config(supportedTaskTypes=[]), [(X, [agent(("t", 0), ("t", 1))]), (Y, [agent(("t", 3))])]
    )
    assert set(registry.routes["t"]) == {3}
    assert registry.routes["t"][3].deployment == Y


def test_supported_task_types_do_not_override_discovered_ones() -> None:
    registry = build_registry(config(supportedTaskTypes=["task_type_3"]), [(X, [agent("task_type_3")])])
    assert registry.routes["task_type_3"][0].deployment == X


async def test_discovery_asks_the_default_connector_only_when_it_has_an_endpoint() -> None:
    client = FakeConnectorClient(agents={"x:80": [agent("a")]})
    await discover(config(connectors={"x": {"endpoint": "x:80"}}), client)
    assert [c.endpoint for c in client.calls_to("ListAgents")] == ["x:80"]


async def test_discovery_uses_the_list_connectors_timeout_of_each_deployment() -> None:
    cfg = config(
        defaultConnector={"endpoint": "c:80", "timeouts": {"ListConnectors": "3s", "ListAgents": "1s"}},
        connectors={"x": {"endpoint": "x:80"}},
    )
    client = FakeConnectorClient(agents={"c:80": [], "x:80": []})
    await discover(cfg, client)
    assert [(c.endpoint, c.deadline) for c in client.calls_to("ListAgents")] == [
        ("c:80", 3.0),
        ("x:80", None),
    ]


async def test_discovery_skips_unimplemented_and_failing_deployments(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cfg = config(
        connectors={
            "old": {"endpoint": "old:80"},
            "down": {"endpoint": "down:80"},
            "ok": {"endpoint": "ok:80"},
        },
        supportedTaskTypes=[],
    )
    client = FakeConnectorClient(
        agents={"old:80": ConnectorRpcError("Unimplemented", "unknown service"), "ok:80": [agent("good")]}
    )
    with caplog.at_level(logging.WARNING):
        registry = await discover(cfg, client)
    assert registry.task_types == {"good"}
    assert "does not implement the metadata service" in caplog.text
    assert "down:80" in caplog.text


# Flyte's connector client_test.go TestInitializeClients (the channel side is covered with real gRPC in
# test_connector_grpc.py).
async def test_every_deployment_is_asked_for_its_connectors() -> None:
    cfg = config(connectors={"x": {"endpoint": "x:80"}, "y": {"endpoint": "y:80"}})
    client = FakeConnectorClient(agents={"x:80": [agent("a")], "y:80": [agent("b")]})
    registry = await discover(cfg, client)
    assert {c.endpoint for c in client.calls_to("ListAgents")} == {"x:80", "y:80"}
    assert registry.routes["a"][0].deployment.endpoint == "x:80"
    assert registry.routes["b"][0].deployment.endpoint == "y:80"


# -- background rediscovery ----------------------------------------------------------------------


async def test_registry_is_rebuilt_every_poll_interval_on_the_injected_clock() -> None:
    clock = FakeClock()
    client = FakeConnectorClient(agents={"c:80": [agent("first")]})
    plugin = ConnectorPlugin(
        config(defaultConnector={"endpoint": "c:80"}, pollInterval="10s"), client=client, clock=clock
    )
    await plugin.start()
    try:
        assert plugin.discoveries == 1
        assert plugin.handles_task_type("first")
        client.agents["c:80"] = [agent("second")]

        await clock.advance(9)
        assert plugin.discoveries == 1
        assert not plugin.handles_task_type("second")

        await clock.advance(1)
        assert plugin.discoveries == 2
        assert plugin.handles_task_type("second")
        assert not plugin.handles_task_type("first")

        await clock.advance(10)
        assert plugin.discoveries == 3
    finally:
        await plugin.stop()


async def test_a_failing_rediscovery_keeps_the_fallbacks_and_the_loop_alive() -> None:
    clock = FakeClock()
    client = FakeConnectorClient(agents={"c:80": [agent("a")]})
    plugin = ConnectorPlugin(config(defaultConnector={"endpoint": "c:80"}), client=client, clock=clock)
    await plugin.start()
    try:
        client.agents["c:80"] = ConnectorRpcError("Unavailable", "connection refused")
        await clock.advance(10)
        assert plugin.discoveries == 2
        assert not plugin.handles_task_type("a")  # discovery found nothing: only configured routes remain
        assert plugin.handles_task_type("task_type_3")
        client.agents["c:80"] = [agent("a")]
        await clock.advance(10)
        assert plugin.handles_task_type("a")
    finally:
        await plugin.stop()


async def test_stop_ends_the_poller_and_closes_the_client() -> None:
    clock = FakeClock()
    client = FakeConnectorClient(agents={})
    plugin = ConnectorPlugin(config(), client=client, clock=clock)
    async with plugin:
        assert clock.sleepers == 1
    assert client.closed
    assert clock.sleepers == 0
    await clock.advance(100)
    assert plugin.discoveries == 1


async def test_start_twice_runs_one_poller() -> None:
    clock = FakeClock()
    plugin = ConnectorPlugin(config(), client=FakeConnectorClient(), clock=clock)
    await plugin.start()
    await plugin.start()
    try:
        assert clock.sleepers == 1
    finally:
        await plugin.stop()


def test_before_start_only_configured_routes_are_known() -> None:
    plugin = ConnectorPlugin(config(), client=FakeConnectorClient())
    assert plugin.task_types == {"task_type_3", "task_type_4"}
    assert not plugin.handles_task_type("sensor")
