"""The ``connector-service`` web-API plugin: Flyte connectors (agents) over gRPC.

Follows flyteplugins/go/tasks/plugins/webapi/connector (Flyte 1). Registered through the entry point
``connector = "taskplug.plugins.connector:plugin_entries"`` in the ``taskplug.plugins`` group.

The registration (``plugin_entries``) loads at once; the config's models, the plugin, its gRPC client and the
fake load on first use (PEP 562), so that discovering plugins — which every command does — never imports them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from taskplug.core import lazy_exports
from taskplug.plugins.connector._entries import (
    CONNECTOR_SECTION,
    config_from_setup,
    load_connector_plugin,
    pipeline_pod_spec,
    plugin_entries,
)
from taskplug.plugins.connector._id import ID

if TYPE_CHECKING:
    from taskplug.plugins.connector._client import (
        ChannelFactory,
        Connection,
        ConnectorClient,
        ConnectorRpcError,
        GrpcConnectorClient,
        dial,
    )
    from taskplug.plugins.connector._config import (
        DEFAULT_SERVICE_CONFIG,
        FLYTEIDL,
        FLYTEIDL2,
        ConnectorConfig,
        Deployment,
        ResourceConstraint,
        ResourceConstraints,
    )
    from taskplug.plugins.connector._connection import (
        SECRET_ENV_PREFIX,
        EnvSecretManager,
        connection_of,
        resolve_connection,
    )
    from taskplug.plugins.connector._fake import FakeConnectorClient, RecordedCall
    from taskplug.plugins.connector._plugin import (
        ConnectorPlugin,
        ConnectorResourceMeta,
        PodSpecBuilder,
        ResourceWrapper,
        TaskCategory,
        passthrough_pod_spec,
        resource_phase_info,
        task_execution_metadata,
    )
    from taskplug.plugins.connector._registry import Connector, ConnectorRegistry, build_registry, discover

__all__ = [
    "CONNECTOR_SECTION",
    "DEFAULT_SERVICE_CONFIG",
    "FLYTEIDL",
    "FLYTEIDL2",
    "ID",
    "SECRET_ENV_PREFIX",
    "ChannelFactory",
    "Connection",
    "Connector",
    "ConnectorClient",
    "ConnectorConfig",
    "ConnectorPlugin",
    "ConnectorRegistry",
    "ConnectorResourceMeta",
    "ConnectorRpcError",
    "Deployment",
    "EnvSecretManager",
    "FakeConnectorClient",
    "GrpcConnectorClient",
    "PodSpecBuilder",
    "RecordedCall",
    "ResourceConstraint",
    "ResourceConstraints",
    "ResourceWrapper",
    "TaskCategory",
    "build_registry",
    "config_from_setup",
    "connection_of",
    "dial",
    "discover",
    "load_connector_plugin",
    "passthrough_pod_spec",
    "pipeline_pod_spec",
    "plugin_entries",
    "resolve_connection",
    "resource_phase_info",
    "task_execution_metadata",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "DEFAULT_SERVICE_CONFIG": "taskplug.plugins.connector._config",
        "FLYTEIDL": "taskplug.plugins.connector._config",
        "FLYTEIDL2": "taskplug.plugins.connector._config",
        "SECRET_ENV_PREFIX": "taskplug.plugins.connector._connection",
        "ChannelFactory": "taskplug.plugins.connector._client",
        "Connection": "taskplug.plugins.connector._client",
        "Connector": "taskplug.plugins.connector._registry",
        "ConnectorClient": "taskplug.plugins.connector._client",
        "ConnectorConfig": "taskplug.plugins.connector._config",
        "ConnectorPlugin": "taskplug.plugins.connector._plugin",
        "ConnectorRegistry": "taskplug.plugins.connector._registry",
        "ConnectorResourceMeta": "taskplug.plugins.connector._plugin",
        "ConnectorRpcError": "taskplug.plugins.connector._client",
        "Deployment": "taskplug.plugins.connector._config",
        "EnvSecretManager": "taskplug.plugins.connector._connection",
        "FakeConnectorClient": "taskplug.plugins.connector._fake",
        "GrpcConnectorClient": "taskplug.plugins.connector._client",
        "PodSpecBuilder": "taskplug.plugins.connector._plugin",
        "RecordedCall": "taskplug.plugins.connector._fake",
        "ResourceConstraint": "taskplug.plugins.connector._config",
        "ResourceConstraints": "taskplug.plugins.connector._config",
        "ResourceWrapper": "taskplug.plugins.connector._plugin",
        "TaskCategory": "taskplug.plugins.connector._plugin",
        "build_registry": "taskplug.plugins.connector._registry",
        "connection_of": "taskplug.plugins.connector._connection",
        "dial": "taskplug.plugins.connector._client",
        "discover": "taskplug.plugins.connector._registry",
        "passthrough_pod_spec": "taskplug.plugins.connector._plugin",
        "resolve_connection": "taskplug.plugins.connector._connection",
        "resource_phase_info": "taskplug.plugins.connector._plugin",
        "task_execution_metadata": "taskplug.plugins.connector._plugin",
    },
)
