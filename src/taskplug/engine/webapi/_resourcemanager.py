"""Allocation tokens: resource managers, the per-plugin and per-task proxies, their config and factory.

Follows flytepropeller/pkg/controller/nodes/task/resourcemanager/{resourcemanager,noop_resourcemanager,
redis_resourcemanager,resourceconstraints,resourcemanager_util,config/config}.go.

A quota is a set of tokens per namespace. Allocating a token already in the set is Granted again
(idempotent); a full set is Exhausted; each constraint counts the tokens starting with its prefix and needs
``count < Value`` (Flyte's rule, so ``Value <= 0`` refuses as soon as the set holds any token, and
``ex:proj`` also counts ``ex:project2…``); otherwise the token is added. Release removes it.

Namespacing (the proxies): quotas are registered and used as ``<managerID>:<pluginID>:<ns>``; tokens are
``ex:<project>:<domain>:<execName>-<token>``; a project-scope constraint counts prefix ``ex:<project>`` and
a namespace-scope one ``ex:<project>:<domain>``.

Deviations:

* The default manager is ``inprocess``, which really enforces quotas and constraints inside one process;
  Flyte's default ``noop`` grants everything (it is still available as ``type: noop``).
* Redis allocation is one Lua script, so check-and-add is atomic and several executors sharing a Redis
  never over-allocate (Flyte's separate SISMEMBER/SCARD/SMEMBERS/SADD calls race).
* An unknown ``type`` is a config error naming the key (Flyte silently falls back to noop).
* The resource managers' periodic metrics (set size, backlog every 10 s) are not exported.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from taskplug.core import (
    RESOURCE_MANAGER_SECTION,
    AllocationStatus,
    ConfigError,
    ErrorCode,
    PluginError,
    ResourceConstraintsSpec,
    ResourceManagerConfig,
)

__all__ = [
    "BaseResourceManager",
    "FullyQualifiedConstraint",
    "InProcessResourceManager",
    "NoopResourceManager",
    "RedisResourceManager",
    "ResourcePoolInfo",
    "ResourceRegistrarProxy",
    "TaskResourceManager",
    "build_resource_manager",
    "check_constraints",
    "compose_token_prefix",
    "decide_allocation",
    "token_with_prefix",
]

# -- pure rules ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FullyQualifiedConstraint:
    """At most ``value`` tokens (exclusive: ``count < value``) that start with ``prefix``."""

    prefix: str
    value: int

    def allows(self, count: int) -> bool:
        return count < self.value


@dataclass(frozen=True, slots=True)
class ResourcePoolInfo:
    """What a task's allocation used, for events (unprefixed namespace and token)."""

    namespace: str
    allocation_token: str


def compose_token_prefix(project: str, domain: str, name: str) -> str:
    return ":".join(("ex", project, domain, name))


def token_with_prefix(prefix: str, token: str) -> str:
    return f"{prefix}-{token}"


def check_constraints(
    members: Sequence[str], constraints: Sequence[FullyQualifiedConstraint]
) -> tuple[bool, int]:
    """Flyte's checkAgainstConstraints: ``(allowed, index of the first violated constraint or -1)``."""
    for index, constraint in enumerate(constraints):
        count = 0
        for member in members:
            if member.startswith(constraint.prefix):
                count += 1
            # Checked after every member, matching or not, as Flyte does.
            if not constraint.allows(count):
                return False, index
    return True, -1


def decide_allocation(
    members: Iterable[str], quota: int, token: str, constraints: Sequence[FullyQualifiedConstraint]
) -> AllocationStatus:
    """Whether ``token`` may join a set holding ``members`` under ``quota`` (Granted or Exhausted)."""
    held = members if isinstance(members, set | frozenset) else set(members)
    if token in held:
        return AllocationStatus.GRANTED
    if not len(held) < quota:
        return AllocationStatus.EXHAUSTED
    if constraints and not check_constraints(list(held), constraints)[0]:
        return AllocationStatus.EXHAUSTED
    return AllocationStatus.GRANTED


def _check_quota(namespace: str, quota: int, max_quota: int, known: Iterable[str]) -> None:
    if quota <= 0 or quota > max_quota:
        raise PluginError(
            ErrorCode.RESOURCE_MANAGER_FAILURE,
            f"Invalid request for resource quota (<= 0 || > {max_quota}): [{quota}]",
        )
    if namespace in known:
        raise PluginError(
            ErrorCode.RESOURCE_MANAGER_FAILURE, f"Resource namespace already exists [{namespace}]"
        )


def _unknown_namespace(namespace: str) -> PluginError:
    return PluginError(
        ErrorCode.RESOURCE_MANAGER_FAILURE,
        f"Requested resource [{namespace}] not found in namespacedResourceMap",
    )


# -- managers -------------------------------------------------------------------------------------------


