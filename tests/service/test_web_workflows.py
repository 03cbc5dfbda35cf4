"""A workflow execution's page as HTML (Starlette's TestClient, a real PostgreSQL, a workflow written by
``pyflyte serialize`` in a subprocess), its node records written as a replica writes them: the graph's nodes
and edges, each node's phase, gate nodes' forms aimed at the signal route, a launch-plan node's link to its
execution, every user-given text escaped; the phase history's node column once events have one (and the page
before that migration); the layered layout and the unique ids (the executor's rule)."""

from __future__ import annotations

import html as html_lib
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import psycopg
import pytest
from fastapi.testclient import TestClient
from psycopg.types.json import Jsonb

from support.flytekit_workflows import Serialized, serialize
from taskplug.executor import parse_spec
from taskplug.executor.nodes._ids import unique_node_id
from taskplug.service._api_app import create_app
from taskplug.service._web_graph import layers, unique_id, workflow_view

GATED = textwrap.dedent(
    """
    from datetime import timedelta

    from flytekit import LaunchPlan, approve, task, wait_for_input, workflow


    @task
    def add(a: int, b: int) -> int:
        return a + b


    @workflow
    def sub(a: int, b: int = 5) -> int:
        return add(a=a, b=b)


    sub_lp = LaunchPlan.get_or_create(sub, name="sub_lp", fixed_inputs={"a": 1})


    @workflow
    def gated(x: int) -> int:
        y = wait_for_input("y_value", timeout=timedelta(hours=1), expected_type=int)
        s = add(a=x, b=y).with_overrides(name="<img src=x onerror=alert(1)>")
        approved = approve(s, "approve-sum", timeout=timedelta(hours=1))
        return sub_lp(b=approved)
    """
)
"""``gated``: a signal gate (n0), a task whose node name is HTML (n1), an approval gate (n2), a launch plan
(n3)."""


@pytest.fixture(scope="module")
def serialized(tmp_path_factory: pytest.TempPathFactory) -> Serialized:
    return serialize(tmp_path_factory.mktemp("web-gated"), "webgated", GATED)


@pytest.fixture(scope="module")
def client(postgres_dsn: str) -> Iterator[TestClient]:
    with TestClient(create_app(postgres_dsn, replica_ttl=3.0)) as c:
        yield c


