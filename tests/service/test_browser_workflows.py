"""A workflow execution's page in a real browser: a flytekit workflow serialized by ``pyflyte serialize`` (a
subprocess), run by two ``taskplug executor`` replicas on ``taskplug cluster serve --mode process`` (its
kubelet runs ``pyflyte-execute`` from this virtualenv), one PostgreSQL, the server on uvicorn, Chromium.

The page draws the workflow's graph; its nodes change phase while it is open, without a reload (a task waits
for a file the test writes); the sub-workflow and the branch expand to their nodes; the failed node shows its
error as text. The list shows the execution's kind. No console error. Screenshots as in ``test_browser.py``.
"""

from __future__ import annotations

import re
import shutil
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from service.test_api_replica_double import serve_app
from service.test_browser import CHROMIUM_ARGS, SCREENS, Problems, screenshot
from service.test_web_workflows import GATED
from support.flytekit_workflows import serialize

playwright_sync = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (extra `test`)"
)
replica_helpers = pytest.importorskip(
    "service.replica_helpers", reason="the replicas' test helpers are absent"
)

from taskplug.service import migrate  # noqa: E402 (after the skips)
from taskplug.service._api_app import create_app  # noqa: E402 (after the skips: needs the web extra)

pytestmark = [pytest.mark.browser, pytest.mark.integration]

expect = playwright_sync.expect
RUN = 120_000  # ms: pods run pyflyte-execute for real; a deadline, not a timing

WORKFLOW = textwrap.dedent(
    """
    import os
    import time

    from flytekit import conditional, task, workflow


    @task
    def wait_for(a: int, path: str) -> int:
        while path and not os.path.exists(path):
            time.sleep(0.1)
        return a + 1


    @task
    def boom(a: int) -> int:
        if a > 0:
            raise ValueError(f"<b>boom</b> at {a}")
        return a


    @workflow
    def inner(a: int, path: str) -> int:
        return wait_for(a=a, path=path)


    @workflow
    def wf(x: int, path: str = "") -> int:
        s = inner(a=x, path=path)
        c = conditional("big").if_(s > 1).then(wait_for(a=s, path="")).else_().then(wait_for(a=x, path=""))
        return boom(a=c)
    """
)
"""``wf``: a sub-workflow whose task waits until ``path`` exists, a branch (its first case runs), then a task
that fails with a message holding HTML."""


@pytest.fixture(scope="module")
def tmp_module(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("wf-browser")


@pytest.fixture(scope="module")
def serialized(tmp_module: Path) -> Any:
    return serialize(tmp_module / "project", "webwf", WORKFLOW)


@pytest.fixture(scope="module")
def cluster(tmp_module: Path) -> Iterator[Any]:
    with replica_helpers.serve_cluster(tmp_module, mode="process") as served:
        yield served


@pytest.fixture(scope="module")
def replicas(postgres_dsn: str, cluster: Any, tmp_module: Path) -> Iterator[list[Any]]:
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        migrate(conn)
    config = tmp_module / "platform.yaml"
    config.write_text(f"executor:\n  data-root: {tmp_module / 'data'}\n  resync-period: 1s\n")
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


def submit_workflow(dsn: str, serialized: Any, name: str, inputs: dict[str, Any]) -> str:
    """Insert a workflow execution as a submitter with database access does (the API takes no
    ``templateFile``): its spec names the file ``pyflyte serialize`` wrote; the row's task type is
    ``workflow``. Its key, the execution key ``p/d/<name>/wf``."""
    key = f"p/d/{name}/wf"
    document = {
        "templateFile": str(serialized.file("webwf.wf_2.pb")),
        "inputs": inputs,
        "execution": {
            "id": {"project": "p", "domain": "d", "name": name},
            # pyflyte-execute imports the workflow's module from the project's folder.
            "environment": {"PYTHONPATH": str(serialized.module.parent)},
        },
    }
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO taskplug_executions (key, task_type, spec) VALUES (%s, 'workflow', %s)",
            (key, Jsonb(document)),
        )
        conn.execute("NOTIFY taskplug_work")
    return key


