"""Every spec and config file goes through one bounded reader, and every field of a spec is typed.

Each case runs the command line as a user runs it — a fresh interpreter, ``taskplug render`` / ``run`` /
``config validate`` — with its memory (``RLIMIT_AS``) and CPU time (``RLIMIT_CPU``) limited in the child, so
that a regression (a bomb expanded, a file read to its end, a stack exhausted) fails here instead of eating
the machine. Each asserts exit code 2, the file and the field named on stderr, no traceback, nothing on
stdout, and for ``run`` that nothing was run (no state DB, no data written).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from taskplug.cli import cli

REPO = Path(__file__).resolve().parents[2]
HELLO = REPO / "examples" / "hello.yaml"
_SCRIPT = Path(sys.executable).with_name("taskplug")
TASKPLUG = (str(_SCRIPT),) if _SCRIPT.exists() else (sys.executable, "-m", "taskplug.cli")
DEADLINE = 60.0
MEMORY = 768 * 1024 * 1024
"""Address space a command may use: a few times what ``render`` or a failing ``run`` needs (~150 MB)."""
CPU_SECONDS = 30


def _limits() -> None:  # runs in the child, before exec
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS))


def taskplug(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*TASKPLUG, *(str(a) for a in args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        preexec_fn=_limits,
        check=False,
    )


def render_in_process(*args: str | Path) -> subprocess.CompletedProcess[str]:
    result = CliRunner().invoke(cli, ["render", *(str(a) for a in args)], catch_exceptions=False)
    return subprocess.CompletedProcess(["render"], result.exit_code, result.stdout, result.stderr)


def assert_bad_input(proc: subprocess.CompletedProcess[str], *named: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.stderr.startswith("error: "), proc.stderr[-2000:]
    for name in named:
        assert name in proc.stderr, (name, proc.stderr[-2000:])


def assert_nothing_ran(cwd: Path) -> None:
    """``run`` stopped before the state DB or any data existed."""
    assert not (cwd / "state.db").exists()
    assert not (cwd / ".taskplug").exists()


def _hello() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(HELLO.read_text())
    return document


# -- what cannot be read --------------------------------------------------------------------------------

_BOMB = "\n".join(
    ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
)
"""About 840 bytes of YAML that expand to 10 × 9^9 ≈ 3.9 billion values."""

_HELLO_TEXT = HELLO.read_text()


def _with_inputs(text: str) -> str:
    # hello.yaml with its inputs replaced: the task still needs `name`, so a document that got through
    # would fail on inputs, never succeed.
    head, _, _ = _HELLO_TEXT.partition("\ninputs:")
    return head + "\ninputs:\n" + text


def _with_custom(text: str) -> str:
    return _HELLO_TEXT.replace("  type: container\n", "  type: container\n  custom:\n" + text, 1)


def _with_config_map(text: str) -> str:
    return _HELLO_TEXT.replace("  type: container\n", "  type: container\n  config:\n" + text, 1)


_UNREADABLE_SPECS: dict[str, tuple[bytes, str]] = {
    "not-utf8": (_HELLO_TEXT.replace("hello, ", "h\xe9llo, ").encode("latin-1"), "is not UTF-8 text (byte"),
    "binary": (
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)),
        "is not UTF-8 text (byte 0 is 0x89)",
    ),
    "nul": (_HELLO_TEXT.replace("world", "wor\x00ld").encode(), "not valid YAML"),
    "alias-bomb-in-config": (
        _with_config_map("    " + _BOMB.replace("\n", "\n    ") + "\n").encode(),
        "expands to more than",
    ),
    "alias-bomb-in-inputs": (
        _with_inputs("  " + _BOMB.replace("\n", "\n  ") + "\n").encode(),
        "expands to more than",
    ),
    "recursive-alias": (
        _with_inputs("  name: &n [*n]\n").encode(),
        "refers to itself (a recursive YAML alias)",
    ),
    "deep-list-in-inputs": (
        _with_inputs("  name: " + "[" * 50_000 + "]" * 50_000 + "\n").encode(),
        "nests deeper than",
    ),
    "deep-map-in-custom": (
        _with_custom("    " + "{a: " * 3000 + "1" + "}" * 3000 + "\n").encode(),
        "nests deeper than",
    ),
    "long-list-in-inputs": (
        _with_inputs("  name: [" + "1, " * 600_000 + "1]\n").encode(),
        "holds more than",
    ),
}


@pytest.mark.parametrize("case", sorted(_UNREADABLE_SPECS))
def test_render_refuses_a_spec_it_cannot_read_naming_the_file(tmp_path: Path, case: str) -> None:
    content, reason = _UNREADABLE_SPECS[case]
    spec = tmp_path / "spec.yaml"
    spec.write_bytes(content)
    assert_bad_input(taskplug("render", spec, cwd=tmp_path), str(spec), reason)


@pytest.mark.parametrize(
    "case", ["not-utf8", "alias-bomb-in-inputs", "deep-list-in-inputs", "recursive-alias"]
)
def test_run_refuses_a_spec_it_cannot_read_before_anything_runs(tmp_path: Path, case: str) -> None:
    content, reason = _UNREADABLE_SPECS[case]
    spec = tmp_path / "spec.yaml"
    spec.write_bytes(content)
    proc = taskplug("run", spec, "--state-db", tmp_path / "state.db", "-o", "json", cwd=tmp_path)
    assert_bad_input(proc, str(spec), reason)
    assert_nothing_ran(tmp_path)


@pytest.mark.parametrize("command", ["render", "run"])
def test_an_endless_spec_file_is_refused_at_once(tmp_path: Path, command: str) -> None:
    extra = ["--state-db", tmp_path / "state.db"] if command == "run" else []
    proc = taskplug(command, "/dev/zero", *extra, cwd=tmp_path)
    assert_bad_input(proc, "/dev/zero", "execution spec is larger than 4194304 bytes")
    assert_nothing_ran(tmp_path)


def test_a_missing_spec_file_is_named(tmp_path: Path) -> None:
    assert_bad_input(
        taskplug("render", tmp_path / "nope.yaml", cwd=tmp_path),
        str(tmp_path / "nope.yaml"),
        "cannot read execution spec",
    )


_UNREADABLE_CONFIGS: dict[str, tuple[bytes, str]] = {
    "not-utf8": (b"plugins:\n  k8s:\n    scheduler-name: caf\xe9\n", "is not UTF-8 text (byte 39 is 0xe9)"),
    "alias-bomb": (b"plugins:\n  k8s:\n    default-annotations:\n" + _BOMB.encode(), "expands to more than"),
    "recursive-alias": (b"plugins: &p {k8s: *p}\n", "refers to itself"),
    "deep": (b"plugins: " + b"[" * 50_000 + b"]" * 50_000 + b"\n", "nests deeper than"),
    "deep-map": (b"plugins: " + b"{a: " * 3000 + b"1" + b"}" * 3000 + b"\n", "nests deeper than"),
}


@pytest.mark.parametrize("case", sorted(_UNREADABLE_CONFIGS))
def test_a_config_file_that_cannot_be_read_is_refused_naming_it(tmp_path: Path, case: str) -> None:
    content, reason = _UNREADABLE_CONFIGS[case]
    config = tmp_path / "config.yaml"
    config.write_bytes(content)
    assert_bad_input(taskplug("render", HELLO, "--config", config, cwd=tmp_path), str(config), reason)


def test_config_validate_refuses_an_endless_config_file(tmp_path: Path) -> None:
    assert_bad_input(
        taskplug("config", "validate", "/dev/zero", cwd=tmp_path), "/dev/zero", "config file is larger than"
    )


# -- what is read but wrong --------------------------------------------------------------------------------


def _set(document: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    *parents, leaf = path.split(".")
    node = document
    for key in parents:
        node = node.setdefault(key, {})
    node[leaf] = value
    return document


_BAD_FIELDS: list[tuple[str, Any, str, str]] = [
    ("execution.id.retryAttempt", 4294967296, "execution.id.retryAttempt", "4294967295"),
    ("execution.id.name", ["hello", "1"], "execution.id.name", "must be a string"),
    ("execution.id.name", {"a": 1}, "execution.id.name", "must be a string"),
    ("execution.id.project", ["demo"], "execution.id.project", "must be a string"),
    ("execution.maxAttempts", 2**40, "execution.maxAttempts", "4294967295"),
    ("execution.labels", {"bad key!": "x"}, "execution.labels.bad key!", "invalid label"),
    ("execution.annotations", {"bad key!": "x"}, "execution.annotations.bad key!", "invalid annotation key"),
    (
        "execution.platformResources.limits.cpu",
        "-1",
        "execution.platformResources.limits.cpu",
        "non-negative",
    ),
    (
        "execution.overrides.resources.requests.memory",
        "-1",
        "execution.overrides.resources.requests.memory",
        "non-negative",
    ),
    (
        "execution.overrides.podTemplate",
        {"podSpec": {"containers": [{"name": "primary", "command": "echo hi"}]}},
        "execution.overrides.podTemplate.podSpec.containers[0].command",
        "must be a list",
    ),
    (
        "execution.overrides.podTemplate",
        {"podSpec": {"containers": [{"name": "primary", "env": "A=B"}]}},
        "execution.overrides.podTemplate.podSpec.containers[0].env",
        "must be a list",
    ),
    ("arrayNode.timeout", "99999999999999h", "arrayNode.timeout", "out of range"),
    ("arrayNode.timeout", 1e300, "arrayNode.timeout", "out of range"),
    (
        "template.metadata.retries",
        {"retries": 4294967296},
        "template.metadata.retries.retries",
        "out of range",
    ),
    ("execution.surprise", 1, "execution.surprise", "unknown field"),
]


@pytest.mark.parametrize(
    ("field", "value", "path", "reason"), _BAD_FIELDS, ids=[f"{f}={v!r}"[:60] for f, v, _, _ in _BAD_FIELDS]
)
def test_render_refuses_a_malformed_field_naming_it_and_the_file(
    tmp_path: Path, field: str, value: Any, path: str, reason: str
) -> None:
    # In process (nothing here can eat memory): the same command line, exit code and streams.
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(_set(_hello(), field, value)))
    assert_bad_input(render_in_process(spec), f"error: {path}: ", reason, str(spec))


@pytest.mark.parametrize(
    ("field", "value", "path"),
    [
        ("execution.labels", {"bad key!": "x"}, "execution.labels.bad key!"),
        ("execution.platformResources.limits.cpu", "-1", "execution.platformResources.limits.cpu"),
    ],
)
def test_run_refuses_what_an_api_server_would_refuse_before_anything_runs(
    tmp_path: Path, field: str, value: Any, path: str
) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(_set(_hello(), field, value)))
    proc = taskplug("run", spec, "--state-db", tmp_path / "state.db", cwd=tmp_path)
    assert_bad_input(proc, f"error: {path}: ", str(spec))
    assert_nothing_ran(tmp_path)


@pytest.mark.parametrize(
    ("text", "key"),
    [
        (
            "plugins:\n  k8s:\n    default-env-from-secrets: my-secret\n",
            "plugins.k8s.default-env-from-secrets",
        ),
        ("plugins:\n  k8s:\n    scheduler-name: [a, b]\n", "plugins.k8s.scheduler-name"),
        ("tasks:\n  task-plugins:\n    enabled-plugins: container\n", "tasks.task-plugins.enabled-plugins"),
        ("plugins:\n  k8s:\n    pod-pending-timeout: 99999999999999h\n", "plugins.k8s.pod-pending-timeout"),
    ],
)
def test_a_config_value_of_the_wrong_type_is_refused_naming_the_key(
    tmp_path: Path, text: str, key: str
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(text)
    assert_bad_input(render_in_process(HELLO, "--config", config), f"error: {key}")


# -- the execution name -------------------------------------------------------------------------------------


@pytest.mark.integration
def test_a_spec_without_a_name_runs_again_after_an_edit_as_a_new_execution(tmp_path: Path) -> None:
    """The newcomer's path: run hello.yaml, change the greeting, run it again: the edited command runs."""
    spec = tmp_path / "hello.yaml"
    spec.write_text(_HELLO_TEXT)
    outputs = []
    for _ in range(2):
        proc = taskplug("run", spec, "-o", "json", "--state-db", tmp_path / "state.db", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]
        result = json.loads(proc.stdout)
        assert result["attempts"] == 1
        outputs.append(result["outputs"]["greeting"])
        spec.write_text(_HELLO_TEXT.replace('greeting = "hello, ', 'greeting = "hi, '))
    assert outputs == ["hello, world", "hi, world"]
    executions = sorted(p.name for p in (tmp_path / ".taskplug/data/metadata/demo/development").iterdir())
    assert len(executions) == 2
    assert all(len(name) == 20 and name.startswith("a") for name in executions)


def test_render_of_a_spec_without_a_name_is_the_same_each_time(tmp_path: Path) -> None:
    first = json.loads(taskplug("render", HELLO, cwd=tmp_path).stdout)
    second = json.loads(taskplug("render", HELLO, cwd=tmp_path).stdout)
    assert first == second
    name = first["metadata"]["labels"]["execution-id"]
    assert first["metadata"]["name"] == f"{name}-n0-0"
