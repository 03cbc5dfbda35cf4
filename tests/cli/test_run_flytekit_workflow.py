"""A flytekit module's workflow or launch plan serialized in this process (what ``taskplug run FILE.py WF``
will run): the same workflow ``pyflyte serialize`` writes, hydrated; its default launch plan; a launch plan run
as itself; eager and reference entities refused with the reason; and ``--help`` listing the launch plan's
expected inputs as typed options with their defaults."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner
from flyteidl.core import workflow_pb2

from support.flytekit_workflows import DEMO, REMOTE, Serialized, serialize
from taskplug.cli._flytekit_module import ModuleTarget, module_workflow, serialize_workflow
from taskplug.cli._run import run as run_command
from taskplug.compiler import WorkflowBundle, hydrate, launch_inputs, read_bundle
from taskplug.core import SpecError, TaskplugError, literal_map_to_plain

from .conftest import assert_bad_input, invoke


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Serialized:
    return serialize(tmp_path_factory.mktemp("cli-demo"), "loader_cli_demo", DEMO)


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cli-remote")
    module = root / "loader_cli_remote.py"
    module.write_text(REMOTE)
    return module


def _upstream_sorted(template: workflow_pb2.WorkflowTemplate) -> workflow_pb2.WorkflowTemplate:
    copy = workflow_pb2.WorkflowTemplate()
    copy.CopyFrom(template)
    for node in copy.nodes:
        upstream = sorted(node.upstream_node_ids)
        del node.upstream_node_ids[:]
        node.upstream_node_ids.extend(upstream)
    return copy


def test_in_process_serialization_gives_what_pyflyte_writes_hydrated(demo: Serialized) -> None:
    in_process = serialize_workflow(demo.module, "wf")
    version = in_process.workflow.id.version
    assert (in_process.workflow.id.project, in_process.workflow.id.domain) == ("flytesnacks", "development")
    written = hydrate(
        read_bundle(demo.folder, workflow=None), project="flytesnacks", domain="development", version=version
    )
    assert set(in_process.sub_workflows) == set(written.sub_workflows)
    assert set(in_process.tasks) == set(written.tasks)
    for key, template in written.sub_workflows.items():
        assert _upstream_sorted(in_process.sub_workflows[key]) == _upstream_sorted(template), key
    assert in_process.launch_plan.id == written.launch_plan.id
    assert in_process.launch_plan.spec.default_inputs == written.launch_plan.spec.default_inputs
    # The launch plan wf runs as a node, and the default one of wf; not the default ones of sub and inner.
    assert {p.id.name for p in in_process.launch_plans.values()} == {"sub_lp", "loader_cli_demo.wf"}


def test_a_dynamic_task_carries_the_serialization_settings_its_pod_needs(demo: Serialized) -> None:
    # Without them the dynamic task cannot write its futures (flytekit: "An image is required").
    for bundle in (serialize_workflow(demo.module, "wf"), read_bundle(demo.folder, workflow=None)):
        (fan,) = [t for t in bundle.tasks.values() if t.id.name == "loader_cli_demo.fan"]
        assert "_F_SS_C" in {pair.key for pair in fan.container.env}


def test_a_launch_plan_of_the_module_runs_as_itself(demo: Serialized) -> None:
    bundle = serialize_workflow(demo.module, "sub_lp")
    assert bundle.launch_plan.id.name == "sub_lp"
    assert bundle.workflow.id.name == "loader_cli_demo.sub"
    assert literal_map_to_plain(launch_inputs(bundle, {})) == {"a": 1, "b": 5}


def test_a_workflow_is_also_found_by_its_flytekit_name(demo: Serialized) -> None:
    assert serialize_workflow(demo.module, "loader_cli_demo.sub").workflow.id.name == "loader_cli_demo.sub"


@pytest.mark.parametrize(
    ("name", "words"),
    [
        (
            "eager_wf",
            "'eager_wf' is an eager workflow (@eager): it launches its tasks through Flyte's Admin API",
        ),
        ("remote_lp", "'remote_lp' is a reference launch plan (it lives in a Flyte cluster's registry"),
        ("remote_task", "'remote_task' is a reference task"),
        ("uses_task", "runs task 'remote.t' (project 'p', domain 'd', version 'v1'), which is not in"),
        ("uses_lp", "runs launch plan 'remote.lp' (project 'p', domain 'd', version 'v1'), which is not in"),
        ("nothing", "has no workflow or launch plan 'nothing': it has uses_lp, uses_task"),
    ],
)
def test_what_cannot_run_here_is_refused_with_the_reason(remote: Path, name: str, words: str) -> None:
    with pytest.raises(SpecError) as err:
        serialize_workflow(remote, name)
    assert words in err.value.reason


def _module_workflow(path: Path, *arguments: str) -> tuple[WorkflowBundle, dict[str, Any]]:
    with click.Context(run_command, info_name="taskplug run").scope():
        return module_workflow(path, list(arguments), ModuleTarget())


def test_the_options_after_a_workflow_are_its_inputs_and_the_launch_plan_fills_the_rest(
    demo: Serialized,
) -> None:
    bundle, values = _module_workflow(demo.module, "wf", "--x", "2")
    assert values == {"x": 2}
    assert bundle.workflow.id.name == "loader_cli_demo.wf"
    assert literal_map_to_plain(launch_inputs(bundle, values)) == {"x": 2, "y": 3}
    bundle, values = _module_workflow(demo.module, "sub_lp", "--b", "7")
    assert literal_map_to_plain(launch_inputs(bundle, values)) == {"a": 1, "b": 7}


KINDS = """
import datetime
import enum

