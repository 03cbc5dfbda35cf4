"""Issue 13's "What was seen", sample by sample, as the command line meets it.

Each sample bullet about a command's outcome has a test: either here, or already elsewhere in the suite,
which :data:`ELSEWHERE` names (and :func:`test_every_sample_tested_elsewhere_still_has_its_test` checks is
still there), so that no sample is tested twice and none is forgotten. The tests here run the command as a
user does (a fresh interpreter, memory and CPU time limited by ``resource.setrlimit`` in the child, see
``test_readers.taskplug``) or, where nothing can eat memory, in process; each asserts the exit code, the
field named on stderr and that no traceback was printed.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import resource
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from hostile.test_readers import (
    CPU_SECONDS,
    HELLO,
    MEMORY,
    TASKPLUG,
    assert_bad_input,
    render_in_process,
    taskplug,
)
from support.waiting import wait_until

TESTS = Path(__file__).resolve().parents[1]

# -- where each sample is tested ---------------------------------------------------------------------------

ELSEWHERE: dict[str, list[str]] = {
    # Reading input.
    "non-UTF-8 or binary spec": [
        "hostile/test_readers.py::test_render_refuses_a_spec_it_cannot_read_naming_the_file"
    ],
    "non-UTF-8 config": [
        "hostile/test_readers.py::test_a_config_file_that_cannot_be_read_is_refused_naming_it"
    ],
    "non-UTF-8 pod template": [
        "hostile/test_pod_template_files.py::test_an_unreadable_file_exits_2_naming_it"
    ],
    "non-UTF-8 kubeconfig": [
        "hostile/test_kubeconfig.py::test_run_with_a_kubeconfig_it_cannot_read_exits_2_naming_the_file_and_creates_nothing"
    ],
    "render /dev/zero": ["hostile/test_readers.py::test_an_endless_spec_file_is_refused_at_once"],
    "alias bomb in template.config / inputs, recursive alias, deep list / map": [
        "hostile/test_readers.py::test_render_refuses_a_spec_it_cannot_read_naming_the_file",
        "hostile/test_readers.py::test_run_refuses_a_spec_it_cannot_read_before_anything_runs",
    ],
    # Types and ranges.
    "retryAttempt 4294967296, execution.id.name a list or map, requests.memory -1": [
        "hostile/test_readers.py::test_render_refuses_a_malformed_field_naming_it_and_the_file"
    ],
    "99999999999999h in the config and arrayNode.timeout": [
        "hostile/test_readers.py::test_a_config_value_of_the_wrong_type_is_refused_naming_the_key",
        "hostile/test_readers.py::test_render_refuses_a_malformed_field_naming_it_and_the_file",
    ],
    # Config that validates but cannot run.
    "enabled-plugins [no-such-plugin], workers 10**20, data-root nosuchproto://x": [
        "hostile/test_config_validate.py::test_config_validate_refuses_what_a_run_would_trip_over_naming_the_key",
        "hostile/test_config_validate.py::test_run_refuses_the_same_config_before_creating_anything",
    ],
    "pod-template container without a name, containers a string": [
        "hostile/test_pod_template_files.py::test_a_malformed_manifest_exits_2_naming_the_file_and_the_field"
    ],
    # status --resource.
    "status a list, conditions a string, containerStatuses of integers, exitCode x, month 13, year 10000": [
        "cli/test_status.py::test_a_pod_field_of_the_wrong_type_exits_2_naming_the_pod_and_the_field"
    ],
    # cluster serve.
    "wrong-typed metadata / spec / containers / resources; integer container name, env name with =, "
    "NUL in command, env a string, nodeSelector a list": [
        "hostile/test_cluster_validation.py::test_an_invalid_pod_over_http_is_a_json_status_naming_the_field_and_the_cluster_goes_on"
    ],
    "cross-site simple POST": [
        "hostile/test_cluster_serve_requests.py::test_a_create_in_a_media_type_an_api_server_does_not_decode_is_refused_and_creates_nothing"
    ],
    "500-byte alias-bomb body": [
        "hostile/test_cluster_serve_requests.py::test_a_yaml_alias_bomb_body_is_refused_at_once"
    ],
    "70 MiB body": [
        "hostile/test_cluster_serve_requests.py::test_a_body_over_the_api_servers_limit_is_a_413_status"
    ],
    "the kubelet or scheduler dies of a pod": [
        "hostile/test_cluster_survival.py::test_a_pod_the_kubelet_cannot_handle_fails_alone_naming_the_error",
        "hostile/test_cluster_survival.py::test_a_pod_the_scheduler_cannot_handle_fails_alone",
    ],
    # run and the state DB.
    "label key `bad key!`, platformResources.limits.cpu -1 reported Success": [
        "hostile/test_readers.py::test_run_refuses_what_an_api_server_would_refuse_before_anything_runs"
    ],
    "kubeconfig pointing at a closed port": [
        "hostile/test_unreachable_api.py::test_a_closed_port_ends_the_run_within_the_bound_naming_the_address_and_what_may_be_left"
    ],
    "SIGTERM goes on; Ctrl-C twice exits 130": [
        "hostile/test_run_signals.py::test_sigterm_aborts_the_execution_like_ctrl_c_and_exits_1",
        "hostile/test_run_signals.py::test_a_second_ctrl_c_still_exits_1_without_a_traceback_and_leaves_no_process",
    ],
    "corrupt state DB, a record not JSON, a path under a file, someone else's SQLite": [
        "hostile/test_state_db.py::test_run_on_a_state_db_that_is_not_taskplugs_exits_2_naming_it",
        "hostile/test_state_db.py::test_a_state_db_path_that_cannot_be_a_file_exits_2_naming_it",
        "hostile/test_state_db.py::test_a_stored_row_that_does_not_decode_exits_2_naming_the_execution",
        "hostile/test_state_db.py::test_a_state_db_that_is_not_taskplugs_is_refused_naming_it_and_left_untouched",
    ],
    "two runs on one state DB at once": [
        "hostile/test_state_db.py::test_two_runs_of_one_execution_at_once_run_its_command_once"
    ],
    "re-running an edited spec prints the old outcome": [
        "hostile/test_readers.py::test_a_spec_without_a_name_runs_again_after_an_edit_as_a_new_execution",
        "hostile/test_state_db.py::test_a_finished_execution_reports_its_stored_outcome_and_code_and_rerun_runs_it_again",
        "hostile/test_state_db.py::test_a_resume_whose_spec_changed_is_refused_and_the_original_spec_resumes",
    ],
    # Fidelity.
    "a named pod template missing from an empty folder": [
        "hostile/test_pod_template_files.py::test_a_named_template_missing_from_an_empty_folder_does_not_exist"
    ],
    "the live view eats [...] from messages": [
        "cli/test_run.py::test_text_from_the_task_is_printed_verbatim_never_read_as_rich_markup"
    ],
}


def test_every_sample_tested_elsewhere_still_has_its_test() -> None:
    for sample, references in ELSEWHERE.items():
        for reference in references:
            file, _, name = reference.partition("::")
            text = (TESTS / file).read_text()
            assert f"def {name}(" in text, f"{sample!r}: {reference} is gone"


# -- helpers -------------------------------------------------------------------------------------------


def hello() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(HELLO.read_text())
    return document


def write(path: Path, document: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(document))
    return path


def with_input(variable: dict[str, Any], value: Any) -> dict[str, Any]:
    document = hello()
    document["template"]["interface"]["inputs"]["variables"]["extra"] = {"type": variable}
    document["inputs"]["extra"] = value
    return document


def pod_task(kind: str, container: dict[str, Any]) -> dict[str, Any]:
    """hello.yaml as a sidecar (v0 or v1) or a ``k8sPod`` task whose one container is ``container``."""
    document = hello()
    template = document["template"]
    del template["container"]
    spec = {"containers": [{"name": "main", "image": "python:3.11-slim", **container}]}
    if kind == "sidecar-v0":
        template.update(
            type="sidecar", taskTypeVersion=0, custom={"podSpec": spec, "primaryContainerName": "main"}
        )
    elif kind == "sidecar-v1":
        template.update(
            type="sidecar", taskTypeVersion=1, custom=spec, config={"primary_container_name": "main"}
        )
    else:
        template.update(
            type="python-task", k8sPod={"podSpec": spec}, config={"primary_container_name": "main"}
        )
    return document


# -- types and ranges ----------------------------------------------------------------------------------

TYPED_INPUTS = [
    pytest.param(
        {"simple": "FLOAT"}, "1e400", "inputs.extra", "too large for a 64-bit float", id="float-1e400"
    ),
    pytest.param(
        {"enumType": {"values": ["red", "green"]}},
        "blue",
        "inputs.extra",
        "expected one of",
        id="enum-outside",
    ),
    pytest.param(
        {
            "unionType": {
                "variants": [
                    {"simple": "INTEGER", "structure": {"tag": "int"}},
                    {"simple": "BOOLEAN", "structure": {"tag": "bool"}},
                ]
            }
        },
        "text",
        "inputs.extra",
        "matches no variant",
        id="union-no-variant",
    ),
]


@pytest.mark.parametrize(("variable", "value", "path", "reason"), TYPED_INPUTS)
def test_an_input_outside_its_type_exits_2_naming_it(
    tmp_path: Path, variable: dict[str, Any], value: str, path: str, reason: str
) -> None:
    spec = write(tmp_path / "spec.yaml", with_input(variable, "PLACEHOLDER"))
    # Written as YAML text, so that 1e400 reaches the reader as the number a user typed.
    spec.write_text(spec.read_text().replace("PLACEHOLDER", value))
    assert_bad_input(taskplug("render", spec, cwd=tmp_path), f"error: {path}: ", reason, spec.name)


def test_a_template_timeout_no_duration_holds_exits_2_naming_it(tmp_path: Path) -> None:
    document = hello()
    document["template"]["metadata"] = {"timeout": "99999999999999h"}
    spec = write(tmp_path / "spec.yaml", document)
    assert_bad_input(taskplug("render", spec, cwd=tmp_path), "error: template.metadata.timeout: ")
    document["template"]["metadata"] = {"timeout": f"{10**16}s"}
    assert_bad_input(
        taskplug("render", write(spec, document), cwd=tmp_path),
        "error: template.metadata.timeout: ",
        "range",
    )


WRONG_CONTAINER_FIELDS = [
    pytest.param({"command": "echo hi"}, "containers[0].command: must be a list, got a string", id="command"),
    pytest.param({"args": "a b"}, "containers[0].args: must be a list, got a string", id="args"),
    pytest.param({"env": "A=B"}, "containers[0].env: must be a list, got a string", id="env"),
    pytest.param({"name": 7}, "containers[0].name: must be a string, got an integer 7", id="name-an-integer"),
    pytest.param(
        {"resources": {"requests": {"memory": "-1"}}},
        "containers[0].resources.requests.memory: must be greater than or equal to 0",
        id="negative-memory",
    ),
]


@pytest.mark.parametrize("kind", ["sidecar-v0", "sidecar-v1", "k8s-pod"])
@pytest.mark.parametrize(("container", "named"), WRONG_CONTAINER_FIELDS)
def test_a_pod_tasks_container_field_of_the_wrong_type_exits_2_naming_it(
    tmp_path: Path, kind: str, container: dict[str, Any], named: str
) -> None:
    # Once rendered as a list of single characters. In process: nothing here can eat memory.
    spec = write(tmp_path / "spec.yaml", pod_task(kind, container))
    prefix = "podSpec." if kind == "sidecar-v0" else ""
    assert_bad_input(render_in_process(spec), "[BadTaskSpecification]", f"[{prefix}{named}")


def test_run_refuses_a_pod_task_with_a_string_command_before_any_pod_is_created(tmp_path: Path) -> None:
    spec = write(tmp_path / "spec.yaml", pod_task("sidecar-v1", {"command": "echo hi"}))
    proc = taskplug("run", spec, "--state-db", tmp_path / "state.db", "-o", "json", cwd=tmp_path)
    assert_bad_input(proc, "containers[0].command: must be a list")
    assert not (tmp_path / ".taskplug" / "data").exists()


# -- the fidelity defects that are command outcomes -----------------------------------------------------


def test_a_bad_quantity_exits_2_from_run_as_from_render(tmp_path: Path) -> None:
    document = hello()
    document["template"]["container"]["resources"]["requests"] = [{"name": "CPU", "value": "lots"}]
    spec = write(tmp_path / "spec.yaml", document)
    named = "[CPU: 'lots']"
    assert_bad_input(render_in_process(spec), named)
    proc = taskplug("run", spec, "--state-db", tmp_path / "state.db", "-o", "json", cwd=tmp_path)
    assert_bad_input(proc, named)
    assert not (tmp_path / ".taskplug" / "data").exists()


def test_a_named_execution_refused_at_submit_runs_once_its_spec_is_fixed(tmp_path: Path) -> None:
    document = hello()
    document["execution"]["id"]["name"] = "fixme"
    good = copy.deepcopy(document)
    document["template"]["container"]["resources"]["requests"] = [{"name": "CPU", "value": "lots"}]
    spec = write(tmp_path / "spec.yaml", document)
    state = tmp_path / "state.db"
    assert taskplug("run", spec, "--state-db", state, cwd=tmp_path).returncode == 2
    proc = taskplug("run", write(spec, good), "--state-db", state, "-o", "json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_an_image_override_applies_to_a_template_without_an_image(tmp_path: Path) -> None:
    # Flyte's TestToK8sPodContainerImage: the override is the container's image; the spec is not refused.
    document = hello()
    del document["template"]["container"]["image"]
    document["execution"]["overrides"] = {"containerImage": "foo:latest"}
    proc = render_in_process(write(tmp_path / "spec.yaml", document))
    assert proc.returncode == 0, proc.stderr
    pod = json.loads(proc.stdout)
    assert [c["image"] for c in pod["spec"]["containers"]] == ["foo:latest"]
    # Without the override nothing could give it one: refused naming the field.
    del document["execution"]["overrides"]
    assert_bad_input(render_in_process(write(tmp_path / "spec.yaml", document)), "template.container.image")


# -- run: malformed pods end the run, a killed run leaves nothing running ----------------------------------


@pytest.mark.parametrize(
    ("change", "field"),
    [
        pytest.param(
            lambda c: c.update(env=[{"key": "A=B", "value": "x"}]),
            "spec.containers[0].env[0].name",
            id="env-name-with-equals",
        ),
        pytest.param(
            lambda c: c.update(args=["a\x00b"]), "spec.containers[0].args[0]", id="nul-in-an-argument"
        ),
    ],
)
def test_a_pod_the_api_refuses_ends_the_run_naming_the_field(tmp_path: Path, change: Any, field: str) -> None:
    # These once killed the embedded kubelet and `run` never ended. The embedded API now refuses the pod as a
    # real one does (422 Invalid), which Flyte's plugin manager turns into a permanent failure of the task:
    # exit 1 (the task failed), the field named, no traceback, nothing run.
    document = hello()
    change(document["template"]["container"])
    spec = write(tmp_path / "spec.yaml", document)
    proc = taskplug("run", spec, "--state-db", tmp_path / "state.db", "-o", "json", cwd=tmp_path)
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    result = json.loads(proc.stdout)
    assert result["phase"] == "PermanentFailure"
    assert result["attempts"] == 1
    assert field in result["error"]["message"]
    assert result["outputs"] is None


_SLEEPER = """
import os, sys, time
from pathlib import Path
pids = Path(sys.argv[1])
with pids.open("a") as f:
    f.write(f"{os.getpid()}\\n")
