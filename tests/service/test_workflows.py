"""Workflows on the service: the PostgreSQL store keeps a workflow's events (kind, node), node records and each
task node's create intents apart; a replica runs a submitted workflow (the self-contained ``workflowClosure``
form) on the simulated cluster and a replica that takes it over resumes it without starting a finished node
again; the API submits one (compiled again, its nodes bounded), lists its nodes and shows its phase and
outputs. Real PostgreSQL, real replicas, the embedded cluster with simulated pods, 127.0.0.1 only."""

from __future__ import annotations

import asyncio
import copy
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import httpx
import psycopg
import pytest
import yaml
from click.testing import CliRunner
from psycopg.types.json import Jsonb

from service.replica_helpers import (
    claim_row,
    empty_database_fixture,  # noqa: F401 (the conn fixture)
    pod_document,
    replica_row,
    rows,
    running,
    stale_epoch_writes,
    submit,
    workflow_document,
)
from service.test_api_replica_double import serve_app
from service.test_create_intents import _CountingConnector
from support.flytekit_workflows import DEMO, serialize
from support.postgres_server import postgres_dsn_fixture, postgres_server_fixture  # noqa: F401
from support.waiting import wait_until
from taskplug.cli._flytekit_module import ModuleTarget, module_workflow
from taskplug.cli._remote_run import module_document, remote_document, serialized_document
from taskplug.cli._run import run
from taskplug.core import PluginRegistry, SpecError
from taskplug.executor import (
    Event,
    ExecutionRecord,
    NodeRecord,
    Platform,
    SubmissionLimits,
    check_limits,
    load_spec,
    parse_spec,
    unique_node_id,
    workflow_spec,
)
from taskplug.k8s import POD
from taskplug.localcluster import LocalCluster
from taskplug.service import PostgresStateStore, Replica, ReplicaSettings
from taskplug.service._api_app import create_app
from taskplug.service._api_nodes import ClosureCache, workflow_nodes
from taskplug.service._api_submit import parse_submission
from taskplug.webapi import WebApiPluginEntry

FAST = ReplicaSettings(heartbeat=0.5, ttl=3.0, margin=1.0, poll=0.25, reap=0.5, reconcile=1.0)


@pytest.fixture
def platform(tmp_path: Path) -> Platform:
    return Platform.load(
        document={
            "executor": {"data-root": str(tmp_path / "data"), "resync-period": "1s"},
            "plugins": {"k8s": {"delete-resource-on-finalize": True}},
        }
    )


def _store(dsn: str, rid: uuid.UUID) -> PostgresStateStore:
    return PostgresStateStore(psycopg.connect(dsn, autocommit=True), replica_id=rid, commit_interval=0)


# -- the store -----------------------------------------------------------------------------------------------


def test_events_keep_their_kind_node_and_name_and_node_records_round_trip(
    conn: psycopg.Connection[Any], postgres_dsn: str
) -> None:
    submit(conn, "w1", workflow_document("w1"))
    rid = replica_row(conn)
    store = _store(postgres_dsn, rid)
    store.claim("k", claim_row(conn, rid, "w1"))
    store.append_event(
        "k", Event(attempt=0, phase="Running", version=0, reason="", occurred_at=None, kind="workflow")
    )
    store.append_event(
        "k",
        Event(
            attempt=0,
            phase="Queued",
            version=0,
            reason="",
            occurred_at=None,
            kind="node",
            node="n0",
            name="sq",
        ),
    )
    store.append_event(
        "k", Event(attempt=0, phase="Running", version=0, reason="", occurred_at=None, node="n0")
    )
    child = ExecutionRecord(key="p/d/w1/n0", workflow_state={"phase": 2}, attempt=1, task_phase=3)
    element = NodeRecord(path="m0/2", node_phase=5)
    store.save_nodes("k", [child, element])
    store.save(ExecutionRecord(key="k", path="wf", workflow_state={"phase": 1}))
    store.flush()
    assert [(e.kind, e.node, e.name, e.phase) for e in store.events("k")] == [
        ("workflow", None, None, "Running"),
        ("node", "n0", "sq", "Queued"),
        ("task", "n0", None, "Running"),
    ]
    # A workflow's node events are no attempts of the execution: only the execution's own task has rows.
    assert conn.execute("SELECT count(*) FROM taskplug_attempts").fetchone() == (0,)
    # The row shows the workflow running (not the Queued of a task phase it never reports).
    assert rows(conn)["w1"]["phase"] == "Running"
    stored = dict(conn.execute("SELECT path, record FROM taskplug_nodes").fetchall())
    back = {path: NodeRecord.from_json(record) for path, record in stored.items()}
    assert isinstance(back["n0"], ExecutionRecord)
    assert (back["n0"].workflow_state, back["n0"].attempt, back["n0"].key) == ({"phase": 2}, 1, "p/d/w1/n0")
    assert type(back["m0/2"]) is NodeRecord and back["m0/2"].node_phase == 5
    store.close()


