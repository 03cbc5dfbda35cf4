"""The package surface: exports, the entry's loader, and the layer rule (core and webapi only)."""

from __future__ import annotations

import ast
from pathlib import Path

from taskplug.core import FakeClock, PlatformConfig, SetupContext, load_platform_config
from taskplug.plugins import connector
from taskplug.plugins.connector import CONNECTOR_SECTION, ConnectorConfig, ConnectorPlugin, plugin_entries

SOURCE = Path(connector.__file__).parent


def test_every_exported_name_exists_once() -> None:
    # The order is ruff's (RUF022, isort-style), checked by the linter.
    assert len(set(connector.__all__)) == len(connector.__all__)
    for name in connector.__all__:
        assert hasattr(connector, name), name


def test_the_plugin_imports_only_core_webapi_and_the_pod_pipeline_from_taskplug() -> None:
    imported: set[str] = set()
    for path in SOURCE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module)
            elif isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
    taskplug_modules = {m for m in imported if m.startswith("taskplug")}
    # The pod pipeline builds k8s_pod tasks' pod specs, as Flyte's connector plugin calls flytek8s.
    allowed = {"taskplug.core", "taskplug.webapi", "taskplug.k8s"}
    assert all(m in allowed or m.startswith("taskplug.plugins.connector") for m in taskplug_modules), (
        taskplug_modules
    )


async def test_the_loader_reads_the_section_from_the_platform_config_and_starts_discovery() -> None:
    platform = load_platform_config(
        {"plugins": {"connector-service": {"supportedTaskTypes": ["mine"]}}}, [CONNECTOR_SECTION]
    )
    assert isinstance(platform, PlatformConfig)
    [entry] = plugin_entries()
    clock = FakeClock()
    plugin = await entry.plugin_loader(
        SetupContext(enqueue_owner=lambda ns, name: None, clock=clock, config=platform)
    )
    assert isinstance(plugin, ConnectorPlugin)
    try:
        assert plugin.discoveries == 1
        assert plugin.handles_task_type("mine")
        assert clock.sleepers == 1
    finally:
        await plugin.stop()


async def test_the_loader_uses_the_section_it_is_given_and_defaults_without_a_config() -> None:
    [entry] = plugin_entries()
    cfg = ConnectorConfig.model_validate({"supportedTaskTypes": ["direct"]})
    platform = load_platform_config({}, [CONNECTOR_SECTION]).with_section(CONNECTOR_SECTION, cfg)
    plugin = await entry.plugin_loader(
        SetupContext(enqueue_owner=lambda ns, name: None, clock=FakeClock(), config=platform)
    )
    assert isinstance(plugin, ConnectorPlugin)
    assert plugin.config is cfg
    await plugin.stop()
    plugin = await entry.plugin_loader(SetupContext(enqueue_owner=lambda ns, name: None, clock=FakeClock()))
    assert isinstance(plugin, ConnectorPlugin)
    assert plugin.config == ConnectorConfig()
    await plugin.stop()
