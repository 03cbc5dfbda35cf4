"""Credentials from the command line: ``taskplug run --server`` with an API token (``--token-file``,
``TASKPLUG_TOKEN``), ``taskplug serve`` refusing a non-loopback bind without authentication and saying what a
loopback server without it means, and a trusted proxy's user header believed from its address only (a
``taskplug serve`` child process on 127.0.0.1, against a real PostgreSQL)."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner

from service.test_api_cli import drive, spec_file
from service.test_api_replica_double import ReplicaDouble, pod_spec, serve_app
from support.net import free_port, stop_process, wait_until_ready
from taskplug.cli._main import cli
from taskplug.service import AuthSettings, auth_settings, create_token, migrate
from taskplug.service._api_app import create_app
from taskplug.service._auth import is_loopback


@pytest.fixture(scope="module")
def token(postgres_dsn: str) -> str:
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        migrate(conn)
        return create_token(conn, name="laptop-cli", role="submit")


@pytest.fixture(scope="module")
def server(postgres_dsn: str, token: str) -> Iterator[str]:
    with serve_app(create_app(postgres_dsn, poll_interval=0.25, auth=AuthSettings(cache_seconds=0))) as url:
        yield url


def _follow_to_success(postgres_dsn: str, key: str) -> Any:
    def steps(double: ReplicaDouble) -> None:
        double.phase(key, "Success", outputs={"greeting": "hi"})

    return drive(postgres_dsn, key, steps)


def test_run_without_a_token_is_refused_naming_where_to_give_one(server: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["run", str(spec_file(tmp_path, "no-token")), "--server", server])

    assert result.exit_code == 2, result.output
    assert "--token-file: the server refused the credentials" in result.output
    assert "TASKPLUG_TOKEN" in result.output


def test_run_sends_the_token_of_its_token_file(
    server: str, token: str, postgres_dsn: str, tmp_path: Path
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n")
    thread = _follow_to_success(postgres_dsn, "p/d/with-file/n0")

    result = CliRunner().invoke(
        cli,
        [
            "run",
            str(spec_file(tmp_path, "with-file")),
            "--server",
            server,
            "--token-file",
            str(token_file),
            "-o",
            "json",
        ],
    )
    thread.join(timeout=30)

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["phase"] == "Success"
    with psycopg.connect(postgres_dsn) as conn:
        row = conn.execute(
            "SELECT submitted_by FROM taskplug_executions WHERE key = 'p/d/with-file/n0'"
        ).fetchone()
    assert row == ("token:laptop-cli",)


def test_run_sends_the_token_of_the_environment(
    server: str, token: str, postgres_dsn: str, tmp_path: Path
) -> None:
    thread = _follow_to_success(postgres_dsn, "p/d/with-env/n0")

    result = CliRunner(env={"TASKPLUG_TOKEN": token}).invoke(
        cli, ["run", str(spec_file(tmp_path, "with-env")), "--server", server, "-o", "json"]
    )
    thread.join(timeout=30)

    assert result.exit_code == 0, result.output


def test_a_wrong_token_names_its_source(server: str, tmp_path: Path) -> None:
    result = CliRunner(env={"TASKPLUG_TOKEN": "tp_0000000000000000_" + "x" * 43}).invoke(
        cli, ["run", str(spec_file(tmp_path, "wrong")), "--server", server]
    )

    assert result.exit_code == 2
    assert "TASKPLUG_TOKEN: the server refused the credentials" in result.output


def test_a_token_file_is_for_a_server_only(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("tp_x")
    result = CliRunner().invoke(
        cli, ["run", "--token-file", str(tmp_path / "token"), str(spec_file(tmp_path, "local"))]
    )

    assert result.exit_code == 2
    assert "--token-file: only with --server" in result.output


# -- serve's options --------------------------------------------------------------------------------------


def test_serve_help_says_what_a_loopback_server_without_credentials_means() -> None:
    result = CliRunner().invoke(cli, ["serve", "--help"])

    text = " ".join(result.output.split())
    assert "anyone who can connect to this port on this machine can run commands as the user running" in text
    for option in (
        "--trusted-proxy",
        "--proxy-user-header",
        "--oidc-issuer",
        "--oidc-audience",
        "--insecure-no-auth",
    ):
        assert option in text


def test_serve_refuses_a_network_address_without_authentication(postgres_server: Any) -> None:
    dsn = postgres_server.create_database()

    result = CliRunner().invoke(cli, ["serve", "--store", dsn, "--host", "0.0.0.0", "--port", "0"])

    assert result.exit_code == 2, result.output
    assert "--host" in result.output
    for what in ("taskplug token create", "--trusted-proxy", "--oidc-issuer", "--insecure-no-auth"):
        assert what in result.output


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.000.000.001", True),
        ("127.1", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.1.2.3", False),
    ],
)
def test_loopback_is_recognised_however_it_is_spelled(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_the_settings_serve_starts_with() -> None:
    assert auth_settings(host="127.0.0.1", tokens_exist=False).anonymous == "local"
    # Tokens in the store: loopback still lets its user in only while there are none (checked per request).
    assert auth_settings(host="127.0.0.1", tokens_exist=True).anonymous == "local"
    assert auth_settings(host="0.0.0.0", tokens_exist=True).anonymous is None
    assert auth_settings(host="0.0.0.0", tokens_exist=False, insecure_no_auth=True).anonymous == "anonymous"
    proxied = auth_settings(
        host="127.0.0.1", tokens_exist=False, trusted_proxies=["10.0.0.5"], proxy_user_header="X-User"
    )
    assert proxied.anonymous is None  # a proxy configured: nobody without credentials, even on loopback
    with pytest.raises(Exception, match="--trusted-proxy"):
        auth_settings(
            host="127.0.0.1", tokens_exist=False, trusted_proxies=["not-an-address"], proxy_user_header="X"
        )
    with pytest.raises(Exception, match="--proxy-user-header"):
        auth_settings(host="127.0.0.1", tokens_exist=False, trusted_proxies=["10.0.0.5"])


# -- a trusted proxy --------------------------------------------------------------------------------------


def _request(url: str, headers: dict[str, str], body: object = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        url,
        data=data,
        method="POST" if data else "GET",
        headers={"content-type": "application/json", **headers},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def test_a_trusted_proxys_user_header_is_believed_with_its_role(postgres_server: Any) -> None:
    dsn = postgres_server.create_database()
    settings = AuthSettings(
        anonymous=None,
        trusted_proxies=("127.0.0.0/8",),
        proxy_user_header="X-Forwarded-User",
        proxy_role_header="X-Forwarded-Groups",
        proxy_role="read",
    )
    with serve_app(create_app(dsn, auth=settings)) as url:
        headers = {"X-Forwarded-User": "alice", "X-Forwarded-Groups": "staff, submit"}
        status, body = _request(f"{url}/api/v1/executions", headers, {"spec": pod_spec("proxied")})
        assert status == 201, body
        assert body["submitted_by"] == "proxy:alice"

        # The web view signs its user in through the proxy too: no form, the page says who.
        page = urllib.request.Request(f"{url}/executions", headers={"X-Forwarded-User": "alice"})
        with urllib.request.urlopen(page, timeout=10) as answer:
            assert 'id="viewer">proxy:alice<' in answer.read().decode()

        reader = {"X-Forwarded-User": "bob"}
        assert _request(f"{url}/api/v1/executions", reader)[0] == 200
        assert _request(f"{url}/api/v1/executions", reader, {"spec": pod_spec("bob")})[0] == 403
        assert _request(f"{url}/api/v1/executions", {})[0] == 401


def test_a_proxy_header_from_an_untrusted_peer_is_ignored_even_with_forwarded_for(
    postgres_server: Any, tmp_path: Path
) -> None:
    dsn = postgres_server.create_database()
    port = free_port()
    log = tmp_path / "serve.log"
    command = "import sys; from taskplug.cli._serve import serve; sys.argv[0] = 'taskplug serve'; serve()"
    options = [
        "--trusted-proxy",
        "10.0.0.5",
        "--proxy-user-header",
        "X-Forwarded-User",
        "--proxy-role",
        "admin",
    ]
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-c", command, "--store", dsn, "--port", str(port), *options],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(
            lambda: _healthy(f"{url}/healthz"), process, log, what="taskplug serve --trusted-proxy"
        )
        # From 127.0.0.1, claiming to be the proxy (uvicorn would believe X-Forwarded-For from loopback).
        spoofed = {"X-Forwarded-User": "mallory", "X-Forwarded-For": "10.0.0.5", "X-Real-IP": "10.0.0.5"}
        status, body = _request(f"{url}/api/v1/executions", spoofed, {"spec": pod_spec("spoofed")})
        assert status == 401, body
        assert _request(f"{url}/api/v1/executions", spoofed)[0] == 401
    finally:
        stop_process(process)


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False
