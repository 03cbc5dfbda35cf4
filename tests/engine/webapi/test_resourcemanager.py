"""Allocation tokens (flytepropeller's nodes/task/resourcemanager; its resourcemanager_test.go and
redis_resourcemanager_test.go cases): pure rules, the in-process and noop managers, the proxies,
the config section and the factory. Redis cases run against a real redis-server (integration)."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
from collections.abc import AsyncIterator, Iterator

import pytest

from taskplug.core import (
    RESOURCE_MANAGER_SECTION,
    AllocationStatus,
    ConfigError,
    PluginError,
    ResourceConstraintsSpec,
    ResourceManagerConfig,
    load_platform_config,
)
from taskplug.engine.webapi import (
    FullyQualifiedConstraint,
    InProcessResourceManager,
    NoopResourceManager,
    RedisResourceManager,
    ResourcePoolInfo,
    ResourceRegistrarProxy,
    TaskResourceManager,
    build_resource_manager,
    check_constraints,
    compose_token_prefix,
    decide_allocation,
    token_with_prefix,
)

GRANTED, EXHAUSTED = AllocationStatus.GRANTED, AllocationStatus.EXHAUSTED


def test_the_token_prefix_joins_project_domain_and_name() -> None:
    assert (
        compose_token_prefix("testproject", "testdomain", "testname") == "ex:testproject:testdomain:testname"
    )


def test_a_token_is_joined_to_its_prefix_with_a_dash() -> None:
    assert token_with_prefix("tok:prefix", "abcdefg-hijklmn") == "tok:prefix-abcdefg-hijklmn"


def test_one_violated_constraint_is_reported_with_its_index() -> None:
    members = ["ns1-token1", "ns1-token2"]
    assert check_constraints(members, [FullyQualifiedConstraint("ns1", 2)]) == (False, 0)
    assert check_constraints(members, [FullyQualifiedConstraint("ns1", 3)]) == (True, -1)


@pytest.mark.parametrize(
    ("members", "quota", "token", "constraints", "expected"),
    [
        pytest.param(set(), 1, "t", [], GRANTED, id="empty set"),
        pytest.param({"a", "b"}, 2, "c", [], EXHAUSTED, id="at quota"),
        pytest.param({"a", "b"}, 2, "a", [], GRANTED, id="re-allocation is idempotent even at quota"),
        pytest.param({"ns1-token1"}, 3, "ns1-token2", [FullyQualifiedConstraint("ns1", 1)], EXHAUSTED, id="prefix"),
        pytest.param({"ns1-token1"}, 3, "ns2-token1", [], GRANTED, id="no constraint"),
        pytest.param({"x"}, 3, "y", [FullyQualifiedConstraint("ex:p", 1)], GRANTED, id="prefix not matching"),
        pytest.param({"x"}, 3, "y", [FullyQualifiedConstraint("ex:p", 0)], EXHAUSTED, id="value 0 refuses any member"),
        pytest.param(set(), 3, "y", [FullyQualifiedConstraint("ex:p", 0)], GRANTED, id="value 0 on an empty set"),
        pytest.param(
            {"ex:project2:d:e-t"}, 3, "ex:proj:d:e-u", [FullyQualifiedConstraint("ex:proj", 1)], EXHAUSTED,
            id="plain string prefix also counts a longer project name",
        ),
    ],
)  # fmt: skip
def test_allocation_decisions(
    members: set[str],
    quota: int,
    token: str,
    constraints: list[FullyQualifiedConstraint],
    expected: AllocationStatus,
) -> None:
    assert decide_allocation(members, quota, token, constraints) is expected


async def test_the_noop_manager_grants_everything_through_the_task_proxy() -> None:
    proxy = TaskResourceManager(NoopResourceManager(), "plugin", "p", "d", "exec")
    status = await proxy.allocate_resource("namespace", "allocation token", ResourceConstraintsSpec())
    assert status is GRANTED
    assert proxy.resource_pool_info == [ResourcePoolInfo("namespace", "allocation token")]


async def test_the_in_process_manager_exhausts_at_quota_until_a_token_is_released() -> None:
    manager = InProcessResourceManager()
    await manager.register_resource_quota("ns", 2)
    assert [await manager.allocate_resource("ns", t, []) for t in ("a", "b", "c")] == [
        GRANTED,
        GRANTED,
        EXHAUSTED,
    ]
    await manager.release_resource("ns", "a")
    assert await manager.allocate_resource("ns", "c", []) is GRANTED
    assert manager.allocated("ns") == {"b", "c"}


@pytest.mark.parametrize("quota", [0, -1, 1001])
async def test_a_quota_out_of_range_is_refused(quota: int) -> None:
    with pytest.raises(PluginError, match=r"Invalid request for resource quota \(<= 0 \|\| > 1000\)"):
        await InProcessResourceManager().register_resource_quota("ns", quota)


async def test_a_namespace_registers_once() -> None:
    manager = InProcessResourceManager()
    await manager.register_resource_quota("ns", 1)
    with pytest.raises(PluginError, match="Resource namespace already exists"):
        await manager.register_resource_quota("ns", 1)


async def test_an_unknown_namespace_is_an_error() -> None:
    with pytest.raises(PluginError, match="not found"):
        await InProcessResourceManager().allocate_resource("nope", "t", [])


async def test_the_proxies_qualify_namespaces_tokens_and_constraints() -> None:
    manager = InProcessResourceManager()
    await ResourceRegistrarProxy(manager, "connector-service").register_resource_quota("default", 10)
    spec = ResourceConstraintsSpec(project_scope=2, namespace_scope=1)
    a = TaskResourceManager(manager, "connector-service", "proj", "dev", "e1")
    b = TaskResourceManager(manager, "connector-service", "proj", "dev", "e2")
    c = TaskResourceManager(manager, "connector-service", "proj", "prod", "e3")
    d = TaskResourceManager(manager, "connector-service", "proj", "stage", "e4")
    assert await a.allocate_resource("default", "tok", spec) is GRANTED
    assert manager.allocated("inprocessresourcemanager:connector-service:default") == {"ex:proj:dev:e1-tok"}
    assert await b.allocate_resource("default", "tok", spec) is EXHAUSTED  # namespace scope: 1 per proj:dev
    assert await c.allocate_resource("default", "tok", spec) is GRANTED
    assert await d.allocate_resource("default", "tok", spec) is EXHAUSTED  # project scope: 2 per proj
    await a.release_resource("default", "tok")
    assert await b.allocate_resource("default", "tok", spec) is GRANTED


def test_the_config_section_has_flytes_keys_and_the_in_process_default() -> None:
    cfg = load_platform_config({}, [RESOURCE_MANAGER_SECTION]).get(RESOURCE_MANAGER_SECTION)
    assert (cfg.type, cfg.resource_max_quota, cfg.redis.host_paths) == ("inprocess", 1000, ())
    document = {
        "propeller": {
            "resourcemanager": {
                "type": "redis",
                "resourceMaxQuota": 50,
                "redis": {"hostPaths": ["h:1"], "primaryName": "p", "hostKey": "k", "maxRetries": 3},
            }
        }
    }
    cfg = load_platform_config(document, [RESOURCE_MANAGER_SECTION]).get(RESOURCE_MANAGER_SECTION)
    assert cfg.redis.primary_name == "p"
    assert cfg.resource_max_quota == 50


def test_an_unknown_manager_type_is_a_config_error_naming_the_key() -> None:
    with pytest.raises(ConfigError) as info:
        load_platform_config(
            {"propeller": {"resourcemanager": {"type": "zookeeper"}}}, [RESOURCE_MANAGER_SECTION]
        )
    assert info.value.path == "propeller.resourcemanager.type"


@pytest.mark.parametrize(
    ("kind", "cls"), [("inprocess", InProcessResourceManager), ("noop", NoopResourceManager)]
)
async def test_the_factory_builds_the_configured_manager(kind: str, cls: type) -> None:
    assert isinstance(await build_resource_manager(ResourceManagerConfig(type=kind)), cls)  # type: ignore[arg-type]


async def test_a_redis_manager_without_hosts_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="hostPaths"):
        await build_resource_manager(ResourceManagerConfig(type="redis"))


# -- Redis (integration) ----------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def redis_server() -> Iterator[str]:
    """A throwaway redis-server on 127.0.0.1 (no persistence); always stopped."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed (scripts/setup installs it)")
    port = _free_port()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail("redis-server exited at start-up")
                import time

                time.sleep(0.02)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _redis_config(host: str) -> ResourceManagerConfig:
    return ResourceManagerConfig.model_validate({"type": "redis", "redis": {"hostPaths": [host]}})


