"""The web view with real replicas: two ``taskplug executor`` processes and ``taskplug cluster serve``
(simulated kubelet) over HTTP, one PostgreSQL, the server on uvicorn, Chromium driving the pages.

Abort from the page ends with the Kubernetes object gone (asked of the cluster's API), also through a second
web server on the same database (both pages stay live), and a replica SIGKILLed while its execution's page
is open: the other replica takes it over and the page shows it to its
end without a reload, with no console error. Screenshots as in ``test_browser.py``.
"""

from __future__ import annotations

import os
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from service.test_api_replica_double import serve_app
from service.test_browser import CHROMIUM_ARGS, Problems, screenshot

playwright_sync = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (extra `test`)"
)
replica_helpers = pytest.importorskip(
    "service.replica_helpers", reason="the replicas' test helpers are absent"
)

from taskplug.service._api_app import create_app  # noqa: E402 (after the skips: needs the web extra)

pytestmark = [pytest.mark.browser, pytest.mark.integration]

expect = playwright_sync.expect
TAKEOVER = 30_000  # ms: the replicas' ttl is 3 s; a deadline, not a timing


@pytest.fixture(scope="module")
def tmp_module(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("replicas")


@pytest.fixture(scope="module")
def cluster(tmp_module: Path) -> Iterator[Any]:
    with replica_helpers.serve_cluster(tmp_module) as served:
        yield served


@pytest.fixture(scope="module")
def replicas(postgres_dsn: str, cluster: Any, tmp_module: Path) -> Iterator[list[Any]]:
    config = tmp_module / "platform.yaml"
    config.write_text(
        f"executor:\n  data-root: {tmp_module / 'data'}\n  resync-period: 1s\n"
        "plugins:\n  k8s:\n    delete-resource-on-finalize: true\n"
    )
    started = [
        replica_helpers.start_replica(
            postgres_dsn, cluster.kubeconfig, tmp_module / f"r{i}.log", config=config
        )
        for i in range(2)
    ]
    try:
        yield started
    finally:
        for replica in started:
            replica_helpers.stop_replica(replica)


@pytest.fixture(autouse=True)
def replica_logs_on_failure(request: pytest.FixtureRequest, replicas: list[Any]) -> Iterator[None]:
    """After a failed test, the replicas' logs (verbose: claims, hand-overs, aborts) in its report."""
    yield
    if request.node.stash.get(replica_helpers.CALL_FAILED, False):
        for replica in replicas:
            print(f"--- replica pid {replica.pid} (exit {replica.process.poll()}): {replica.log}")
            print(replica.text()[-6000:])


@pytest.fixture(scope="module")
def server(postgres_dsn: str, replicas: list[Any]) -> Iterator[str]:
    with serve_app(create_app(postgres_dsn, replica_ttl=3.0, poll_interval=0.25)) as url:
        yield url


@pytest.fixture(scope="module")
def other_server(postgres_dsn: str, replicas: list[Any]) -> Iterator[str]:
    """A second web process on the same database, as a platform runs several behind a load balancer."""
    with serve_app(create_app(postgres_dsn, replica_ttl=3.0, poll_interval=0.25)) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    import shutil

    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("Chromium is not installed (scripts/setup installs Debian's chromium)")
    with playwright_sync.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Any, server: str) -> Iterator[Any]:
    context = browser.new_context(base_url=server, viewport={"width": 1400, "height": 900})
    problems = Problems()
    pg = context.new_page()
    problems.watch(pg)
    try:
        yield pg
    finally:
        context.close()
    assert problems.found == [], problems.found


def submit(page: Any, name: str, *, duration: float) -> str:
    document = replica_helpers.pod_document(name, duration=duration)
    response = page.request.post("/api/v1/executions", data={"spec": document})
    assert response.status == 201, response.text()
    key: str = response.json()["key"]
    return key


def cluster_has_pod(cluster: Any, name: str) -> bool:
    try:
        with cluster.request(f"/api/v1/namespaces/default/pods/{name}"):
            return True
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return False
        raise


