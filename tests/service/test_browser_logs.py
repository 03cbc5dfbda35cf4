"""An attempt's log in the web view, in a real browser: a shell task run by a ``taskplug executor`` replica on
``taskplug cluster serve --mode process``, the server on uvicorn with the cluster's kubeconfig, Chromium.

The page shows the lines the task prints while it runs (the task waits for a file the test writes), without a
reload; after the attempt ended and its pod was deleted from the cluster, the page shows the whole log (the
replica's kept copy). A line that looks like HTML is shown as text. No console error.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from service.test_browser import CHROMIUM_ARGS, Problems, screenshot
from service.test_logs_api import RUN, Service, gated_script, service, wait_until

playwright_sync = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (extra `test`)"
)

replica_helpers = pytest.importorskip(
    "service.replica_helpers", reason="the replicas' test helpers are absent"
)

pytestmark = [pytest.mark.browser, pytest.mark.integration]
__all__ = ["service"]  # the module's fixture, used here

expect = playwright_sync.expect
SHOWN = int(RUN * 1000)  # ms: a deadline for the page to show what the task printed, not a timing


@pytest.fixture
def page(service: Service) -> Iterator[Any]:
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("Chromium is not installed (scripts/setup installs Debian's chromium)")
    with playwright_sync.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
        context = browser.new_context(base_url=service.url, viewport={"width": 1400, "height": 900})
        problems = Problems()
        pg = context.new_page()
        problems.watch(pg)
        try:
            yield pg
        finally:
            context.close()
            browser.close()
        assert problems.found == [], problems.found


def test_the_page_streams_a_running_attempts_log_and_shows_the_kept_log_after_its_pod_is_gone(
    page: Any, service: Service, tmp_path: Any
) -> None:
    gate = service.tmp / "gate-browser"
    key = service.submit("logs-browser", gated_script(gate))
    page.goto(f"/executions/{key}")
    text = page.locator('#logs .log-pane[data-attempt="0"] pre.log-text')
    expect(text).to_contain_text("second line", timeout=SHOWN)
    # Printed while the attempt runs: the task is still waiting for the gate.
    assert "after the gate" not in text.text_content()
    assert service.execution(key)["terminal"] is False
    expect(text).to_contain_text("first line <b>")  # as text: the log is not parsed as HTML
    assert text.locator("b").count() == 0
    screenshot(page, tmp_path, "logs-running")
    gate.touch()
    expect(text).to_contain_text("after the gate", timeout=SHOWN)
    expect(page.locator('#logs .log-pane[data-attempt="0"]')).to_have_attribute(
        "data-state", "ended", timeout=SHOWN
    )

    wait_until(lambda: service.kept(key), what="the log kept")
    pod = next(p for p in service.pods() if p["metadata"]["labels"].get("execution-id") == "logs-browser")
    service.delete_pod(pod["metadata"]["namespace"], pod["metadata"]["name"])
    wait_until(
        lambda: not any(p["metadata"]["name"] == pod["metadata"]["name"] for p in service.pods()),
        what="the pod gone",
    )
    page.reload()
    expect(text).to_have_text("first line <b>\nsecond line\nafter the gate\n", timeout=SHOWN)
    screenshot(page, tmp_path, "logs-kept")


def shell_workflow(name: str, script: str) -> dict[str, Any]:
    """``workflow_document``'s workflow (``n0``, then ``m0``, then ``end``) whose task runs ``script``."""
    document: dict[str, Any] = replica_helpers.workflow_document(name, fan_out=1)
    document["workflowClosure"]["tasks"][0]["template"]["container"]["command"] = ["sh", "-c", script]
    document["execution"]["annotations"] = {}
    return document