def test_two_task_nodes_attempt_zero_are_two_intents_each_with_its_outcome(
    conn: psycopg.Connection[Any], postgres_dsn: str
) -> None:
    submit(conn, "w2", workflow_document("w2"))
    a, b = replica_row(conn), replica_row(conn)
    old = _store(postgres_dsn, a)
    old.claim("k", claim_row(conn, a, "w2"))
    assert old.write_create_intent("k", 0, "w2-n0-0", node="n0") is False
    assert old.write_create_intent("k", 0, "w2-m0-0", node="m0") is False
    assert old.write_create_intent("k", 0, "w2-m1-e3", node="m1", element=3) is False
    # Node n0's create answered: saving its record carries that outcome (and only that one).
    old.save_nodes("k", [ExecutionRecord(key="p/d/w2/n0", workflow_state={"phase": 2})])
    intents = conn.execute(
        "SELECT node, element, attempt, outcome_at IS NOT NULL FROM taskplug_create_intents ORDER BY node"
    ).fetchall()
    assert intents == [("m0", -1, 0, False), ("m1", 3, 0, False), ("n0", -1, 0, True)]
    assert conn.execute("SELECT count(*) FROM taskplug_attempts").fetchone() == (0,)
    old.close()  # stopped before m0's and m1's element 3's answers were committed
    new = _store(postgres_dsn, b)
    new.claim("k", claim_row(conn, b, "w2"))
    assert new.write_create_intent("k", 0, "w2-n0-0", node="n0") is False  # its outcome is known
    assert new.write_create_intent("k", 0, "w2-m0-0", node="m0") is True  # unknown: created again
    assert new.write_create_intent("k", 0, "w2-m1-e3", node="m1", element=3) is True
    assert new.write_create_intent("k", 0, "w2-m1-e4", node="m1", element=4) is False
    new.close()


# -- a replica runs it ---------------------------------------------------------------------------------------


async def _pods(cluster: LocalCluster) -> dict[str, str]:
    objects, _ = await cluster.client().list(POD, None)
    return {o["metadata"]["name"]: o["metadata"]["uid"] for o in objects}


def _node_phases(conn: psycopg.Connection[Any], key: str) -> dict[str, int]:
    found = conn.execute(
        "SELECT n.path, (n.record->'workflow_state'->>'phase')::int FROM taskplug_nodes n"
        " JOIN taskplug_executions e ON e.id = n.execution_id WHERE e.key = %s",
        (key,),
    ).fetchall()
    return {path: phase for path, phase in found if phase is not None}