@pytest.fixture
async def redis_managers(
    redis_server: str,
) -> AsyncIterator[tuple[RedisResourceManager, RedisResourceManager]]:
    """Two managers (two "executors") on one redis."""
    first = await build_resource_manager(_redis_config(redis_server))
    second = await build_resource_manager(_redis_config(redis_server))
    assert isinstance(first, RedisResourceManager)
    assert isinstance(second, RedisResourceManager)
    try:
        yield first, second
    finally:
        await first.aclose()
        await second.aclose()


@pytest.mark.integration
async def test_redis_prefix_constraint_exhausts_and_an_unconstrained_token_is_granted(
    redis_managers: tuple[RedisResourceManager, RedisResourceManager],
) -> None:
    rm, _ = redis_managers
    await rm.register_resource_quota("resource1", 3)
    assert await rm.allocate_resource("resource1", "ns1-token1", []) is GRANTED
    assert (
        await rm.allocate_resource("resource1", "ns1-token2", [FullyQualifiedConstraint("ns1", 1)])
        is EXHAUSTED
    )
    assert await rm.allocate_resource("resource1", "ns2-token1", []) is GRANTED


@pytest.mark.integration
async def test_redis_grants_up_to_the_quota_then_exhausts(
    redis_managers: tuple[RedisResourceManager, RedisResourceManager],
) -> None:
    rm, _ = redis_managers
    await rm.register_resource_quota("resource2", 4)
    for i in range(3):
        assert await rm.allocate_resource("resource2", f"t{i}", []) is GRANTED
    assert await rm.allocate_resource("resource2", "t3", []) is GRANTED
    assert await rm.allocate_resource("resource2", "t4", []) is EXHAUSTED
    assert await rm.allocate_resource("resource2", "t0", []) is GRANTED  # idempotent at quota
    await rm.release_resource("resource2", "t1")
    assert await rm.allocate_resource("resource2", "t4", []) is GRANTED
    assert await rm.allocated("resource2") == {"t0", "t2", "t3", "t4"}


