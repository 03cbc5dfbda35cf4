"""The web view's pages as HTML (Starlette's TestClient, a real PostgreSQL; the browser tests drive them live):
the list with its filters in the URL, one execution's sections, abort with and without JavaScript, the
replicas page, static files (the vendored htmx pinned by its sha256), the live feed, and the pure helpers."""

from __future__ import annotations

import asyncio
import hashlib
import html as html_lib
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from importlib import resources
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient
from psycopg_pool import AsyncConnectionPool

from service.test_api_replica_double import ReplicaDouble, pod_spec
from taskplug.service._api_app import create_app
from taskplug.service._web_feed import EVERYTHING, Feed, Subscription, _Holes
from taskplug.service._web_render import group_of, human_duration, log_links, timeline

VENDORED = {
    # npm pack htmx.org@2.0.11 → package/dist/htmx.min.js (BSD-0-Clause)
    "htmx.min.js": "d6fdc75f204e6bdefa99b69bf1e6d4ac69b8a364f77929f45c13476b4000f717",
    # npm pack htmx-ext-sse@2.2.4 → package/dist/sse.min.js (BSD-0-Clause)
    "htmx-ext-sse.min.js": "98a46496de0c3605fbffdce9167ba427bdd9553184f83f149c261891a92c0136",
}


@pytest.fixture(scope="module")
def client(postgres_dsn: str) -> Iterator[TestClient]:
    with TestClient(create_app(postgres_dsn, replica_ttl=3.0)) as c:
        yield c


@pytest.fixture
def replica(postgres_dsn: str, client: TestClient) -> Iterator[ReplicaDouble]:
    double = ReplicaDouble(postgres_dsn, host="web-host", pid=777)
    yield double
    double.close()


def submit(client: TestClient, name: str, **extra: Any) -> str:
    response = client.post("/api/v1/executions", json={"spec": pod_spec(name), **extra})
    assert response.status_code == 201, response.text
    key: str = response.json()["key"]
    return key


def row_keys(html: str) -> list[str]:
    return re.findall(r'<td class="key"><a href="/executions/([^"]+)">', html)


def test_the_list_shows_executions_newest_first_with_phase_badges(
    client: TestClient, replica: ReplicaDouble
) -> None:
    older, newer = submit(client, "list-old"), submit(client, "list-new")
    replica.claim(older)
    replica.phase(older, "Running")

    html = client.get("/executions", params={"q": "list-"}).text

    assert row_keys(html) == [newer, older]
    assert '<span class="badge running">Running</span>' in html
    assert '<span class="badge waiting">Queued</span>' in html
    assert "web-host:777" in html  # the owner replica
    # The table listens for changes to the same filtered list.
    assert 'sse-connect="/executions/stream?q=list-"' in html


def test_filters_are_kept_in_the_url_and_select_rows(client: TestClient, replica: ReplicaDouble) -> None:
    running, queued = submit(client, "filt-run"), submit(client, "filt-queued")
    replica.claim(running)
    replica.phase(running, "Running")

    html = client.get("/executions", params={"q": "filt-", "phase": "Running", "window": "1h"}).text

    assert row_keys(html) == [running]
    assert queued not in html
    assert '<option value="Running" selected>' in html
    assert '<option value="1h" selected>' in html
    assert 'value="filt-"' in html


def test_the_list_pages_older_by_a_link(client: TestClient) -> None:
    keys = [submit(client, f"pager-{i:02d}") for i in range(53)]

    first = client.get("/executions", params={"q": "pager-"}).text
    older = re.search(r'href="(/executions\?[^"]*cursor=[^"]+)" id="older"', first)
    assert older is not None
    second = client.get(older.group(1).replace("&amp;", "&")).text

    assert row_keys(first) == list(reversed(keys))[:50]
    assert row_keys(second) == list(reversed(keys))[50:]
    assert 'id="newest"' in second


