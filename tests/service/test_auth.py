"""Who may use ``taskplug serve``, against a real PostgreSQL: API tokens and their roles (``taskplug token``),
the loopback server that lets its one user in until a token exists, web sign-in with a session cookie, and
the identity recorded on what is submitted and relaunched."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from service.test_api_replica_double import ReplicaDouble, pod_spec
from taskplug.cli._main import cli
from taskplug.service import AuthSettings, create_token, migrate
from taskplug.service._api_app import create_app

pytest.importorskip("fastapi")

NO_CACHE = AuthSettings(cache_seconds=0.0)
"""A loopback server's settings that believe nothing longer than the request: a revoke shows at once."""


def make_token(dsn: str, name: str, role: str, **kw: Any) -> str:
    with psycopg.connect(dsn, autocommit=True) as conn:
        migrate(conn)
        return create_token(conn, name=name, role=role, **kw)


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def invoke(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture(scope="module")
def tokens(postgres_dsn: str) -> dict[str, str]:
    """One token of each role (made before the server starts: this database is never open to `local`)."""
    return {role: make_token(postgres_dsn, f"{role}-bot", role) for role in ("read", "submit", "admin")}


@pytest.fixture(scope="module")
def client(postgres_dsn: str, tokens: dict[str, str]) -> Iterator[TestClient]:
    with TestClient(create_app(postgres_dsn, auth=NO_CACHE)) as c:
        yield c


def submit(client: TestClient, name: str | None, token: str, **extra: Any) -> Any:
    return client.post("/api/v1/executions", json={"spec": pod_spec(name), **extra}, headers=bearer(token))


# -- tokens and roles -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [{}, bearer("tp_0123456789abcdef_" + "x" * 43), bearer("not-a-token"), {"authorization": "Basic YTpi"}],
    ids=["none", "unknown-token", "garbage", "basic"],
)
def test_a_request_without_good_credentials_is_401_in_the_apis_error_shape(
    client: TestClient, tokens: dict[str, str], headers: dict[str, str]
) -> None:
    for method, path in (("GET", "/api/v1/executions"), ("POST", "/api/v1/executions"), ("GET", "/metrics")):
        response = client.request(method, path, headers=headers, json={"spec": pod_spec("nope")})
        assert response.status_code == 401, (method, path, response.text)
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert set(response.json()) == {"error"} and response.json()["error"]["message"]
    assert client.get("/api/v1/executions/p/d/nope/n0", headers=bearer(tokens["read"])).status_code == 404