@pytest.mark.integration
async def test_two_executors_on_one_redis_share_the_quota(
    redis_managers: tuple[RedisResourceManager, RedisResourceManager],
) -> None:
    first, second = redis_managers
    n = 5
    for rm in (first, second):
        await ResourceRegistrarProxy(rm, "connector-service").register_resource_quota("default", n)
    a = TaskResourceManager(first, "connector-service", "p", "d", "exec-a")
    b = TaskResourceManager(second, "connector-service", "p", "d", "exec-b")
    spec = ResourceConstraintsSpec()
    requests = [(a, f"a{i}") for i in range(n)] + [(b, f"b{i}") for i in range(n)]
    statuses = await asyncio.gather(
        *[proxy.allocate_resource("default", token, spec) for proxy, token in requests]
    )
    assert statuses.count(GRANTED) == n  # atomic: never over-allocated
    assert len(await first.allocated("redisresourcemanager:connector-service:default")) == n
    granted = [r for r, s in zip(requests, statuses, strict=True) if s is GRANTED]
    refused = [r for r, s in zip(requests, statuses, strict=True) if s is EXHAUSTED]
    (waiter, waiting_token), (holder, held_token) = refused[0], granted[0]
    assert await waiter.allocate_resource("default", waiting_token, spec) is EXHAUSTED
    await holder.release_resource("default", held_token)
    assert await waiter.allocate_resource("default", waiting_token, spec) is GRANTED


@pytest.mark.integration
async def test_redis_unknown_namespace_and_unreachable_server_are_errors(
    redis_managers: tuple[RedisResourceManager, RedisResourceManager],
) -> None:
    rm, _ = redis_managers
    with pytest.raises(PluginError, match="not found"):
        await rm.allocate_resource("nope", "t", [])
    with pytest.raises(PluginError, match="cannot reach redis"):
        await build_resource_manager(_redis_config(f"127.0.0.1:{_free_port()}"))