def node(page: Any, unique_id: str) -> Any:
    return page.locator(f'g.node[data-node="{unique_id}"]')


def test_a_workflow_is_drawn_and_its_nodes_change_live(
    page: Any, postgres_dsn: str, serialized: Any, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    key = submit_workflow(postgres_dsn, serialized, "wfweb-live", {"x": 2, "path": str(go)})

    page.goto("/executions")
    listed = page.locator("#rows tr", has=page.locator(f'a[href="/executions/{key}"]'))
    expect(listed.locator("td.kind")).to_have_text("workflow")

    page.goto(f"/executions/{key}")
    expect(page.locator("#kind")).to_have_text("workflow")
    for unique_id in ("start-node", "n0", "n1", "n2", "end-node"):
        expect(node(page, unique_id)).to_have_count(1)
    assert page.locator("svg#graph-top path.edge").count() == 4  # start → n0 → n1 → n2 → end
    # The sub-workflow runs while its task waits for the file.
    expect(node(page, "n0")).to_have_attribute("data-phase", "Running", timeout=RUN)
    expect(node(page, "n2")).to_have_attribute("data-phase", "NotYetStarted")
    page.evaluate("window.__not_reloaded = true")

    # The sub-workflow expands to its own graph, its task running.
    node(page, "n0").click()
    expect(page.locator("details#sub-n0")).to_have_attribute("open", "")
    expect(node(page, "n0-0-n0")).to_be_visible()
    expect(node(page, "n0-0-n0")).to_have_attribute("data-phase", "Running", timeout=RUN)
    expect(page.locator("#node-n0")).to_be_visible()
    expect(page.locator("#nd-n0 .badge").first).to_have_text("Running")
    running_fill = node(page, "n0").locator("rect").evaluate("r => getComputedStyle(r).fill")
    screenshot(page, tmp_path, "wf-running")

    go.write_text("go")
    # Every change from here shows without a reload.
    expect(node(page, "n0-0-n0")).to_have_attribute("data-phase", "Succeeded", timeout=RUN)
    expect(node(page, "n0")).to_have_attribute("data-phase", "Succeeded", timeout=RUN)
    expect(node(page, "n1")).to_have_attribute("data-phase", "Succeeded", timeout=RUN)
    expect(node(page, "n2")).to_have_attribute("data-phase", "Failed", timeout=RUN)
    expect(node(page, "n2")).to_have_attribute("data-group", "failed")
    failed_fill = node(page, "n2").locator("rect").evaluate("r => getComputedStyle(r).fill")
    succeeded_fill = node(page, "n0").locator("rect").evaluate("r => getComputedStyle(r).fill")
    assert len({running_fill, failed_fill, succeeded_fill}) == 3
    expect(node(page, "n2").locator(".phase-text")).to_have_text("Failed")

    # The failed node's error, as text (its HTML is not markup).
    node(page, "n2").click()
    expect(page.locator("#node-n2")).to_be_visible()
    error = page.locator("#nd-n2 .node-error")
    expect(error).to_contain_text("<b>boom</b> at 4", timeout=RUN)
    assert error.locator("b").count() == 0
    expect(page.locator("#node-n0")).to_be_hidden()

    # The branch expands to its cases: the first was taken, the other never started.
    node(page, "n1").click()
    expect(page.locator("details#sub-n1")).to_have_attribute("open", "")
    expect(node(page, "n1-0-n1-n0")).to_have_attribute("data-phase", "Succeeded")
    expect(node(page, "n1-0-n1-n0")).to_have_class(re.compile(r"\btaken\b"))
    expect(page.locator("#nd-n1-0-n1-n0")).to_contain_text("the case taken")
    expect(node(page, "n1-0-n1-n1")).to_have_attribute("data-phase", "NotYetStarted")
    expect(node(page, "n1-0-n1-n1")).not_to_have_class(re.compile(r"\btaken\b"))

    expect(page.locator("#abort")).to_have_count(0, timeout=RUN)  # the workflow ended
    assert page.evaluate("window.__not_reloaded") is True
    screenshot(page, tmp_path, "wf-failed")
    SCREENS.mkdir(parents=True, exist_ok=True)
    page.locator("#workflow").screenshot(path=str(SCREENS / "wf-failed-graph.png"))

    # Opened afresh, the page draws what it ended with.
    page.reload()
    expect(node(page, "n2")).to_have_attribute("data-phase", "Failed")
    expect(node(page, "n0-0-n0")).to_have_attribute("data-phase", "Succeeded")


def test_a_workflow_whose_file_is_gone_says_why_it_has_no_graph(
    page: Any, postgres_dsn: str, serialized: Any, tmp_path: Path
) -> None:
    key = "p/d/wfweb-gone/wf"
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO taskplug_executions (key, task_type, spec, terminal, phase)"
            " VALUES (%s, 'workflow', %s, true, 'Aborted')",
            (key, Jsonb({"templateFile": str(tmp_path / "<gone>.pb")})),
        )
    page.goto(f"/executions/{key}")
    expect(page.locator("#graph-unavailable")).to_contain_text("<gone>.pb")
    assert page.locator("svg.graph").count() == 0


