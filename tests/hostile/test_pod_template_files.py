"""Pod template files as a careless or hostile user writes them: every one is exit 2 naming the file (and the
field), never a traceback, a template silently ignored, or the machine's memory.

The files go through ``taskplug render SPEC --pod-templates FILE`` (``run`` loads them the same way, through
``Platform.load``). Bombs run in a child under memory and CPU limits, so a regression fails instead of eating
the machine. And Flyte's rule for a named template that is not there (flytek8s/pod_helper.go
``getBasePodTemplate``): ``PodTemplate 'foo' does not exist``, also when the folder holds no manifests.
"""

from __future__ import annotations

import resource
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

MANIFEST_HEAD = "apiVersion: v1\nkind: PodTemplate\nmetadata: {name: base}\n"


def _spec(tmp_path: Path, pod_template_name: str = "base") -> Path:
    document: dict[str, Any] = yaml.safe_load(HELLO.read_text())
    document["template"]["metadata"] = {"podTemplateName": pod_template_name}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def _render(spec: Path, *templates: Path | str) -> Result:
    args = ["render", str(spec)]
    for t in templates:
        args += ["--pod-templates", str(t)]
    return CliRunner().invoke(cli, args, prog_name="taskplug", catch_exceptions=False)


def _assert_bad_input(result: Result, *named: str) -> None:
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    for name in named:
        assert name in result.stderr, (name, result.stderr)


# -- malformed manifests: the field is named -------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field", "reason"),
    [
        pytest.param(
            "template:\n  spec:\n    containers:\n    - image: x\n",
            "[0].template.spec.containers[0].name",
            "required",
            id="container-without-a-name",
        ),
        pytest.param(
            "template:\n  spec:\n    containers:\n    - {name: '', image: x}\n",
            "[0].template.spec.containers[0].name",
            "must not be empty",
            id="container-with-an-empty-name",
        ),
        pytest.param(
            "template:\n  spec:\n    containers: default\n",
            "[0].template.spec.containers",
            "must be a list, got a string 'default'",
            id="containers-a-string",
        ),
        pytest.param(
            "template:\n  spec:\n    containers: [{name: default, env: 'A=1'}]\n",
            "[0].template.spec.containers[0].env",
            "must be a list",
            id="env-a-string",
        ),
        pytest.param(
            "template:\n  spec:\n    containers: [{name: default, command: python -c 1}]\n",
            "[0].template.spec.containers[0].command",
            "must be a list",
            id="command-a-string",
        ),
        pytest.param(
            "template:\n  spec:\n    nodeSelector: [gpu]\n",
            "[0].template.spec.nodeSelector",
            "must be a mapping",
            id="node-selector-a-list",
        ),
        pytest.param(
            "template:\n  spec:\n    containers: [{name: default, resources: {limits: {memory: '-1'}}}]\n",
            "[0].template.spec.containers[0].resources.limits.memory",
            "must be greater than or equal to 0",
            id="negative-quantity",
        ),
        pytest.param(
            "template:\n  spec:\n    containers: [{name: default, resources: {requests: {cpu: lots}}}]\n",
            "[0].template.spec.containers[0].resources.requests.cpu",
            "lots",
            id="unparseable-quantity",
        ),
        pytest.param(
            "template:\n  metadata: {labels: {team: [a]}}\n",
            "[0].template.metadata.labels.team",
            "must be a string",
            id="label-a-list",
        ),
        pytest.param("template: [spec]\n", "[0].template", "must be a mapping", id="template-a-list"),
    ],
)
def test_a_malformed_manifest_exits_2_naming_the_file_and_the_field(
    tmp_path: Path, body: str, field: str, reason: str
) -> None:
    manifest = tmp_path / "templates.yaml"
    manifest.write_text(MANIFEST_HEAD + body)
    _assert_bad_input(_render(_spec(tmp_path), manifest), f"{manifest}{field}: ", reason)


@pytest.mark.parametrize(
    ("text", "named"),
    [
        pytest.param("apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n", "[0].kind", id="another-kind"),
        pytest.param("kind: PodTemplate\nmetadata: {}\ntemplate: {}\n", "[0].metadata.name", id="no-name"),
        pytest.param(
            "kind: PodTemplate\nmetadata: {name: 7}\ntemplate: {}\n", "[0].metadata.name", id="int-name"
        ),
        pytest.param("kind: List\nitems: {a: b}\n", "[0].items", id="list-items-not-a-list"),
        pytest.param("- a\n- b\n", "[0]", id="a-list-document"),
    ],
)
def test_what_is_not_a_pod_template_exits_2_naming_it(tmp_path: Path, text: str, named: str) -> None:
    manifest = tmp_path / "templates.yaml"
    manifest.write_text(text)
    _assert_bad_input(_render(_spec(tmp_path), manifest), f"{manifest}{named}")