def test_health_and_the_api_description_need_no_credentials(client: TestClient) -> None:
    assert client.get("/healthz").status_code == 200
    assert client.get("/api/v1/healthz").status_code == 200
    assert client.get("/api/v1/executions").status_code == 401
    document = client.get("/api/v1/openapi.json")
    assert document.status_code == 200
    # The document declares bearer authentication (Swagger UI's Authorize), and none for health.
    assert document.json()["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    assert document.json()["security"] == [{"bearer": []}, {}]  # optional: a loopback server, until a token
    assert document.json()["paths"]["/api/v1/healthz"]["get"]["security"] == []
    assert "Bearer <token>" in document.json()["info"]["description"]


def test_a_read_token_reads_but_may_not_submit_abort_or_relaunch(
    client: TestClient, tokens: dict[str, str]
) -> None:
    key = submit(client, "by-submitter", tokens["submit"]).json()["key"]
    read = bearer(tokens["read"])

    assert client.get("/api/v1/executions", headers=read).status_code == 200
    assert client.get(f"/api/v1/executions/{key}", headers=read).status_code == 200
    for response in (
        submit(client, "by-reader", tokens["read"]),
        client.post(f"/api/v1/executions/{key}/abort", headers=read),
        client.post(f"/api/v1/executions/{key}/relaunch", headers=read),
    ):
        assert response.status_code == 403, response.text
        assert "submit role" in response.json()["error"]["message"]
    assert client.get("/api/v1/executions/p/d/by-reader/n0", headers=read).status_code == 404
    assert client.get(f"/api/v1/executions/{key}", headers=read).json()["aborting"] is False


def test_a_read_token_lists_signals_but_only_a_submit_token_answers_a_gate(
    client: TestClient, tokens: dict[str, str], postgres_dsn: str
) -> None:
    from flyteidl.core import types_pb2

    from service.replica_helpers import claim_row, replica_row
    from taskplug.service import PostgresStateStore

    key = submit(client, "gated-auth", tokens["submit"]).json()["key"]
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        rid = replica_row(conn)
        store = PostgresStateStore(psycopg.connect(postgres_dsn, autocommit=True), replica_id=rid)
        try:
            store.claim(key, claim_row(conn, rid, key))
            store.get_or_create_signal(
                key, "approve-y", types_pb2.LiteralType(simple=types_pb2.SimpleType.BOOLEAN)
            )
        finally:
            store.close()
    signals = f"/api/v1/executions/{key}/signals"

    assert client.get(signals, headers=bearer(tokens["read"])).json()[0]["is_set"] is False
    refused = client.post(f"{signals}/approve-y", json={"value": True}, headers=bearer(tokens["read"]))
    assert refused.status_code == 403 and "submit role" in refused.json()["error"]["message"]
    assert client.post(f"{signals}/approve-y", json={"value": True}).status_code == 401
    answered = client.post(f"{signals}/approve-y", json={"value": True}, headers=bearer(tokens["submit"]))
    assert answered.status_code == 200, answered.text
    assert (answered.json()["value"], answered.json()["set_by"]) == (True, "token:submit-bot")


def test_the_submitter_and_the_relauncher_are_recorded_and_shown(
    client: TestClient, tokens: dict[str, str], postgres_dsn: str
) -> None:
    created = submit(client, "recorded", tokens["submit"])
    assert created.status_code == 201, created.text
    key = created.json()["key"]
    assert created.json()["submitted_by"] == "token:submit-bot"
    listed = client.get("/api/v1/executions", headers=bearer(tokens["read"])).json()["items"]
    assert {e["key"]: e["submitted_by"] for e in listed}[key] == "token:submit-bot"

    double = ReplicaDouble(postgres_dsn)
    try:
        double.claim(key)
        double.phase(key, "PermanentFailure", error={"kind": "USER", "code": "x", "message": "boom"})
    finally:
        double.close()
    relaunched = client.post(f"/api/v1/executions/{key}/relaunch", headers=bearer(tokens["admin"]))
    assert relaunched.status_code == 201, relaunched.text
    assert relaunched.json()["submitted_by"] == "token:admin-bot"

    page = client.get(f"/executions/{key}", headers=bearer(tokens["read"]))
    assert page.status_code == 200
    assert re.search(r'id="submitted-by">token:submit-bot<', page.text)


def test_an_expired_token_is_401(client: TestClient, postgres_dsn: str) -> None:
    from datetime import timedelta

    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        token = create_token(conn, name="short-lived", role="read", expires_in=timedelta(hours=1))
        assert client.get("/api/v1/executions", headers=bearer(token)).status_code == 200
        conn.execute(
            "UPDATE taskplug_tokens SET expires_at = now() - interval '1 second' WHERE name = 'short-lived'"
        )

    assert client.get("/api/v1/executions", headers=bearer(token)).status_code == 401


def test_a_tokens_secret_must_match_not_only_its_id(client: TestClient, tokens: dict[str, str]) -> None:
    forged = tokens["admin"][:-1] + ("A" if tokens["admin"][-1] != "A" else "B")

    assert client.get("/api/v1/executions", headers=bearer(forged)).status_code == 401


def test_the_token_command_creates_lists_and_revokes(client: TestClient, postgres_dsn: str) -> None:
    made = invoke(
        "token", "create", "--store", postgres_dsn, "--name", "ci", "--role", "submit", "--expires", "30d"
    )
    assert made.exit_code == 0, made.output
    token = made.stdout.splitlines()[0]
    assert re.fullmatch(r"tp_[0-9a-f]{16}_[A-Za-z0-9_-]{43}", token)
    assert submit(client, "from-ci", token).status_code == 201

    again = invoke("token", "create", "--store", postgres_dsn, "--name", "ci")
    assert again.exit_code == 2 and "--name" in again.output

    listed = invoke("token", "list", "--store", postgres_dsn)
    assert listed.exit_code == 0, listed.output
    row = next(line for line in listed.stdout.splitlines() if line.startswith("ci "))
    assert row.split()[1] == "submit" and "never" not in row.split()[3]  # used once, expires in 30 days
    assert token.split("_", 2)[2] not in listed.stdout and token.split("_", 2)[2] not in made.stderr

    revoked = invoke("token", "revoke", "--store", postgres_dsn, "ci")
    assert revoked.exit_code == 0, revoked.output
    assert submit(client, "from-ci-again", token).status_code == 401
    missing = invoke("token", "revoke", "--store", postgres_dsn, "ci")
    assert missing.exit_code == 2 and "no token named 'ci'" in missing.output


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("--name", "ci", "--role", "root"), "--role"),
        (("--name", "no spaces"), "--name"),
        (("--name", "x", "--expires", "soon"), "--expires"),
    ],
)
def test_bad_token_options_exit_2_naming_them(postgres_dsn: str, args: tuple[str, ...], named: str) -> None:
    result = invoke("token", "create", "--store", postgres_dsn, *args)
    assert result.exit_code == 2
    assert named in result.output


