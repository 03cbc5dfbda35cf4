"""Task logs on the service: ``GET /api/v1/executions/{key}/logs`` and ``taskplug logs --server``, against a
real ``taskplug executor`` replica on ``taskplug cluster serve --mode process`` (its kubelet runs the task's
shell command), one PostgreSQL and the server on uvicorn with the cluster's kubeconfig.

A running task's log is streamed with ``follow`` as it prints; once the attempt ended the replica keeps the
log in the database, so it is still read whole after the pod was deleted from the cluster; ``taskplug gc``
deletes the kept logs with their execution.
"""

from __future__ import annotations

import base64
import ssl
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import yaml
from click.testing import CliRunner

from service.test_api_replica_double import serve_app

replica_helpers = pytest.importorskip(
    "service.replica_helpers", reason="the replicas' test helpers are absent"
)
pytest.importorskip("uvicorn", reason="uvicorn is not installed (extra `web`)")

from taskplug.cli._logs import logs as logs_command  # noqa: E402 (after the skips)
from taskplug.service import collect_garbage, migrate  # noqa: E402
from taskplug.service._api_app import create_app  # noqa: E402 (after the skips: needs the web extra)

pytestmark = [pytest.mark.integration]

RUN = 90.0  # seconds: a deadline for a pod to run a shell command, not a timing