def test_a_waiting_gate_offers_its_answers_and_posts_them_to_the_signal_route(
    page: Any, postgres_dsn: str, tmp_path: Path
) -> None:
    """A gate's node records as a replica writes them (no replica claims the row: its owner is a replica row
    that stays live); the signal route is answered by the test, which reads what the page sent."""
    gated = serialize(tmp_path / "project", "webgatedb", GATED)
    key = "p/d/wfweb-gate/wf"
    spec = {
        "templateFile": str(gated.file("webgatedb.gated_2.pb")),
        "inputs": {"x": 1},
        "execution": {"id": {"project": "p", "domain": "d", "name": "wfweb-gate"}},
    }
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        owner = conn.execute(
            "INSERT INTO taskplug_replicas (id, host, pid, version, capacity, heartbeat_at)"
            " VALUES (gen_random_uuid(), 'gate-host', 1, 't', 1, now() + interval '1 day') RETURNING id"
        ).fetchone()
        assert owner is not None
        row = conn.execute(
            "INSERT INTO taskplug_executions (key, task_type, spec, owner_id, lease_epoch, phase)"
            " VALUES (%s, 'workflow', %s, %s, 1, 'Running') RETURNING id",
            (key, Jsonb(spec), owner[0]),
        ).fetchone()
        assert row is not None
        for path, phase in (("start-node", 5), ("n0", 2)):
            state = {"phase": phase, **({"gate": "y_value"} if path == "n0" else {})}
            conn.execute(
                "INSERT INTO taskplug_nodes (execution_id, path, record, epoch) VALUES (%s, %s, %s, 1)",
                (row[0], path, Jsonb({"path": path, "workflow_state": state})),
            )

    sent: list[tuple[str, str, Any]] = []

    def answer(route: Any) -> None:
        request = route.request
        sent.append((request.method, request.url, request.post_data_json))
        route.fulfill(status=200, content_type="application/json", body="{}")

    page.route("**/signals/**", answer)
    page.goto(f"/executions/{key}")
    expect(node(page, "n0")).to_have_attribute("data-phase", "Running")

    node(page, "n0").click()
    form = page.locator("#node-n0 form.gate-form")
    expect(form).to_be_visible()
    form.locator("input[name=value]").fill("42")
    form.locator("button.send").click()
    expect(form.locator(".gate-result")).to_have_text("Sent.")
    assert sent == [
        (
            "POST",
            f"{page.url.split('/executions/')[0]}/api/v1/executions/{key}/signals/y_value",
            {"value": 42},
        )
    ]

    # The approval gate waits only once it runs: its buttons show then, without a reload.
    node(page, "n2").click()
    approve = page.locator("#node-n2 button.approve")
    expect(approve).to_be_hidden()
    page.evaluate("window.__not_reloaded = true")
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO taskplug_nodes (execution_id, path, record, epoch) VALUES (%s, 'n2', %s, 1)",
            (row[0], Jsonb({"path": "n2", "workflow_state": {"phase": 2, "gate": "approve-sum"}})),
        )
        conn.execute(
            "INSERT INTO taskplug_events (execution_id, attempt, phase, epoch) VALUES (%s, 0, 'Running', 1)",
            (row[0],),
        )
        conn.execute("NOTIFY taskplug_events")
    expect(node(page, "n2")).to_have_attribute("data-phase", "Running")
    expect(approve).to_be_visible()
    screenshot(page, tmp_path, "wf-gate")
    approve.click()
    expect(page.locator("#node-n2 .gate-result")).to_have_text("Sent.")
    assert sent[-1][1].endswith(f"/api/v1/executions/{key}/signals/approve-sum")
    assert sent[-1][2] == {"value": True}
    assert page.evaluate("window.__not_reloaded") is True

    with psycopg.connect(postgres_dsn, autocommit=True) as conn:  # ended, for the replicas' sake
        conn.execute(
            "UPDATE taskplug_executions SET terminal = true, phase = 'Aborted' WHERE id = %s", (row[0],)
        )