def test_token_management_over_the_api_is_for_admins(
    client: TestClient, tokens: dict[str, str], postgres_dsn: str
) -> None:
    assert client.get("/api/v1/tokens", headers=bearer(tokens["submit"])).status_code == 403
    listed = client.get("/api/v1/tokens", headers=bearer(tokens["admin"]))
    assert listed.status_code == 200, listed.text
    names = {t["name"]: t["role"] for t in listed.json()}
    assert names["read-bot"] == "read" and "secret" not in listed.text and tokens["read"] not in listed.text

    doomed = make_token(postgres_dsn, "doomed", "read")
    assert client.get("/api/v1/executions", headers=bearer(doomed)).status_code == 200
    assert client.delete("/api/v1/tokens/doomed", headers=bearer(tokens["submit"])).status_code == 403
    assert client.delete("/api/v1/tokens/doomed", headers=bearer(tokens["admin"])).status_code == 204
    assert client.get("/api/v1/executions", headers=bearer(doomed)).status_code == 401
    gone = client.delete("/api/v1/tokens/doomed", headers=bearer(tokens["admin"]))
    assert gone.status_code == 404 and gone.json()["error"]["field"] == "name"


# -- web sign-in ------------------------------------------------------------------------------------------


def test_a_page_sends_a_stranger_to_sign_in_and_a_token_signs_in_with_a_strict_cookie(
    postgres_dsn: str, tokens: dict[str, str]
) -> None:
    with TestClient(create_app(postgres_dsn, auth=NO_CACHE), base_url="https://testserver") as browser:
        away = browser.get("/executions?q=x", follow_redirects=False)
        assert away.status_code == 303
        assert away.headers["location"] == "/signin?next=%2Fexecutions%3Fq%3Dx"
        assert browser.get("/signin").status_code == 200

        wrong = browser.post("/signin", data={"token": "tp_nope", "next": "/executions"})
        assert wrong.status_code == 401 and "taskplug_session" not in wrong.headers.get("set-cookie", "")

        signed = browser.post(
            "/signin", data={"token": tokens["read"], "next": "/executions?q=x"}, follow_redirects=False
        )
        assert signed.status_code == 303 and signed.headers["location"] == "/executions?q=x"
        cookie = signed.headers["set-cookie"]
        assert tokens["read"] not in cookie
        for attribute in ("HttpOnly", "SameSite=strict", "Secure", "Path=/"):
            assert attribute.lower() in cookie.lower(), cookie
        page = browser.get("/executions")
        assert page.status_code == 200 and 'id="viewer">token:read-bot<' in page.text
        assert browser.get("/api/v1/executions").status_code == 200  # the same session on the API
        # A read session may not abort: 403 naming the role.
        refused = browser.post("/api/v1/executions", json={"spec": pod_spec("web")})
        assert refused.status_code == 403 and "submit role" in refused.json()["error"]["message"]

        out = browser.post("/signout", follow_redirects=False)
        assert out.status_code == 303
        browser.cookies.set(
            "taskplug_session", cookie.split(";")[0].split("=", 1)[1]
        )  # replayed after sign-out
        assert browser.get("/executions", follow_redirects=False).status_code == 303


