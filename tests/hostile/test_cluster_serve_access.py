"""Who may drive ``cluster serve``: a client holding the kubeconfig's token, naming a Host the server answers
to, not a web page.

A pod's command runs on this machine, so a page that could reach the embedded API (cross-site, or through DNS
rebinding: ``attacker.example`` re-pointed at 127.0.0.1, so the browser sends ``Host: attacker.example:PORT``)
could run anything. Each refusal is checked by what it must prevent: no pod is created, no command runs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest

from support.cluster_http import cluster_session
from taskplug.core import FakeClock
from taskplug.k8s import POD
from taskplug.localcluster import LocalCluster

pytestmark = pytest.mark.integration

PODS = "/api/v1/namespaces/default/pods"


@pytest.fixture
async def served() -> AsyncIterator[tuple[LocalCluster, str]]:
    async with LocalCluster(mode="process", clock=FakeClock()) as cluster:
        yield cluster, await cluster.serve_http()


def _pod(marker: Path) -> bytes:
    command = ["sh", "-c", f"touch {marker}"]
    return orjson.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "forged"},
            "spec": {"containers": [{"name": "c", "image": "busybox", "command": command}]},
        }
    )


def _pods(cluster: LocalCluster) -> list[str]:
    return [p["metadata"]["name"] for p in cluster.store.iter(POD, "default")]


@pytest.mark.parametrize(
    ("authorized", "headers", "status", "reason"),
    [
        pytest.param(False, {}, 401, "Unauthorized", id="no-token"),
        pytest.param(False, {"Authorization": "Bearer not-the-token"}, 401, "Unauthorized", id="wrong-token"),
        pytest.param(
            False, {"Authorization": "Basic YWRtaW46YWRtaW4="}, 401, "Unauthorized", id="basic-auth"
        ),
        pytest.param(True, {"Host": "attacker.example:443"}, 403, "Forbidden", id="dns-rebinding-host"),
        pytest.param(True, {"Host": "127.0.0.1.attacker.example"}, 403, "Forbidden", id="host-with-suffix"),
        pytest.param(True, {"Host": "user@127.0.0.1"}, 403, "Forbidden", id="host-with-userinfo"),
        pytest.param(True, {"Origin": "http://attacker.example"}, 403, "Forbidden", id="foreign-origin"),
        pytest.param(True, {"Origin": "null"}, 403, "Forbidden", id="opaque-origin"),
        pytest.param(True, {"Sec-Fetch-Site": "cross-site"}, 403, "Forbidden", id="sec-fetch-cross-site"),
    ],
)
async def test_a_create_without_the_token_or_from_a_web_page_is_refused_and_runs_nothing(
    served: tuple[LocalCluster, str],
    tmp_path: Path,
    authorized: bool,
    headers: dict[str, str],
    status: int,
    reason: str,
) -> None:
    cluster, url = served
    marker = tmp_path / "ran"
    async with (
        cluster_session(cluster, authorized=authorized) as session,
        session.post(
            url + PODS, data=_pod(marker), headers={"Content-Type": "application/json", **headers}
        ) as response,
    ):
        body = await response.json(content_type=None)
        assert response.status == status
    assert body["kind"] == "Status" and body["reason"] == reason and body["code"] == status
    assert _pods(cluster) == []
    assert not marker.exists()


@pytest.mark.parametrize(
    "path", [PODS, f"{PODS}/p/log", f"{PODS}?watch=1&timeoutSeconds=1", "/api", "/apis", "/api/v1/nodes"]
)
async def test_reads_logs_watches_and_discovery_need_the_token(
    served: tuple[LocalCluster, str], path: str
) -> None:
    cluster, url = served
    async with cluster_session(cluster, authorized=False) as session, session.get(url + path) as response:
        assert response.status == 401


@pytest.mark.parametrize("path", [PODS, "/api"])
async def test_a_foreign_host_cannot_read_even_with_the_token(
    served: tuple[LocalCluster, str], path: str
) -> None:
    cluster, url = served
    async with (
        cluster_session(cluster) as session,
        session.get(url + path, headers={"Host": "attacker.example"}) as response,
    ):
        assert response.status == 403


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "LOCALHOST.", "[::1]:6443", "127.0.0.1:1"])
async def test_every_loopback_name_is_answered_with_the_token(
    served: tuple[LocalCluster, str], host: str
) -> None:
    cluster, url = served
    async with (
        cluster_session(cluster) as session,
        session.get(url + PODS, headers={"Host": host}) as response,
    ):
        assert response.status == 200


@pytest.mark.parametrize("path", ["/healthz", "/livez", "/readyz", "/version"])
async def test_health_and_version_are_public_as_on_an_api_server(
    served: tuple[LocalCluster, str], path: str
) -> None:
    cluster, url = served
    async with cluster_session(cluster, authorized=False) as session, session.get(url + path) as response:
        assert response.status == 200


async def test_the_server_speaks_tls_only(served: tuple[LocalCluster, str]) -> None:
    import aiohttp

    cluster, url = served
    plain = url.replace("https://", "http://")
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {cluster.http_token}"}) as session:
        with pytest.raises(aiohttp.ClientError):
            async with session.get(plain + PODS) as response:
                await response.read()
    assert _pods(cluster) == []


async def test_a_given_token_is_the_one_wanted_and_the_kubeconfig_is_private(tmp_path: Path) -> None:
    async with LocalCluster(mode="simulated", clock=FakeClock()) as cluster:
        await cluster.serve_http(token="a-token-of-our-own-choosing-0123456789")
        path = cluster.kubeconfig(tmp_path / "kc.yaml")
        assert path.stat().st_mode & 0o777 == 0o600
        assert "a-token-of-our-own-choosing-0123456789" in path.read_text()
        assert cluster.http_token == "a-token-of-our-own-choosing-0123456789"


async def test_a_kubeconfig_written_over_a_readable_file_becomes_private(tmp_path: Path) -> None:
    path = tmp_path / "kc.yaml"
    path.write_text("old")
    path.chmod(0o644)
    async with LocalCluster(mode="simulated", clock=FakeClock()) as cluster:
        await cluster.serve_http()
        cluster.kubeconfig(path)
    assert path.stat().st_mode & 0o777 == 0o600
    assert "old" not in path.read_text()
