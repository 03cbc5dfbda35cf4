"""``taskplug run FILE.py TASK --input value``, as ``pyflyte run`` takes a flytekit module: the task found by
name, its inputs as options typed by its interface (``--help`` lists them), its defaults, and every mistake
an exit-2 usage error naming what is wrong. Serialized with the flytekit installed here; nothing runs (the
runs are in ``tests/integration/test_run_flytekit_module.py``): the spec a module's task becomes is checked
through ``module_spec`` and ``render``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from click.testing import CliRunner
from flyteidl.core import literals_pb2

from taskplug.cli._flytekit_module import ModuleTarget, host_image, module_spec
from taskplug.cli._run import run as run_command
from taskplug.core import SpecError, literal_map_to_plain

from .conftest import DEADLINE, EXAMPLES, HELLO, assert_bad_input, invoke

WORKFLOWS = EXAMPLES / "flytekit" / "workflows.py"

MODULE = textwrap.dedent(
    """
    import datetime
    import enum
    from typing import Optional, Union

    from flytekit import dynamic, task, workflow
    from flytekit.types.file import FlyteFile


    class Color(enum.Enum):
        RED = "red"
        BLUE = "blue"


    @task
    def typed(
        n: int,
        ratio: float,
        label: str,
        xs: list[int],
        counts: dict[str, int],
        maybe: Optional[str] = None,
        either: Union[int, str] = 0,
        color: Color = Color.RED,
        when: datetime.datetime = datetime.datetime(2024, 1, 2, 3, 4, 5),
        flag: bool = False,
        data: Optional[FlyteFile] = None,
    ) -> str:
        return label


    @task
    def echo(with_underscore: int = 7) -> int:
        return with_underscore


    @dynamic
    def fan_out(n: int) -> list[int]:
        return [echo(with_underscore=i) for i in range(n)]


    @workflow
    def pipeline(n: int) -> int:
        return echo(with_underscore=n)
    """
)


@pytest.fixture
def module(tmp_path: Path) -> Path:
    path = tmp_path / "typed_tasks.py"
    path.write_text(MODULE)
    return path


def _spec(path: Path, *arguments: str, target: ModuleTarget | None = None) -> Any:
    """The spec ``taskplug run PATH ARGUMENTS`` would run, built inside a click context as the command does."""
    with click.Context(run_command, info_name="taskplug run").scope():
        return module_spec(path, list(arguments), target or ModuleTarget())


def _inputs(spec: Any) -> dict[str, Any]:
    return literal_map_to_plain(spec.inputs)


# -- inputs as options, typed by the interface -------------------------------------------------------------


def test_each_option_is_converted_by_the_type_the_task_declares(
    module: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "data.csv"
    data.write_text("a,b\n")
    spec = _spec(
        module,
        "typed",
        *("--n", "3", "--ratio", "1e3", "--label", "123", "--xs", "[1, 2]", "--counts", '{"a": 1}'),
        *("--maybe", "5", "--either", "7", "--color", "blue", "--when", "2025-06-07T08:09:10Z"),
        *("--flag", "--data", "data.csv"),
    )
    literals = spec.inputs.literals
    assert literals["n"].scalar.primitive.integer == 3
    assert literals["ratio"].scalar.primitive.float_value == 1000.0
    # A string input keeps the text as typed, even when it reads as a number.
    assert literals["label"].scalar.primitive.string_value == "123"
    assert [v.scalar.primitive.integer for v in literals["xs"].collection.literals] == [1, 2]
    assert literals["counts"].map.literals["a"].scalar.primitive.integer == 1
    assert literals["flag"].scalar.primitive.boolean is True
    plain = _inputs(spec)
    # Optional[str] given 5: the text "5" (no variant takes the number).
    assert plain["maybe"] == "5"
    assert plain["color"] == "blue"
    assert plain["when"] == "2025-06-07T08:09:10Z"
    # A local file, made absolute: the task's process runs in a folder of its own.
    assert plain["data"] == str(data.resolve())


def test_inputs_left_out_take_the_tasks_defaults(module: Path) -> None:
    spec = _spec(module, "typed", "--n", "1", "--ratio", "2", "--label", "x", "--xs", "[]", "--counts", "{}")
    literals = spec.inputs.literals
    assert set(literals) == {
        "n",
        "ratio",
        "label",
        "xs",
        "counts",
        "maybe",
        "either",
        "color",
        "when",
        "flag",
        "data",
    }
    assert literals["flag"].scalar.primitive.boolean is False
    assert literals["color"].scalar.primitive.string_value == "red"
    assert literals["when"].scalar.primitive.datetime.ToDatetime().isoformat() == "2024-01-02T03:04:05"
    # Optional without a value: flytekit's default literal, none.
    assert literals["maybe"].WhichOneof("value") == "scalar"
    assert literals["xs"].collection == literals_pb2.LiteralCollection()


def test_an_input_name_with_underscores_is_also_an_option_with_dashes(module: Path) -> None:
    assert _inputs(_spec(module, "echo", "--with_underscore", "4")) == {"with_underscore": 4}
    assert _inputs(_spec(module, "echo", "--with-underscore", "5")) == {"with_underscore": 5}
    assert _inputs(_spec(module, "echo")) == {"with_underscore": 7}


def test_a_value_of_the_wrong_type_is_an_error_naming_the_option(module: Path) -> None:
    with pytest.raises(SpecError) as e:
        _spec(module, "echo", "--with_underscore", "seven")
    assert e.value.path == "--with_underscore"
    with pytest.raises(SpecError) as e:
        _spec(
            module, "typed", "--n", "1", "--ratio", "2", "--label", "x", "--xs", "[1, oops", "--counts", "{}"
        )
    assert e.value.path == "--xs"


# -- the serialized task and the execution around it --------------------------------------------------------


def test_the_task_is_serialized_by_flytekit_to_run_on_this_machine_by_default(module: Path) -> None:
    spec = _spec(module, "echo")
    template = spec.template
    assert template.type == "python-task"
    assert template.container.image == host_image()
    assert list(template.container.args[-4:]) == ["task-module", "typed_tasks", "task-name", "echo"]
    env = {e.key: e.value for e in template.container.env}
    assert env["PYTHONPATH"] == str(module.parent.resolve())
    execution = spec.metadata.task_execution_id.id.node_execution_id.execution_id
    assert (execution.project, execution.domain) == ("flytesnacks", "development")
    assert spec.metadata.namespace == "flytesnacks-development"


def test_for_a_real_cluster_the_image_is_the_users_and_no_local_path_goes_into_the_template(
    module: Path,
) -> None:
    target = ModuleTarget(
        images=("ghcr.io/example/tasks:v3",), project="ml", domain="staging", name="run-7", on_host=False
    )
    spec = _spec(module, "echo", target=target)
    assert spec.template.container.image == "ghcr.io/example/tasks:v3"
    assert "PYTHONPATH" not in {e.key for e in spec.template.container.env}
    assert spec.execution_key == "ml/staging/run-7/n0"


def test_without_a_name_each_spec_is_a_fresh_execution(module: Path) -> None:
    first, second = _spec(module, "echo"), _spec(module, "echo")
    assert first.execution_key != second.execution_key
    assert _spec(module, "echo", target=ModuleTarget(name="mine")).execution_key.endswith("/mine/n0")


def test_a_map_task_becomes_an_array_node_with_its_concurrency_ratio_and_bound_inputs(tmp_path: Path) -> None:
    path = tmp_path / "mapped_tasks.py"
    path.write_text(
        textwrap.dedent(
            """
            import functools

            from flytekit import map_task, task


            @task
            def shifted(x: int, offset: int) -> int:
                return x + offset


            mapped = map_task(functools.partial(shifted, offset=1), concurrency=2, min_success_ratio=0.5)
            """
        )
    )
    spec = _spec(path, "mapped", "--x", "[1, 2, 3]", "--offset", "10")
    assert spec.array is not None
    assert (spec.array.parallelism, spec.array.min_success_ratio) == (2, 0.5)
    assert spec.array.bound_inputs == ("offset",)
    assert _inputs(spec) == {"x": [1, 2, 3], "offset": 10}
    assert spec.template.container.args[0] == "pyflyte-map-execute"


# -- the command line ----------------------------------------------------------------------------------------


def test_help_after_the_task_lists_its_inputs_with_types_and_defaults(runner: CliRunner) -> None:
    result = invoke(runner, "run", WORKFLOWS, "add", "--help")
    assert result.exit_code == 0, result.stderr
    usage = " ".join(result.stdout.split("\n\n")[0].split())
    assert usage == f"Usage: taskplug run {WORKFLOWS} add [OPTIONS]"
    assert "Add two integers." in result.stdout
    lines = {line.split()[0]: line for line in result.stdout.splitlines() if line.strip().startswith("--")}
    assert "int" in lines["--a"] and "[required]" in lines["--a"] and "the first addend" in lines["--a"]
    assert "int" in lines["--b"] and "[default: 1]" in lines["--b"]


def test_help_after_the_file_lists_its_tasks(runner: CliRunner, module: Path) -> None:
    result = invoke(runner, "run", module, "--help")
    assert result.exit_code == 0, result.stderr
    assert "echo, typed" in result.stdout
    assert "workflows, launch plans and @dynamic tasks: fan_out, pipeline" in result.stdout


def test_a_required_input_left_out_exits_2_naming_it(runner: CliRunner) -> None:
    result = invoke(runner, "run", WORKFLOWS, "add", "--b", "3")
    assert result.exit_code == 2
    assert "Missing option '--a'" in result.stderr


def test_an_input_the_task_does_not_have_exits_2_naming_it(runner: CliRunner) -> None:
    result = invoke(runner, "run", WORKFLOWS, "add", "--a", "1", "--c", "2")
    assert result.exit_code == 2
    assert "--c" in result.stderr


def test_a_mistyped_task_name_exits_2_suggesting_the_close_one_and_listing_the_tasks(
    runner: CliRunner,
) -> None:
    result = invoke(runner, "run", WORKFLOWS, "ad", "--a", "1")
    assert_bad_input(result, "no task 'ad' (did you mean 'add'?)", "add, greet, scale, total")
    far = invoke(runner, "run", WORKFLOWS, "zzz", "--a", "1")
    assert_bad_input(far, "no task 'zzz':", "add, greet, scale, total")
    assert "did you mean" not in far.stderr


def test_no_task_name_exits_2_listing_the_tasks(runner: CliRunner) -> None:
    result = invoke(runner, "run", WORKFLOWS)
    assert_bad_input(result, "name the task", "add, greet, scale, total")


@pytest.mark.parametrize(("name", "nodes"), [("pipeline", None), ("fan_out", 1)])
def test_a_workflow_or_a_dynamic_task_renders_as_the_workflow_it_runs(
    runner: CliRunner, module: Path, name: str, nodes: int | None
) -> None:
    """A workflow is compiled as flyteadmin compiles it; a @dynamic task runs as a single task is launched,
    a one-node workflow around it (its start and end nodes beside)."""
    result = invoke(runner, "render", module, name, "--n", "2")
    assert result.exit_code == 0, result.stderr
    closure = json.loads(result.stdout)
    template = closure["primary"]["template"]
    assert template["id"]["name"].endswith(f".{name}")
    if nodes is not None:
        assert len(template["nodes"]) == nodes + 2


def test_a_run_option_after_the_task_exits_2_saying_where_it_goes(runner: CliRunner) -> None:
    result = invoke(runner, "run", WORKFLOWS, "add", "--a", "1", "-o", "json")
    assert result.exit_code == 2
    assert "-o is an option of `taskplug run`: put it before the file" in result.stderr


def test_a_value_of_the_wrong_type_exits_2_naming_the_option(runner: CliRunner) -> None:
    result = invoke(runner, "run", WORKFLOWS, "add", "--a", "two")
    assert_bad_input(result, "--a: expected an integer, got 'two'")


def test_a_module_that_fails_to_import_exits_2_naming_the_file_and_the_error(
    runner: CliRunner, tmp_path: Path
) -> None:
    broken = tmp_path / "broken_tasks.py"
    broken.write_text("import no_such_module_anywhere\n")
    result = invoke(runner, "run", broken, "t")
    assert_bad_input(result, "broken_tasks.py", "ModuleNotFoundError", "no_such_module_anywhere")


def test_a_module_named_like_one_already_imported_exits_2_instead_of_shadowing_it(
    runner: CliRunner, tmp_path: Path
) -> None:
    # Imported under its own name, json.py would replace the standard library's json in this process.
    shadow = tmp_path / "json.py"
    shadow.write_text("from flytekit import task\n\n@task\ndef t() -> int:\n    return 1\n")
    result = invoke(runner, "run", shadow, "t")
    assert_bad_input(result, "module 'json'", "rename the file")
    import json

    assert json.loads("[1]") == [1]


def test_a_file_that_does_not_exist_exits_2(runner: CliRunner, tmp_path: Path) -> None:
    assert_bad_input(invoke(runner, "run", tmp_path / "nowhere.py", "t"), "no such file")


def test_kubeconfig_without_an_image_exits_2_naming_image(runner: CliRunner, tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("{}")
    result = invoke(runner, "run", "--kubeconfig", kubeconfig, WORKFLOWS, "add", "--a", "1")
    assert_bad_input(result, "--image", "flytekit and the module")


@pytest.mark.parametrize(
    ("option", "value"),
    [("--image", "x:1"), ("--project", "p"), ("--domain", "d"), ("--name", "n"), ("--env", "A=1")],
)
def test_module_options_with_a_yaml_spec_exit_2_naming_them(
    runner: CliRunner, tmp_path: Path, option: str, value: str
) -> None:
    result = invoke(runner, "run", option, value, HELLO, "--state-db", tmp_path / "s.db")
    assert_bad_input(result, option, "flytekit module")
    assert not (tmp_path / "s.db").exists()


def test_an_env_option_that_is_not_name_equals_value_exits_2(runner: CliRunner) -> None:
    result = invoke(runner, "render", "--env", "NOEQUALS", WORKFLOWS, "add", "--a", "1")
    assert_bad_input(result, "--env", "NAME=VALUE")


def test_render_of_a_modules_task_prints_its_pod_as_the_embedded_cluster_runs_it(runner: CliRunner) -> None:
    result = invoke(
        runner, "render", "-o", "yaml", "--name", "r1", "-e", "GREETING=hi", WORKFLOWS, "add", "--a", "2"
    )
    assert result.exit_code == 0, result.stderr
    pod = yaml.safe_load(result.stdout)
    assert pod["metadata"]["name"] == "r1-n0-0"
    assert pod["metadata"]["namespace"] == "flytesnacks-development"
    (container,) = pod["spec"]["containers"]
    assert container["image"] == host_image()
    assert container["args"][0] == "pyflyte-execute"
    assert container["args"][-4:] == ["task-module", "workflows", "task-name", "add"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["PYTHONPATH"] == str(WORKFLOWS.parent)
    assert env["GREETING"] == "hi"


def test_render_with_an_image_prints_the_pod_a_real_cluster_gets(runner: CliRunner) -> None:
    result = invoke(
        runner, "render", "-i", "ghcr.io/example/wf:1", "--project", "ml", WORKFLOWS, "total", "--xs", "[1]"
    )
    assert result.exit_code == 0, result.stderr
    pod = yaml.safe_load(result.stdout)
    (container,) = pod["spec"]["containers"]
    assert container["image"] == "ghcr.io/example/wf:1"
    assert "PYTHONPATH" not in {e["name"] for e in container["env"]}
    assert pod["metadata"]["namespace"] == "ml-development"
    # Without --name, the same command renders the same object (a name drawn from the spec, not a fresh one).
    again = invoke(
        runner, "render", "-i", "ghcr.io/example/wf:1", "--project", "ml", WORKFLOWS, "total", "--xs", "[1]"
    )
    assert yaml.safe_load(again.stdout)["metadata"]["name"] == pod["metadata"]["name"]


def test_without_flytekit_a_module_exits_2_saying_how_to_install_it(tmp_path: Path) -> None:
    # flytekit made unimportable in a fresh interpreter, as if it were not installed.
    hide = (
        "import sys; sys.modules['flytekit'] = None; "
        "from taskplug.cli import main; sys.argv[0] = 'taskplug'; main()"
    )
    done = subprocess.run(
        [sys.executable, "-c", hide, "run", str(WORKFLOWS), "add", "--a", "1"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "pip install flytekit" in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""
    assert not (tmp_path / ".taskplug").exists()


def test_a_yaml_spec_still_runs_without_flytekit(tmp_path: Path) -> None:
    hide = (
        "import sys; sys.modules['flytekit'] = None; "
        "from taskplug.cli import main; sys.argv[0] = 'taskplug'; main()"
    )
    done = subprocess.run(
        [sys.executable, "-c", hide, "render", str(HELLO)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert '"kind": "Pod"' in done.stdout


@pytest.mark.parametrize("given", ["missing.txt", "file:///nowhere/missing.txt"])
def test_a_file_input_that_does_not_exist_exits_2_naming_the_input_and_creates_nothing(
    runner: CliRunner, module: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SpecError) as e:
        _spec(
            module,
            "typed",
            "--n",
            "1",
            "--ratio",
            "2",
            "--label",
            "x",
            "--xs",
            "[]",
            "--counts",
            "{}",
            "--data",
            given,
        )
    assert e.value.path == "--data" and "no such file or folder" in str(e.value)

    state_db = tmp_path / "state.db"
    result = invoke(
        runner,
        "run",
        "--state-db",
        state_db,
        module,
        "typed",
        "--n",
        "1",
        "--ratio",
        "2",
        "--label",
        "x",
        "--xs",
        "[]",
        "--counts",
        "{}",
        "--data",
        given,
    )
    assert_bad_input(result, "--data", "no such file or folder", given)
    assert not state_db.exists() and not (tmp_path / ".taskplug").exists()


def test_a_file_uri_that_exists_is_kept_as_given(module: Path, tmp_path: Path) -> None:
    data = tmp_path / "data.csv"
    data.write_text("a\n")
    spec = _spec(
        module,
        "typed",
        "--n",
        "1",
        "--ratio",
        "2",
        "--label",
        "x",
        "--xs",
        "[]",
        "--counts",
        "{}",
        "--data",
        data.as_uri(),
    )
    assert _inputs(spec)["data"] == data.as_uri()


def test_the_tasks_param_lines_stay_one_per_line_in_its_help(runner: CliRunner) -> None:
    result = invoke(runner, "run", WORKFLOWS, "add", "--help")
    assert result.exit_code == 0, result.stderr
    lines = [line.strip() for line in result.stdout.splitlines()]
    assert ":param a: the first addend" in lines
    assert ":param b: the second addend" in lines
    assert "Add two integers." in lines