async def test_a_replica_runs_a_workflow_and_its_successor_resumes_it_creating_nothing_twice(
    conn: psycopg.Connection[Any], postgres_dsn: str, tmp_path: Path
) -> None:
    # Pods kept when finalized: every pod the workflow ever created is still there to be counted at the end.
    platform = Platform.load(
        document={"executor": {"data-root": str(tmp_path / "data"), "resync-period": "1s"}}
    )
    async with LocalCluster(mode="simulated") as cluster:
        submit(conn, "wf1", workflow_document("wf1", duration=1.5, x=11, fan_out=3))
        async with running(Replica(postgres_dsn, platform, cluster.client(), settings=FAST)):
            # Stopped once n0 finished and its followers run (hand-over at stop: the successor claims it).
            await wait_until(
                lambda: _node_phases(conn, "wf1").get("n0") == 5 and len(_node_phases(conn, "wf1")) > 1,
                within=60,
                what="n0 succeeded and the fan-out started",
            )
        first = await _pods(cluster)
        assert not rows(conn)["wf1"]["terminal"]
        async with running(Replica(postgres_dsn, platform, cluster.client(), settings=FAST)):
            await wait_until(lambda: rows(conn)["wf1"]["terminal"], within=60, what="the workflow ends")
        pods = await _pods(cluster)
    found = rows(conn)["wf1"]
    assert (found["phase"], found["outputs"], found["error"]) == ("Success", {"o": 11, "y": 1}, None)
    # One pod per node, each created once: the ones the first replica created are the same objects.
    assert len(pods) == 5
    assert all(pods[name] == uid for name, uid in first.items())
    assert _node_phases(conn, "wf1") == dict.fromkeys(
        ["start-node", "n0", "m0", "m1", "m2", "end", "end-node"], 5
    )
    epochs = conn.execute(
        "SELECT DISTINCT ev.epoch FROM taskplug_events ev JOIN taskplug_executions e ON e.id = ev.execution_id"
        " WHERE e.key = 'wf1'"
    ).fetchall()
    assert len(epochs) == 2  # two owners wrote its events
    kinds = conn.execute("SELECT DISTINCT kind FROM taskplug_events").fetchall()
    assert {k for (k,) in kinds} == {"task", "node", "workflow"}
    assert stale_epoch_writes(conn) == []


# -- submitting ----------------------------------------------------------------------------------------------


def test_a_submitted_closure_is_compiled_again_not_trusted() -> None:
    document = workflow_document("c1")
    # A closure whose compiled connections claim n0 needs nothing and "end" follows nothing: ignored, the
    # template's own dependencies are what the compiler derives.
    document["workflowClosure"]["primary"]["connections"] = {"upstream": {"end": {"ids": []}}}
    spec = parse_spec(document, source="api", fresh_name=False)
    assert set(spec.workflow.closure.primary.connections.upstream["end"].ids) == {"m0", "m1"}
    # A node that refers to a task the closure does not hold is the compiler's error, naming it.
    broken = copy.deepcopy(workflow_document("c2"))
    broken["workflowClosure"]["tasks"] = []
    with pytest.raises(Exception, match="sim"):
        parse_spec(broken, source="api", fresh_name=False)


def test_a_malformed_closure_is_refused_naming_the_field() -> None:
    document = workflow_document("c3")
    document["workflowClosure"]["primary"]["template"]["nodes"][0]["taskNode"] = {"referenceId": 3}
    with pytest.raises(SpecError) as err:
        parse_spec(document, source="api", fresh_name=False)
    assert err.value.path.startswith("workflowClosure.primary.template.nodes")
    compiled = workflow_document("c5")
    compiled["workflowClosure"]["primary"]["template"]["nodes"].insert(0, {"id": "start-node"})
    with pytest.raises(SpecError) as err:
        parse_spec(compiled, source="api", fresh_name=False)
    assert err.value.path == "workflowClosure.primary.template.nodes"
    assert "compiled template" in err.value.reason
    for field, value in (("template", {"type": "container"}), ("node", "n0")):
        with_both = {**workflow_document("c4"), field: value}
        with pytest.raises(SpecError) as err:
            parse_spec(with_both, source="api", fresh_name=False)
        assert err.value.path == field


