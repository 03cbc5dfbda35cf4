"""Which connector deployment serves which task type: the registry, built from ListAgents (Flyte 2:
ListConnectors) and config.

Follows the registry half of flyteplugins/go/tasks/plugins/webapi/connector/client.go
(``getConnectorRegistry``) and ``getFinalConnector`` in plugin.go. :func:`build_registry` is the pure
rule; :func:`discover` does the calls.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from flyteidl.admin import agent_pb2

from taskplug.plugins.connector._client import ConnectorClient, ConnectorRpcError
from taskplug.plugins.connector._config import FLYTEIDL2, ConnectorConfig, Deployment

__all__ = ["Connector", "ConnectorRegistry", "build_registry", "deployments_of", "discover"]

log = logging.getLogger(__name__)

LIST_OPERATION = "ListConnectors"


@dataclass(frozen=True, slots=True)
class Connector:
    """A connector as the registry knows it: where it runs and whether it answers synchronously."""

    deployment: Deployment
    is_sync: bool = False


@dataclass(frozen=True, slots=True)
class ConnectorRegistry:
    """Task type → task-type version → connector; immutable, replaced wholesale by each discovery."""

    routes: Mapping[str, Mapping[int, Connector]] = field(default_factory=dict)

    @property
    def task_types(self) -> frozenset[str]:
        return frozenset(self.routes)

    def select(self, task_type: str, version: int, default: Deployment) -> Connector:
        """The connector for (type, version), else the default deployment as an async connector."""
        connector = self.routes.get(task_type, {}).get(version)
        return connector if connector is not None else Connector(default, is_sync=False)


def deployments_of(config: ConnectorConfig) -> list[Deployment]:
    """The deployments asked for their connectors: the default one (only if it has an endpoint), then
    every configured deployment.

    Deviation: ``connectors`` is walked in config order; Go walks its map in random order, so which of two
    deployments advertising the same type wins changed from poll to poll.
    """
    deployments = [config.default_connector] if config.default_connector.endpoint else []
    deployments.extend(config.connectors.values())
    return deployments


def build_registry(
    config: ConnectorConfig, listings: Iterable[tuple[Deployment, Sequence[agent_pb2.Agent]]]
) -> ConnectorRegistry:
    """Flyte's registry rules over what each deployment's ListAgents returned (failed ones left out)."""
    routes: dict[str, dict[int, Connector]] = {}
    for deployment, agents in listings:
        for agent in agents:
            connector = Connector(deployment, is_sync=agent.is_sync)
            for name in agent.supported_task_types:  # deprecated field: version 0 only
                routes[name] = {0: connector}
            # Assignment replaces the whole version map, as Flyte does: a later deployment (or a later
            # category of the same name) wins.
            for category in agent.supported_task_categories:
                routes[category.name] = {category.version: connector}
    for task_type, deployment_id in config.connector_for_task_types.items():
        forced = config.connectors.get(deployment_id)
        if forced is None:
            log.debug(
                "connectorForTaskTypes[%s] names unknown deployment [%s]; ignored", task_type, deployment_id
            )
            continue
        routes[task_type] = {0: Connector(forced, is_sync=False)}
    for task_type in config.supported_task_types:
        routes.setdefault(task_type, {0: Connector(config.default_connector, is_sync=False)})
    return ConnectorRegistry(MappingProxyType({k: MappingProxyType(v) for k, v in routes.items()}))


async def discover(config: ConnectorConfig, client: ConnectorClient) -> ConnectorRegistry:
    """Ask every deployment for its connectors and build the registry; a failing deployment is skipped."""
    listings: list[tuple[Deployment, Sequence[agent_pb2.Agent]]] = []
    names = {id(d): name for name, d in config.connectors.items()}
    names[id(config.default_connector)] = "defaultConnector"
    for deployment in deployments_of(config):
        where = f"[{names.get(id(deployment), '?')}] at [{deployment.endpoint}]"
        try:
            response = await client.list_agents(deployment, deployment.timeout_for(LIST_OPERATION))
        except ConnectorRpcError as e:
            if e.status == "Unimplemented":
                log.warning(
                    "connector deployment %s (protocol %s) does not implement the metadata service of its "
                    "protocol (a Flyte %s connector?): %s",
                    where,
                    deployment.protocol,
                    "1" if deployment.protocol == FLYTEIDL2 else "2",
                    e.details,
                )
            else:
                log.error(
                    "failed to list connectors of deployment %s (protocol %s): %s",
                    where,
                    deployment.protocol,
                    e,
                )
            continue
        listings.append((deployment, list(response.agents)))
    return build_registry(config, listings)