APPROVAL = textwrap.dedent(
    """
    from datetime import timedelta

    from flytekit import approve, task, workflow


    @task
    def double(a: int) -> int:
        return 2 * a


    @workflow
    def approval(x: int) -> int:
        return approve(double(a=x), "ok-to-go", timeout=timedelta(hours=1))
    """
)
"""``approval``: a task, then an approve gate on its output."""


def test_approving_a_gate_from_the_page_lets_the_workflow_go_on(
    page: Any, postgres_dsn: str, tmp_path: Path
) -> None:
    """Real replicas run the workflow to its gate; the page's Approve answers it through the API's signal
    route; the workflow goes on to its end while the page follows it."""
    approval = serialize(tmp_path / "project", "webapproval", APPROVAL)
    key = "p/d/wfweb-approve/wf"
    document = {
        "templateFile": str(approval.file("webapproval.approval_2.pb")),
        "inputs": {"x": 2},
        "execution": {
            "id": {"project": "p", "domain": "d", "name": "wfweb-approve"},
            "environment": {"PYTHONPATH": str(approval.module.parent)},
        },
    }
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO taskplug_executions (key, task_type, spec) VALUES (%s, 'workflow', %s)",
            (key, Jsonb(document)),
        )
        conn.execute("NOTIFY taskplug_work")

    page.goto(f"/executions/{key}")
    gate = node(page, "n1")
    expect(gate).to_have_attribute("data-phase", "Running", timeout=RUN)
    gate.click()
    approve = page.locator("#node-n1 button.approve")
    expect(approve).to_be_visible()
    page.evaluate("window.__not_reloaded = true")
    screenshot(page, tmp_path, "wf-approval-waiting")
    approve.click()
    expect(page.locator("#node-n1 .gate-result")).to_have_text("Sent.")
    expect(gate).to_have_attribute("data-phase", "Succeeded", timeout=RUN)
    expect(node(page, "end-node")).to_have_attribute("data-phase", "Succeeded", timeout=RUN)
    expect(approve).to_be_hidden()  # the gate no longer waits
    expect(page.locator("#outputs-json")).to_contain_text('"o0": 4', timeout=RUN)
    assert page.evaluate("window.__not_reloaded") is True
    signals = page.request.get(f"/api/v1/executions/{key}/signals").json()
    assert [(s["signal_id"], s["value"]) for s in signals] == [("ok-to-go", True)]