def test_signing_in_never_redirects_to_another_site(postgres_dsn: str, tokens: dict[str, str]) -> None:
    with TestClient(create_app(postgres_dsn, auth=NO_CACHE)) as browser:
        for target in ("https://evil.example/", "//evil.example/x", "/\\evil.example"):
            signed = browser.post(
                "/signin", data={"token": tokens["read"], "next": target}, follow_redirects=False
            )
            assert signed.headers["location"] == "/executions", target
        assert (
            "Secure" not in signed.headers["set-cookie"]
        )  # plain http: a Secure cookie would never come back


def test_a_session_ends_when_its_token_is_revoked(postgres_dsn: str) -> None:
    token = make_token(postgres_dsn, "revoked-under-a-session", "submit")
    with TestClient(create_app(postgres_dsn, auth=NO_CACHE)) as browser:
        browser.post("/signin", data={"token": token})
        assert browser.get("/api/v1/executions").status_code == 200
        assert invoke("token", "revoke", "--store", postgres_dsn, "revoked-under-a-session").exit_code == 0
        assert browser.get("/api/v1/executions").status_code == 401


def test_a_signed_in_browser_still_cannot_be_driven_by_another_site(
    postgres_dsn: str, tokens: dict[str, str]
) -> None:
    with TestClient(create_app(postgres_dsn, auth=NO_CACHE)) as browser:
        browser.post("/signin", data={"token": tokens["submit"]})
        key = browser.post("/api/v1/executions", json={"spec": pod_spec("cross")}).json()["key"]
        for headers in ({"origin": "https://evil.example"}, {"sec-fetch-site": "cross-site"}):
            assert browser.post(f"/executions/{key}/abort", headers=headers).status_code == 403
            assert browser.post(f"/executions/{key}/relaunch", headers=headers).status_code == 403
        assert browser.get(f"/api/v1/executions/{key}").json()["aborting"] is False


# -- the loopback server without configuration ------------------------------------------------------------


def test_a_loopback_server_lets_its_user_in_as_local_until_a_token_exists(postgres_server: Any) -> None:
    dsn = postgres_server.create_database()
    with TestClient(create_app(dsn, auth=NO_CACHE)) as laptop:
        created = laptop.post("/api/v1/executions", json={"spec": pod_spec("mine")})
        assert created.status_code == 201, created.text
        assert created.json()["submitted_by"] == "local"
        description = laptop.get("/api/v1/openapi.json").json()["info"]["description"]
        assert "anyone who can connect to this port on this machine can run commands as" in description

        token = make_token(dsn, "first", "admin")

        assert laptop.get("/api/v1/executions").status_code == 401
        assert laptop.get("/api/v1/executions", headers=bearer(token)).status_code == 200


def test_a_server_configured_for_credentials_lets_nobody_in_without(postgres_server: Any) -> None:
    dsn = postgres_server.create_database()
    with TestClient(create_app(dsn, auth=AuthSettings(anonymous=None))) as strict:
        assert strict.get("/api/v1/openapi.json").json()["security"] == [{"bearer": []}]
        assert strict.get("/api/v1/executions").status_code == 401
        assert strict.get("/executions", follow_redirects=False).status_code == 303