def test_the_execution_page_shows_header_events_attempts_outputs_and_spec(
    client: TestClient, replica: ReplicaDouble
) -> None:
    key = submit(client, "detail", labels={"team": "ml"})
    replica.claim(key)
    logs = [
        {"name": "Kubernetes Logs", "uri": "http://logs.example/detail-n0-0"},
        {"name": "Evil", "uri": "javascript:alert(1)"},
    ]
    replica.phase(key, "Running", reason="pod started", logs=logs)
    replica.phase(
        key,
        "RetryableFailure",
        reason="OOMKilled",
        error={"code": "OOMKilled", "kind": "USER", "message": "<b>out of memory</b>"},
    )
    replica.phase(key, "Running", attempt=1, reason="second try")
    replica.phase(key, "Success", attempt=1, outputs={"greeting": "hello"})

    html = client.get(f"/executions/{key}").text

    assert 'id="phase">Success<' in html
    assert "web-host:777" in html
    phases = re.findall(
        r'<tr class="event" data-seq="\d+">\s*<td class="muted">\d+</td>\s*<td>(\d)</td>\s*<td><span class="badge \w+">(\w+)<',
        html,
    )
    assert phases == [("0", "Running"), ("0", "RetryableFailure"), ("1", "Running"), ("1", "Success")]
    assert 'id="attempt-0"' in html and 'id="attempt-1"' in html
    # Numbered as the phase history numbers them (Flyte's retry attempt, from 0).
    assert re.search(r'<h3>Attempt 0 <span class="badge', html) and re.search(r"<h3>Attempt 1 <span", html)
    assert '<a href="http://logs.example/detail-n0-0"' in html
    assert 'href="javascript:' not in html  # a log URI that is not http(s) is text, not a link
    assert "&lt;b&gt;out of memory&lt;/b&gt;" in html  # escaped
    assert "USER · OOMKilled" in html
    assert '"greeting": "hello"' in html_lib.unescape(html)
    assert "who: world" in html  # the task as submitted (YAML)
    assert '<svg class="timeline"' in html
    assert "team=ml" in html
    assert 'id="abort"' not in html  # terminal: no Abort


def test_a_map_tasks_page_shows_its_elements_by_phase(client: TestClient, replica: ReplicaDouble) -> None:
    key = submit(client, "web-map")
    replica.claim(key)
    replica.elements(
        key,
        [{"index": i, "node_phase": 5, "attempt": 0} for i in range(3)]
        + [
            {
                "index": 3,
                "node_phase": 6,
                "attempt": 2,
                "error": {"kind": "USER", "code": "", "message": "boom"},
            }
        ],
    )

    html = client.get(f"/executions/{key}").text

    assert "<h2>Elements (4)</h2>" in html
    assert 'data-phase="Succeeded">Succeeded 3<' in html
    assert 'data-phase="Failed">Failed 1<' in html
    indices = re.findall(r'<tr class="element" data-index="(\d+)">', html)
    assert indices == ["3", "0", "1", "2"]
    assert "boom" in html
    assert "Elements" not in client.get(f"/executions/{submit(client, 'web-single')}").text


def test_a_failed_execution_shows_its_error_card(client: TestClient, replica: ReplicaDouble) -> None:
    key = submit(client, "failed")
    replica.claim(key)
    replica.phase(
        key,
        "PermanentFailure",
        reason="exit 3",
        error={"code": "ContainersNotReady", "kind": "USER", "message": "exit code 3"},
    )

    html = client.get(f"/executions/{key}").text

    assert re.search(
        r'<div class="error" id="error"><span class="kind">USER · ContainersNotReady</span>\s*exit code 3',
        html,
    )
    assert "None: the execution ended PermanentFailure" in html


def test_abort_without_javascript_redirects_to_the_page_showing_aborting(client: TestClient) -> None:
    key = submit(client, "abort-nojs")
    page = client.get(f"/executions/{key}").text
    assert 'id="abort"' in page and "hx-confirm=" in page

    response = client.post(f"/executions/{key}/abort", follow_redirects=False)

    assert response.status_code == 303
    assert response.headers["location"] == f"/executions/{key}"
    after = client.get(f"/executions/{key}").text
    assert 'id="aborting"' in after
    assert 'id="abort"' not in after


def test_abort_with_htmx_returns_the_new_controls_and_header(client: TestClient) -> None:
    key = submit(client, "abort-htmx")
    page = client.get(f"/executions/{key}").text
    # The controls are a section of their own, not inside the header the live stream re-sends.
    assert re.search(r'<section id="controls" sse-swap="controls">\s*<form[^>]*hx-target="#controls"', page)
    assert 'id="abort"' not in page.split('<section id="header"', 1)[1].split("</section>", 1)[0]
    assert f'sse-connect="/executions/{key}/stream?controls=abort"' in page

    response = client.post(f"/executions/{key}/abort", headers={"HX-Request": "true"})

    assert response.status_code == 200
    controls, header = response.text.split('<div id="header" hx-swap-oob="innerHTML">', 1)
    assert 'id="abort"' not in controls
    assert 'id="aborting"' in header
    assert "<html" not in response.text