from flytekit import task, workflow


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


@task
def describe(c: Color, span: datetime.timedelta) -> str:
    return f"{c.value} {int(span.total_seconds())}"


@workflow
def kinds(c: Color = Color.GREEN, span: datetime.timedelta = datetime.timedelta(minutes=2)) -> str:
    return describe(c=c, span=span)
"""


@pytest.fixture(scope="module")
def kinds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    module = tmp_path_factory.mktemp("cli-kinds") / "loader_cli_kinds.py"
    module.write_text(KINDS)
    return module


@pytest.mark.parametrize(
    ("text", "seconds"), [("30", 30), ("1.5", 1.5), ("1m30s", 90), ("PT2M", 120), ("-5", -5)]
)
def test_a_duration_option_is_seconds_as_a_bare_number_else_a_duration_text(
    kinds: Path, text: str, seconds: float
) -> None:
    # pyflyte's duration option reads "30" as 30 seconds; Go's and ISO 8601's texts are read as in a spec.
    bundle, values = _module_workflow(kinds, "kinds", "--span", text)
    (literal,) = [v for k, v in launch_inputs(bundle, values).literals.items() if k == "span"]
    assert literal.scalar.primitive.duration.ToTimedelta().total_seconds() == seconds


@pytest.mark.parametrize(
    ("arguments", "option", "words"),
    [
        (["--c", "purple"], "--c", "expected one of ['red', 'green'], got 'purple'"),
        (["--span", "forever"], "--span", "expected a duration"),
    ],
)
def test_a_workflow_input_of_the_wrong_kind_exits_2_naming_its_option(
    runner: CliRunner, kinds: Path, arguments: list[str], option: str, words: str
) -> None:
    result = invoke(runner, "run", kinds, "kinds", *arguments)
    assert_bad_input(result, option, words)
    assert "inputs." not in result.stderr


def test_no_workflow_name_is_a_usage_error_listing_the_module(demo: Serialized) -> None:
    with pytest.raises(SpecError) as err:
        _module_workflow(demo.module, "--x", "2")
    assert err.value.path == "WORKFLOW"
    assert "name the workflow to run after the file" in err.value.reason


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def _options(text: str) -> dict[str, str]:
    return {line.split()[0]: line for line in text.splitlines() if line.strip().startswith("--")}


def test_help_after_a_workflow_lists_its_inputs_typed_with_their_defaults(
    runner: CliRunner, demo: Serialized
) -> None:
    result = invoke(runner, "run", demo.module, "wf", "--help")
    assert result.exit_code == 0, result.stderr
    assert f"Usage: taskplug run {demo.module} wf [OPTIONS]" in " ".join(result.stdout.split())
    lines = _options(result.stdout)
    assert "int" in lines["--x"] and "[required]" in lines["--x"]
    assert "int" in lines["--y"] and "[default: 3]" in lines["--y"]


def test_help_after_a_launch_plan_lists_only_what_it_does_not_fix(
    runner: CliRunner, demo: Serialized
) -> None:
    result = invoke(runner, "run", demo.module, "sub_lp", "--help")
    assert result.exit_code == 0, result.stderr
    lines = _options(result.stdout)
    assert "--a" not in lines
    assert "[default: 5]" in lines["--b"]


def test_a_fixed_input_given_as_an_option_exits_2(runner: CliRunner, demo: Serialized) -> None:
    result = invoke(runner, "run", demo.module, "sub_lp", "--a", "2")
    assert result.exit_code == 2
    assert "No such option '--a'" in result.stderr


def test_a_workflow_renders_as_its_compiled_closure_after_its_options_are_read(
    runner: CliRunner, demo: Serialized
) -> None:
    result = invoke(runner, "render", demo.module, "wf", "--x", "2")
    assert result.exit_code == 0, result.stderr
    assert '"connections"' in result.stdout and '"start-node"' in result.stdout


@pytest.mark.parametrize("form", ["module", "package"])
def test_a_workflow_renders_without_its_inputs_which_its_closure_does_not_depend_on(
    runner: CliRunner, demo: Serialized, form: str
) -> None:
    path = demo.module if form == "module" else demo.package
    given = invoke(runner, "render", path, "wf", "--x", "2")
    left_out = invoke(runner, "render", path, "wf")
    assert left_out.exit_code == 0, left_out.stderr
    assert json.loads(left_out.stdout) == json.loads(given.stdout)
    # Given, an input is still read and checked; and a run still needs it.
    assert_bad_input(invoke(runner, "render", path, "wf", "--x", "two"), "--x", "expected an integer")
    missing = invoke(runner, "run", path, "wf")
    assert missing.exit_code == 2 and "Missing option '--x'" in missing.stderr, missing.stderr


def test_a_workflow_calling_a_reference_workflow_is_refused_with_flytekits_reason(tmp_path: Path) -> None:
    module = tmp_path / "loader_cli_ref_wf.py"
    module.write_text(
        "from flytekit import reference_workflow, workflow\n\n\n"
        '@reference_workflow(project="p", domain="d", name="remote.wf", version="v1")\n'
        "def remote_wf(a: int) -> int:\n    return 0\n\n\n"
        "@workflow\ndef outer(a: int) -> int:\n    return remote_wf(a=a)\n"
    )
    with pytest.raises(TaskplugError) as err:
        serialize_workflow(module, "outer")
    assert "Reference sub-workflows are currently unsupported" in str(err.value)


# -- what pyflyte wrote, named on the command line ---------------------------------------------------------


@pytest.mark.parametrize("form", ["folder", "package", "file"])
def test_what_pyflyte_wrote_renders_as_the_workflow_it_holds_with_options_for_its_inputs(
    runner: CliRunner, demo: Serialized, form: str
) -> None:
    path = {"folder": demo.folder, "package": demo.package, "file": demo.file("wf_2.pb")}[form]
    result = invoke(runner, "render", path, "wf", "--x", "2")
    assert result.exit_code == 0, result.stderr
    closure = json.loads(result.stdout)
    assert closure["primary"]["template"]["id"]["name"] == "loader_cli_demo.wf"
    # The same closure a spec naming the same file compiles.
    spec_file = demo.module.parent / f"render-{form}.yaml"
    spec_file.write_text(
        json.dumps(
            {
                "templateFile": str(path),
                "workflow": "wf",
                "inputs": {"x": 2},
                "execution": {"id": {"project": "flytesnacks", "domain": "development"}},
            }
        )
    )
    from_spec = invoke(runner, "render", spec_file)
    assert from_spec.exit_code == 0, from_spec.stderr
    assert json.loads(from_spec.stdout)["primary"] == closure["primary"]


def test_help_after_what_pyflyte_wrote_lists_the_launch_plans_inputs(
    runner: CliRunner, demo: Serialized
) -> None:
    result = invoke(runner, "run", demo.folder, "sub_lp", "--help")
    assert result.exit_code == 0, result.stderr
    lines = _options(result.stdout)
    assert "--a" not in lines  # fixed by the launch plan
    assert "INTEGER" in lines["--b"] and "[default: 5]" in lines["--b"]


@pytest.mark.parametrize(
    ("arguments", "field", "words"),
    [
        (["nope"], "WORKFLOW", "has no workflow 'nope'"),
        (["wf", "--x", "two"], "--x", "expected an integer"),
    ],
)
def test_a_mistake_after_what_pyflyte_wrote_exits_2_naming_it(
    runner: CliRunner, demo: Serialized, arguments: list[str], field: str, words: str
) -> None:
    result = invoke(runner, "render", demo.package, *arguments)
    assert result.exit_code == 2
    assert field in result.stderr and words in result.stderr, result.stderr


def test_without_a_name_the_one_workflow_no_other_runs_is_the_one_run(
    runner: CliRunner, demo: Serialized
) -> None:
    result = invoke(runner, "render", demo.package, "--x", "2")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["primary"]["template"]["id"]["name"] == "loader_cli_demo.wf"


def test_a_folder_without_what_pyflyte_wrote_is_refused_naming_spec(
    runner: CliRunner, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("not a workflow")
    result = invoke(runner, "run", tmp_path, "wf")
    assert result.exit_code == 2
    assert "SPEC" in result.stderr and "holds no workflow" in result.stderr, result.stderr


def test_an_image_option_is_refused_for_what_pyflyte_wrote(runner: CliRunner, demo: Serialized) -> None:
    result = invoke(runner, "render", "--image", "x:1", demo.folder, "wf", "--x", "1")
    assert result.exit_code == 2
    assert "--image" in result.stderr and "name their images" in result.stderr