def test_a_workflow_with_too_many_nodes_is_refused_with_422_naming_the_field() -> None:
    body = httpx.Request("POST", "http://x", json={"spec": workflow_document("big", fan_out=8)}).content
    with pytest.raises(SpecError) as err:
        parse_submission(body, max_bytes=1 << 22, limits=SubmissionLimits(max_nodes=9))
    assert err.value.path == "spec.workflowClosure"
    assert "at most 9" in err.value.reason
    parse_submission(body, max_bytes=1 << 22, limits=SubmissionLimits(max_nodes=10))  # 10 nodes: allowed
    spec = parse_spec(workflow_document("ok"), source="api", fresh_name=False)
    check_limits(spec, SubmissionLimits(max_nodes=4))


# -- the API and `taskplug run --server` ---------------------------------------------------------------------

MODULE = """
from flytekit import task, workflow


@task
def step(a: int) -> None:
    print(a)


@workflow
def sub(a: int) -> None:
    step(a=a)


@workflow
def wf(a: int, b: int = 2) -> int:
    step(a=a)
    sub(a=b)
    return a
"""


@pytest.fixture
def api(postgres_dsn: str) -> Iterator[str]:
    with serve_app(create_app(postgres_dsn, poll_interval=0.25)) as url:
        yield url


async def test_the_api_runs_a_submitted_workflow_and_lists_its_nodes(
    conn: psycopg.Connection[Any], postgres_dsn: str, platform: Platform, api: str
) -> None:
    async with (
        LocalCluster(mode="simulated") as cluster,
        running(Replica(postgres_dsn, platform, cluster.client(), settings=FAST)),
        httpx.AsyncClient(base_url=f"{api}/api/v1") as client,
    ):
        answer = await client.post("/executions", json={"spec": workflow_document("api1", x=5)})
        assert answer.status_code == 201, answer.text
        created = answer.json()
        assert (created["key"], created["task_type"]) == ("p/d/api1/wf", "workflow")
        key = created["key"]

        await wait_until(lambda: rows(conn)["p/d/api1/wf"]["terminal"], within=60, what="the workflow ends")
        execution = (await client.get(f"/executions/{key}")).json()
        outputs = (await client.get(f"/executions/{key}/outputs")).json()
        nodes = (await client.get(f"/executions/{key}/nodes")).json()
        events = (await client.get(f"/executions/{key}/events")).json()
        elements = (await client.get(f"/executions/{key}/elements")).json()
        openapi = (await client.get("/openapi.json")).json()
        refused = await client.post(
            "/executions", json={"spec": {**workflow_document("api2"), "templateFile": "wf.pb"}}
        )
    assert (execution["phase"], execution["error"], execution["node"]) == ("Success", None, "wf")
    assert outputs["outputs"] == {"o": 5, "y": 1}
    assert [(n["id"], n["name"], n["kind"], n["parent"], n["phase"], n["attempts"]) for n in nodes] == [
        ("n0", "first", "task", None, "Succeeded", 1),
        ("m0", "m0", "task", None, "Succeeded", 1),
        ("m1", "m1", "task", None, "Succeeded", 1),
        ("end", "last", "task", None, "Succeeded", 1),
    ]
    assert all(n["started_at"] and n["updated_at"] and n["error"] is None for n in nodes)
    # The workflow's own events and its nodes' events, each naming its node.
    assert events[0]["kind"] == "workflow" and events[0]["phase"] == "Running"
    assert events[-1]["kind"] == "workflow" and events[-1]["phase"] == "Succeeded"
    assert {e["node"] for e in events if e["kind"] == "node"} >= {"n0", "m0", "m1", "end"}
    assert elements["total"] == 0
    assert "/api/v1/executions/{key}/nodes" in openapi["paths"]
    assert refused.status_code == 422
    assert refused.json()["error"]["field"] == "spec.templateFile"


def test_a_task_executions_nodes_are_empty_and_an_unknown_key_is_404(
    conn: psycopg.Connection[Any], api: str
) -> None:
    with httpx.Client(base_url=f"{api}/api/v1") as client:
        submitted = client.post("/executions", json={"spec": pod_document("t1")}).json()
        assert client.get(f"/executions/{submitted['key']}/nodes").json() == []
        assert client.get("/executions/p/d/nothing/wf/nodes").status_code == 404


