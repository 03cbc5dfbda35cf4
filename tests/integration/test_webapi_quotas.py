"""Allocation-token quotas of web-API tasks through the executor, against a real connector server.

``plugins.connector-service.webApi.resourceQuotas: {default: 2}``: the scripted connector holds every job
RUNNING until the test releases it and records how many jobs of a group it runs at once. A third execution
must wait (WaitingForResources) until one of the first two finishes. With two executors sharing one real
``redis-server`` the same quota holds across both.

Executors run on a :class:`FastClock` (10×) with a short ``executor.resync-period``: an execution waiting
for a token is only retried by the resync (nothing wakes it when another task releases its token).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis.asyncio

from support.clocks import FastClock
from support.connector_server import ConnectorServer, connector_server_fixture  # noqa: F401
from support.redis_server import RedisServer, redis_server_fixture  # noqa: F401
from support.webapi import (
    connector_document,
    finished,
    phases_of,
    running_executor,
    scripted_document,
    spec,
    wait_until,
)
from taskplug.executor._executor import Executor
from taskplug.localcluster import LocalCluster

pytestmark = pytest.mark.integration

QUOTA = 2
WAITING = "WaitingForResources"
# The token namespace of the connector plugin's quota on the redis manager (<managerID>:<pluginID>:<ns>).
REDIS_NAMESPACE = "redisresourcemanager:connector-service:default"


@pytest.fixture
async def cluster() -> AsyncIterator[LocalCluster]:
    async with LocalCluster(mode="simulated") as c:
        yield c


async def submit_held(ex: Executor, name: str, group: str) -> str:
    """A scripted job that runs until ``name`` is released, counted in ``group`` by the connector."""
    return await ex.submit(spec(scripted_document(name, hold=name, group=group)))


def waiting_for_a_token(ex: Executor, key: str) -> bool:
    return WAITING in phases_of(ex, key)


async def test_the_execution_over_the_quota_waits_for_resources_until_one_finishes(
    connector_server: ConnectorServer, cluster: LocalCluster, tmp_path: Path
) -> None:
    group = f"quota-{uuid.uuid4().hex[:8]}"
    a, b, c = (f"{group}-{n}" for n in "abc")
    document = connector_document(tmp_path, connector_server.endpoint, quotas={"default": QUOTA})
    async with running_executor(document, kube_client=cluster.client(), clock=FastClock(10)) as ex:
        first = [await submit_held(ex, a, group), await submit_held(ex, b, group)]
        await wait_until(lambda: len(connector_server.running(group)) == QUOTA, what="a and b run")

        third = await submit_held(ex, c, group)
        await wait_until(lambda: waiting_for_a_token(ex, third), what="c waits for a token")
        # c keeps retrying on every resync and keeps being refused while a and b hold the two tokens.
        rounds = ex.rounds
        await wait_until(lambda: ex.rounds >= rounds + 10, what="ten more executor rounds")
        assert sorted(connector_server.running(group).values()) == [a, b]
        assert phases_of(ex, third) == [WAITING]

        connector_server.release(a)
        (done_a,) = await finished(ex, first[:1])
        assert (done_a.phase, done_a.outputs) == ("Success", {"o0": 42})
        await wait_until(lambda: c in connector_server.running(group).values(), what="c runs after a")

        connector_server.release(b)
        connector_server.release(c)
        results = await finished(ex, [*first, third])

    assert [r.phase for r in results] == ["Success"] * 3
    assert WAITING not in phases_of(ex, first[0]) + phases_of(ex, first[1])
    timeline = phases_of(ex, third)
    assert timeline[0] == WAITING
    assert timeline[1:3] == ["Queued", "Queued"]  # token granted, then created
    assert timeline[-1] == "Success"
    assert connector_server.max_running(group) == QUOTA


@contextlib.asynccontextmanager
async def two_executors(
    tmp_path: Path, connector_server: ConnectorServer, redis_server: RedisServer, cluster: LocalCluster
) -> AsyncIterator[tuple[Executor, Executor]]:
    manager = {"type": "redis", "redis": {"hostPath": redis_server.host_path}}
    documents = [
        connector_document(
            tmp_path / name, connector_server.endpoint, quotas={"default": QUOTA}, resource_manager=manager
        )
        for name in ("one", "two")
    ]
    async with (
        running_executor(documents[0], kube_client=cluster.client(), clock=FastClock(10)) as one,
        running_executor(documents[1], kube_client=cluster.client(), clock=FastClock(10)) as two,
    ):
        yield one, two


async def test_two_executors_sharing_redis_never_run_more_jobs_than_the_quota(
    connector_server: ConnectorServer, redis_server: RedisServer, cluster: LocalCluster, tmp_path: Path
) -> None:
    group = f"redis-{uuid.uuid4().hex[:8]}"
    names = [f"{group}-{n}" for n in ("a1", "b1", "a2", "b2")]
    async with two_executors(tmp_path, connector_server, redis_server, cluster) as (one, two):
        keys = {names[0]: (one, await submit_held(one, names[0], group))}
        keys[names[1]] = (one, await submit_held(one, names[1], group))
        await wait_until(lambda: len(connector_server.running(group)) == QUOTA, what="a1 and b1 run")

        # The second executor's executions find the quota taken by the first's.
        for name in names[2:]:
            keys[name] = (two, await submit_held(two, name, group))
        for name in names[2:]:
            ex, key = keys[name]
            await wait_until(lambda ex=ex, key=key: waiting_for_a_token(ex, key), what=f"{name} waits")
        assert sorted(connector_server.running(group).values()) == sorted(names[:2])

        # Release whatever runs, one job at a time, until everything finished.
        released: list[str] = []
        while len(released) < len(names):
            running = sorted(connector_server.running(group).values())
            assert len(running) <= QUOTA
            pending = [n for n in running if n not in released]
            if pending:
                connector_server.release(pending[0])
                released.append(pending[0])
                ex, key = keys[pending[0]]
                await finished(ex, [key])
            else:
                await wait_until(
                    lambda: any(n not in released for n in connector_server.running(group).values()),
                    what="a waiting execution gets a token and runs",
                )
        results = {name: ex.result(key) for name, (ex, key) in keys.items()}

    assert {name: r.phase for name, r in results.items()} == dict.fromkeys(names, "Success")
    assert connector_server.max_running(group) == QUOTA
    for name in names[2:]:
        ex, key = keys[name]
        assert phases_of(ex, key)[0] == WAITING
    client = redis.asyncio.Redis(host=redis_server.host, port=redis_server.port)
    try:
        assert await client.smembers(REDIS_NAMESPACE) == set()  # every token was released
    finally:
        await client.aclose()