def test_the_second_document_of_a_file_is_named_by_its_index(tmp_path: Path) -> None:
    manifest = tmp_path / "templates.yaml"
    manifest.write_text(
        MANIFEST_HEAD + "template: {spec: {containers: [{name: default}]}}\n---\n"
        "kind: PodTemplate\nmetadata: {name: other}\ntemplate: {spec: {containers: [{image: x}]}}\n"
    )
    _assert_bad_input(_render(_spec(tmp_path), manifest), f"{manifest}[1].template.spec.containers[0].name")


# -- unreadable files: the file is named ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        pytest.param(b"\xff\xfe\x00k\x00i\x00n\x00d", "is not UTF-8 text (byte 0 is 0xff)", id="utf16"),
        pytest.param(MANIFEST_HEAD.encode() + b"template: {}\n# caf\xe9\n", "is not UTF-8 text", id="latin1"),
        pytest.param(b"\x89PNG\r\n\x1a\n\x00\x00", "is not UTF-8 text", id="binary"),
        pytest.param(b"a: &a [*a]\n", "refers to itself", id="recursive-alias"),
        pytest.param(b"template: !!python/object/apply:os.system [echo hi]\n", "python", id="python-tag"),
        pytest.param(b"[" * 5000 + b"]" * 5000, "nests deeper than", id="deep-list"),
    ],
)
def test_an_unreadable_file_exits_2_naming_it(tmp_path: Path, content: bytes, reason: str) -> None:
    manifest = tmp_path / "templates.yaml"
    manifest.write_bytes(content)
    _assert_bad_input(_render(_spec(tmp_path), manifest), f"{manifest}: ", reason)


def test_a_missing_path_exits_2_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    _assert_bad_input(_render(_spec(tmp_path), missing), str(missing), "cannot read pod templates")


# -- bombs: in a child with memory and CPU limits -------------------------------------------------------------


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (1024**3, 1024**3))
    resource.setrlimit(resource.RLIMIT_CPU, (60, 60))


def _render_in_child(spec: Path, template: Path | str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "taskplug.cli", "render", str(spec), "--pod-templates", str(template)],
        capture_output=True,
        text=True,
        preexec_fn=_limits,
        timeout=120,
        check=False,
    )


ALIAS_BOMB = "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 10)}]\n"
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True)
)


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        pytest.param(
            ("a: &a [x, x, x, x, x, x, x, x, x, x]\n" + ALIAS_BOMB).encode(),
            "expands to more than",
            id="alias",
        ),
        pytest.param(b"x: " + b"a" * (5 * 1024 * 1024) + b"\n", "larger than", id="five-mebibytes"),
    ],
)
def test_a_bomb_is_refused_within_memory_and_time_limits(tmp_path: Path, content: bytes, reason: str) -> None:
    manifest = tmp_path / "bomb.yaml"
    manifest.write_bytes(content)
    done = _render_in_child(_spec(tmp_path), manifest)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert str(manifest) in done.stderr and reason in done.stderr, done.stderr


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_an_endless_file_is_refused_without_reading_it_all(tmp_path: Path) -> None:
    done = _render_in_child(_spec(tmp_path), "/dev/zero")
    assert done.returncode == 2, done.stderr
    assert "/dev/zero" in done.stderr and "larger than" in done.stderr, done.stderr


# -- Flyte's rule for a named template that is not there -----------------------------------------------------


def test_a_named_template_missing_from_an_empty_folder_does_not_exist(tmp_path: Path) -> None:
    # flytek8s/pod_helper.go getBasePodTemplate: "PodTemplate '%s' does not exist" (BadTaskSpecification);
    # a folder without manifests is a cluster without PodTemplates, not an error of its own.
    folder = tmp_path / "templates"
    folder.mkdir()
    _assert_bad_input(_render(_spec(tmp_path, "foo"), folder), "PodTemplate 'foo' does not exist")


def test_a_named_template_in_the_folder_is_merged(tmp_path: Path) -> None:
    folder = tmp_path / "templates"
    folder.mkdir()
    (folder / "base.yaml").write_text(
        MANIFEST_HEAD + "template: {spec: {priorityClassName: batch, containers: [{name: default}]}}\n"
    )
    result = _render(_spec(tmp_path), folder)
    assert result.exit_code == 0, result.stderr
    assert yaml.safe_load(result.stdout)["spec"]["priorityClassName"] == "batch"
