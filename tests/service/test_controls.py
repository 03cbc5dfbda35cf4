"""NUL and other control characters where they cannot go are a 4xx naming the parameter or field, never a 500:
in query parameters and keys on every route, page and stream, and in a submitted spec's strings."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.test_api_replica_double import pod_spec
from taskplug.service._api_app import create_app


@pytest.fixture(scope="module")
def client(postgres_dsn: str) -> Iterator[TestClient]:
    # raise_server_exceptions: a 500 would fail the test with its traceback.
    with TestClient(create_app(postgres_dsn)) as c:
        yield c


# Where a control character reached the database (a 500) or was ignored; a phase, a cursor or a number holding
# one was already refused by the parameter's own check.
QUERIES = [
    ("/api/v1/executions", "q"),
    ("/api/v1/executions", "task_type"),
    ("/executions", "q"),
    ("/executions", "task_type"),
    ("/executions", "window"),
    ("/executions", "cursor"),
    ("/executions/stream", "q"),
    ("/executions/stream", "task_type"),
]


@pytest.mark.parametrize(("path", "parameter"), QUERIES)
@pytest.mark.parametrize("character", ["%00", "%0A", "%1B", "%7F"])
def test_a_control_character_in_a_query_parameter_is_422_naming_it(
    client: TestClient, path: str, parameter: str, character: str
) -> None:
    response = client.get(f"{path}?{parameter}=a{character}b")

    assert response.status_code == 422, response.text
    if path.startswith("/api/"):
        assert response.json()["error"]["field"] == f"query.{parameter}"
    else:
        assert f"query.{parameter}" in response.text


KEYED = [
    ("GET", "/api/v1/executions/{key}"),
    ("GET", "/api/v1/executions/{key}/events"),
    ("GET", "/api/v1/executions/{key}/attempts"),
    ("GET", "/api/v1/executions/{key}/elements"),
    ("GET", "/api/v1/executions/{key}/outputs"),
    ("POST", "/api/v1/executions/{key}/abort"),
    ("POST", "/api/v1/executions/{key}/relaunch"),
    ("GET", "/executions/{key}"),
    ("GET", "/executions/{key}/stream"),
    ("POST", "/executions/{key}/abort"),
    ("POST", "/executions/{key}/relaunch"),
]


@pytest.mark.parametrize(("method", "path"), KEYED)
@pytest.mark.parametrize("key", ["p/d/a%00b/n0", "p%00", "p/d/x/n0%0D%0A"])
def test_a_control_character_in_a_key_is_422_naming_the_key_on_every_route(
    client: TestClient, method: str, path: str, key: str
) -> None:
    response = client.request(method, path.format(key=key), headers={"origin": "http://testserver"})

    assert response.status_code == 422, response.text
    if path.startswith("/api/"):
        assert response.json()["error"]["field"] == "path.key"
    else:
        assert "path.key" in response.text and "<html" in response.text


def _with(spec: dict[str, Any], where: list[str | int], value: Any) -> dict[str, Any]:
    changed = copy.deepcopy(spec)
    target: Any = changed
    for part in where[:-1]:
        target = target[part]
    target[where[-1]] = value
    return changed


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (
            lambda s: _with(s, ["template", "container", "env"], [{"key": "A", "value": "x\x00y"}]),
            "spec.template.container.env[0].value",
        ),
        (
            lambda s: _with(s, ["template", "container", "args"], ["ok", "a\x00"]),
            "spec.template.container.args[1]",
        ),
        (lambda s: _with(s, ["inputs", "who"], "wor\x00ld"), "spec.inputs.who"),
        (
            lambda s: _with(s, ["template", "container", "image"], "busybox\x00"),
            "spec.template.container.image",
        ),
        (lambda s: _with(s, ["inputs"], {"who": "w", "n\x00": 1}), "spec.inputs"),
    ],
)
def test_nul_in_a_submitted_spec_is_422_naming_the_field(client: TestClient, change: Any, field: str) -> None:
    response = client.post("/api/v1/executions", json={"spec": change(pod_spec("nul-spec"))})

    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == field
    assert client.get("/api/v1/executions/p/d/nul-spec/n0").status_code == 404


@pytest.mark.parametrize(
    ("labels", "field"),
    [
        ({"team": "a\x00"}, "labels.team"),
        ({"team": "line\nbreak"}, "labels.team"),
        ({"a\x00": "x"}, "labels"),
    ],
)
def test_a_control_character_in_a_label_is_422_naming_it(
    client: TestClient, labels: dict[str, str], field: str
) -> None:
    response = client.post("/api/v1/executions", json={"spec": pod_spec("nul-label"), "labels": labels})

    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == field
    # Newlines and tabs in a spec's strings stay allowed (a script argument has them).
    spec = _with(pod_spec("multiline"), ["template", "container", "args"], ["line one\n\tline two"])
    assert client.post("/api/v1/executions", json={"spec": spec}).status_code in (200, 201)
