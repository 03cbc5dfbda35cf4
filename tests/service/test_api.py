"""The JSON API against a real PostgreSQL: submit (idempotent by key), bad input named by field, the list's
filters and keyset pages, one execution's events/attempts/outputs as a replica writes them, abort, replicas,
health, metrics and the OpenAPI document."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from typing import Any

import orjson
import psycopg
import pytest
from fastapi.testclient import TestClient

from service.test_api_replica_double import ReplicaDouble, pod_spec
from taskplug.service._api_app import create_app

pytest.importorskip("fastapi")


@pytest.fixture(scope="module")
def client(postgres_dsn: str) -> Iterator[TestClient]:
    with TestClient(create_app(postgres_dsn, replica_ttl=3.0, max_body_bytes=64 * 1024)) as c:
        yield c


@pytest.fixture
def replica(postgres_dsn: str, client: TestClient) -> Iterator[ReplicaDouble]:
    double = ReplicaDouble(postgres_dsn)
    yield double
    double.close()


def submit(client: TestClient, spec: dict[str, Any], **extra: Any) -> Any:
    return client.post("/api/v1/executions", json={"spec": spec, **extra})


def test_submitting_creates_a_queued_execution_keyed_by_its_execution_id(client: TestClient) -> None:
    response = submit(client, pod_spec("first"), labels={"team": "ml"})

    assert response.status_code == 201, response.text
    body = response.json()
    assert body["key"] == "p/d/first/n0"
    assert (body["phase"], body["terminal"], body["task_type"]) == ("Queued", False, "container")
    assert body["labels"] == {"team": "ml"}
    assert body["owner"] is None


def test_submitting_the_same_key_again_returns_the_existing_execution(client: TestClient) -> None:
    first = submit(client, pod_spec("again"))
    second = submit(client, pod_spec("again"))

    assert (first.status_code, second.status_code) == (201, 200)
    assert first.json()["id"] == second.json()["id"]


def test_the_same_key_with_another_spec_is_a_conflict(client: TestClient) -> None:
    assert submit(client, pod_spec("changed")).status_code == 201
    response = submit(client, pod_spec("changed", image="alpine"))

    assert response.status_code == 409
    assert response.json()["error"]["field"] == "key"


def test_an_unnamed_spec_is_a_new_execution_each_time_unless_a_key_is_given(client: TestClient) -> None:
    a, b = submit(client, pod_spec(None)), submit(client, pod_spec(None))
    assert (a.status_code, b.status_code) == (201, 201)
    assert a.json()["key"] != b.json()["key"]

    keyed = [submit(client, pod_spec(None), key="nightly/2026-11-25") for _ in range(2)]
    assert [r.status_code for r in keyed] == [201, 200]
    stored = client.get("/api/v1/executions/nightly/2026-11-25").json()["spec"]
    # The stored spec names its execution, so every replica that parses it runs the same one.
    assert stored["execution"]["id"]["name"].startswith("a")
    assert len(stored["execution"]["id"]["name"]) == 20


def test_a_named_spec_cannot_be_submitted_under_another_key(client: TestClient) -> None:
    response = submit(client, pod_spec("named"), key="something-else")

    assert response.status_code == 422
    assert response.json()["error"]["field"] == "key"


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda s: s["template"]["container"].update(image=""), "spec.template.container.image"),
        (lambda s: s["execution"].update(maxAttempts=0), "spec.execution.maxAttempts"),
        (lambda s: s.update(templateFile="/etc/passwd"), "spec.templateFile"),
        (lambda s: s["execution"]["id"].update(nodeId="events"), "spec.execution.id.nodeId"),
    ],
    ids=["empty-image", "zero-attempts", "template-file", "reserved-node-id"],
)
def test_a_bad_spec_is_422_naming_the_field(client: TestClient, mutate: Any, field: str) -> None:
    spec = copy.deepcopy(pod_spec("bad"))
    mutate(spec)

    response = submit(client, spec)

    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == field
    assert client.get("/api/v1/executions/p/d/bad/n0").status_code == 404


@pytest.mark.parametrize(
    ("execution", "labels", "field"),
    [
        # The attack: the victim's pod name and owner label, so that the attacker's attempt adopts
        # the victim's pod and its abort deletes it.
        (
            {"generatedName": "victim-n0-0", "labels": {"execution-id": "victim"}},
            {},
            "spec.execution.generatedName",
        ),
        ({"labels": {"execution-id": "victim"}}, {}, "spec.execution.labels.execution-id"),
        ({"labels": {"team": "ml", "node-id": "n0"}}, {}, "spec.execution.labels.node-id"),
        (
            {"annotations": {"taskplug.io/task-execution": "p/d/victim/n0/0"}},
            {},
            "spec.execution.annotations.taskplug.io/task-execution",
        ),
        ({}, {"relaunch-of": "p/d/victim/n0"}, "labels.relaunch-of"),
    ],
    ids=["generated-name", "execution-id", "node-id", "attempt-annotation", "relaunch-of"],
)
def test_what_the_machinery_sets_itself_cannot_be_submitted(
    client: TestClient, execution: dict[str, Any], labels: dict[str, str], field: str
) -> None:
    spec = copy.deepcopy(pod_spec("hijack"))
    spec["execution"].update(execution)

    response = submit(client, spec, labels=labels)

    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == field
    assert client.get("/api/v1/executions/p/d/hijack/n0").status_code == 404


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        (b"{not json", 400, None),
        (b"[]", 422, ""),
        (orjson.dumps({"spec": {}, "surprise": 1}), 422, "surprise"),
        (orjson.dumps({"spec": pod_spec(None), "key": "../etc"}), 422, "key"),
        (orjson.dumps({"spec": pod_spec(None), "labels": {"a": 1}}), 422, "labels.a"),
    ],
    ids=["not-json", "not-an-object", "unknown-field", "bad-key", "label-not-text"],
)
def test_a_bad_envelope_is_refused_naming_the_field(
    client: TestClient, body: bytes, status: int, field: str | None
) -> None:
    response = client.post("/api/v1/executions", content=body, headers={"content-type": "application/json"})

    assert response.status_code == status, response.text
    assert response.json()["error"].get("field") == field


def test_a_body_that_is_not_json_typed_is_415(client: TestClient) -> None:
    body = orjson.dumps({"spec": pod_spec("typed")})

    response = client.post("/api/v1/executions", content=body, headers={"content-type": "text/plain"})

    assert response.status_code == 415
    assert client.get("/api/v1/executions/p/d/typed/n0").status_code == 404


def test_a_change_sent_by_another_sites_page_is_refused(client: TestClient) -> None:
    key = submit(client, pod_spec("csrf")).json()["key"]

    for headers in ({"origin": "https://evil.example"}, {"sec-fetch-site": "cross-site"}, {"origin": "null"}):
        assert client.post(f"/api/v1/executions/{key}/abort", headers=headers).status_code == 403, headers
        assert client.post(f"/executions/{key}/abort", headers=headers).status_code == 403, headers
        refused = client.post("/api/v1/executions", json={"spec": pod_spec("csrf-2")}, headers=headers)
        assert refused.status_code == 403, headers
    assert client.get("/api/v1/executions/p/d/csrf-2/n0").status_code == 404
    assert client.get(f"/api/v1/executions/{key}").json()["aborting"] is False
    same = client.post(f"/api/v1/executions/{key}/abort", headers={"origin": "http://testserver"})
    assert same.status_code == 202
    assert client.get("/api/v1/executions", headers={"origin": "https://evil.example"}).status_code == 200


def test_only_the_allowed_host_names_are_answered(postgres_dsn: str) -> None:
    with TestClient(
        create_app(postgres_dsn, allowed_hosts=["127.0.0.1", "localhost"]), base_url="http://127.0.0.1"
    ) as c:
        assert c.get("/api/v1/healthz").status_code == 200
        # A name an attacker's DNS points at 127.0.0.1 (rebinding) is not one of them.
        assert c.get("/api/v1/healthz", headers={"host": "rebound.example"}).status_code == 400


def test_a_body_over_the_bound_is_413_before_it_is_parsed(client: TestClient) -> None:
    spec = pod_spec("huge")
    spec["inputs"] = {"who": "x" * (65 * 1024)}

    response = submit(client, spec)

    assert response.status_code == 413
    assert client.get("/api/v1/executions/p/d/huge/n0").status_code == 404


def test_the_list_is_newest_first_and_pages_by_keyset_without_repeats(client: TestClient) -> None:
    keys = [submit(client, pod_spec(f"page-{i}")).json()["key"] for i in range(5)]

    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"q": "/page-", "limit": 2}
        if cursor:
            params["cursor"] = cursor
        page = client.get("/api/v1/executions", params=params).json()
        seen += [item["key"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break

    assert seen == list(reversed(keys))


def test_the_list_filters_by_phase_task_type_and_time(client: TestClient, replica: ReplicaDouble) -> None:
    submit(client, pod_spec("filter-a"))
    submit(client, pod_spec("filter-b"))
    replica.claim("p/d/filter-a/n0")
    replica.phase("p/d/filter-a/n0", "Running")

    def keys(**params: Any) -> list[str]:
        response = client.get("/api/v1/executions", params={"q": "filter-", **params})
        assert response.status_code == 200, response.text
        return [item["key"] for item in response.json()["items"]]

    assert keys(phase="Running") == ["p/d/filter-a/n0"]
    assert keys(phase=["Running", "Queued"]) == ["p/d/filter-b/n0", "p/d/filter-a/n0"]
    assert keys(task_type="spark") == []
    assert keys(since="2999-01-01T00:00:00Z") == []
    assert len(keys(since="2000-01-01T00:00:00")) == 2


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"cursor": "bm90IGEgY3Vyc29y"}, "query.cursor"),
        ({"limit": 0}, "query.limit"),
        ({"since": "soon"}, "query.since"),
    ],
)
def test_bad_list_parameters_are_422_naming_them(
    client: TestClient, params: dict[str, Any], field: str
) -> None:
    response = client.get("/api/v1/executions", params=params)

    assert response.status_code == 422
    assert response.json()["error"]["field"] == field


def test_events_attempts_and_outputs_follow_what_the_replica_wrote(
    client: TestClient, replica: ReplicaDouble
) -> None:
    key = submit(client, pod_spec("followed")).json()["key"]
    assert client.get(f"/api/v1/executions/{key}/outputs").status_code == 409
    replica.claim(key)
    logs = [{"name": "Kubernetes Logs", "uri": "http://logs.example/followed-n0-0"}]
    first = replica.phase(key, "Running", reason="pod started", logs=logs)
    replica.phase(
        key,
        "RetryableFailure",
        reason="OOMKilled",
        error={"code": "OOMKilled", "kind": "USER", "message": "oom"},
    )
    replica.phase(key, "Running", attempt=1)
    replica.phase(key, "Success", attempt=1, outputs={"greeting": "hello"})

    events = client.get(f"/api/v1/executions/{key}/events").json()
    assert [(e["phase"], e["attempt"]) for e in events] == [
        ("Running", 0),
        ("RetryableFailure", 0),
        ("Running", 1),
        ("Success", 1),
    ]
    assert [e["seq"] for e in events] == sorted(e["seq"] for e in events)
    assert events[0]["logs"] == logs
    assert len(client.get(f"/api/v1/executions/{key}/events", params={"after_seq": first}).json()) == 3

    attempts = client.get(f"/api/v1/executions/{key}/attempts").json()
    assert [(a["attempt"], a["phase"]) for a in attempts] == [(0, "RetryableFailure"), (1, "Success")]
    assert attempts[0]["error"]["code"] == "OOMKilled"
    assert attempts[0]["logs"] == logs

    outputs = client.get(f"/api/v1/executions/{key}/outputs")
    assert outputs.status_code == 200
    assert outputs.json()["outputs"] == {"greeting": "hello"}
    detail = client.get(f"/api/v1/executions/{key}").json()
    assert (detail["phase"], detail["terminal"], detail["reason"]) == ("Success", True, "")
    assert detail["owner"]["host"] == "double-host"
    assert detail["duration_seconds"] is not None


def test_a_map_tasks_elements_are_counted_by_phase_failed_first(
    client: TestClient, replica: ReplicaDouble
) -> None:
    key = submit(client, pod_spec("mapped")).json()["key"]
    replica.claim(key)
    oom = {"code": "OOMKilled", "kind": "USER", "message": "oom"}
    replica.elements(
        key,
        [
            {"index": 0, "node_phase": 5, "attempt": 0},
            {"index": 1, "node_phase": 2, "attempt": 1, "logs": [{"name": "l", "uri": "http://x/1"}]},
            {"index": 2, "node_phase": 6, "attempt": 1, "error": oom},
            {"index": 3, "node_phase": 5, "attempt": 0, "error": None},
        ],
    )

    body = client.get(f"/api/v1/executions/{key}/elements").json()

    assert body["total"] == 4
    assert body["counts"] == {"Running": 1, "Succeeded": 2, "Failed": 1}
    assert [(e["index"], e["phase"]) for e in body["items"]] == [
        (2, "Failed"),
        (0, "Succeeded"),
        (1, "Running"),
        (3, "Succeeded"),
    ]
    assert body["items"][0]["error"] == oom
    # Each element is its root node's child, and the API reads NodeRecord's keys (attempt, not attempts).
    assert [(e["node"], e["attempts"]) for e in body["items"]] == [
        ("n0/2", 1),
        ("n0/0", 0),
        ("n0/1", 1),
        ("n0/3", 0),
    ]
    assert (
        client.get(f"/api/v1/executions/{key}/elements", params={"limit": 1}).json()["items"][0]["index"] == 2
    )
    single = submit(client, pod_spec("not-mapped")).json()["key"]
    assert client.get(f"/api/v1/executions/{single}/elements").json() == {
        "total": 0,
        "counts": {},
        "items": [],
    }


def test_an_unknown_execution_is_404(client: TestClient) -> None:
    for path in ("", "/events", "/attempts", "/elements", "/outputs"):
        response = client.get(f"/api/v1/executions/p/d/nobody/n0{path}")
        assert response.status_code == 404, path
    assert client.post("/api/v1/executions/p/d/nobody/n0/abort").status_code == 404
    # A path no route matches answers in the same error shape.
    unmatched = client.get("/api/v1/no-such-route")
    assert unmatched.status_code == 404
    assert unmatched.json() == {"error": {"message": "Not Found"}}


def test_abort_is_accepted_once_notified_and_refused_when_terminal(
    client: TestClient, replica: ReplicaDouble, postgres_dsn: str
) -> None:
    key = submit(client, pod_spec("aborted")).json()["key"]
    with psycopg.connect(postgres_dsn, autocommit=True) as listener:
        listener.execute("LISTEN taskplug_abort")
        first = client.post(f"/api/v1/executions/{key}/abort")
        second = client.post(f"/api/v1/executions/{key}/abort")
        notified = [n.payload for n in listener.notifies(timeout=5, stop_after=1)]

    assert (first.status_code, second.status_code) == (202, 202)
    assert first.json()["aborting"] is True
    # Idempotent: the first request's time is kept.
    assert first.json()["abort_requested_at"] == second.json()["abort_requested_at"]
    assert notified and set(notified) == {key}  # one per request: a wake-up hint

    replica.claim(key)
    replica.phase(key, "Aborted", reason="aborted on request")
    third = client.post(f"/api/v1/executions/{key}/abort")
    assert third.status_code == 409
    assert "Aborted" in third.json()["error"]["message"]


def test_relaunch_submits_the_same_task_and_inputs_under_a_fresh_name(
    client: TestClient, replica: ReplicaDouble, postgres_dsn: str
) -> None:
    spec = pod_spec("to-relaunch")
    spec["inputs"] = {"who": "again"}
    key = submit(client, spec, labels={"team": "ml"}).json()["key"]
    replica.claim(key)
    replica.phase(key, "PermanentFailure", error={"kind": "USER", "code": "x", "message": "boom"})

    with psycopg.connect(postgres_dsn, autocommit=True) as listener:
        listener.execute("LISTEN taskplug_work")
        first = client.post(f"/api/v1/executions/{key}/relaunch")
        woken = [n.channel for n in listener.notifies(timeout=5, stop_after=1)]
    second = client.post(f"/api/v1/executions/{key}/relaunch")

    assert (first.status_code, second.status_code) == (201, 201), first.text
    assert woken == ["taskplug_work"]
    new = first.json()
    # Each relaunch is its own execution: a new name, queued, with the original's labels and where it came from.
    assert new["key"] != key and second.json()["key"] not in (key, new["key"])
    assert re.fullmatch(r"p/d/a[bcdfghjklmnpqrstvwxz2456789]{19}/n0", new["key"]), new["key"]
    assert (new["phase"], new["terminal"], new["attempt"]) == ("Queued", False, 0)
    assert new["labels"] == {"team": "ml", "relaunch-of": key}
    stored = client.get(f"/api/v1/executions/{new['key']}").json()["spec"]
    original = client.get(f"/api/v1/executions/{key}").json()["spec"]
    assert stored["execution"]["id"]["name"] == new["key"].split("/")[2]
    stored["execution"]["id"]["name"] = original["execution"]["id"]["name"]
    assert stored == original  # the same task, inputs and everything else
    # The original is untouched.
    assert client.get(f"/api/v1/executions/{key}").json()["phase"] == "PermanentFailure"


def test_relaunching_an_unknown_execution_is_404_and_relaunch_is_no_key(client: TestClient) -> None:
    response = client.post("/api/v1/executions/p/d/nobody/n0/relaunch")
    assert response.status_code == 404
    assert response.json()["error"]["field"] == "key"
    # A key ending in "relaunch" would make its own relaunch URL ambiguous.
    refused = submit(client, pod_spec(None), key="nightly/relaunch")
    assert refused.status_code == 422
    assert refused.json()["error"]["field"] == "key"


def test_submitting_wakes_the_replicas(client: TestClient, postgres_dsn: str) -> None:
    with psycopg.connect(postgres_dsn, autocommit=True) as listener:
        listener.execute("LISTEN taskplug_work")
        submit(client, pod_spec("wakes"))
        channels = [n.channel for n in listener.notifies(timeout=5, stop_after=1)]

    assert channels == ["taskplug_work"]


def test_replicas_are_shown_live_silent_or_fenced(client: TestClient, postgres_dsn: str) -> None:
    live, silent, fenced = (
        ReplicaDouble(postgres_dsn, host=h) for h in ("live-host", "silent-host", "fenced-host")
    )
    try:
        live.heartbeat()
        silent.heartbeat(age_seconds=60)
        fenced.fence()
        states = {r["host"]: r["state"] for r in client.get("/api/v1/replicas").json()}
    finally:
        for double in (live, silent, fenced):
            double.close()

    assert (states["live-host"], states["silent-host"], states["fenced-host"]) == ("live", "silent", "fenced")


def test_metrics_show_every_unfenced_replicas_samples_labelled_by_replica(
    client: TestClient, postgres_dsn: str
) -> None:
    a, b, gone = (ReplicaDouble(postgres_dsn, host=h) for h in ("metrics-a", "metrics-b", "metrics-gone"))
    try:
        a.heartbeat({"taskplug_rounds_total": [{"labels": {"plugin": "pod"}, "value": 7}]})
        b.heartbeat(
            {
                "taskplug_rounds_total": [{"labels": {"plugin": "pod"}, "value": 3}],
                "bad name!": [{"labels": {}, "value": 1}],
                "taskplug_weird": [{"labels": {}, "value": "not a number"}],
            }
        )
        gone.heartbeat({"taskplug_rounds_total": [{"labels": {"plugin": "pod"}, "value": 99}]})
        gone.fence()
        text = client.get("/api/v1/metrics").text
        assert client.get("/metrics").text == text  # where Prometheus looks by default
    finally:
        for double in (a, b, gone):
            double.close()

    assert f'taskplug_rounds_total{{plugin="pod",replica="{a.id}"}} 7.0' in text
    assert f'taskplug_rounds_total{{plugin="pod",replica="{b.id}"}} 3.0' in text
    assert str(gone.id) not in text.split("taskplug_rounds_total", 1)[1]
    assert f'taskplug_replica_up{{host="metrics-gone",replica="{gone.id}"}} 0.0' in text
    assert "bad name" not in text
    assert "taskplug_weird{" not in text


def test_healthz_reports_the_schema_version(client: TestClient) -> None:
    response = client.get("/api/v1/healthz")

    assert response.status_code == 200
    assert response.json()["status"] == "ok"
    assert response.json()["schema_version"] >= 1
    assert client.get("/healthz").json() == response.json()


def test_the_openapi_document_describes_the_api(client: TestClient) -> None:
    document = client.get("/api/v1/openapi.json").json()

    paths = document["paths"]
    for path in (
        "/api/v1/executions",
        "/api/v1/executions/{key}",
        "/api/v1/executions/{key}/events",
        "/api/v1/executions/{key}/abort",
        "/api/v1/replicas",
        "/api/v1/metrics",
    ):
        assert path in paths, path
    schema = paths["/api/v1/executions"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert set(schema["properties"]) == {"spec", "labels", "key"}
    assert not any(p.startswith("/executions") for p in paths), "the web view's pages are not API"


def test_an_execution_says_its_cache_status_once_its_root_node_has_one(
    client: TestClient, postgres_dsn: str
) -> None:
    spec = pod_spec("cached-one")
    spec["execution"]["overwriteCache"] = True  # accepted as part of the spec (Flyte's overwrite_cache)
    assert submit(client, spec).status_code == 201
    key = "p/d/cached-one/n0"
    assert client.get(f"/api/v1/executions/{key}").json()["cache_status"] is None
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE taskplug_executions SET record = %s::jsonb WHERE key = %s",
            (orjson.dumps({"key": key, "path": "n0", "cache": {"status": "CACHE_HIT"}}).decode(), key),
        )
    assert client.get(f"/api/v1/executions/{key}").json()["cache_status"] == "CACHE_HIT"
