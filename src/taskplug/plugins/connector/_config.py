"""The ``plugins.connector-service`` config section.

Follows flyteplugins/go/tasks/plugins/webapi/connector/config.go. Keys are Flyte's camelCase names; the
resource constraints use the Go field names (``ProjectScopeResourceConstraint: {Value: 100}``) because the Go
struct has no json tags. Maps may also be written as lists of single-key maps, as viper accepts.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from datetime import timedelta
from typing import Annotated, Any, Final, Literal

from pydantic import BeforeValidator, ConfigDict, Field, field_validator

from taskplug.core import (
    GoDuration,
    ResourceConstraintsSpec,
    StrictModel,
    list_of_maps_to_map,
)
from taskplug.plugins.connector._id import DEFAULT_SUPPORTED_TASK_TYPES
from taskplug.webapi import PluginConfig

__all__ = [
    "DEFAULT_SERVICE_CONFIG",
    "FLYTEIDL",
    "FLYTEIDL2",
    "ConnectorConfig",
    "Deployment",
    "ResourceConstraint",
    "ResourceConstraints",
]

DEFAULT_SERVICE_CONFIG: Final = '{"loadBalancingConfig": [{"round_robin":{}}]}'

FLYTEIDL: Final = "flyteidl"
"""Flyte 1's connector protocol: ``flyteidl.service.AsyncAgentService``, ``SyncAgentService`` and
``AgentMetadataService`` (flytekit's ``pyflyte serve connector``)."""
FLYTEIDL2: Final = "flyteidl2"
"""Flyte 2's connector protocol: ``flyteidl2.connector.AsyncConnectorService`` and
``ConnectorMetadataService`` (the ``flyte`` SDK's ``c0``); no synchronous service."""

Protocol = Literal["flyteidl", "flyteidl2"]


class _CamelModel(StrictModel):
    # The web-API sections use Flyte's camelCase keys (explicit aliases), not the kebab-case of plugins.k8s.
    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=True, alias_generator=None, arbitrary_types_allowed=True
    )


class Deployment(_CamelModel):
    """Where one connector deployment listens and how to call it: ``defaultConnector`` and each value of
    ``connectors`` in ``plugins.connector-service``.

    The field defaults are Go's zero values: that is what an entry of ``connectors`` gets for the keys it
    leaves out (viper decodes map values into fresh structs). ``defaultConnector`` starts from its own
    defaults instead (:data:`DEFAULT_CONNECTOR`: insecure, round-robin, a 10 s default timeout).
    """

    endpoint: str = ""
    """gRPC target (``host:port``, ``dns:///host:port``)."""
    protocol: Protocol = FLYTEIDL
    """Which connector services the deployment serves: ``flyteidl`` (Flyte 1, flytekit's connector server) or
    ``flyteidl2`` (Flyte 2, the ``flyte`` SDK's ``c0``). Not a key of Flyte's: each Flyte release speaks one."""
    insecure: bool = False
    """Plaintext when true; TLS with the system root certificates otherwise."""
    default_service_config: str = Field(default="", alias="defaultServiceConfig")
    """gRPC service-config JSON applied to the channel (load balancing, retries)."""
    timeouts: Annotated[dict[str, GoDuration], BeforeValidator(list_of_maps_to_map)] = Field(
        default_factory=dict
    )
    """Operation (``CreateTask``, ``GetTask``, ``DeleteTask``, ``ExecuteTaskSync``, ``ListConnectors``,
    ``GetTaskLogs``, ``GetTaskMetrics``) → deadline of its calls, a Go duration; zero means no deadline."""
    default_timeout: GoDuration = Field(default=timedelta(0), alias="defaultTimeout")
    """Deadline, a Go duration, of operations without an entry in ``timeouts``; zero means no deadline."""

    def timeout_for(self, operation: str) -> float | None:
        """Seconds allowed for ``operation``, or None for no deadline (Flyte's getFinalTimeout).

        Deviation: the operation name is matched case-insensitively, because viper lower-cases map keys
        read from YAML and Flyte's exact-case lookup then never finds ``GetTask``.
        """
        value = self.timeouts.get(operation)
        if value is None:
            lowered = operation.lower()
            value = next((v for k, v in self.timeouts.items() if k.lower() == lowered), self.default_timeout)
        seconds = value.total_seconds()
        return seconds if seconds > 0 else None


# Laid in place rather than validated: these values are of their fields' types, and validating them would build
# Deployment's validator when the module is imported, on every command (plugin discovery imports it).
DEFAULT_CONNECTOR: Final = Deployment.model_construct(
    endpoint="",
    insecure=True,
    default_service_config=DEFAULT_SERVICE_CONFIG,
    default_timeout=timedelta(seconds=10),
)


class ResourceConstraint(_CamelModel):
    """One cap of ``resourceConstraints`` (Go's ``core.ResourceConstraint``)."""

    value: int = Field(alias="Value")
    """Jobs that may hold an allocation token at once within the scope (a count; the check is
    ``count < Value``)."""