if len(pids.read_text().split()) == 1:
    time.sleep(300)
"""


def _limits() -> None:  # in the child, before exec
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for this purpose (the kubelet's child, reaped by its own parent or init).
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


@pytest.mark.integration
async def test_a_sigkilled_run_leaves_no_task_process_and_its_resume_runs_one_copy(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    document = hello()
    document["execution"]["id"]["name"] = "killed"
    container = document["template"]["container"]
    container["command"] = ["python", "-c", _SLEEPER, str(pids)]
    container.pop("args", None)
    document["template"]["interface"]["outputs"] = {}
    spec = write(tmp_path / "spec.yaml", document)
    state = tmp_path / "state.db"
    args = [*TASKPLUG, "run", str(spec), "--state-db", str(state), "-o", "json"]
    first = await asyncio.create_subprocess_exec(
        *args, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=_limits
    )
    try:
        await wait_until(
            lambda: pids.exists() and pids.read_text().strip() != "", within=60, what="the task started"
        )
        task_pid = int(pids.read_text().split()[0])
        assert _alive(task_pid)
        first.send_signal(signal.SIGKILL)
        await asyncio.wait_for(first.wait(), 30)
    finally:
        if first.returncode is None:
            first.kill()
            await first.wait()
    # The task's process dies with the run (parent-death signal), not 300 s later.
    try:
        await wait_until(
            lambda: not _alive(task_pid), within=20, what="the task's process to die with the run"
        )
    finally:
        if _alive(task_pid):
            os.kill(task_pid, signal.SIGKILL)
    resumed = await asyncio.create_subprocess_exec(
        *args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=_limits
    )
    out, err = await asyncio.wait_for(resumed.communicate(), 120)
    assert resumed.returncode == 0, err.decode()[-2000:]
    assert b"Traceback" not in err
    assert json.loads(out)["phase"] == "Success"
    # One copy at a time: the resume ran the command once more, the first copy already gone.
    assert len(pids.read_text().split()) == 2
