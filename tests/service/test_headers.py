"""Every answer of ``taskplug serve`` carries its security headers (a CSP with ``frame-ancestors 'none'``,
``X-Frame-Options``, ``nosniff``, a ``Referrer-Policy``), and a form posted from another site's page is refused
when the browser names that page only in ``Referer``. Relaunch's confirmation is in ``test_web.py``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from service.test_api_replica_double import pod_spec
from taskplug.service._api_app import create_app


@pytest.fixture(scope="module")
def client(postgres_dsn: str) -> Iterator[TestClient]:
    with TestClient(create_app(postgres_dsn)) as c:
        yield c


@pytest.fixture(scope="module")
def key(client: TestClient) -> str:
    response = client.post("/api/v1/executions", json={"spec": pod_spec("headers")})
    assert response.status_code == 201, response.text
    value: str = response.json()["key"]
    return value


PATHS = [
    "/executions",
    "/executions/{key}",
    "/executions/p/d/nobody/n0",
    "/replicas",
    "/replicas?fragment=true",
    "/api/v1/executions",
    "/api/v1/executions/{key}",
    "/api/v1/executions/p/d/nobody/n0",
    "/api/v1/healthz",
    "/healthz",
    "/metrics",
    "/api/v1/openapi.json",
    "/api/v1/docs",
    "/static/style.css",
    "/static/htmx.min.js",
    "/favicon.ico",
    "/no-such-page",
    "/api/v1/executions?limit=0",
]


@pytest.mark.parametrize("path", PATHS)
def test_every_page_and_api_answer_carries_the_security_headers(
    client: TestClient, key: str, path: str
) -> None:
    response = client.get(path.format(key=key))

    policy = response.headers.get("content-security-policy", "")
    assert "frame-ancestors 'none'" in policy, path
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy, path
    assert response.headers.get("x-frame-options") == "DENY", path
    assert response.headers.get("x-content-type-options") == "nosniff", path
    assert response.headers.get("referrer-policy") == "same-origin", path


def test_the_api_docs_page_allows_exactly_its_own_inline_script(client: TestClient) -> None:
    import base64
    import hashlib
    import re

    page = client.get("/api/v1/docs")
    inline = re.findall(r"<script>(.*?)</script>", page.text, re.DOTALL)
    assert len(inline) == 1
    digest = base64.b64encode(hashlib.sha256(inline[0].encode()).digest()).decode()

    assert f"'sha256-{digest}'" in page.headers["content-security-policy"]


def test_the_stream_and_a_refusal_carry_the_headers_too(client: TestClient, key: str) -> None:
    refused = client.post(f"/executions/{key}/abort", headers={"origin": "https://evil.example"})
    assert refused.status_code == 403
    assert refused.headers["x-frame-options"] == "DENY"
    with client.stream("GET", f"/executions/{key}/stream") as stream:
        assert stream.status_code == 200
        assert "frame-ancestors 'none'" in stream.headers["content-security-policy"]


@pytest.mark.parametrize("action", ["abort", "relaunch"])
def test_a_form_posted_from_another_sites_page_without_origin_is_refused_by_its_referer(
    client: TestClient, action: str
) -> None:
    key = client.post("/api/v1/executions", json={"spec": pod_spec(f"referer-{action}")}).json()["key"]
    before = client.get(f"/api/v1/executions/{key}").json()
    total = len(client.get("/api/v1/executions", params={"limit": 500}).json()["items"])

    for referer in ("https://evil.example/page", "http://testserver.evil.example/", "null"):
        response = client.post(
            f"/executions/{key}/{action}",
            data={"confirm": "yes"},
            headers={"referer": referer},
            follow_redirects=False,
        )
        assert response.status_code == 403, referer

    assert client.get(f"/api/v1/executions/{key}").json()["aborting"] is before["aborting"] is False
    assert len(client.get("/api/v1/executions", params={"limit": 500}).json()["items"]) == total
    # This server's own page as Referer (the browser's own form) goes through.
    same = client.post(
        f"/executions/{key}/{action}",
        data={"confirm": "yes"},
        headers={"referer": f"http://testserver/executions/{key}"},
        follow_redirects=False,
    )
    assert same.status_code == 303