class BaseResourceManager(Protocol):
    """A manager of fully-qualified namespaces and tokens (what the proxies wrap)."""

    def get_id(self) -> str: ...

    async def register_resource_quota(self, namespace: str, quota: int) -> None: ...

    async def allocate_resource(
        self, namespace: str, token: str, constraints: Sequence[FullyQualifiedConstraint]
    ) -> AllocationStatus: ...

    async def release_resource(self, namespace: str, token: str) -> None: ...

    async def aclose(self) -> None: ...


class NoopResourceManager:
    """Flyte's noop manager: every registration works, every allocation is Granted."""

    ID = "noopresourcemanager"

    def get_id(self) -> str:
        return self.ID

    async def register_resource_quota(self, namespace: str, quota: int) -> None:
        return None

    async def allocate_resource(
        self, namespace: str, token: str, constraints: Sequence[FullyQualifiedConstraint]
    ) -> AllocationStatus:
        return AllocationStatus.GRANTED

    async def release_resource(self, namespace: str, token: str) -> None:
        return None

    async def aclose(self) -> None:
        return None


class InProcessResourceManager:
    """Quotas and constraints enforced in this process (the default); Redis's semantics without Redis."""

    ID = "inprocessresourcemanager"

    def __init__(self, max_quota: int = 1000) -> None:
        self._max_quota = max_quota
        self._quotas: dict[str, int] = {}
        self._tokens: dict[str, set[str]] = {}

    def get_id(self) -> str:
        return self.ID

    async def register_resource_quota(self, namespace: str, quota: int) -> None:
        _check_quota(namespace, quota, self._max_quota, self._quotas)
        self._quotas[namespace] = quota
        self._tokens[namespace] = set()

    async def allocate_resource(
        self, namespace: str, token: str, constraints: Sequence[FullyQualifiedConstraint]
    ) -> AllocationStatus:
        quota = self._quotas.get(namespace)
        if quota is None:
            raise _unknown_namespace(namespace)
        held = self._tokens[namespace]
        status = decide_allocation(held, quota, token, constraints)
        if status is AllocationStatus.GRANTED:
            held.add(token)
        return status

    async def release_resource(self, namespace: str, token: str) -> None:
        held = self._tokens.get(namespace)
        if held is None:
            raise _unknown_namespace(namespace)
        held.discard(token)

    def allocated(self, namespace: str) -> frozenset[str]:
        """The tokens held in ``namespace`` (for tests and status pages)."""
        return frozenset(self._tokens.get(namespace, ()))

    async def aclose(self) -> None:
        return None


# Returns 1 (Granted) or 2 (Exhausted); the same rules as decide_allocation, atomically.
_ALLOCATE_SCRIPT = """
local ns = KEYS[1]
local token = ARGV[1]
if redis.call('SISMEMBER', ns, token) == 1 then return 1 end
if redis.call('SCARD', ns) >= tonumber(ARGV[2]) then return 2 end
if #ARGV > 2 then
  local members = redis.call('SMEMBERS', ns)
  for i = 3, #ARGV, 2 do
    local prefix = ARGV[i]
    local value = tonumber(ARGV[i + 1])
    local count = 0
    for _, member in ipairs(members) do
      if string.sub(member, 1, #prefix) == prefix then count = count + 1 end
      if not (count < value) then return 2 end
    end
  end
end
redis.call('SADD', ns, token)
return 1
"""


class RedisResourceManager:
    """Tokens in one Redis set per namespace, shared by every executor on that Redis.

    Quotas are registered per process (as in Flyte); executors sharing a Redis must register the same ones.
    """

    ID = "redisresourcemanager"

    def __init__(self, client: Any, *, max_quota: int = 1000, owns_client: bool = True) -> None:
        self._client = client
        self._max_quota = max_quota
        self._owns_client = owns_client
        self._quotas: dict[str, int] = {}
        self._allocate = client.register_script(_ALLOCATE_SCRIPT)

    def get_id(self) -> str:
        return self.ID

    async def register_resource_quota(self, namespace: str, quota: int) -> None:
        if self._client is None:
            raise PluginError(ErrorCode.RESOURCE_MANAGER_FAILURE, "Redis client does not exist.")
        _check_quota(namespace, quota, self._max_quota, self._quotas)
        self._quotas[namespace] = quota

    async def allocate_resource(
        self, namespace: str, token: str, constraints: Sequence[FullyQualifiedConstraint]
    ) -> AllocationStatus:
        from redis.exceptions import RedisError

        quota = self._quotas.get(namespace)
        if quota is None:
            raise _unknown_namespace(namespace)
        args: list[str | int] = [token, quota]
        for constraint in constraints:
            args += [constraint.prefix, constraint.value]
        try:
            result = await self._allocate(keys=[namespace], args=args)
        except RedisError as e:
            raise PluginError(
                ErrorCode.RESOURCE_MANAGER_FAILURE,
                f"allocating token [{namespace}:{token}] in redis failed",
                cause=e,
            ) from e
        return AllocationStatus(int(result))

    async def release_resource(self, namespace: str, token: str) -> None:
        from redis.exceptions import RedisError

        try:
            await self._client.srem(namespace, token)
        except RedisError as e:
            raise PluginError(
                ErrorCode.RESOURCE_MANAGER_FAILURE, f"Error removing token [{namespace}:{token}]", cause=e
            ) from e
        if namespace not in self._quotas:
            raise _unknown_namespace(namespace)

    async def allocated(self, namespace: str) -> frozenset[str]:
        members = await self._client.smembers(namespace)
        return frozenset(m.decode() if isinstance(m, bytes) else m for m in members)

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()


