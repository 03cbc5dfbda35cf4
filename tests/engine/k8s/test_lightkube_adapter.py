"""The lightkube adapter over HTTP against ``LocalCluster.serve_http`` on 127.0.0.1 (wire-level)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from taskplug.core import ConfigError, FakeClock
from taskplug.engine.k8s._informer import Informer
from taskplug.engine.k8s._lightkube import LightkubeClient
from taskplug.k8s import KubeApiError, ResourceType, WatchEvent

pytestmark = pytest.mark.integration

NS = "default"
TEMPLATES = ResourceType("v1", "PodTemplate", "podtemplates")
POD = ResourceType("v1", "Pod", "pods")


def template(name: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": name, "namespace": NS, "labels": dict(labels)},
        "template": {"spec": {"containers": [{"name": "main", "image": "busybox"}]}},
    }


@pytest.fixture
async def served(local_cluster: Any, tmp_path: Path) -> AsyncIterator[tuple[Any, LightkubeClient]]:
    await local_cluster.serve_http(port=0)
    kubeconfig = local_cluster.kubeconfig(tmp_path / "kubeconfig")
    client = LightkubeClient(kubeconfig, trust_env=False)
    try:
        yield local_cluster, client
    finally:
        await client.close()


async def test_create_get_list_patch_replace_delete_round_trip(served: tuple[Any, LightkubeClient]) -> None:
    _, client = served
    created = await client.create(TEMPLATES, template("a", app="x"))
    assert created["metadata"]["resourceVersion"]
    assert (await client.get(TEMPLATES, NS, "a"))["metadata"]["uid"] == created["metadata"]["uid"]
    await client.create(TEMPLATES, template("b", app="y"))
    items, rv = await client.list(TEMPLATES, NS)
    assert sorted(i["metadata"]["name"] for i in items) == ["a", "b"]
    assert rv
    assert all(i["kind"] == "PodTemplate" for i in items)
    selected, _ = await client.list(TEMPLATES, label_selector="app=y")
    assert [i["metadata"]["name"] for i in selected] == ["b"]
    patched = await client.patch(TEMPLATES, NS, "a", {"metadata": {"labels": {"p": "1"}}})
    assert patched["metadata"]["labels"] == {"app": "x", "p": "1"}
    patched["metadata"]["labels"]["r"] = "2"
    replaced = await client.replace(TEMPLATES, patched)
    assert replaced["metadata"]["labels"]["r"] == "2"
    await client.delete(TEMPLATES, NS, "a")
    with pytest.raises(KubeApiError) as info:
        await client.get(TEMPLATES, NS, "a")
    assert (info.value.status, info.value.reason) == (404, "NotFound")


async def test_bursts_of_requests_reuse_the_connections_the_first_opened(
    local_cluster: Any, tmp_path: Path
) -> None:
    """Over TLS a new connection is a handshake on both sides: a burst of concurrent requests opens at most
    the pool's 32 connections and the pool keeps them all (httpx's default kept 20 and closed the rest once
    used), so the next bursts open none. Counted at a relay between the client and the cluster."""
    from support.tcp_relay import Relay

    url = await local_cluster.serve_http(port=0)
    relay = Relay(("127.0.0.1", int(url.rsplit(":", 1)[1])))
    kubeconfig = local_cluster.kubeconfig(tmp_path / "kubeconfig")
    config = yaml.safe_load(kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{relay.port}"
    kubeconfig.write_text(yaml.safe_dump(config))
    client = LightkubeClient(kubeconfig, trust_env=False)
    try:
        await asyncio.gather(*(client.list(TEMPLATES, NS) for _ in range(60)))
        first = relay.accepted
        assert 20 < first <= 32  # more than httpx keeps by default, no more than the pool's bound
        for _ in range(3):
            await asyncio.gather(*(client.list(TEMPLATES, NS) for _ in range(first)))
        assert relay.accepted == first
    finally:
        await client.close()
        relay.cut()


async def test_watch_streams_events_from_a_resource_version(served: tuple[Any, LightkubeClient]) -> None:
    _, client = served
    _, rv = await client.list(TEMPLATES, NS)
    seen: list[WatchEvent] = []

    async def consume() -> None:
        async for event in client.watch(TEMPLATES, NS, resource_version=rv):
            seen.append(event)
            if len(seen) == 3:
                return

    task = asyncio.create_task(consume())
    await client.create(TEMPLATES, template("w"))
    await client.patch(TEMPLATES, NS, "w", {"metadata": {"labels": {"v": "2"}}})
    await client.delete(TEMPLATES, NS, "w")
    await asyncio.wait_for(task, timeout=30)
    assert [e.type for e in seen] == ["ADDED", "MODIFIED", "DELETED"]
    assert seen[1].object["metadata"]["labels"] == {"v": "2"}


async def test_watch_from_a_compacted_version_raises_410(served: tuple[Any, LightkubeClient]) -> None:
    cluster, client = served
    _, rv = await client.list(TEMPLATES, NS)
    await client.create(TEMPLATES, template("x"))
    cluster.compact()
    with pytest.raises(KubeApiError) as info:
        async for _ in client.watch(TEMPLATES, NS, resource_version=rv):
            pass
    assert info.value.status == 410


async def test_a_dropped_watch_ends_cleanly(served: tuple[Any, LightkubeClient]) -> None:
    cluster, client = served
    _, rv = await client.list(TEMPLATES, NS)
    events: list[WatchEvent] = []

    async def consume() -> None:
        async for event in client.watch(TEMPLATES, NS, resource_version=rv):
            events.append(event)

    task = asyncio.create_task(consume())
    await client.create(TEMPLATES, template("d"))
    for _ in range(200):
        if events:
            break
        await asyncio.sleep(0.01)
    cluster.drop_watches()
    await asyncio.wait_for(task, timeout=30)  # returns: no exception, no retry
    assert events[0].type == "ADDED"


async def provoke(case: str, cluster: Any, client: LightkubeClient) -> None:
    """Make the API answer with the error named by ``case``."""
    if case == "missing":
        await client.get(TEMPLATES, NS, "nope")
    elif case == "duplicate":
        await client.create(TEMPLATES, template("dup"))
        await client.create(TEMPLATES, template("dup"))
    elif case == "invalid":
        await client.create(
            POD, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "Bad_Name"}, "spec": {}}
        )
    elif case == "quota":
        await client.create(
            ResourceType("v1", "ResourceQuota", "resourcequotas"),
            {
                "apiVersion": "v1",
                "kind": "ResourceQuota",
                "metadata": {"name": "q", "namespace": NS},
                "spec": {"hard": {"limits.memory": "1Gi"}},
            },
        )
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "big", "namespace": NS},
            "spec": {
                "containers": [{"name": "m", "image": "busybox", "resources": {"limits": {"memory": "2Gi"}}}]
            },
        }
        await client.create(POD, pod)
    elif case == "fault500":
        cluster.faults.fail("get", 500)
        await client.get(TEMPLATES, NS, "x")
    else:
        cluster.faults.fail("list", 429)
        await client.list(TEMPLATES, NS)


@pytest.mark.parametrize(
    ("case", "status", "reason"),
    [
        ("missing", 404, "NotFound"),
        ("duplicate", 409, "AlreadyExists"),
        ("invalid", 422, "Invalid"),
        ("quota", 403, "Forbidden"),
        ("fault500", 500, "InternalError"),
        ("fault429", 429, "TooManyRequests"),
    ],
)
async def test_api_errors_are_mapped_to_kube_api_error_with_the_status_body(
    served: tuple[Any, LightkubeClient], case: str, status: int, reason: str
) -> None:
    cluster, client = served
    with pytest.raises(KubeApiError) as info:
        await provoke(case, cluster, client)
    err = info.value
    assert (err.status, err.reason) == (status, reason)
    assert err.message
    if case == "quota":
        assert "exceeded quota" in err.message
    assert not type(err).__module__.startswith(("lightkube", "httpx"))


async def test_connection_refused_is_a_connection_error(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n"
        "users: [{name: u, user: {}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u, namespace: default}}]\n"
    )
    client = LightkubeClient(kubeconfig, trust_env=False)
    server = f"http://127.0.0.1:{port}"
    try:
        with pytest.raises(ConnectionError, match=f"cannot reach the Kubernetes API at {server}"):
            await client.get(TEMPLATES, NS, "x")
        with pytest.raises(ConnectionError, match=f"cannot reach the Kubernetes API at {server}"):
            async for _ in client.watch(TEMPLATES, NS):
                pass
    finally:
        await client.close()


async def test_a_server_that_never_answers_times_out_naming_it_and_the_config_key(tmp_path: Path) -> None:
    # Accepts the connection and the request, and never answers: only the whole-request timeout ends it.
    held: list[asyncio.StreamWriter] = []

    async def hold(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    from taskplug.localcluster import LocalCluster

    client = LightkubeClient(
        LocalCluster.write_kubeconfig(tmp_path / "kubeconfig", url), trust_env=False, timeout=0.2
    )
    try:
        with pytest.raises(TimeoutError) as info:
            await asyncio.wait_for(client.get(TEMPLATES, NS, "x"), 30)
        assert f"the Kubernetes API at {url} did not answer GET" in str(info.value)
        assert "propeller.kube-client-config.timeout" in str(info.value)
    finally:
        await client.close()
        for writer in held:
            writer.close()
        server.close()
        await server.wait_closed()


async def test_a_5xx_answer_names_the_server_a_4xx_keeps_its_message(
    served: tuple[Any, LightkubeClient],
) -> None:
    cluster, client = served
    cluster.faults.fail("get", 503)
    with pytest.raises(KubeApiError) as failing:
        await client.get(TEMPLATES, NS, "x")
    assert failing.value.status == 503
    assert f"(the Kubernetes API at {client.server} answered 503)" in failing.value.message
    with pytest.raises(KubeApiError) as missing:
        await client.get(TEMPLATES, NS, "x")
    assert missing.value.status == 404 and client.server not in missing.value.message


async def test_a_2xx_body_that_is_not_json_is_a_connection_error_naming_the_server(tmp_path: Path) -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    from taskplug.localcluster import LocalCluster

    client = LightkubeClient(LocalCluster.write_kubeconfig(tmp_path / "kubeconfig", url), trust_env=False)
    try:
        with pytest.raises(ConnectionError, match=f"the Kubernetes API at {url} answered GET"):
            await client.get(TEMPLATES, NS, "x")
    finally:
        await client.close()
        server.close()
        await server.wait_closed()


def test_a_missing_kubeconfig_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read kubeconfig") as err:
        LightkubeClient(tmp_path / "absent")
    assert err.value.path == str(tmp_path / "absent")


async def test_the_informer_lists_and_watches_over_http(
    served: tuple[Any, LightkubeClient],
) -> None:
    _, client = served
    await client.create(TEMPLATES, template("one"))
    informer = Informer(client, TEMPLATES, clock=FakeClock(), namespace=NS)
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(informer.run())
        await asyncio.wait_for(informer.wait_synced(), timeout=30)
        assert informer.get(NS, "one") is not None
        await client.create(TEMPLATES, template("two"))
        for _ in range(500):
            if informer.get(NS, "two") is not None:
                break
            await asyncio.sleep(0.01)
        assert informer.get(NS, "two") is not None
        task.cancel()


async def test_a_watch_asks_for_a_timeout_and_fails_when_its_server_falls_silent(tmp_path: Path) -> None:
    # Answers the watch's headers, then sends nothing and keeps the connection open: a hung server.
    requests: list[bytes] = []
    held: list[asyncio.StreamWriter] = []

    async def hang(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        requests.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        await writer.drain()
        held.append(writer)

    server = await asyncio.start_server(hang, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    from taskplug.localcluster import LocalCluster

    client = LightkubeClient(
        LocalCluster.write_kubeconfig(tmp_path / "kubeconfig", url), trust_env=False, timeout=0.2
    )
    try:

        async def drain() -> None:
            async for _ in client.watch(TEMPLATES, NS, timeout_seconds=1):
                pass

        with pytest.raises(TimeoutError, match=f"the Kubernetes API at {url} did not answer in time"):
            await asyncio.wait_for(drain(), 30)
        assert b"timeoutSeconds=1" in requests[0]
        # Without a timeout of its own, a watch asks for 5 to 10 minutes, as client-go's reflector does.
        watching = asyncio.ensure_future(anext(aiter(client.watch(TEMPLATES, NS))))
        async with asyncio.timeout(30):
            while len(requests) < 2:
                await asyncio.sleep(0.01)
        watching.cancel()
        asked = int(requests[1].split(b"timeoutSeconds=", 1)[1].split(b"&", 1)[0].split(b" ", 1)[0])
        assert 300 <= asked <= 600
    finally:
        await client.close()
        for writer in held:
            writer.close()
        server.close()
        await server.wait_closed()


async def test_follow_pod_log_yields_what_a_container_prints_as_it_prints_it(tmp_path: Path) -> None:
    from taskplug.k8s import FollowsPodLogs
    from taskplug.localcluster import LocalCluster

    gate = tmp_path / "gate"
    script = f"echo one; while [ ! -e {gate} ]; do sleep 0.05; done; echo two"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "followed", "namespace": NS},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "sh", "command": ["sh", "-c", script]}],
        },
    }
    async with LocalCluster(mode="process") as cluster:
        await cluster.serve_http(port=0)
        client = LightkubeClient(cluster.kubeconfig(tmp_path / "kubeconfig"), trust_env=False)
        try:
            assert isinstance(client, FollowsPodLogs)
            await client.create(POD, pod)
            await cluster.wait_for(
                POD, NS, "followed", lambda p: p.get("status", {}).get("phase") == "Running", within=30
            )
            received = ""
            stream = client.follow_pod_log(NS, "followed", "main")
            async with asyncio.timeout(60):  # a deadline, not a timing
                async for text in stream:
                    received += text
                    if received == "one\n":
                        gate.touch()  # printed before the container could go on: it came while it ran
            assert received == "one\ntwo\n"
            with pytest.raises(KubeApiError) as info:
                async for _ in client.follow_pod_log(NS, "no-such-pod"):
                    pass
            assert info.value.status == 404
        finally:
            await client.close()


async def test_a_connection_the_server_closed_while_idle_is_not_reused(tmp_path: Path) -> None:
    """A server that closes each kept-alive connection after answering (as one whose idle timer ran out does):
    the pool sees the end on the idle connection and opens a new one, so no request fails on a dead one."""
    accepted = 0

    async def answer_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal accepted
        accepted += 1
        await reader.readuntil(b"\r\n\r\n")
        body = b'{"kind": "PodTemplate", "metadata": {"name": "x"}}'
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        await writer.drain()
        writer.close()  # no Connection: close: the client believes it may keep the connection

    server = await asyncio.start_server(answer_once, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    from taskplug.localcluster import LocalCluster

    client = LightkubeClient(LocalCluster.write_kubeconfig(tmp_path / "kubeconfig", url), trust_env=False)
    try:
        for _ in range(3):
            got = await client.get(TEMPLATES, NS, "x")
            assert got["metadata"]["name"] == "x"
            await asyncio.sleep(0.05)  # let the close arrive before the next request takes a connection
        assert accepted == 3
    finally:
        await client.close()
        server.close()
        await server.wait_closed()


async def test_a_watch_read_late_still_gets_every_event_in_order(served: tuple[Any, LightkubeClient]) -> None:
    """Events that pile up while nobody reads the watch (more than the transport buffers before it stops
    reading the socket) all arrive, in order, once it is read."""
    _, client = served
    _, rv = await client.list(TEMPLATES, NS)
    watch = client.watch(TEMPLATES, NS, resource_version=rv)
    first = asyncio.ensure_future(anext(watch))  # the watch's request is sent; its events wait unread
    big = "v" * 60_000
    for i in range(40):  # about 2.4 MB of events, over the transport's 1 MiB mark
        obj = template(f"t{i}")
        obj["metadata"]["annotations"] = {"big": big}
        await client.create(TEMPLATES, obj)
    names = [(await asyncio.wait_for(first, 30)).object["metadata"]["name"]]
    while len(names) < 40:
        event = await asyncio.wait_for(anext(watch), 30)
        names.append(event.object["metadata"]["name"])
    await watch.aclose()
    assert names == [f"t{i}" for i in range(40)]


def test_the_client_works_on_uvloop_as_uvicorn_runs_it(tmp_path: Path) -> None:
    """``taskplug serve --kubeconfig`` reads pod logs from uvicorn's loop, uvloop when it is installed: its
    transports are not subclasses of asyncio's, and the connections must not care."""
    uvloop = pytest.importorskip("uvloop")
    from taskplug.localcluster import LocalCluster

    async def main() -> str:
        async with LocalCluster(mode="simulated") as cluster:
            await cluster.serve_http(port=0)
            client = LightkubeClient(cluster.kubeconfig(tmp_path / "kubeconfig"), trust_env=False)
            try:
                await client.create(TEMPLATES, template("on-uvloop"))
                name: str = (await client.get(TEMPLATES, NS, "on-uvloop"))["metadata"]["name"]
                return name
            finally:
                await client.close()

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        assert runner.run(main()) == "on-uvloop"