def insert(dsn: str, key: str, spec: dict[str, Any], nodes: dict[str, dict[str, Any]]) -> int:
    """The execution row as a submitter inserts it, its node records as a replica writes them; its id."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "INSERT INTO taskplug_executions (key, task_type, spec) VALUES (%s, 'workflow', %s) RETURNING id",
            (key, Jsonb(spec)),
        ).fetchone()
        assert row is not None
        for path, record in nodes.items():
            conn.execute(
                "INSERT INTO taskplug_nodes (execution_id, path, record, epoch) VALUES (%s, %s, %s, 1)",
                (row[0], path, Jsonb({"path": path, **record})),
            )
        return int(row[0])


def gated_spec(serialized: Serialized, name: str) -> dict[str, Any]:
    return {
        "templateFile": str(serialized.file("webgated.gated_2.pb")),
        "inputs": {"x": 1},
        "execution": {"id": {"project": "p", "domain": "d", "name": name}},
    }


def node_tag(html: str, unique: str) -> str:
    found = re.search(rf'<g class="[^"]*" id="g-{re.escape(unique)}"[^>]*>', html)
    assert found is not None, unique
    return found.group(0)


def test_the_graph_shows_gates_launch_plans_and_escapes_what_users_wrote(
    client: TestClient, postgres_dsn: str, serialized: Serialized
) -> None:
    key = "p/d/gated-1/wf"
    error = {"kind": "USER", "code": "E", "message": "<script>alert(2)</script> failed"}
    insert(
        postgres_dsn,
        key,
        gated_spec(serialized, "gated-1"),
        {
            "start-node": {"workflow_state": {"phase": 5}},
            "n0": {"workflow_state": {"phase": 2, "gate": "y_value"}},
            "n1": {"workflow_state": {"phase": 6}, "attempt": 1, "error": error},
            "n2": {"workflow_state": {"phase": 2}},
            "n3": {"workflow_state": {"phase": 2, "child": "p/d/fchild01/wf"}},
        },
    )
    html = client.get(f"/executions/{key}").text

    assert 'data-phase="Running"' in node_tag(html, "n0")
    assert 'data-phase="Failed"' in node_tag(html, "n1")
    assert 'data-phase="NotYetStarted"' in node_tag(html, "end-node")
    # The edges of the compiled workflow: start → n0 → n1 → n2 → n3 → end, and x from start to n1.
    edges = set(re.findall(r'data-from="([^"]+)" data-to="([^"]+)"', html))
    chain = {("start-node", "n0"), ("n0", "n1"), ("n1", "n2"), ("n2", "n3"), ("n3", "end-node")}
    assert edges == chain | {("start-node", "n1")}
    # Layered by the longest path: n1 one column after n0, though start feeds it too.
    x_of = {
        n: int(re.search(r'<rect x="(\d+)"', html[html.index(f'id="g-{n}"') :]).group(1))
        for n in ("n0", "n1")
    }  # type: ignore[union-attr]
    assert x_of["n1"] > x_of["n0"]

    # A node's name and error are text, never markup.
    assert "<img src=x" not in html and "<script>alert(2)" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "&lt;script&gt;alert(2)&lt;/script&gt; failed" in html
    assert "attempts: 2" in html

    # The gates' forms post to the signal route (an approval's two answers; a signal's typed value).
    signal_form = re.search(r'<form class="gate-form"[^>]*data-gate="signal"[^>]*>', html, re.S)
    assert signal_form is not None
    assert 'action="/api/v1/executions/p/d/gated-1/wf/signals/y_value"' in signal_form.group(0)
    approve_form = re.search(r'<form class="gate-form"[^>]*data-gate="approve"[^>]*>', html, re.S)
    assert approve_form is not None
    assert 'action="/api/v1/executions/p/d/gated-1/wf/signals/approve-sum"' in approve_form.group(0)
    assert '<button type="submit" name="value" value="true" class="approve">Approve</button>' in html
    assert "simple:INTEGER" in html

    # The launch plan's execution, linked.
    assert '<a class="child-execution" href="/executions/p/d/fchild01/wf">' in html
    # The list says what it is.
    listed = client.get("/executions?q=gated-1").text
    assert '<span class="badge kind-workflow">workflow</span>' in listed


def test_a_node_whose_result_came_from_the_cache_says_so_and_links_the_execution_that_made_it(
    client: TestClient, postgres_dsn: str, serialized: Serialized
) -> None:
    key = "p/d/gated-3/wf"
    insert(
        postgres_dsn,
        key,
        gated_spec(serialized, "gated-3"),
        {
            "n1": {
                "workflow_state": {"phase": 5},
                "cache": {"status": "CACHE_HIT", "source": "p/d/earlier-run/wf#n1"},
            },
            "n2": {"workflow_state": {"phase": 5}, "cache": {"status": "CACHE_POPULATED"}},
        },
    )
    html = client.get(f"/executions/{key}").text
    assert '<span class="badge cache">CACHE_HIT</span>' in html
    assert '<a class="cache-source" href="/executions/p/d/earlier-run/wf">p/d/earlier-run/wf</a>' in html
    assert '<span class="badge cache">CACHE_POPULATED</span>' in html
    assert html.count('class="cache-source"') == 1  # only a hit names where its outputs came from


def test_a_single_tasks_page_says_its_result_came_from_the_cache(
    client: TestClient, postgres_dsn: str
) -> None:
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO taskplug_executions (key, task_type, spec, record) VALUES (%s, 'python-task', %s, %s)",
            (
                "p/d/cached-1/n0",
                Jsonb({"execution": {"id": {"name": "cached-1"}}}),
                Jsonb({"key": "p/d/cached-1/n0", "cache": {"status": "CACHE_HIT", "source": "p/d/first/n0"}}),
            ),
        )
    html = client.get("/executions/p/d/cached-1/n0").text
    assert '<dd id="cache"><span class="badge cache">CACHE_HIT</span>' in html
    assert '<a id="cache-source" href="/executions/p/d/first/n0">p/d/first/n0</a>' in html


def test_events_get_their_node_once_the_schema_has_one(
    client: TestClient, postgres_dsn: str, serialized: Serialized
) -> None:
    key = "p/d/gated-2/wf"
    execution_id = insert(
        postgres_dsn, key, gated_spec(serialized, "gated-2"), {"n1": {"workflow_state": {"phase": 2}}}
    )
    logs = [{"name": "Pod log", "uri": "https://logs.example/n1"}]
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO taskplug_events (execution_id, attempt, phase, epoch, logs) VALUES (%s, 0, 'Running', 1, %s)",
            (execution_id, Jsonb(logs)),
        )
    # Migration 0008 gave the events their kind and node: an event written without them has neither.
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO taskplug_events (execution_id, attempt, phase, epoch, logs, node, kind)"
            " VALUES (%s, 0, 'Running', 1, %s, 'n1', 'task')",
            (execution_id, Jsonb(logs)),
        )
        conn.execute(
            "INSERT INTO taskplug_events (execution_id, attempt, phase, epoch, kind)"
            " VALUES (%s, 0, 'Running', 1, 'workflow')",
            (execution_id,),
        )
    after = client.get(f"/executions/{key}").text
    assert "<th>Node</th>" in after
    assert '<td class="node"><a href="#node-n1">n1</a></td>' in after
    panel = after[after.index('id="nd-n1"') :]
    panel = panel[: panel.index("</section>")]
    assert 'href="https://logs.example/n1"' in panel  # the node's logs, from its task events


def test_a_workflow_the_server_cannot_read_has_no_graph_and_says_why(
    client: TestClient, postgres_dsn: str, tmp_path: Path
) -> None:
    missing = tmp_path / "<missing>.pb"
    insert(postgres_dsn, "p/d/gone/wf", {"templateFile": str(missing)}, {})
    html = client.get("/executions/p/d/gone/wf").text
    assert 'id="graph-unavailable"' in html
    assert html_lib.escape(str(missing), quote=False) in html
    assert '<svg class="graph"' not in html


def test_layers_put_a_node_after_its_longest_path_and_order_rows_by_their_upstream() -> None:
    downstream = {"start": ["a", "b"], "a": ["c"], "b": ["d"], "d": ["c"], "c": ["end"]}
    place = layers(["start", "a", "b", "c", "d", "end"], downstream)
    assert {n: layer for n, (layer, _) in place.items()} == {
        "start": 0,
        "a": 1,
        "b": 1,
        "d": 2,
        "c": 3,
        "end": 4,
    }
    # x comes before y in the order given, but its upstream node sits in row 1 and y's in row 0.
    place = layers(["s", "p", "q", "x", "y"], {"s": ["p", "q"], "q": ["x"], "p": ["y"]})
    assert place["y"] == (2, 0) and place["x"] == (2, 1)
    assert layers(["lonely"], {}) == {"lonely": (0, 0)}


@pytest.mark.parametrize(
    ("parent", "attempt", "node"),
    [(None, 0, "n0"), ("n4", 0, "n0"), ("n4-0-n1", 2, "n1-n0"), (None, 0, "a-very-long-node-identifier")],
)
def test_unique_ids_are_the_executors(parent: str | None, attempt: int, node: str) -> None:
    assert unique_id(parent, attempt, node) == unique_node_id(parent, attempt, node)


def test_the_stream_sends_every_nodes_phase_as_json(serialized: Serialized) -> None:
    spec = parse_spec(gated_spec(serialized, "gated-3"), fresh_name=False)
    assert spec.workflow is not None
    view = workflow_view(spec.workflow.closure, {"n1": {"workflow_state": {"phase": 10}}})
    phases = orjson.loads(view.phases_json())
    assert phases["n1"] == ["TimedOut", "failed", 0]
    assert phases["n0"] == ["NotYetStarted", "waiting", 0]


def test_records_below_a_task_node_are_its_dynamic_nodes_and_elements_are_counted(
    client: TestClient, postgres_dsn: str, serialized: Serialized
) -> None:
    key = "p/d/gated-4/wf"
    insert(
        postgres_dsn,
        key,
        gated_spec(serialized, "gated-4"),
        {
            "n1": {"workflow_state": {"phase": 11}},
            "n1-0-start-node": {"workflow_state": {"phase": 5}},
            "n1-0-dn0": {"workflow_state": {"phase": 5}},
            "n1-0-dn0-0-n0": {"workflow_state": {"phase": 5}},
            "n1-0-dn1": {"workflow_state": {"phase": 2}, "error": {"kind": "USER", "message": "<i>x</i>"}},
            "fhashed1": {"workflow_state": {"phase": 5}},
            "n1/0": {"node_phase": 5},
            "n1/1": {"node_phase": 5},
            "n1/2": {"node_phase": 6},
        },
    )
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        # Its node events name a dynamic node's node (the stored closure does not hold it).
        conn.execute(
            "INSERT INTO taskplug_events (execution_id, attempt, phase, version, reason, kind, node, name, epoch)"
            " SELECT id, 0, 'Queued', 0, '', 'node', 'n1-0-dn0', '<b>square</b>', 1 FROM taskplug_executions"
            " WHERE key = %s",
            (key,),
        )
    html = client.get(f"/executions/{key}").text
    sub = html[html.index('id="sub-n1"') :]
    sub = sub[: sub.index("</details>")]
    assert "&lt;img src=x onerror=alert(1)&gt; (dynamic)" in sub
    assert "&lt;b&gt;square&lt;/b&gt;" in sub  # named by its event, escaped
    assert 'data-phase="Succeeded"' in node_tag(sub, "n1-0-dn0")
    assert 'data-phase="Running"' in node_tag(sub, "n1-0-dn1")
    assert "small" in node_tag(sub, "n1-0-start-node")
    assert "n1-0-dn0-0-n0" not in sub  # a node of the dynamic node's nodes: in its own graph
    nested = html[html.index('id="sub-n1-0-dn0"') :]
    assert 'data-phase="Succeeded"' in node_tag(nested[: nested.index("</details>")], "n1-0-dn0-0-n0")
    assert "fhashed1" not in html  # a hashed id names no parent
    assert "&lt;i&gt;x&lt;/i&gt;" in html
    panel = html[html.index('id="nd-n1"') :]
    panel = panel[: panel.index("</section>")]
    assert ">Succeeded 2</span>" in panel and ">Failed 1</span>" in panel
    assert 'data-expand="sub-n1"' in html
