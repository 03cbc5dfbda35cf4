"""Launch-plan nodes on replicas: the child execution is a row of its own (labelled with its parent, submitted
by the parent's submitter), which any replica claims; its end wakes the parent, which takes its outputs; the
parent's abort aborts it; a parent taken over by another replica finds its child instead of starting another.
Real PostgreSQL, real replicas, a flytekit module serialized by flytekit, the embedded cluster with simulated
pods, 127.0.0.1 only."""

from __future__ import annotations

import copy
import textwrap
from pathlib import Path
from typing import Any

import click
import orjson
import psycopg
import pytest

from service.replica_helpers import (
    empty_database_fixture,  # noqa: F401 (the conn fixture)
    rows,
    running,
    submit,
)
from support.postgres_server import postgres_dsn_fixture, postgres_server_fixture  # noqa: F401
from support.waiting import wait_until
from taskplug.cli._flytekit_module import ModuleTarget
from taskplug.cli._remote_run import module_document
from taskplug.cli._run import run
from taskplug.core import SpecError
from taskplug.executor import Platform, parse_spec
from taskplug.k8s import POD
from taskplug.localcluster import LocalCluster
from taskplug.service import Replica, ReplicaSettings
from taskplug.service._api_submit import parse_submission

pytestmark = pytest.mark.integration

FAST = ReplicaSettings(heartbeat=0.5, ttl=3.0, margin=1.0, poll=0.25, reap=0.5, reconcile=1.0)

# flytekit keeps one launch-plan registry per process: this module's launch plan has a name of its own.
MODULE = textwrap.dedent(
    """
    from flytekit import LaunchPlan, task, workflow


    @task
    def step() -> None:
        pass


    @workflow
    def child(x: int, y: int = 3) -> int:
        step()
        return x


    child_lp = LaunchPlan.get_or_create(child, name="replica_child_lp", default_inputs={"y": 4})


    @workflow
    def parent(x: int) -> int:
        step()
        return child_lp(x=x)


    @workflow
    def direct(x: int) -> int:
        return child_lp(x=x)
    """
)


@pytest.fixture
def platform(tmp_path: Path) -> Platform:
    # Pods kept when finalized: every pod ever created is still there to be counted.
    return Platform.load(document={"executor": {"data-root": str(tmp_path / "data"), "resync-period": "30s"}})


@pytest.fixture(scope="module")
def documents(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Each workflow's document, serialized once (flytekit refuses a launch plan's name twice a process)."""
    module = tmp_path_factory.mktemp("module") / "lp_children.py"
    module.write_text(MODULE)
    found = {}
    for workflow in ("parent", "direct"):
        with click.Context(run, info_name="taskplug run").scope():
            found[workflow], _ = module_document(module, [workflow, "--x", "4"], ModuleTarget(name="x"))
    return found


def _document(
    documents: dict[str, dict[str, Any]], name: str, *, duration: float = 0.0, workflow: str = "parent"
) -> dict[str, Any]:
    document = copy.deepcopy(documents[workflow])
    document["execution"]["id"]["name"] = name
    document["execution"]["annotations"] = {"taskplug.io/simulate-duration": str(duration)}
    return document


def _child_rows(conn: psycopg.Connection[Any]) -> dict[str, dict[str, Any]]:
    found = conn.execute(
        "SELECT key, labels, phase, terminal, outputs, submitted_by FROM taskplug_executions"
        " WHERE labels ? 'parent-execution'"
    ).fetchall()
    return {
        key: {
            "parent": labels["parent-execution"],
            "phase": phase,
            "terminal": terminal,
            "outputs": outputs,
            "submitted_by": by,
        }
        for key, labels, phase, terminal, outputs, by in found
    }


async def _pods(cluster: LocalCluster) -> dict[str, str]:
    items, _ = await cluster.client().list(POD, None)
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in items}


async def test_a_launch_plan_child_is_a_row_of_its_own_whose_end_gives_the_parent_its_outputs(
    conn: psycopg.Connection[Any], postgres_dsn: str, platform: Platform, documents: dict[str, dict[str, Any]]
) -> None:
    document = _document(documents, "lpparent1")
    submit(conn, "row-of-parent", document)
    conn.execute("UPDATE taskplug_executions SET submitted_by = 'alice' WHERE key = 'row-of-parent'")
    async with LocalCluster(mode="simulated") as cluster:
        async with running(Replica(postgres_dsn, platform, cluster.client(), settings=FAST)):
            await wait_until(
                lambda: rows(conn)["row-of-parent"]["terminal"], within=60, what="the parent ends"
            )
        pods = await _pods(cluster)
    parent = rows(conn)["row-of-parent"]
    children = _child_rows(conn)
    assert (parent["phase"], parent["error"], parent["outputs"]) == ("Success", None, {"o0": 4})
    assert len(children) == 1
    ((child_key, child),) = children.items()
    assert child_key.startswith("flytesnacks/development/") and child_key.endswith("/wf")
    assert child == {
        "parent": "row-of-parent",
        "phase": "Success",
        "terminal": True,
        "outputs": {"o0": 4},
        "submitted_by": "alice",
    }
    # The child's document reads back as what the node launched: the launch plan's default merged in.
    stored = conn.execute("SELECT spec FROM taskplug_executions WHERE key = %s", (child_key,)).fetchone()
    assert stored is not None
    spec = parse_spec(stored[0], source="api", fresh_name=False)
    assert spec.execution_key == child_key
    assert {name: lit.scalar.primitive.integer for name, lit in spec.inputs.literals.items()} == {
        "x": 4,
        "y": 4,
    }
    assert len(pods) == 2  # the parent's step and the child's step, each once


async def test_aborting_the_parent_aborts_its_running_child_wherever_it_runs(
    conn: psycopg.Connection[Any], postgres_dsn: str, platform: Platform, documents: dict[str, dict[str, Any]]
) -> None:
    """Two replicas: the child may run on either. Its pod runs 600 s; the parent's abort ends it."""
    document = _document(documents, "lpparent2", duration=600, workflow="direct")
    submit(conn, "p2", document)
    async with (
        LocalCluster(mode="simulated") as cluster,
        running(Replica(postgres_dsn, platform, cluster.client(), settings=FAST)),
        running(Replica(postgres_dsn, platform, cluster.client(), settings=FAST)),
    ):
        await wait_until(lambda: len(_child_rows(conn)) == 1, within=60, what="the child was launched")
        (child_key,) = _child_rows(conn)
        await wait_until(
            lambda: bool(rows(conn)[child_key]["owner_id"]), within=30, what="a replica claimed the child"
        )
        conn.execute("UPDATE taskplug_executions SET abort_requested_at = now() WHERE key = 'p2'")
        conn.execute("SELECT pg_notify('taskplug_abort', 'p2')")
        await wait_until(
            lambda: rows(conn)["p2"]["terminal"] and rows(conn)[child_key]["terminal"],
            within=60,
            what="the parent and its child end",
        )
    assert rows(conn)["p2"]["phase"] == "Aborted"
    assert rows(conn)[child_key]["phase"] == "Aborted"