async def test_run_with_server_submits_a_module_s_workflow_and_follows_it_to_its_outputs(
    conn: psycopg.Connection[Any], postgres_dsn: str, platform: Platform, api: str, tmp_path: Path
) -> None:
    module = tmp_path / "service_wf_module.py"
    module.write_text(MODULE)
    args = ["--server", api, "-o", "json", "--name", "modwf", str(module), "wf", "--a", "4"]
    async with (
        LocalCluster(mode="simulated") as cluster,
        running(Replica(postgres_dsn, platform, cluster.client(), settings=FAST)),
    ):
        result = await asyncio.to_thread(CliRunner().invoke, run, args)
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert (document["execution"], document["phase"]) == ("flytesnacks/development/modwf/wf", "Success")
    assert document["outputs"] == {"o0": 4}
    (step, sub) = document["nodes"]
    assert (step["phase"], sub["phase"]) == ("Succeeded", "Succeeded")
    assert [n["phase"] for n in sub["nodes"]] == ["Succeeded"]
    stored = conn.execute("SELECT spec FROM taskplug_executions WHERE key = %s", (document["execution"],))
    spec = stored.fetchone()[0]
    # What was sent is the self-contained form: the compiled closure, its launch plan, the values given.
    assert set(spec) == {"workflowClosure", "launchPlans", "launchPlan", "inputs", "execution"}
    assert spec["inputs"] == {"a": 4}


def _spec_file(tmp_path: Path, package: Path, name: str) -> Path:
    """A spec running ``wf`` of ``package`` with a = 3, as execution p/d/``name``."""
    spec_file = tmp_path / "run.yaml"
    spec_file.write_text(
        yaml.safe_dump(
            {
                "templateFile": str(package),
                "workflow": "wf",
                "inputs": {"a": 3},
                "execution": {"id": {"project": "p", "domain": "d", "name": name}},
            }
        )
    )
    return spec_file


def test_a_workflow_spec_file_is_sent_compiled_and_the_server_compiles_the_same(tmp_path: Path) -> None:
    serialized = serialize(tmp_path / "project", "service_wf_file", MODULE)
    spec_file = _spec_file(tmp_path, serialized.package, "file1")
    document, key = remote_document(spec_file)
    assert key == "p/d/file1/wf"
    assert "templateFile" not in document and "workflow" not in document
    assert document["inputs"] == {"a": 3}
    local = load_spec(spec_file)
    served = parse_spec(document, source="api", fresh_name=False)
    assert served.execution_key == local.execution_key
    assert served.workflow is not None and local.workflow is not None
    ours, theirs = local.workflow.closure, served.workflow.closure
    assert (theirs.primary, theirs.tasks) == (ours.primary, ours.tasks)

    def called(closure: Any) -> dict[str, Any]:
        primary = closure.primary.template.id
        return {s.template.id.name: s for s in closure.sub_workflows if s.template.id != primary}

    assert called(theirs) == called(ours)
    assert served.inputs == local.inputs  # b = 2 from the launch plan's default, merged again by the server


def test_what_pyflyte_wrote_named_on_the_command_line_is_sent_as_its_spec_file_would_be(
    tmp_path: Path,
) -> None:
    serialized = serialize(tmp_path / "project", "service_wf_cli", MODULE)
    target = ModuleTarget(project="p", domain="d", name="cli1", on_host=False)
    with click.Context(run, info_name="taskplug run").scope():
        document, key = serialized_document(serialized.package, ["wf", "--a", "3"], target)
    spec_file = _spec_file(tmp_path, serialized.package, "cli1")
    from_file, file_key = remote_document(spec_file)
    assert key == file_key == "p/d/cli1/wf"
    assert document == from_file


