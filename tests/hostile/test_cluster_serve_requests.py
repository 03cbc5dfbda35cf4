"""What a web page (or any careless client) can send ``taskplug cluster serve``: only what an API server decodes.

A browser may send a cross-site "simple" POST (``text/plain``, a form, multipart) to 127.0.0.1 without asking
first; if the embedded API accepted it, any page the user has open could start a pod — a process on the user's
machine. So create/update take only ``application/json`` / ``application/yaml``, patches only the patch types,
anything else is a 415 ``Status``, bodies over kube-apiserver's 3 MB limit a 413 ``Status``, and YAML bodies
go through the bounded loader (an alias bomb is a 400, answered at once).
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


def pod(name: str, marker: Path) -> dict[str, object]:
    command = ["sh", "-c", f"touch {marker}"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox", "command": command}]},
    }


@pytest.fixture
async def served() -> AsyncIterator[tuple[LocalCluster, str]]:
    async with LocalCluster(mode="process", clock=FakeClock()) as cluster:
        yield cluster, await cluster.serve_http()


def pods(cluster: LocalCluster) -> list[str]:
    return [p["metadata"]["name"] for p in cluster.store.iter(POD, "default")]


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        pytest.param("text/plain", None, id="text-plain"),
        pytest.param("application/x-www-form-urlencoded", None, id="form"),
        pytest.param("multipart/form-data; boundary=x", None, id="multipart"),
        pytest.param("", None, id="no-content-type"),
        pytest.param("application/merge-patch+json", None, id="a-patch-type-on-create"),
    ],
)
async def test_a_create_in_a_media_type_an_api_server_does_not_decode_is_refused_and_creates_nothing(
    served: tuple[LocalCluster, str], tmp_path: Path, content_type: str, body: bytes | None
) -> None:
    cluster, url = served
    marker = tmp_path / "ran"
    payload = body if body is not None else orjson.dumps(pod("forged", marker))
    headers = {"Content-Type": content_type} if content_type else {}
    async with (
        cluster_session(cluster) as session,
        session.post(url + PODS, data=payload, headers=headers) as response,
    ):
        status = await response.json(content_type=None)
        assert response.status == 415
        assert response.headers["Content-Type"].startswith("application/json")
    assert status["kind"] == "Status" and status["reason"] == "UnsupportedMediaType"
    assert "application/json" in status["message"]
    assert pods(cluster) == []
    assert not marker.exists()


async def test_json_and_yaml_creates_are_accepted(served: tuple[LocalCluster, str], tmp_path: Path) -> None:
    import yaml

    cluster, url = served
    async with cluster_session(cluster) as session:
        for name, content_type, dump in [
            ("as-json", "application/json", orjson.dumps),
            ("as-yaml", "application/yaml; charset=utf-8", lambda d: yaml.safe_dump(d).encode()),
        ]:
            document = pod(name, tmp_path / name)
            headers = {"Content-Type": content_type}
            async with session.post(url + PODS, data=dump(document), headers=headers) as response:
                assert response.status == 201, await response.text()
    assert sorted(pods(cluster)) == ["as-json", "as-yaml"]


async def test_a_patch_in_another_media_type_is_refused(
    served: tuple[LocalCluster, str], tmp_path: Path
) -> None:
    cluster, url = served
    async with cluster_session(cluster) as session:
        headers = {"Content-Type": "application/json"}
        async with session.post(
            url + PODS, data=orjson.dumps(pod("p", tmp_path / "p")), headers=headers
        ) as r:
            assert r.status == 201
        patch = orjson.dumps({"metadata": {"labels": {"x": "y"}}})
        async with session.patch(f"{url}{PODS}/p", data=patch, headers={"Content-Type": "text/plain"}) as r:
            assert r.status == 415
            assert (await r.json(content_type=None))["reason"] == "UnsupportedMediaType"
    assert "x" not in (cluster.store.get(POD, "default", "p")["metadata"].get("labels") or {})


async def test_a_body_over_the_api_servers_limit_is_a_413_status(served: tuple[LocalCluster, str]) -> None:
    cluster, url = served
    big = b'{"metadata": {"name": "big", "annotations": {"a": "' + b"x" * (4 * 1024 * 1024) + b'"}}}'
    headers = {"Content-Type": "application/json"}
    async with cluster_session(cluster) as session, session.post(url + PODS, data=big, headers=headers) as r:
        assert r.status == 413
        status = await r.json(content_type=None)
    assert status["kind"] == "Status" and status["reason"] == "RequestEntityTooLarge"
    assert pods(cluster) == []


async def test_a_yaml_alias_bomb_body_is_refused_at_once(served: tuple[LocalCluster, str]) -> None:
    cluster, url = served
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    lines += [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]" for i in range(1, 12)]
    bomb = ("metadata: {name: bomb}\nspec:\n  " + "\n  ".join(lines) + "\n").encode()
    assert len(bomb) < 1000
    headers = {"Content-Type": "application/yaml"}
    async with cluster_session(cluster) as session, session.post(url + PODS, data=bomb, headers=headers) as r:
        assert r.status == 400
        status = await r.json(content_type=None)
    assert "more than" in status["message"]
    assert pods(cluster) == []
