"""The web view in a real browser: Playwright driving Debian's Chromium (``scripts/setup`` installs it; no
browser is downloaded) against uvicorn on 127.0.0.1 and a throwaway PostgreSQL.

Executions change here as a replica changes them, through :class:`ReplicaDouble` (the rows and NOTIFYs the
service contract says a replica writes); a page must show each change without a reload. Every page's
console errors, page errors and failed requests are collected and must be none. A screenshot of each page is
saved under the test's tmp dir and copied to ``/tmp/taskplug-screens/``.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from service.test_api_replica_double import ReplicaDouble, pod_spec, serve_app

playwright_sync = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (extra `test`)"
)
pytest.importorskip("uvicorn", reason="uvicorn is not installed (extra `web`)")

from taskplug.service._api_app import create_app  # noqa: E402 (after the skips: needs the web extra)

pytestmark = [pytest.mark.browser, pytest.mark.integration]

expect = playwright_sync.expect
SCREENS = Path("/tmp/taskplug-screens")
# ms: how long a change may take to show without a reload. Generous, so a loaded CI machine cannot fail the
# test: what is asserted is that the page updates by itself (an SSE push), not how fast; the push follows
# the NOTIFY of the commit, well under the 2 s on an idle machine.
LIVE = 10_000
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def server(postgres_dsn: str) -> Iterator[str]:
    """The API and web view on uvicorn, 127.0.0.1, in a thread of the test process."""
    with serve_app(create_app(postgres_dsn, replica_ttl=3.0, poll_interval=0.25)) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("Chromium is not installed (scripts/setup installs Debian's chromium)")
    with playwright_sync.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


class Problems:
    """What a page must never show: console errors, uncaught page errors, failed or 4xx/5xx requests."""

    def __init__(self) -> None:
        self.found: list[str] = []

    def watch(self, page: Any) -> None:
        page.on(
            "console",
            lambda m: self.found.append(f"console {m.type}: {m.text}") if m.type == "error" else None,
        )
        page.on("pageerror", lambda e: self.found.append(f"page error: {e}"))
        page.on(
            "requestfailed",
            # An SSE stream the page closes as it navigates away is cancelled, not failed.
            lambda r: (
                None
                if "/stream" in r.url and "ERR_ABORTED" in (r.failure or "")
                else self.found.append(f"request failed: {r.url} {r.failure}")
            ),
        )
        page.on(
            "response", lambda r: self.found.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None
        )


@pytest.fixture
def page(browser: Any, server: str) -> Iterator[Any]:
    context = browser.new_context(base_url=server, viewport={"width": 1400, "height": 900})
    problems = Problems()
    pg = context.new_page()
    problems.watch(pg)
    pg.problems = problems
    try:
        yield pg
    finally:
        context.close()
    assert problems.found == [], problems.found


@pytest.fixture
def replica(postgres_dsn: str, server: str) -> Iterator[ReplicaDouble]:
    double = ReplicaDouble(postgres_dsn, host="browser-host", pid=1234)
    double.heartbeat()
    yield double
    double.close()


def screenshot(page: Any, tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    SCREENS.mkdir(parents=True, exist_ok=True)
    shutil.copy(path, SCREENS / path.name)
    return path


def submit(page: Any, name: str, **extra: Any) -> str:
    response = page.request.post("/api/v1/executions", data={"spec": pod_spec(name), **extra})
    assert response.status == 201, response.text()
    key: str = response.json()["key"]
    return key


def row(page: Any, key: str) -> Any:
    return page.locator("#rows tr", has=page.locator(f'a[href="/executions/{key}"]'))


def test_the_list_filters_in_the_url_and_back_restores_them(
    page: Any, replica: ReplicaDouble, tmp_path: Path
) -> None:
    keys = [submit(page, f"br-list-{i}") for i in range(3)]
    replica.claim(keys[0])
    replica.phase(keys[0], "Running", reason="pod started")

    page.goto("/executions?q=br-list-")
    expect(page.locator("#rows tr")).to_have_count(3)
    assert page.locator("#rows td.key").all_inner_texts() == list(reversed(keys))
    screenshot(page, tmp_path, "executions-list")

    page.select_option("#filter-phase", "Running")
    expect(page).to_have_url(re.compile(r"phase=Running"))
    expect(page.locator("#rows tr")).to_have_count(1)
    expect(row(page, keys[0]).locator(".badge")).to_have_text("Running")
    screenshot(page, tmp_path, "executions-filtered")

    page.go_back()
    expect(page).not_to_have_url(re.compile(r"phase="))
    expect(page.locator("#rows tr")).to_have_count(3)


def test_phase_changes_and_new_submissions_appear_without_reload(
    page: Any, replica: ReplicaDouble, tmp_path: Path
) -> None:
    key = submit(page, "br-live")
    page.goto("/executions?q=br-live")
    expect(row(page, key).locator(".badge")).to_have_text("Queued")
    page.evaluate("window.__not_reloaded = true")

    replica.claim(key)
    replica.phase(key, "Running", reason="pod started")
    expect(row(page, key).locator(".badge")).to_have_text("Running", timeout=LIVE)
    expect(row(page, key)).to_contain_text("browser-host:1234", timeout=LIVE)

    newer = submit(page, "br-live-new")
    expect(row(page, newer)).to_be_visible(timeout=LIVE)
    assert page.locator("#rows td.key").all_inner_texts()[0] == newer  # newest first

    replica.phase(key, "Success", outputs={"greeting": "hi"})
    expect(row(page, key).locator(".badge")).to_have_text("Success", timeout=LIVE)
    assert page.evaluate("window.__not_reloaded") is True
    screenshot(page, tmp_path, "executions-live")


def test_the_execution_page_shows_events_attempts_logs_outputs_and_stays_live(
    page: Any, replica: ReplicaDouble, tmp_path: Path
) -> None:
    key = submit(page, "br-detail", labels={"team": "ml"})
    replica.claim(key)
    logs = [{"name": "Kubernetes Logs (User)", "uri": "http://127.0.0.1:9/logs/br-detail-n0-0"}]
    replica.phase(key, "Running", reason="pod started", logs=logs)
    replica.phase(
        key,
        "RetryableFailure",
        reason="OOMKilled",
        error={"code": "OOMKilled", "kind": "USER", "message": "container exceeded its memory limit"},
        logs=logs,
    )

    page.goto(f"/executions/{key}")
    expect(page.locator("#phase")).to_have_text("RetryableFailure")
    card = page.locator("#attempt-0")
    expect(card.locator(".error")).to_contain_text("container exceeded its memory limit")
    link = card.locator("a", has_text="Kubernetes Logs (User)")
    expect(link).to_have_attribute("href", logs[0]["uri"])
    page.evaluate("window.__not_reloaded = true")

    replica.phase(key, "Running", attempt=1, reason="second attempt")
    replica.phase(key, "Success", attempt=1, outputs={"greeting": "hello, world"})
    expect(page.locator("#phase")).to_have_text("Success", timeout=LIVE)
    expect(page.locator("#outputs")).to_contain_text('"greeting": "hello, world"', timeout=LIVE)
    expect(page.locator("#attempt-1 .badge")).to_have_text("Success", timeout=LIVE)
    phases = page.locator("#event-table tr.event td:nth-child(3)").all_inner_texts()
    assert phases == ["Running", "RetryableFailure", "Running", "Success"]
    expect(page.locator("#abort")).to_have_count(0)
    assert page.evaluate("window.__not_reloaded") is True
    screenshot(page, tmp_path, "execution-detail")


def test_a_failed_execution_shows_its_error_card(page: Any, replica: ReplicaDouble, tmp_path: Path) -> None:
    key = submit(page, "br-failed")
    replica.claim(key)
    replica.phase(
        key,
        "PermanentFailure",
        reason="exit code 3",
        error={
            "code": "ContainersNotReady",
            "kind": "USER",
            "message": "[primary] terminated with exit code (3)",
        },
    )

    page.goto(f"/executions/{key}")

    expect(page.locator("#error")).to_contain_text("USER · ContainersNotReady")
    expect(page.locator("#error")).to_contain_text("terminated with exit code (3)")
    screenshot(page, tmp_path, "execution-failed")


def test_relaunch_appears_when_the_execution_ends_and_opens_the_new_one(
    page: Any, replica: ReplicaDouble, tmp_path: Path
) -> None:
    key = submit(page, "br-relaunch")
    replica.claim(key)
    replica.phase(key, "Running", reason="pod started")
    page.goto(f"/executions/{key}")
    expect(page.locator("#abort")).to_be_visible()
    expect(page.locator("#relaunch")).to_have_count(0)

    # It fails while the page is open: the live header swaps Abort for Relaunch.
    replica.phase(key, "PermanentFailure", reason="exit code 3", error={"kind": "USER", "message": "boom"})
    expect(page.locator("#relaunch")).to_be_visible(timeout=LIVE)
    expect(page.locator("#abort")).to_have_count(0)

    # Relaunch asks first, as Abort does: a page whose form confirms.
    page.click("#relaunch")
    expect(page.locator("#confirm-relaunch")).to_be_visible()
    screenshot(page, tmp_path, "execution-relaunch-confirm")
    page.click("#confirm-relaunch")
    expect(page).not_to_have_url(re.compile(re.escape(key) + "(/relaunch)?$"))
    expect(page.locator("#phase")).to_have_text("Queued")
    expect(page.locator("#relaunch-of")).to_have_text(key)
    new_key = page.locator("#key").inner_text()
    assert new_key != key
    assert page.request.get(f"/api/v1/executions/{new_key}").json()["labels"] == {"relaunch-of": key}
    screenshot(page, tmp_path, "execution-relaunched")
    page.click("#relaunch-of")
    expect(page.locator("#key")).to_have_text(key)


def test_abort_from_the_page_asks_first_then_shows_aborting_then_aborted(
    page: Any, replica: ReplicaDouble, tmp_path: Path
) -> None:
    key = submit(page, "br-abort")
    replica.claim(key)
    replica.phase(key, "Running", reason="pod started")
    page.goto(f"/executions/{key}")
    expect(page.locator("#phase")).to_have_text("Running")

    dismissed: list[str] = []
    page.once("dialog", lambda d: (dismissed.append(d.message), d.dismiss()))
    page.click("#abort")
    expect(page.locator("#abort")).to_be_visible()
    assert dismissed and key in dismissed[0]
    assert page.request.get(f"/api/v1/executions/{key}").json()["aborting"] is False

    page.once("dialog", lambda d: d.accept())
    page.click("#abort")
    expect(page.locator("#aborting")).to_have_text("aborting…", timeout=LIVE)
    expect(page.locator("#abort")).to_have_count(0)
    assert page.request.get(f"/api/v1/executions/{key}").json()["aborting"] is True
    screenshot(page, tmp_path, "execution-aborting")

    # The owner sees abort_requested_at, aborts what it created and ends the execution Aborted.
    replica.phase(key, "Aborted", reason="aborted on request")
    expect(page.locator("#phase")).to_have_text("Aborted", timeout=LIVE)
    expect(page.locator("#aborting")).to_have_count(0)
    assert page.request.get(f"/api/v1/executions/{key}").json()["phase"] == "Aborted"
    screenshot(page, tmp_path, "execution-aborted")


def test_a_live_update_while_abort_is_held_down_does_not_lose_the_click(
    page: Any, replica: ReplicaDouble, tmp_path: Path
) -> None:
    """The stream re-sends the page's sections as the execution changes. One arriving between the press and
    the release of Abort must leave the button where it is: were it swapped for a copy (as when Abort was
    part of the re-sent header), the browser would click nothing at the release: no question, no request,
    no error, and the execution would run on."""
    key = submit(page, "br-abort-held")
    replica.claim(key)
    replica.phase(key, "Running", reason="pod started")
    page.goto(f"/executions/{key}")
    expect(page.locator("#phase")).to_have_text("Running")
    box = page.locator("#abort").bounding_box()
    assert box is not None
    asked: list[str] = []
    page.once("dialog", lambda d: (asked.append(d.message), d.accept()))

    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.down()
    replica.phase(key, "Running", reason="image pulled", version=1)
    expect(page.locator("#reason")).to_have_text("image pulled", timeout=LIVE)  # the header was re-sent
    with page.expect_response(lambda r: r.url.endswith(f"/executions/{key}/abort"), timeout=LIVE) as answer:
        page.mouse.up()

    assert answer.value.status == 200
    assert asked and key in asked[0]
    expect(page.locator("#aborting")).to_have_text("aborting…", timeout=LIVE)
    expect(page.locator("#abort")).to_have_count(0)
    assert page.request.get(f"/api/v1/executions/{key}").json()["aborting"] is True
    screenshot(page, tmp_path, "execution-abort-held")


def test_the_replicas_page_follows_heartbeats(page: Any, postgres_dsn: str, tmp_path: Path) -> None:
    a, b = ReplicaDouble(postgres_dsn, host="replica-a"), ReplicaDouble(postgres_dsn, host="replica-b")
    try:
        a.heartbeat()
        b.heartbeat()
        page.goto("/replicas")
        expect(page.locator(f"#replica-{b.id}")).to_have_attribute("data-state", "live")
        # b stops heartbeating (as a SIGKILLed replica does): the page shows it silent without a reload.
        b.heartbeat(age_seconds=10)
        expect(page.locator(f"#replica-{b.id}")).to_have_attribute("data-state", "silent", timeout=5_000)
        expect(page.locator(f"#replica-{a.id}")).to_have_attribute("data-state", "live")
        screenshot(page, tmp_path, "replicas")
    finally:
        a.close()
        b.close()


def test_the_api_docs_page_renders_every_route_from_this_server_alone(
    page: Any, server: str, tmp_path: Path
) -> None:
    """Swagger UI at /api/v1/docs draws the API's operations with every asset served by taskplug itself:
    the browser asks nothing of any other host (a reader offline, or behind a proxy, still gets the page)."""
    from urllib.parse import urlsplit

    hosts: set[str] = set()
    page.on("request", lambda r: hosts.add(urlsplit(r.url).netloc))
    page.goto("/api/v1/docs")
    operations = page.locator(".opblock-summary-path")
    expect(operations.first).to_be_visible(timeout=LIVE)
    paths = set(operations.all_inner_texts())
    assert {"/api/v1/executions", "/api/v1/executions/{key}/abort", "/api/v1/replicas"} <= {
        p.replace("\u200b", "") for p in paths
    }
    assert hosts == {urlsplit(server).netloc}, hosts
    screenshot(page, tmp_path, "api-docs")


def test_a_page_of_another_origin_cannot_frame_the_view(
    browser: Any, server: str, replica: ReplicaDouble
) -> None:
    """``frame-ancestors 'none'`` (and ``X-Frame-Options: DENY``): a decoy page cannot put Abort or Relaunch
    under the user's click. The refusal is the browser's console error, so this page is not watched."""
    key = "p/d/br-framed/n0"
    context = browser.new_context()
    try:
        page = context.new_page()
        page.request.post(f"{server}/api/v1/executions", data={"spec": pod_spec("br-framed")})
        page.set_content(
            f'<iframe id="decoy" src="{server}/executions/{key}" width="800" height="600"></iframe>'
        )
        frame = page.frame_locator("#decoy")
        page.wait_for_load_state("load")
        assert frame.locator("#key").count() == 0
        assert frame.locator("#abort").count() == 0
        # The same page opened directly (not framed) shows it.
        page.goto(f"{server}/executions/{key}")
        expect(page.locator("#key")).to_have_text(key)
    finally:
        context.close()


def test_a_rebound_name_cannot_drive_the_server_from_a_page(browser: Any, postgres_dsn: str) -> None:
    """DNS rebinding, simulated: Chromium resolves ``rebound.example`` to 127.0.0.1 (as an attacker's DNS
    would after the page loaded), so a page of that origin sends ``Host: rebound.example:PORT``. A server
    bound to loopback, however spelled, answers none of it — no page, no read, no submission — while 127.0.0.1 still works."""
    from taskplug.service import host_policy

    # Bound as `serve --host 127.000.000.001` was (that spelling answered every Host before).
    app = create_app(postgres_dsn, poll_interval=0.25, allowed_hosts=host_policy("127.000.000.001"))
    rules = "--host-resolver-rules=MAP rebound.example 127.0.0.1"
    with serve_app(app) as url:
        port = url.rsplit(":", 1)[1]
        # A Chromium of its own (the same binary as the module's): the resolver rule is a launch argument.
        rebinding = browser.browser_type.launch(
            executable_path=shutil.which("chromium"), headless=True, args=[*CHROMIUM_ARGS, rules]
        )
        try:
            # bypass_csp: the attacker's page is the attacker's, not under this server's policy.
            page = rebinding.new_context(bypass_csp=True).new_page()
            rebound = f"http://rebound.example:{port}"
            assert page.goto(f"{rebound}/executions").status == 400
            # The page's own scripts, same-origin to the rebound name, as the attacker's would run.
            read = page.evaluate("fetch('/api/v1/executions').then(r => r.status)")
            submit = page.evaluate(
                """spec => fetch('/api/v1/executions', {method: 'POST',
                    headers: {'Content-Type': 'application/json'}, body: JSON.stringify({spec})})
                    .then(r => r.status)""",
                pod_spec("br-rebound"),
            )
            assert (read, submit) == (400, 400)
            assert page.goto(f"{url}/executions").status == 200
            assert page.request.get(f"{url}/api/v1/executions/p/d/br-rebound/n0").status == 404
        finally:
            rebinding.close()
