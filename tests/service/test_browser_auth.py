"""The web view with credentials on, in Chromium (as ``test_browser.py``): a stranger is sent to sign in, a
token signs in through the form, the pages (and their live streams) work with the session cookie alone, the
execution page shows who submitted and who relaunched, signing out ends it, and a page of another origin
cannot abort through the signed-in browser."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psycopg
import pytest

from service.test_api_replica_double import ReplicaDouble, pod_spec, serve_app
from service.test_browser import LIVE, Problems, browser, expect, screenshot
from taskplug.service import AuthSettings, create_token, migrate
from taskplug.service._api_app import create_app

__all__ = ["browser"]

pytestmark = [pytest.mark.browser, pytest.mark.integration]


@pytest.fixture(scope="module")
def tokens(postgres_dsn: str) -> dict[str, str]:
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        migrate(conn)
        return {
            "web": create_token(conn, name="web-user", role="submit"),
            "reader": create_token(conn, name="web-reader", role="read"),
        }


@pytest.fixture(scope="module")
def server(postgres_dsn: str, tokens: dict[str, str]) -> Iterator[str]:
    app = create_app(postgres_dsn, replica_ttl=3.0, poll_interval=0.25, auth=AuthSettings(anonymous=None))
    with serve_app(app) as url:
        yield url


@pytest.fixture
def page(browser: Any, server: str) -> Iterator[Any]:
    context = browser.new_context(base_url=server, viewport={"width": 1400, "height": 900})
    problems = Problems()
    pg = context.new_page()
    problems.watch(pg)
    pg.allowed = []  # what a test expects to go wrong: a text each allowed problem contains
    try:
        yield pg
    finally:
        context.close()
    found = [p for p in problems.found if not any(allowed in p for allowed in pg.allowed)]
    assert found == [], found


def api_submit(server: str, token: str, name: str) -> str:
    import json
    import urllib.request

    request = urllib.request.Request(
        f"{server}/api/v1/executions",
        data=json.dumps({"spec": pod_spec(name)}).encode(),
        headers={"content-type": "application/json", "authorization": f"Bearer {token}"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        key: str = json.loads(response.read())["key"]
        return key


def test_signing_in_with_a_token_shows_the_live_pages_and_who_submitted(
    page: Any, server: str, tokens: dict[str, str], postgres_dsn: str, tmp_path: Path
) -> None:
    key = api_submit(server, tokens["web"], "br-auth")
    page.goto(f"/executions/{key}")
    expect(page.locator("#token")).to_be_visible()  # sent to sign in first
    screenshot(page, tmp_path, "signin")
    page.fill("#token", tokens["web"])
    page.click("#signin")

    expect(page.locator("#phase")).to_have_text("Queued")  # back on the page it asked for
    expect(page.locator("#submitted-by")).to_have_text("token:web-user")
    expect(page.locator("#viewer")).to_have_text("token:web-user")
    cookie = next(c for c in page.context.cookies() if c["name"] == "taskplug_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert tokens["web"] not in cookie["value"]

    double = ReplicaDouble(postgres_dsn, host="auth-host", pid=77)
    try:
        double.claim(key)
        double.phase(key, "Running", reason="pod started")
        expect(page.locator("#phase")).to_have_text("Running", timeout=LIVE)  # the stream, on the cookie
        double.phase(key, "PermanentFailure", error={"kind": "USER", "code": "x", "message": "boom"})
        expect(page.locator("#relaunch")).to_be_visible(timeout=LIVE)
    finally:
        double.close()
    page.click("#relaunch")
    expect(page.locator("#relaunch-of")).to_have_text(key)
    expect(page.locator("#submitted-by")).to_have_text("token:web-user")
    screenshot(page, tmp_path, "signed-in-relaunched")

    page.click("#signout")
    expect(page.locator("#token")).to_be_visible()
    page.goto("/executions")
    expect(page.locator("#token")).to_be_visible()  # the session is over


def test_a_reader_is_told_which_role_relaunch_needs(
    page: Any, server: str, tokens: dict[str, str], postgres_dsn: str
) -> None:
    key = api_submit(server, tokens["web"], "br-auth-read")
    double = ReplicaDouble(postgres_dsn, host="auth-host", pid=78)
    try:
        double.claim(key)
        double.phase(key, "Success", outputs={"greeting": "hi"})
    finally:
        double.close()
    page.goto(f"/signin?next=/executions/{key}")
    page.fill("#token", tokens["reader"])
    page.click("#signin")
    expect(page.locator("#phase")).to_have_text("Success")

    page.allowed.append("403")  # the refusal is what this test is about
    with page.expect_response(lambda r: r.url.endswith("/relaunch")) as answer:
        page.click("#relaunch")
    assert answer.value.status == 403
    expect(page.locator("#signin-message")).to_contain_text("needs the submit role")


def test_another_origins_page_cannot_abort_through_a_signed_in_browser(
    page: Any, server: str, tokens: dict[str, str]
) -> None:
    key = api_submit(server, tokens["web"], "br-auth-csrf")
    page.goto(f"/signin?next=/executions/{key}")
    page.fill("#token", tokens["web"])
    page.click("#signin")
    expect(page.locator("#phase")).to_have_text("Queued")

    evil = f"""<form id="f" method="post" action="{server}/executions/{key}/abort"></form>
<script>document.getElementById("f").submit()</script>"""

    class Evil(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            data = evil.encode()
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    site = ThreadingHTTPServer(("127.0.0.1", 0), Evil)
    thread = threading.Thread(target=site.serve_forever, daemon=True)
    thread.start()
    other = page.context.new_page()
    try:
        # Another origin (another port): its form posts to the server in this signed-in browser.
        with other.expect_response(lambda r: r.url.endswith("/abort")) as answer:
            other.goto(f"http://localhost:{site.server_address[1]}/")
        assert answer.value.status in (401, 403)
    finally:
        other.close()
        site.shutdown()
        site.server_close()
    page.reload()
    expect(page.locator("#phase")).to_have_text("Queued")
    expect(page.locator("#aborting")).to_have_count(0)