def test_abort_from_the_page_deletes_the_object(page: Any, cluster: Any, tmp_path: Path) -> None:
    key = submit(page, "e2e-abort", duration=120)
    page.goto(f"/executions/{key}")
    expect(page.locator("#phase")).to_have_text("Running", timeout=TAKEOVER)
    attempts = page.request.get(f"/api/v1/executions/{key}/attempts").json()
    pod = attempts[0]["resource_name"]
    assert cluster_has_pod(cluster, pod)

    page.once("dialog", lambda d: d.accept())
    with page.expect_response(lambda r: r.url.endswith(f"/executions/{key}/abort")) as answer:
        page.click("#abort")
    assert answer.value.status == 200, answer.value.text()
    expect(page.locator("#phase")).to_have_text("Aborted", timeout=TAKEOVER)
    expect(page.locator("#abort")).to_have_count(0, timeout=TAKEOVER)
    screenshot(page, tmp_path, "e2e-aborted")

    assert page.request.get(f"/api/v1/executions/{key}").json()["terminal"] is True
    deadline = time.monotonic() + 30
    while cluster_has_pod(cluster, pod):
        assert time.monotonic() < deadline, f"pod {pod} still exists after the abort"
        time.sleep(0.2)  # waiting for the owner's delete to reach the cluster, not a timing


def test_a_sigkilled_owner_is_replaced_while_the_page_stays_live(
    page: Any, replicas: list[Any], tmp_path: Path
) -> None:
    key = submit(page, "e2e-kill", duration=6)
    page.goto(f"/executions/{key}")
    expect(page.locator("#phase")).to_have_text("Running", timeout=TAKEOVER)
    page.evaluate("window.__not_reloaded = true")
    owner = page.request.get(f"/api/v1/executions/{key}").json()["owner"]
    victim = next(r for r in replicas if r.pid == owner["pid"])

    os.kill(victim.pid, signal.SIGKILL)
    victim.process.wait()

    expect(page.locator("#phase")).to_have_text("Success", timeout=TAKEOVER + 10_000)
    # Its last write (terminal, once the object is cleaned up) comes without an event: shown all the same.
    expect(page.locator("#abort")).to_have_count(0, timeout=TAKEOVER)
    after = page.request.get(f"/api/v1/executions/{key}").json()
    assert after["owner"] is None or after["owner"]["pid"] != victim.pid
    assert page.evaluate("window.__not_reloaded") is True
    screenshot(page, tmp_path, "e2e-taken-over")

    page.goto("/replicas")
    expect(page.locator(f'tr.replica:has-text("{victim.pid}")')).not_to_have_attribute(
        "data-state", "live", timeout=TAKEOVER
    )
    screenshot(page, tmp_path, "e2e-replicas")


def test_an_execution_is_live_and_abortable_through_another_web_server(
    page: Any, browser: Any, other_server: str, cluster: Any, tmp_path: Path
) -> None:
    """Submitted through one web process, driven by a replica, followed and aborted through another: both
    pages follow it live (each server has its own LISTEN), and the object is gone."""
    key = submit(page, "e2e-two-servers", duration=120)
    page.goto(f"/executions/{key}")
    context = browser.new_context(base_url=other_server, viewport={"width": 1400, "height": 900})
    problems = Problems()
    other = context.new_page()
    problems.watch(other)
    try:
        other.goto(f"/executions/{key}")
        expect(other.locator("#phase")).to_have_text("Running", timeout=TAKEOVER)
        expect(page.locator("#phase")).to_have_text("Running", timeout=TAKEOVER)
        pod = other.request.get(f"/api/v1/executions/{key}/attempts").json()[0]["resource_name"]
        page.evaluate("window.__not_reloaded = true")

        other.once("dialog", lambda d: d.accept())
        with other.expect_response(lambda r: r.url.endswith(f"/executions/{key}/abort")) as answer:
            other.click("#abort")
        assert answer.value.status == 200, answer.value.text()
        assert answer.value.request.method == "POST"
        try:
            expect(other.locator("#phase")).to_have_text("Aborted", timeout=TAKEOVER)
            expect(page.locator("#phase")).to_have_text("Aborted", timeout=TAKEOVER)
        except AssertionError:
            print("the execution's row:", other.request.get(f"/api/v1/executions/{key}").text())
            print("the other page's header:", other.locator("#header").inner_html())
            raise
        assert page.evaluate("window.__not_reloaded") is True
        screenshot(other, tmp_path, "e2e-other-server")
    finally:
        context.close()
    assert problems.found == [], problems.found
    deadline = time.monotonic() + 30
    while cluster_has_pod(cluster, pod):
        assert time.monotonic() < deadline, f"pod {pod} still exists after the abort"
        time.sleep(0.2)  # waiting for the owner's delete to reach the cluster, not a timing
