"""``taskplug config validate`` means the config will run.

Each config here once validated and then broke every run (or ate the machine, or looped for ever): an
enabled plugin id nobody registered, ``executor.workers: 10**20``, a data root whose protocol fsspec does not
know, a Redis address without a port, a web-API cache size Flyte's ``validateConfig`` refuses, a malformed
pod template. Each is now refused by ``config validate`` with exit 2 naming the key (and the bound or the
choices), and the same config is refused by ``run`` before anything is created — not later. A config that
validates, with every such setting given a sound value, runs ``examples/hello.yaml`` to Success.

Bounds and why: workers (``executor.workers``, ``executor.array-node.node-execution-worker-count``) 1 … 10000,
the largest worker pool Flyte accepts (its web-API cache ``workers``); int32 fields (``max-parallelism``,
``default-max-attempts``) at most 2**31-1 as in Flyte's protobuf/Go types; the web-API cache size 10 …
500000 and resync 5 s … 1 h, Flyte's own ``validateConfig`` ranges.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from taskplug.cli import cli

REPO = Path(__file__).resolve().parents[2]
HELLO = REPO / "examples" / "hello.yaml"
TASKPLUG = (sys.executable, "-m", "taskplug.cli")

POD_TEMPLATE_WITHOUT_NAMED_CONTAINER = {
    "apiVersion": "v1",
    "kind": "PodTemplate",
    "metadata": {"name": "base"},
    "template": {"spec": {"containers": [{"image": "busybox"}]}},
}

# (id, config document, pod template manifest or None, what the error must name)
REFUSED: list[tuple[str, dict[str, Any], dict[str, Any] | None, tuple[str, ...]]] = [
    (
        "unknown-plugin-id",
        {"tasks": {"task-plugins": {"enabled-plugins": ["no-such-plugin"]}}},
        None,
        ("tasks.task-plugins.enabled-plugins[0]", "no plugin [no-such-plugin]", "container", "spark"),
    ),
    (
        "unknown-default-plugin",
        {"tasks": {"task-plugins": {"default-for-task-types": {"python-task": "pod-v2"}}}},
        None,
        ("tasks.task-plugins.default-for-task-types.python-task", "no plugin [pod-v2]"),
    ),
    ("workers-10**20", {"executor": {"workers": 10**20}}, None, ("executor.workers", "out of range")),
    ("workers-over-bound", {"executor": {"workers": 100_000}}, None, ("executor.workers", "10000")),
    (
        "element-workers-over-bound",
        {"executor": {"array-node": {"node-execution-worker-count": 50_000}}},
        None,
        ("executor.array-node.node-execution-worker-count", "10000"),
    ),
    (
        "zero-resync",
        {"executor": {"resync-period": "0s"}},
        None,
        ("executor.resync-period", "longer than 0s"),
    ),
    (
        "unknown-protocol",
        {"executor": {"data-root": "nosuchproto://x"}},
        None,
        ("executor.data-root", "'nosuchproto'", "s3"),
    ),
    (
        "redis-without-port",
        {"propeller": {"resourcemanager": {"type": "redis", "redis": {"hostPaths": ["redis"]}}}},
        None,
        ("propeller.resourcemanager.redis.hostPaths", "host:port"),
    ),
    (
        "redis-without-host",
        {"propeller": {"resourcemanager": {"type": "redis"}}},
        None,
        ("propeller.resourcemanager.redis.hostPaths", "at least one host"),
    ),
    (
        "web-api-cache-too-small",
        {"plugins": {"connector-service": {"webApi": {"caching": {"size": 5}}}}},
        None,
        ("plugins.connector-service.webApi", "cache size is expected to be between 10 and 500000"),
    ),
    (
        "web-api-quota-over-the-managers-max",
        {"propeller": {"resourcemanager": {"resourceMaxQuota": 10}}},
        None,
        ("plugins.connector-service.webApi.resourceQuotas.default", "resourceMaxQuota (10)"),
    ),
    (
        "negative-api-timeout",
        {"propeller": {"kube-client-config": {"timeout": "-5s"}}},
        None,
        ("propeller.kube-client-config.timeout", "negative"),
    ),
    (
        "pod-template-container-without-name",
        {},
        POD_TEMPLATE_WITHOUT_NAMED_CONTAINER,
        ("template.spec.containers[0].name", "required"),
    ),
]


def _write(tmp_path: Path, config: dict[str, Any], template: dict[str, Any] | None) -> list[str]:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    args = [str(path)]
    if template is not None:
        folder = tmp_path / "templates"
        folder.mkdir()
        (folder / "base.yaml").write_text(yaml.safe_dump(template))
        args += ["--pod-templates", str(folder)]
    return args


def _validate(*args: str) -> Result:
    return CliRunner().invoke(
        cli, ["config", "validate", *args], prog_name="taskplug", catch_exceptions=False
    )


def _assert_refused(code: int, stdout: str, stderr: str, named: tuple[str, ...]) -> None:
    assert code == 2, (code, stdout, stderr)
    assert "Traceback" not in stderr
    for name in named:
        assert name in stderr, (name, stderr)


@pytest.mark.parametrize(
    ("config", "template", "named"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED]
)
def test_config_validate_refuses_what_a_run_would_trip_over_naming_the_key(
    tmp_path: Path, config: dict[str, Any], template: dict[str, Any] | None, named: tuple[str, ...]
) -> None:
    result = _validate(*_write(tmp_path, config, template))
    _assert_refused(result.exit_code, result.stdout, result.stderr, named)
    assert result.stdout == ""


@pytest.mark.integration
@pytest.mark.parametrize(
    ("config", "template", "named"),
    [
        r[1:]
        for r in REFUSED
        if r[0] in ("unknown-plugin-id", "unknown-protocol", "pod-template-container-without-name")
    ],
    ids=["unknown-plugin-id", "unknown-protocol", "pod-template-container-without-name"],
)
def test_run_refuses_the_same_config_before_creating_anything(
    tmp_path: Path, config: dict[str, Any], template: dict[str, Any] | None, named: tuple[str, ...]
) -> None:
    config_path, *templates = _write(tmp_path, config, template)
    proc = subprocess.run(
        [
            *TASKPLUG,
            "run",
            str(HELLO),
            "--config",
            config_path,
            *templates,
            "--state-db",
            "state.db",
            "-o",
            "json",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    _assert_refused(proc.returncode, proc.stdout, proc.stderr, named)
    assert not (tmp_path / ".taskplug").exists()  # no data root, nothing written


@pytest.mark.integration
def test_a_config_that_validates_runs_hello(tmp_path: Path) -> None:
    templates = tmp_path / "templates"
    templates.mkdir()
    manifest = {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": "base"},
        "template": {
            "metadata": {"labels": {"team": "a"}},
            "spec": {"containers": [{"name": "default", "image": "x"}]},
        },
    }
    (templates / "base.yaml").write_text(yaml.safe_dump(manifest))
    config = {
        "tasks": {"task-plugins": {"enabled-plugins": ["container", "sidecar", "connector-service"]}},
        "executor": {
            "data-root": str(tmp_path / "data"),
            "workers": 10_000,
            "resync-period": "1s",
            "array-node": {"node-execution-worker-count": 16, "max-parallelism": 2**31 - 1},
        },
        "propeller": {
            "resourcemanager": {
                "type": "inprocess",
                "resourceMaxQuota": 2000,
                "redis": {"hostPaths": ["redis:6379"]},
            },
            "kube-client-config": {"timeout": "10s"},
        },
        "plugins": {
            "k8s": {"default-pod-template-name": "base"},
            "connector-service": {"webApi": {"caching": {"size": 10, "workers": 10_000}}},
        },
    }
    config_path, *template_args = _write(tmp_path, config, None)
    template_args = ["--pod-templates", str(templates)]
    validated = _validate(config_path, *template_args)
    assert validated.exit_code == 0, validated.stderr
    assert validated.stdout.startswith(f"{config_path}: ok (") and "1 pod template(s)" in validated.stdout
    proc = subprocess.run(
        [
            *TASKPLUG,
            "run",
            str(HELLO),
            "--config",
            config_path,
            *template_args,
            "--state-db",
            "state.db",
            "-o",
            "json",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["phase"] == "Success"
    assert result["outputs"] == {"greeting": "hello, world"}
    assert (tmp_path / "data").is_dir()  # the data root configured was the one used