def wait_until(predicate: Any, *, timeout: float = RUN, what: str) -> None:
    """Poll ``predicate`` until it holds; fail after ``timeout`` real seconds (a deadline, not a timing)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        time.sleep(0.1)


def shell_task(name: str, script: str, *, max_attempts: int = 1) -> dict[str, Any]:
    """A container task whose container runs ``script`` with ``sh -c`` (the embedded kubelet runs it)."""
    return {
        "template": {
            "id": {"resourceType": "TASK", "project": "p", "domain": "d", "name": "sh", "version": "v1"},
            "type": "container",
            "container": {
                "image": "busybox",
                "command": ["sh", "-c", script],
                "resources": {
                    "requests": [{"name": "CPU", "value": "10m"}, {"name": "MEMORY", "value": "16Mi"}]
                },
            },
        },
        "execution": {
            "id": {"project": "p", "domain": "d", "name": name, "nodeId": "n0"},
            "maxAttempts": max_attempts,
        },
    }


def gated_script(gate: Path, *, exit_code: int = 0) -> str:
    """Print two lines, wait for ``gate``, print a third, end with ``exit_code``."""
    return (
        f"echo 'first line <b>'; echo 'second line'; while [ ! -e {gate} ]; do sleep 0.05; done; "
        f"echo 'after the gate'; exit {exit_code}"
    )


@dataclass
class Service:
    url: str
    dsn: str
    cluster: Any
    tmp: Path

    def submit(self, name: str, script: str, **kwargs: Any) -> str:
        response = httpx.post(
            f"{self.url}/api/v1/executions", json={"spec": shell_task(name, script, **kwargs)}, timeout=30
        )
        assert response.status_code == 201, response.text
        key: str = response.json()["key"]
        return key

    def execution(self, key: str) -> dict[str, Any]:
        document: dict[str, Any] = httpx.get(f"{self.url}/api/v1/executions/{key}", timeout=30).json()
        return document

    def delete_pod(self, namespace: str, name: str) -> None:
        """DELETE the pod as kubectl would (the cluster's CA and the kubeconfig's token)."""
        config = yaml.safe_load(self.cluster.kubeconfig.read_text())
        ca = base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"]).decode()
        token = config["users"][0]["user"]["token"]
        request = urllib.request.Request(
            f"{self.cluster.url}/api/v1/namespaces/{namespace}/pods/{name}",
            method="DELETE",
            headers={"Authorization": f"Bearer {token}"},
        )
        urllib.request.urlopen(request, timeout=10, context=ssl.create_default_context(cadata=ca)).read()

    def pods(self) -> list[dict[str, Any]]:
        with self.cluster.request("/api/v1/pods") as response:
            items: list[dict[str, Any]] = yaml.safe_load(response.read())["items"]
        return items

    def kept(self, key: str) -> list[tuple[str, int, str, int]]:
        with psycopg.connect(self.dsn) as conn:
            rows = conn.execute(
                "SELECT l.node, l.attempt, l.container, l.size FROM taskplug_logs l"
                " JOIN taskplug_executions e ON e.id = l.execution_id WHERE e.key = %s ORDER BY l.attempt",
                (key,),
            ).fetchall()
        return [(str(n), int(a), str(c), int(s)) for n, a, c, s in rows]


@pytest.fixture(scope="module")
def service(postgres_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    tmp = tmp_path_factory.mktemp("logs")
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        migrate(conn)
    with replica_helpers.serve_cluster(tmp, mode="process") as cluster:
        replica = replica_helpers.start_replica(postgres_dsn, cluster.kubeconfig, tmp / "replica.log")
        try:
            app = create_app(
                postgres_dsn, replica_ttl=3.0, poll_interval=0.25, kubeconfig=cluster.kubeconfig, log_poll=0.2
            )
            with serve_app(app) as url:
                yield Service(url, postgres_dsn, cluster, tmp)
        finally:
            replica_helpers.stop_replica(replica)
            print(replica.text()[-4000:])


def wait_running(service: Service, key: str) -> None:
    wait_until(lambda: service.execution(key)["phase"] == "Running", timeout=RUN, what=f"{key} running")


def test_a_running_tasks_log_streams_as_it_prints_and_the_whole_log_stays_after_its_pod_is_gone(
    service: Service,
) -> None:
    gate = service.tmp / "gate-stream"
    key = service.submit("logs-stream", gated_script(gate))
    wait_running(service, key)
    received = ""
    with httpx.stream(
        "GET", f"{service.url}/api/v1/executions/{key}/logs", params={"follow": "true"}, timeout=RUN
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/plain")
        chunks = response.iter_text()
        for chunk in chunks:
            received += chunk
            if "second line" in received:
                break
        # The answer is open and the task still waits: what it printed so far came while it ran.
        assert "after the gate" not in received
        assert service.execution(key)["terminal"] is False
        gate.touch()
        for chunk in chunks:
            received += chunk
    assert "first line <b>" in received and received.index("second line") < received.index("after the gate")
    assert received.startswith("==> node n0, attempt 0: pod ")  # every node asked for: each log is headed
    wait_until(lambda: service.execution(key)["phase"] == "Success", timeout=RUN, what="success")
    wait_until(lambda: service.kept(key), timeout=RUN, what="the log kept")
    ((node, attempt, _container, size),) = service.kept(key)
    assert (node, attempt) == ("n0", 0) and size == len("first line <b>\nsecond line\nafter the gate\n")
    pod = next(p for p in service.pods() if p["metadata"]["labels"].get("execution-id") == "logs-stream")
    service.delete_pod(pod["metadata"]["namespace"], pod["metadata"]["name"])
    wait_until(
        lambda: not any(p["metadata"]["name"] == pod["metadata"]["name"] for p in service.pods()),
        timeout=RUN,
        what="the pod gone",
    )
    whole = httpx.get(
        f"{service.url}/api/v1/executions/{key}/logs", params={"node": "n0", "attempt": 0}, timeout=30
    )
    assert whole.status_code == 200
    assert whole.text == "first line <b>\nsecond line\nafter the gate\n"
    tail = httpx.get(
        f"{service.url}/api/v1/executions/{key}/logs", params={"node": "n0", "attempt": 0, "tail": 1}
    )
    assert tail.text == "after the gate\n"

    # The CLI reads the same through the API.
    printed = CliRunner().invoke(
        logs_command, [key, "--server", service.url, "--attempt", "0", "--node", "n0"]
    )
    assert printed.exit_code == 0, printed.output
    assert printed.output == "first line <b>\nsecond line\nafter the gate\n"
    missing = CliRunner().invoke(logs_command, [key, "--server", service.url, "--attempt", "3"])
    assert missing.exit_code == 2 and "--attempt" in missing.output, missing.output

    # taskplug gc deletes the kept logs with their execution.
    with psycopg.connect(service.dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE taskplug_executions SET finished_at = now() - interval '1 day' WHERE key = %s", (key,)
        )
        collect_garbage(conn, older_than=timedelta(hours=1))
    assert service.kept(key) == []


def test_the_cli_follows_a_running_task_through_the_server(service: Service) -> None:
    gate = service.tmp / "gate-cli"
    key = service.submit("logs-cli", gated_script(gate, exit_code=3))
    wait_running(service, key)
    wait_until(
        lambda: "second line" in httpx.get(f"{service.url}/api/v1/executions/{key}/logs", timeout=30).text,
        timeout=RUN,
        what="the first lines printed",
    )
    gate.touch()
    printed = CliRunner().invoke(logs_command, [key, "--server", service.url, "--follow", "--attempt", "0"])
    assert printed.exit_code == 0, printed.output
    assert printed.output.endswith("after the gate\n")
    assert "first line <b>" in printed.output
    wait_until(lambda: service.execution(key)["terminal"], timeout=RUN, what="the end")
    assert service.execution(key)["phase"] == "PermanentFailure"


def test_bad_parameters_are_named(service: Service) -> None:
    base = f"{service.url}/api/v1/executions"
    missing = httpx.get(f"{base}/p/d/nothing-here/n0/logs", timeout=30)
    assert missing.status_code == 404 and missing.json()["error"]["field"] == "key"
    gate = service.tmp / "gate-params"
    key = service.submit("logs-params", gated_script(gate))
    try:
        negative = httpx.get(f"{base}/{key}/logs", params={"attempt": -1}, timeout=30)
        assert negative.status_code == 422 and "attempt" in negative.json()["error"]["field"]
        control = httpx.get(f"{base}/{key}/logs", params={"node": "n0\x07"}, timeout=30)
        assert control.status_code == 422 and "node" in control.text
        wait_running(service, key)
        wait_until(
            lambda: httpx.get(f"{base}/{key}/logs", timeout=30).status_code == 200, timeout=RUN, what="a log"
        )
        other = httpx.get(f"{base}/{key}/logs", params={"node": "n7"}, timeout=30)
        assert other.status_code == 404 and other.json()["error"]["field"] == "node"
    finally:
        gate.touch()
    wait_until(lambda: service.execution(key)["terminal"], timeout=RUN, what="the end")
    later = httpx.get(f"{base}/{key}/logs", params={"attempt": 5}, timeout=30)
    assert later.status_code == 404 and later.json()["error"]["field"] == "attempt"


def test_the_openapi_document_lists_the_logs_route(service: Service) -> None:
    schema = httpx.get(f"{service.url}/api/v1/openapi.json", timeout=30).json()
    route = schema["paths"]["/api/v1/executions/{key}/logs"]["get"]
    assert {p["name"] for p in route["parameters"]} >= {"key", "node", "attempt", "follow", "tail"}
    assert "text/plain" in route["responses"]["200"]["content"]


def test_an_aborted_attempts_log_is_kept_before_its_pod_is_deleted(service: Service) -> None:
    gate = service.tmp / "gate-abort"  # never written: the task is aborted while it waits
    key = service.submit("logs-abort", gated_script(gate))
    wait_running(service, key)
    wait_until(
        lambda: "second line" in httpx.get(f"{service.url}/api/v1/executions/{key}/logs", timeout=30).text,
        what="the first lines printed",
    )
    aborted = httpx.post(f"{service.url}/api/v1/executions/{key}/abort", timeout=30)
    assert aborted.status_code == 202, aborted.text
    wait_until(lambda: service.execution(key)["terminal"], what="aborted")
    wait_until(
        lambda: not any(p["metadata"]["labels"].get("execution-id") == "logs-abort" for p in service.pods()),
        what="the pod deleted by the abort",
    )
    assert [(n, a) for n, a, _, _ in service.kept(key)] == [("n0", 0)]
    kept = httpx.get(f"{service.url}/api/v1/executions/{key}/logs", params={"attempt": 0}, timeout=30)
    assert kept.status_code == 200 and kept.text == "first line <b>\nsecond line\n"


def test_a_map_tasks_elements_logs_are_read_each_under_its_node(service: Service) -> None:
    document = replica_helpers.map_document("logs-map", 2)
    document["template"]["container"]["command"] = ["sh", "-c", "echo element {{.Inputs.x}}"]
    document["execution"]["annotations"] = {}
    response = httpx.post(f"{service.url}/api/v1/executions", json={"spec": document}, timeout=30)
    assert response.status_code == 201, response.text
    key = response.json()["key"]
    wait_until(lambda: service.execution(key)["terminal"], what="the map's end")
    assert service.execution(key)["phase"] == "Success"
    wait_until(lambda: len(service.kept(key)) == 2, what="both elements' logs kept")
    text = httpx.get(f"{service.url}/api/v1/executions/{key}/logs", timeout=30).text
    print(text)
    assert text.count("==> node ") == 2
    assert "element 0\n" in text and "element 1\n" in text


def test_each_attempt_of_a_retried_task_keeps_its_own_log(service: Service) -> None:
    key = service.submit("logs-retried", "echo printed by a failing attempt; exit 1", max_attempts=2)
    wait_until(lambda: service.execution(key)["terminal"], what="both attempts over")
    assert service.execution(key)["attempt"] == 1
    wait_until(lambda: len(service.kept(key)) == 2, what="both attempts' logs kept")
    text = httpx.get(f"{service.url}/api/v1/executions/{key}/logs", timeout=30).text
    assert text.count("printed by a failing attempt\n") == 2
    assert text.index("==> node n0, attempt 0: ") < text.index("==> node n0, attempt 1: ")
    one = httpx.get(f"{service.url}/api/v1/executions/{key}/logs", params={"attempt": 1}, timeout=30)
    assert one.text == "printed by a failing attempt\n"


def test_a_log_is_kept_for_an_execution_submitted_under_a_key_of_the_submitters(service: Service) -> None:
    """An idempotency key names the row, the execution's name is drawn from it: the row's key is not the
    executor's ``project/domain/name/node``, yet the pod is found to be this execution's and its log kept."""
    spec = shell_task("unnamed", "echo under a key of its own")
    del spec["execution"]["id"]["name"]
    response = httpx.post(
        f"{service.url}/api/v1/executions", json={"spec": spec, "key": "mine/logs-keyed"}, timeout=30
    )
    assert response.status_code == 201, response.text
    key = response.json()["key"]
    assert key == "mine/logs-keyed"
    wait_until(lambda: service.execution(key)["terminal"], what="its end")
    wait_until(lambda: service.kept(key), what="its log kept")
    assert [(n, a) for n, a, _, _ in service.kept(key)] == [("n0", 0)]
    text = httpx.get(f"{service.url}/api/v1/executions/{key}/logs", params={"attempt": 0}, timeout=30).text
    assert text == "under a key of its own\n"