def test_relaunch_is_offered_once_ended_and_leads_to_the_new_execution(
    client: TestClient, replica: ReplicaDouble
) -> None:
    key = submit(client, "relaunch-page")
    assert 'id="relaunch"' not in client.get(f"/executions/{key}").text  # still running: Abort, not Relaunch
    replica.claim(key)
    replica.phase(key, "Success", outputs={"o0": 1})
    page = client.get(f"/executions/{key}").text
    assert f'<form method="post" action="/executions/{key}/relaunch">' in page

    # A plain form post (no JavaScript needed) first asks, as Abort does, and submits nothing.
    before = len(client.get("/api/v1/executions", params={"limit": 500}).json()["items"])
    asked = client.post(f"/executions/{key}/relaunch", follow_redirects=False)
    assert asked.status_code == 200
    assert 'id="confirm-relaunch"' in asked.text
    assert '<input type="hidden" name="confirm" value="yes">' in asked.text
    assert len(client.get("/api/v1/executions", params={"limit": 500}).json()["items"]) == before

    # Its form confirms: redirected to the new execution's page.
    response = client.post(f"/executions/{key}/relaunch", data={"confirm": "yes"}, follow_redirects=False)

    assert response.status_code == 303
    new_key = response.headers["location"].removeprefix("/executions/")
    assert new_key != key
    new_page = client.get(f"/executions/{new_key}").text
    assert '<span class="badge waiting" id="phase">Queued</span>' in new_page
    assert f'<a id="relaunch-of" href="/executions/{key}">{key}</a>' in new_page
    assert client.post("/executions/p/d/nobody/n0/relaunch").status_code == 404


def test_a_relaunch_this_version_cannot_run_is_refused_on_a_page_naming_the_field(
    client: TestClient, postgres_dsn: str
) -> None:
    """A stored spec an older taskplug took and this one refuses (here: its image emptied in the database) is
    parsed again at relaunch: a page saying why, and no new execution."""
    key = submit(client, "relaunch-refused")
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE taskplug_executions SET spec = jsonb_set(spec, '{template,container,image}', '\"\"'),"
            " terminal = true, phase = 'Success', finished_at = now() WHERE key = %s",
            (key,),
        )
        before = conn.execute("SELECT count(*) FROM taskplug_executions").fetchone()

        response = client.post(f"/executions/{key}/relaunch", data={"confirm": "yes"}, follow_redirects=False)

        assert response.status_code == 422
        assert 'id="refused"' in response.text
        assert "spec.template.container.image" in html_lib.unescape(response.text)
        assert conn.execute("SELECT count(*) FROM taskplug_executions").fetchone() == before
    api = client.post(f"/api/v1/executions/{key}/relaunch")
    assert api.status_code == 422
    assert api.json()["error"]["field"] == "spec.template.container.image"


def test_an_unknown_execution_page_is_404(client: TestClient) -> None:
    assert client.get("/executions/p/d/nobody/n0").status_code == 404
    assert client.post("/executions/p/d/nobody/n0/abort").status_code == 404
    assert client.get("/executions/p/d/nobody/n0/stream").status_code == 404


def test_the_replicas_page_shows_each_replicas_state(client: TestClient, postgres_dsn: str) -> None:
    live, silent = (
        ReplicaDouble(postgres_dsn, host="page-live"),
        ReplicaDouble(postgres_dsn, host="page-silent"),
    )
    try:
        live.heartbeat()
        silent.heartbeat(age_seconds=30)
        html = client.get("/replicas").text
        fragment = client.get("/replicas", params={"fragment": "true"}).text
    finally:
        live.close()
        silent.close()

    assert re.search(rf'id="replica-{live.id}" data-state="live"', html)
    assert re.search(rf'id="replica-{silent.id}" data-state="silent"', html)
    assert 'hx-trigger="every 2s"' in html
    assert "<html" not in fragment and str(live.id) in fragment


def test_static_files_favicon_and_pinned_htmx(client: TestClient) -> None:
    for name, digest in VENDORED.items():
        response = client.get(f"/static/{name}")
        assert response.status_code == 200
        assert hashlib.sha256(response.content).hexdigest() == digest, name
        packaged = resources.files("taskplug.service").joinpath(f"web/static/{name}").read_bytes()
        assert hashlib.sha256(packaged).hexdigest() == digest
    assert client.get("/favicon.ico").headers["content-type"].startswith("image/svg+xml")
    assert client.get("/static/style.css").status_code == 200
    assert client.get("/", follow_redirects=False).headers["location"] == "/executions"


async def test_the_feed_tells_subscribers_which_executions_changed(
    postgres_dsn: str, client: TestClient
) -> None:
    key = submit(client, "feed")
    async with AsyncConnectionPool(postgres_dsn, min_size=1, max_size=2, open=False) as pool:
        feed = Feed(postgres_dsn, pool, poll_interval=0.1)
        await feed.start_position()
        async with feed.subscribe() as sub:
            double = ReplicaDouble(postgres_dsn)
            try:
                double.claim(key)
                double.phase(key, "Running")
            finally:
                double.close()
            newer = submit(client, "feed-new")
            changed = await feed.scan()
            got = await sub.next(1.0)
        with psycopg.connect(postgres_dsn) as conn:
            ids = dict(
                conn.execute(
                    "SELECT key, id FROM taskplug_executions WHERE key = ANY(%s)", ([key, newer],)
                ).fetchall()
            )

    assert changed == {ids[key], ids[newer]}
    assert got == changed