# -- proxies ------------------------------------------------------------------------------------------------


def _qualify(manager: BaseResourceManager, plugin_id: str, namespace: str) -> str:
    return f"{manager.get_id()}:{plugin_id}:{namespace}"


@dataclass(frozen=True, slots=True)
class ResourceRegistrarProxy:
    """What a plugin registers its quotas through: namespaces become ``<managerID>:<pluginID>:<ns>``."""

    manager: BaseResourceManager
    plugin_id: str

    async def register_resource_quota(self, namespace: str, quota: int) -> None:
        await self.manager.register_resource_quota(_qualify(self.manager, self.plugin_id, namespace), quota)


@dataclass(slots=True)
class TaskResourceManager:
    """The core ResourceManager one task execution sees: namespaces, tokens and constraints made global."""

    manager: BaseResourceManager
    plugin_id: str
    project: str
    domain: str
    execution_name: str
    resource_pool_info: list[ResourcePoolInfo] = field(default_factory=list)

    def get_id(self) -> str:
        return self.manager.get_id()

    def _token(self, token: str) -> str:
        return token_with_prefix(compose_token_prefix(self.project, self.domain, self.execution_name), token)

    def _constraints(self, spec: ResourceConstraintsSpec) -> list[FullyQualifiedConstraint]:
        out = []
        if spec.project_scope is not None:
            out.append(FullyQualifiedConstraint(f"ex:{self.project}", spec.project_scope))
        if spec.namespace_scope is not None:
            out.append(FullyQualifiedConstraint(f"ex:{self.project}:{self.domain}", spec.namespace_scope))
        return out

    async def allocate_resource(
        self, namespace: str, token: str, constraints: ResourceConstraintsSpec
    ) -> AllocationStatus:
        status = await self.manager.allocate_resource(
            _qualify(self.manager, self.plugin_id, namespace),
            self._token(token),
            self._constraints(constraints),
        )
        # Recorded even when Exhausted, as Flyte does.
        self.resource_pool_info.append(ResourcePoolInfo(namespace, token))
        return status

    async def release_resource(self, namespace: str, token: str) -> None:
        await self.manager.release_resource(
            _qualify(self.manager, self.plugin_id, namespace), self._token(token)
        )


# -- factory ------------------------------------------------------------------------------------------------


def _host_port(path: str, key: str) -> tuple[str, int]:
    host, sep, port = path.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ConfigError(key, f"expected host:port, got {path!r}")
    return host, int(port)


def _redis_client(cfg: ResourceManagerConfig) -> Any:
    from redis.asyncio import Redis
    from redis.asyncio.cluster import ClusterNode, RedisCluster
    from redis.asyncio.retry import Retry
    from redis.asyncio.sentinel import Sentinel
    from redis.backoff import ExponentialBackoff

    key = RESOURCE_MANAGER_SECTION.path + ".redis"
    paths = list(cfg.redis.host_paths) or ([cfg.redis.host_path] if cfg.redis.host_path else [])
    if not paths:
        raise ConfigError(key + ".hostPaths", "the redis resource manager needs at least one host")
    hosts = [_host_port(p, key + ".hostPaths") for p in paths]
    password = cfg.redis.host_key or None
    extra: dict[str, Any] = {}
    if cfg.redis.max_retries > 0:
        extra["retry"] = Retry(ExponentialBackoff(), cfg.redis.max_retries)
    if cfg.redis.primary_name:
        sentinel = Sentinel(hosts, password=password)  # type: ignore[no-untyped-call]
        return sentinel.master_for(cfg.redis.primary_name, password=password, **extra)
    if len(hosts) > 1:
        return RedisCluster(startup_nodes=[ClusterNode(h, p) for h, p in hosts], password=password, **extra)
    host, port = hosts[0]
    return Redis(host=host, port=port, password=password, **extra)


async def build_resource_manager(cfg: ResourceManagerConfig) -> BaseResourceManager:
    """The manager ``cfg`` asks for; a Redis one is pinged first, so a wrong address fails at start-up."""
    if cfg.type == "noop":
        return NoopResourceManager()
    if cfg.type == "inprocess":
        return InProcessResourceManager(cfg.resource_max_quota)
    from redis.exceptions import RedisError

    client = _redis_client(cfg)
    try:
        await client.ping()
    except (RedisError, OSError) as e:
        await client.aclose()
        raise PluginError(
            ErrorCode.RESOURCE_MANAGER_FAILURE, "cannot reach redis for the resource manager", cause=e
        ) from e
    return RedisResourceManager(client, max_quota=cfg.resource_max_quota)
