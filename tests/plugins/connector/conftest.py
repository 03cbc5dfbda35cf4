"""Fixtures for the connector plugin tests: a real flytekit connector server on loopback.

The server fixture is shared with the executor's integration tests and lives in ``tests/support``
(``support.connector_server``): ``pyflyte serve connector`` through a wrapper that binds gRPC and prometheus
to 127.0.0.1 only, loading the scripted test connectors; ready once a ListAgents call answers; always
stopped afterwards.
"""

from __future__ import annotations

from support.connector_server import ConnectorServer, connector_server_fixture

__all__ = ["ConnectorServer", "connector_server_fixture"]
