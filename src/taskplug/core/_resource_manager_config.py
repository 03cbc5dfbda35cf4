"""The ``propeller.resourcemanager`` config section: which manager holds web-API plugins' allocation tokens.

Follows flytepropeller/pkg/controller/nodes/task/resourcemanager/config/config.go. The section lives in core,
beside the ``ResourceManager`` contract and the ``tasks`` section, because the platform validates it for every
command while only a running engine (``taskplug.engine.webapi``) builds a manager from it.

What the manager needs is checked when the file loads, not when a run first asks for a token: a Redis address
is ``host:port`` with a port of 1 … 65535, counts are not negative, and ``resourceMaxQuota`` is at least 1
(the managers refuse every quota above it). That ``type: redis`` names a host is checked with the platform
(``taskplug.executor.Platform.load``), since a model of the section alone may be built without one.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, field_validator

from taskplug.core._config import ConfigSection, StrictModel

__all__ = ["RESOURCE_MANAGER_SECTION", "RedisConfig", "ResourceManagerConfig"]


class _Camel(StrictModel):
    # Flyte's resourcemanager keys are camelCase (json tags), not the kebab-case of the k8s section.
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, alias_generator=None)


class RedisConfig(_Camel):
    """``propeller.resourcemanager.redis``: where the ``redis`` manager keeps its tokens
    (flytepropeller/pkg/controller/nodes/task/resourcemanager/config/config.go)."""

    host_paths: tuple[str, ...] = Field(default=(), alias="hostPaths")
    """Redis hosts as ``host:port``; several without ``primaryName`` means a Redis Cluster."""
    primary_name: str = Field(default="", alias="primaryName")
    """The primary's name when ``hostPaths`` are Redis Sentinels."""
    host_path: str = Field(default="", alias="hostPath")
    """Deprecated single host; used when ``hostPaths`` is empty."""
    host_key: str = Field(default="", alias="hostKey")
    """The Redis password."""
    max_retries: int = Field(default=0, alias="maxRetries", ge=0)
    """Retries of a failed Redis command, a count (0: none)."""

    @field_validator("host_paths")
    @classmethod
    def _host_ports(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for i, path in enumerate(value):
            problem = _host_port_problem(path)
            if problem is not None:
                raise ValueError(f"item {i}: {problem}")
        return value

    @field_validator("host_path")
    @classmethod
    def _host_port(cls, value: str) -> str:
        problem = _host_port_problem(value) if value else None
        if problem is not None:
            raise ValueError(problem)
        return value


def _host_port_problem(path: str) -> str | None:
    """What is wrong with a Redis address (``host:port``, the port 1 … 65535), or None."""
    host, sep, port = path.rpartition(":")
    if not sep or not host or not port.isdigit():
        return f"expected host:port, got {path!r}"
    if not 1 <= int(port) <= 65535:
        return f"port {port} of {path!r} is not between 1 and 65535"
    return None


class ResourceManagerConfig(_Camel):
    """``propeller.resourcemanager``: the allocation tokens that enforce web-API plugins' quotas
    (flytepropeller/pkg/controller/nodes/task/resourcemanager/config/config.go)."""

    type: Literal["inprocess", "noop", "redis"] = "inprocess"
    """Which manager holds the allocation tokens: ``inprocess`` (enforced inside one process), ``noop``
    (grants everything) or ``redis`` (shared by several executors).
    Deviation: Flyte's default is ``noop``."""
    resource_max_quota: int = Field(default=1000, alias="resourceMaxQuota", ge=1)
    """The largest quota (a count of tokens, at least 1) a plugin may register for one namespace."""
    redis: RedisConfig = Field(default_factory=RedisConfig)
    """Connection to Redis, for ``type: redis``."""


RESOURCE_MANAGER_SECTION = ConfigSection("propeller.resourcemanager", ResourceManagerConfig)