async def test_a_watched_execution_that_changes_without_an_event_is_reported(
    postgres_dsn: str, client: TestClient
) -> None:
    key = submit(client, "feed-quiet")
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        row = conn.execute("SELECT id FROM taskplug_executions WHERE key = %s", (key,)).fetchone()
        assert row is not None
        execution_id = row[0]
        async with AsyncConnectionPool(postgres_dsn, min_size=1, max_size=2, open=False) as pool:
            feed = Feed(postgres_dsn, pool)
            await feed.start_position()
            async with feed.subscribe() as sub:
                sub.watch = frozenset({execution_id})
                first = await feed.scan()  # new to the feed: reported once
                unchanged = await feed.scan()
                # A replica's last write (terminal after cleanup) inserts no event and sends no notification.
                conn.execute(
                    "UPDATE taskplug_executions SET terminal = true, updated_at = now() WHERE id = %s",
                    (execution_id,),
                )
                after = await feed.scan()

    assert (first, unchanged, after) == ({execution_id}, frozenset(), {execution_id})


async def test_a_subscriber_that_falls_behind_is_told_to_refresh_everything() -> None:
    sub = Subscription(max_pending=3)
    sub.add({1, 2})
    sub.add({3, 4})

    assert await sub.next(0.1) == EVERYTHING
    sub.add({5})
    assert await sub.next(0.1) == {5}
    assert await sub.next(0.01) == frozenset()


async def test_the_feed_listens_and_wakes_on_a_notification(postgres_dsn: str, client: TestClient) -> None:
    async with AsyncConnectionPool(postgres_dsn, min_size=1, max_size=2, open=False) as pool:
        # A poll interval far longer than the test: only the notification can wake it.
        feed = Feed(postgres_dsn, pool, poll_interval=3600)
        async with feed.subscribe() as sub:
            task = asyncio.create_task(feed.run())
            try:
                await asyncio.sleep(0.5)  # lets it LISTEN: the notification below must come after
                key = await asyncio.to_thread(submit, client, "feed-notified")
                got = await sub.next(10.0)
            finally:
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
    with psycopg.connect(postgres_dsn) as conn:
        row = conn.execute("SELECT id FROM taskplug_executions WHERE key = %s", (key,)).fetchone()
    assert row is not None and row[0] in got


def test_a_late_commit_below_the_last_seen_value_is_read_again() -> None:
    holes = _Holes(ttl=60)
    top = holes.seen(10, [11, 14])
    assert (top, holes.open()) == (14, [12, 13])
    top = holes.seen(top, [13, 15])
    assert (top, holes.open()) == (15, [12])


def test_badges_durations_links_and_timeline() -> None:
    assert [
        group_of(p)
        for p in ("Success", "PermanentFailure", "RetryableFailure", "Aborted", "Running", "Queued")
    ] == [
        "succeeded",
        "failed",
        "retrying",
        "aborted",
        "running",
        "waiting",
    ]
    assert (human_duration(3.21), human_duration(125), human_duration(3700)) == (
        "3.2 s",
        "2 min 5 s",
        "1 h 1 min",
    )
    assert log_links([{"name": "a", "uri": "https://x/y"}, {"name": "b", "uri": "data:text/html,hi"}]) == [
        {"name": "a", "uri": "https://x/y", "href": "https://x/y"},
        {"name": "b", "uri": "data:text/html,hi", "href": None},
    ]
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    execution = {"created_at": t0, "finished_at": t0 + timedelta(seconds=100)}
    attempts = [
        {
            "attempt": 0,
            "phase": "RetryableFailure",
            "started_at": t0 + timedelta(seconds=10),
            "finished_at": t0 + timedelta(seconds=40),
        },
        {
            "attempt": 1,
            "phase": "Success",
            "started_at": t0 + timedelta(seconds=60),
            "finished_at": t0 + timedelta(seconds=100),
        },
    ]
    bars = timeline(execution, attempts)
    assert [(b.label, b.group, round(b.left), round(b.width)) for b in bars] == [
        ("queued", "waiting", 0, 10),
        ("attempt 0", "retrying", 10, 30),
        ("back-off", "waiting", 40, 20),
        ("attempt 1", "succeeded", 60, 40),
    ]