async def test_each_web_api_node_of_a_workflow_is_created_once_with_its_own_intent(
    conn: psycopg.Connection[Any], postgres_dsn: str, tmp_path: Path
) -> None:
    connector = _CountingConnector(postgres_dsn)
    registry = PluginRegistry.discover()
    registry.register(WebApiPluginEntry("counting", ("counting",), lambda setup: connector))
    platform = Platform.load(
        document={
            "executor": {"data-root": str(tmp_path / "data"), "resync-period": "1s"},
            "tasks": {"task-plugins": {"enabled-plugins": ["container", "counting"]}},
        },
        registry=registry,
    )
    document = workflow_document("wweb", x=2, fan_out=2)
    task = document["workflowClosure"]["tasks"][0]["template"]
    task["type"] = "counting"
    del task["container"]
    # An earlier owner (epoch 1, gone) wrote m1's intent and never its outcome: m1's create is unknown, and
    # only m1's — every other node's attempt 0 is another intent.
    conn.execute(
        "INSERT INTO taskplug_executions (key, task_type, spec, lease_epoch) VALUES ('wweb', 'workflow', %s, 1)",
        (Jsonb(document),),
    )
    conn.execute(
        "INSERT INTO taskplug_create_intents (execution_id, node, element, attempt, resource_name, epoch) "
        "SELECT id, 'm1', -1, 0, 'from-the-old-owner', 1 FROM taskplug_executions WHERE key = 'wweb'"
    )
    async with (
        LocalCluster(mode="simulated") as cluster,
        running(Replica(postgres_dsn, platform, cluster.client(), settings=FAST)),
    ):
        await wait_until(lambda: rows(conn)["wweb"]["terminal"], within=60, what="the workflow ends")
        await wait_until(
            lambda: _metric(conn, "taskplug_executor_unknown_creates_total") == 1,
            what="exactly one unknown create counted",
        )
    found = rows(conn)["wweb"]
    assert (found["phase"], found["outputs"]) == ("Success", {"o": 2, "y": 1})
    assert len(connector.creates) == 4 and set(connector.creates.values()) == {1}
    assert all(connector.intent_committed.values())  # each create was sent after its intent committed
    intents = conn.execute(
        "SELECT node, element, attempt, epoch, outcome_at IS NOT NULL FROM taskplug_create_intents"
        " ORDER BY node"
    ).fetchall()
    assert intents == [(n, -1, 0, 2, True) for n in ("end", "m0", "m1", "n0")]


def _metric(conn: psycopg.Connection[Any], name: str) -> float:
    row = conn.execute("SELECT metrics FROM taskplug_replicas WHERE fenced_at IS NULL").fetchone()
    samples = row[0].get(name, []) if row else []
    return float(samples[0]["value"]) if samples else -1.0


async def test_a_failed_and_an_aborted_workflow_show_their_phase_and_error(
    conn: psycopg.Connection[Any], postgres_dsn: str, platform: Platform, api: str
) -> None:
    async with (
        LocalCluster(mode="simulated") as cluster,
        running(Replica(postgres_dsn, platform, cluster.client(), settings=FAST)),
        httpx.AsyncClient(base_url=f"{api}/api/v1") as client,
    ):
        failing = await client.post("/executions", json={"spec": workflow_document("bad", exit_code=3)})
        long = await client.post("/executions", json={"spec": workflow_document("long", duration=3600)})
        bad_key, long_key = failing.json()["key"], long.json()["key"]
        await wait_until(lambda: rows(conn)[long_key]["phase"] == "Running", within=60, what="long runs")
        await wait_until(lambda: _node_phases(conn, long_key).get("n0") == 2, within=60, what="n0 runs")
        assert (await client.post(f"/executions/{long_key}/abort")).status_code in (200, 202)
        await wait_until(
            lambda: rows(conn)[bad_key]["terminal"] and rows(conn)[long_key]["terminal"],
            within=60,
            what="both end",
        )
        bad, aborted = rows(conn)[bad_key], rows(conn)[long_key]
        bad_nodes = (await client.get(f"/executions/{bad_key}/nodes")).json()
        long_nodes = (await client.get(f"/executions/{long_key}/nodes")).json()
        outputs = await client.get(f"/executions/{bad_key}/outputs")
    assert bad["phase"] == "PermanentFailure" and bad["error"] is not None
    assert (bad_nodes[0]["id"], bad_nodes[0]["phase"]) == ("n0", "Failed")
    assert bad_nodes[0]["error"] is not None
    assert {n["phase"] for n in bad_nodes[1:]} <= {"NotYetStarted", "Skipped"}
    assert outputs.status_code == 409
    assert (aborted["phase"], aborted["error"]["message"]) == ("Aborted", "Workflow aborted.")
    assert long_nodes[0]["phase"] == "Aborted"


