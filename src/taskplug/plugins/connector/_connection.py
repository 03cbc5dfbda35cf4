"""The ``connection`` a Flyte 2 connector receives: read from the task template, its secrets resolved.

Follows ``Create`` in flyteplugins/go/tasks/plugins/webapi/connector/plugin.go on Flyte's ``main`` (Flyte 2): the
template's ``custom`` struct is read as a ``flyteidl2.core.Connection`` (``taskType``, ``secrets``, ``configs``;
every other key of ``custom`` ignored), and each value of ``secrets`` — the name of a secret — is replaced by the
secret's value before the call. The connector gets the secrets and configs as keyword arguments.

Where the values come from: the plugin's :class:`~taskplug.core.SecretManager` (the setup context's), else
:class:`EnvSecretManager`, which reads ``FLYTE_SECRET_<name>`` from taskplug's environment (the environment
prefix of Flyte 1's default secret manager, flytepropeller's ``FileEnvSecretManager``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any, Final

from flyteidl.core import tasks_pb2
from flyteidl2.core import security_pb2
from google.protobuf import json_format

from taskplug.core import ErrorCode, PluginError, SecretManager
from taskplug.plugins.connector._client import Connection

__all__ = ["SECRET_ENV_PREFIX", "EnvSecretManager", "connection_of", "resolve_connection"]

SECRET_ENV_PREFIX: Final = "FLYTE_SECRET_"

_SECRET_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


class EnvSecretManager:
    """Secrets from taskplug's environment: secret ``name`` is the variable ``FLYTE_SECRET_<name>``.

    Deviation: Flyte 1's FileEnvSecretManager also reads the file ``/etc/secrets/<name>``, and Flyte 2's backend
    asks its embedded secret manager for the secret scoped to the task's organization, project and domain.
    taskplug reads the environment only: a name from a task spec never becomes a path to read.
    """

    def __init__(self, environ: Mapping[str, str] | None = None, prefix: str = SECRET_ENV_PREFIX) -> None:
        self._environ = environ
        self._prefix = prefix

    async def get(self, key: str) -> str:
        environ = self._environ if self._environ is not None else os.environ
        value = environ.get(self._prefix + key)
        if value is None:
            raise LookupError(f"secret [{key}] not found: set the environment variable {self._prefix}{key}")
        return value


def connection_of(template: tasks_pb2.TaskTemplate) -> Connection:
    """The connection the template's ``custom`` asks for, secrets still named (not resolved).

    Deviation: Flyte 2 fails a template without ``custom`` ("nil Struct Object passed"); here it gets an empty
    connection, as a template whose ``custom`` has none of the three keys does.
    """
    if not template.HasField("custom"):
        return Connection()
    custom: dict[str, Any] = json_format.MessageToDict(template.custom)
    wanted = {k: v for k, v in custom.items() if k in ("taskType", "task_type", "secrets", "configs")}
    try:
        parsed = json_format.ParseDict(wanted, security_pb2.Connection())
    except json_format.ParseError as e:
        raise PluginError(
            ErrorCode.BAD_TASK_SPECIFICATION,
            f"failed to unmarshal connection from task template custom: {e}",
        ) from e
    for name in parsed.secrets.values():
        if not _SECRET_NAME.match(name):
            raise PluginError(
                ErrorCode.BAD_TASK_SPECIFICATION,
                f"template.custom.secrets: {name!r} is not a secret name (letters, digits, '_', '.', '-')",
            )
    return Connection(task_type=parsed.task_type, secrets=dict(parsed.secrets), configs=dict(parsed.configs))


async def resolve_connection(connection: Connection, secrets: SecretManager) -> Connection:
    """``connection`` with each secret's name replaced by its value."""
    values: dict[str, str] = {}
    for key, name in connection.secrets.items():
        try:
            values[key] = await secrets.get(name)
        except Exception as e:
            # Flyte 2: codes.Internal "Failed to get secret value with error: …".
            raise PluginError(ErrorCode.RUNTIME_FAILURE, f"Failed to get secret value with error: {e}") from e
    return Connection(task_type=connection.task_type, secrets=values, configs=dict(connection.configs))