async def test_a_parent_taken_over_finds_the_child_it_launched(
    conn: psycopg.Connection[Any], postgres_dsn: str, tmp_path: Path, documents: dict[str, dict[str, Any]]
) -> None:
    """The parent's replica stops (hand-over) once the child is launched; a successor takes both over: it
    finds the child the parent launched rather than launching another, and the child's end wakes the
    parent."""
    platform = Platform.load(
        document={"executor": {"data-root": str(tmp_path / "data"), "resync-period": "30s"}}
    )
    document = _document(documents, "lpparent3", duration=2)
    submit(conn, "p3", document)
    async with LocalCluster(mode="simulated") as cluster:
        async with running(Replica(postgres_dsn, platform, cluster.client(), settings=FAST)):
            await wait_until(lambda: len(_child_rows(conn)) == 1, within=60, what="the child was launched")
        (child_key,) = _child_rows(conn)
        assert not rows(conn)["p3"]["terminal"]
        async with running(Replica(postgres_dsn, platform, cluster.client(), settings=FAST)):
            await wait_until(lambda: rows(conn)["p3"]["terminal"], within=60, what="the parent ends")
        pods = await _pods(cluster)
    assert (rows(conn)["p3"]["phase"], rows(conn)["p3"]["outputs"]) == ("Success", {"o0": 4})
    assert list(_child_rows(conn)) == [child_key]  # found again, not launched twice
    assert _child_rows(conn)[child_key]["phase"] == "Success"
    assert len(pods) == 2  # the parent's step and the child's, each created once


def test_a_submission_cannot_claim_a_parent() -> None:
    body = b'{"spec": {"template": {"type": "container"}}, "labels": {"parent-execution": "victim"}}'
    with pytest.raises(SpecError) as info:
        parse_submission(body, max_bytes=1 << 20)
    assert info.value.path == "labels.parent-execution"


def test_a_workflow_asking_for_more_parallelism_than_the_limits_allow_is_refused(
    documents: dict[str, dict[str, Any]],
) -> None:
    document = _document(documents, "wide")
    document["execution"]["maxParallelism"] = 50_000
    body = orjson.dumps({"spec": document})
    with pytest.raises(SpecError) as info:
        parse_submission(body, max_bytes=1 << 22)
    assert info.value.path == "spec.execution.maxParallelism"
    document["execution"]["maxParallelism"] = 3
    parsed = parse_spec(document, source="api", fresh_name=False)
    assert parsed.workflow is not None and parsed.workflow.max_parallelism == 3