def test_a_module_workflow_launching_a_launch_plan_compiles_on_the_server_as_here(tmp_path: Path) -> None:
    module = tmp_path / "service_wf_demo.py"
    # flytekit names launch plans in one registry per process: another test's module has a sub_lp too.
    module.write_text(DEMO.replace('name="sub_lp"', 'name="service_sub_lp"'))
    with click.Context(run, info_name="taskplug run").scope():
        document, key = module_document(module, ["wf", "--x", "2"], ModuleTarget(name="demo1"))
    assert key == "flytesnacks/development/demo1/wf"
    served = parse_spec(document, source="api", fresh_name=False)
    with click.Context(run, info_name="taskplug run").scope():
        bundle, values = module_workflow(module, ["wf", "--x", "2"], ModuleTarget(name="demo1"))
    local = workflow_spec(bundle, values, execution=document["execution"], fresh_name=False)
    assert served.workflow is not None and local.workflow is not None
    assert (served.workflow.closure.primary, served.workflow.closure.tasks) == (
        local.workflow.closure.primary,
        local.workflow.closure.tasks,
    )
    assert served.inputs == local.inputs  # y = 3 from the launch plan's default, merged by the server
    # The launch plan its node launches runs the same workflow, compiled there from the template sent.
    assert set(served.workflow.launch_plans) == set(local.workflow.launch_plans)
    for lp_key, launched in local.workflow.launch_plans.items():
        assert served.workflow.launch_plans[lp_key].closure.primary == launched.closure.primary


BRANCHING = """
from flytekit import conditional, task, workflow


@task
def double(a: int) -> int:
    return 2 * a


@task
def halve(a: int) -> int:
    return a // 2


@workflow
def inner(a: int) -> int:
    return double(a=a)


@workflow
def wf(a: int) -> int:
    b = double(a=a)
    return conditional("big").if_(b > 5).then(inner(a=b)).else_().then(halve(a=b))
"""


def test_the_node_list_follows_the_compiled_ids_of_branch_cases_and_sub_workflows(tmp_path: Path) -> None:
    module = tmp_path / "service_wf_branching.py"
    module.write_text(BRANCHING)
    with click.Context(run, info_name="taskplug run").scope():
        document, _ = module_document(module, ["wf", "--a", "4"], ModuleTarget(name="br1"))
    closure = ClosureCache().get(1, document)
    assert closure is not None
    branch = next(n for n in closure.primary.template.nodes if n.WhichOneof("target") == "branch_node")
    taken = branch.branch_node.if_else.case.then_node.id  # the compiled id: <branch>-<case>
    case_unique = unique_node_id(branch.id, 0, taken)
    records = {
        "n0": {"workflow_state": {"phase": 5}, "attempt": 0},
        branch.id: {"workflow_state": {"phase": 2, "taken": taken}},
        case_unique: {"workflow_state": {"phase": 2}},
    }
    listed = [(n["id"], n["kind"], n["parent"], n["phase"]) for n in workflow_nodes(closure, records, {})]
    inner_node = unique_node_id(case_unique, 0, "n0")
    assert listed == [
        ("n0", "task", None, "Succeeded"),
        (branch.id, "branch", None, "Running"),
        (case_unique, "subworkflow", branch.id, "Running"),
        (inner_node, "task", case_unique, "NotYetStarted"),
    ]
