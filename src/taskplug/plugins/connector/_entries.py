"""The connector plugin's registration: what the ``taskplug.plugins`` entry point loads.

Discovery runs on every command (``taskplug render`` too), so this module imports neither the plugin nor its
config's models: the plugin itself — gRPC, flyteidl's admin and service messages — is imported by the loader,
which runs only when an executor loads the plugin; the ``plugins.connector-service`` models when a command
reads the section.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from flyteidl.core import tasks_pb2
from google.protobuf import struct_pb2

from taskplug.core import ConfigSection, SetupContext, TaskExecutionContext
from taskplug.k8s import PlatformPodConfig, to_k8s_pod_spec
from taskplug.plugins.connector._id import DEFAULT_SUPPORTED_TASK_TYPES, ID
from taskplug.webapi import WebApiPluginEntry

if TYPE_CHECKING:
    from taskplug.plugins.connector._config import ConnectorConfig
    from taskplug.plugins.connector._plugin import ConnectorPlugin, PodSpecBuilder

__all__ = [
    "CONNECTOR_SECTION",
    "config_from_setup",
    "load_connector_plugin",
    "pipeline_pod_spec",
    "plugin_entries",
]

CONNECTOR_SECTION: Final[ConfigSection[ConnectorConfig]] = ConfigSection(
    "plugins.connector-service", "taskplug.plugins.connector._config:ConnectorConfig"
)
"""The ``plugins.connector-service`` config section (:class:`~taskplug.plugins.connector.ConnectorConfig`)."""


def config_from_setup(setup: SetupContext) -> ConnectorConfig:
    """The connector section of the platform's config; the defaults when the setup carries no config."""
    if setup.config is not None:
        return setup.config.get(CONNECTOR_SECTION)
    return CONNECTOR_SECTION.model()


def pipeline_pod_spec(platform: PlatformPodConfig) -> PodSpecBuilder:
    """The pod spec a ``k8s_pod`` task sends its connector, built exactly as the pod plugin builds its pod
    (Flyte's connector plugin calls flytek8s.ToK8sPodSpec)."""

    def build(tctx: TaskExecutionContext, template: tasks_pb2.TaskTemplate) -> struct_pb2.Struct:
        spec = struct_pb2.Struct()
        spec.update(to_k8s_pod_spec(tctx, platform).spec)
        return spec

    return build


async def load_connector_plugin(setup: SetupContext) -> ConnectorPlugin:
    """The entry's loader: build the plugin and run its first discovery (the poller keeps it current)."""
    # Imported here, not at the top: see the module docstring.
    from taskplug.plugins.connector._plugin import ConnectorPlugin, passthrough_pod_spec

    builder: PodSpecBuilder = passthrough_pod_spec
    if setup.config is not None:
        builder = pipeline_pod_spec(PlatformPodConfig.from_config(setup.config, setup.pod_templates))
    plugin = ConnectorPlugin(
        config_from_setup(setup),
        clock=setup.clock,
        pod_spec_builder=builder,
        secret_manager=setup.secret_manager,
    )
    await plugin.start()
    return plugin


def plugin_entries() -> list[WebApiPluginEntry]:
    """The entry-point hook. The registered task types are the default ``supportedTaskTypes``; the live set
    (what discovery found) is answered by :meth:`ConnectorPlugin.handles_task_type`."""
    return [
        WebApiPluginEntry(
            id=ID,
            supported_task_types=DEFAULT_SUPPORTED_TASK_TYPES,
            plugin_loader=load_connector_plugin,
            config_sections=(CONNECTOR_SECTION,),
        )
    ]