def test_a_workflow_nodes_panel_streams_that_nodes_log(page: Any, service: Service, tmp_path: Any) -> None:
    gate = service.tmp / "gate-workflow"
    response = page.request.post(
        "/api/v1/executions", data={"spec": shell_workflow("logs-wf", gated_script(gate))}
    )
    assert response.status == 201, response.text()
    key = response.json()["key"]
    page.goto(f"/executions/{key}")
    page.locator('g.node[data-node="n0"]').click()
    pane = page.locator('#node-n0 details.log-pane[data-node="n0"]')
    pane.locator("summary").click()
    text = pane.locator("pre.log-text")
    expect(text).to_contain_text("second line", timeout=SHOWN)
    assert "after the gate" not in text.text_content()
    expect(text).to_contain_text("==> node n0, attempt 0: pod ")  # a node's logs: each attempt headed
    gate.touch()
    expect(text).to_contain_text("after the gate", timeout=SHOWN)
    expect(page.locator("#header")).to_contain_text("Success", timeout=SHOWN)
    page.locator('g.node[data-node="end"]').click()
    last = page.locator('#node-end details.log-pane[data-node="end"]')
    last.locator("summary").click()
    expect(last.locator("pre.log-text")).to_contain_text("after the gate", timeout=SHOWN)
    expect(last).to_have_attribute("data-state", "ended", timeout=SHOWN)
    screenshot(page, tmp_path, "logs-workflow-node")


def test_a_map_elements_pane_shows_that_elements_log(page: Any, service: Service, tmp_path: Any) -> None:
    document = replica_helpers.map_document("logs-map-page", 3)
    document["template"]["container"]["command"] = ["sh", "-c", "echo element {{.Inputs.x}}"]
    document["execution"]["annotations"] = {}
    response = page.request.post("/api/v1/executions", data={"spec": document})
    assert response.status == 201, response.text()
    key = response.json()["key"]
    wait_until(lambda: service.execution(key)["terminal"], what="the map's end")
    page.goto(f"/executions/{key}")
    pane = page.locator('#logs details.log-pane[data-element="2"]')
    expect(pane).to_have_attribute("data-node", "n0-0-n2")
    assert pane.get_attribute("data-state") is None  # closed: nothing streamed until opened
    pane.locator("summary").click()
    expect(pane.locator("pre.log-text")).to_contain_text("element 2", timeout=SHOWN)
    expect(pane).to_have_attribute("data-state", "ended", timeout=SHOWN)
    assert "element 1" not in pane.locator("pre.log-text").text_content()
    pane.locator("summary").click()  # closed: its stream stops; opened again, it starts over
    expect(pane).not_to_have_attribute("data-state", "ended")
    pane.locator("summary").click()
    expect(pane).to_have_attribute("data-state", "ended", timeout=SHOWN)
    assert pane.locator("pre.log-text").text_content().count("element 2") == 1
    # A map's attempt pane would read every element's pods: its elements' panes stand for it.
    assert page.locator("#logs .log-pane[data-attempt]").count() == 0
    screenshot(page, tmp_path, "logs-map-element")


def test_a_server_that_reads_no_cluster_says_so_and_shows_the_kept_log_once_the_attempt_ended(
    service: Service, page: Any, tmp_path: Any
) -> None:
    from service.test_api_replica_double import serve_app
    from taskplug.service._api_app import create_app

    gate = service.tmp / "gate-kept-only"
    key = service.submit("logs-kept-only", gated_script(gate))
    with serve_app(create_app(service.dsn, replica_ttl=3.0, poll_interval=0.25, log_poll=0.2)) as url:
        page.goto(f"{url}/executions/{key}")
        text = page.locator('#logs .log-pane[data-attempt="0"] pre.log-text')
        expect(text).to_have_attribute("data-note", re.compile("once the attempt ends"), timeout=SHOWN)
        assert text.text_content() == ""
        gate.touch()
        expect(text).to_have_text("first line <b>\nsecond line\nafter the gate\n", timeout=SHOWN)
        page.goto("about:blank")  # the page's streams closed before this server stops