class ResourceConstraints(_CamelModel):
    """``plugins.connector-service.resourceConstraints``: Flyte's ResourceConstraintsSpec as written in
    YAML (Go field names; flyteplugins/go/tasks/pluginmachinery/core/resource_manager.go)."""

    project_scope: ResourceConstraint | None = Field(default=None, alias="ProjectScopeResourceConstraint")
    """Cap on the tokens held by one project's executions; unset: no cap."""
    namespace_scope: ResourceConstraint | None = Field(default=None, alias="NamespaceScopeResourceConstraint")
    """Cap on the tokens held by one project and domain's executions; unset: no cap."""

    def to_spec(self) -> ResourceConstraintsSpec:
        return ResourceConstraintsSpec(
            project_scope=self.project_scope.value if self.project_scope is not None else None,
            namespace_scope=self.namespace_scope.value if self.namespace_scope is not None else None,
        )


@functools.cache
def _connector_web_api() -> PluginConfig:
    """The connector's web-API defaults (made on first use: discovery, on every command, never needs them)."""
    return PluginConfig.model_validate(
        {
            "resourceQuotas": {"default": 1000},
            "readRateLimiter": {"qps": 10, "burst": 100},
            "writeRateLimiter": {"qps": 10, "burst": 100},
            "caching": {"size": 500000, "resyncInterval": "30s", "workers": 10, "maxSystemFailures": 5},
        }
    )


def _deep_merge(
    base: Mapping[str, Any], overlay: Mapping[str, Any], *, replace: frozenset[str]
) -> dict[str, Any]:
    out = dict(base)
    for key, value in overlay.items():
        current = out.get(key)
        if key not in replace and isinstance(current, Mapping) and isinstance(value, Mapping):
            out[key] = _deep_merge(current, value, replace=replace)
        else:
            out[key] = value
    return out


def _over_connector_web_api(value: Any) -> Any:
    # A partial webApi block keeps the connector's defaults for the keys it leaves out (viper merges into
    # the default struct). A given resourceQuotas map replaces the default quotas rather than adding to them.
    if isinstance(value, Mapping):
        defaults = _connector_web_api().model_dump(mode="json", by_alias=True)
        return _deep_merge(defaults, value, replace=frozenset({"resourceQuotas"}))
    return value


def _over_default_connector(value: Any) -> Any:
    if isinstance(value, Mapping):
        defaults = DEFAULT_CONNECTOR.model_dump(mode="json", by_alias=True)
        return _deep_merge(defaults, value, replace=frozenset({"timeouts"}))
    return value


class ConnectorConfig(_CamelModel):
    """``plugins.connector-service``: the connector plugin — where connectors listen, which task types
    go where, and the web-API machinery's limits (flyteplugins/go/tasks/plugins/webapi/connector/config.go)."""

    web_api: Annotated[PluginConfig, BeforeValidator(_over_connector_web_api)] = Field(
        default_factory=_connector_web_api, alias="webApi"
    )
    """The web-API machinery's settings for this plugin (quotas, rate limits, status cache)."""
    resource_constraints: ResourceConstraints = Field(
        default_factory=lambda: ResourceConstraints(
            project_scope=ResourceConstraint(value=100), namespace_scope=ResourceConstraint(value=50)
        ),
        alias="resourceConstraints",
    )
    """Caps on the allocation tokens one project, and one project and domain, may hold (returned by
    ``resource_requirements``)."""
    default_connector: Annotated[Deployment, BeforeValidator(_over_default_connector)] = Field(
        default=DEFAULT_CONNECTOR, alias="defaultConnector"
    )
    """The deployment used when no discovered connector matches a task type."""
    connectors: Annotated[dict[str, Deployment], BeforeValidator(list_of_maps_to_map)] = Field(
        default_factory=dict
    )
    """Connector deployments by id, each asked for its connectors (ListAgents; ListConnectors for a
    ``protocol: flyteidl2`` one)."""
    connector_for_task_types: Annotated[dict[str, str], BeforeValidator(list_of_maps_to_map)] = Field(
        default_factory=dict, alias="connectorForTaskTypes"
    )
    """Task type → deployment id; overrides what discovery found."""
    supported_task_types: tuple[str, ...] = Field(
        default=DEFAULT_SUPPORTED_TASK_TYPES, alias="supportedTaskTypes"
    )
    """Legacy: task types routed to the default connector when discovery did not find them."""
    poll_interval: GoDuration = Field(default=timedelta(seconds=10), alias="pollInterval")
    """Go duration between discovery runs (ListAgents on every deployment); must be positive."""

    @field_validator("poll_interval")
    @classmethod
    def _positive_poll_interval(cls, value: timedelta) -> timedelta:
        # Deviation: Flyte accepts 0 and then re-polls in a tight loop; a positive interval is required.
        if value <= timedelta(0):
            raise ValueError("must be a positive duration such as '10s'")
        return value
