"""An ArrayNode in the execution spec (docs/spec.md): the hand-written ``arrayNode`` section, and the
array node read from the files ``pyflyte serialize`` / ``package`` write (built here as flytekit writes them:
admin TaskSpec, WorkflowSpec and LaunchPlan protobufs)."""

from __future__ import annotations

import copy
import io
import tarfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from flyteidl.admin import launch_plan_pb2, task_pb2, workflow_pb2
from flyteidl.core import (
    identifier_pb2,
    interface_pb2,
    literals_pb2,
    tasks_pb2,
    types_pb2,
)
from flyteidl.core import workflow_pb2 as core_workflow_pb2
from google.protobuf import duration_pb2

from taskplug.compiler import MAX_ENTITY_BYTES, is_archive
from taskplug.compiler import _serialized as workflow_reader
from taskplug.core import SpecError
from taskplug.executor import NodeKind, load_spec, parse_spec

LIST_INT = {"collectionType": {"simple": "INTEGER"}}


def hand() -> dict[str, Any]:
    return {
        "template": {
            "id": {"resourceType": "TASK", "name": "sq", "version": "v1"},
            "type": "container",
            "metadata": {"retries": {"retries": 2}, "timeout": "30s"},
            "interface": {
                "inputs": {"variables": {"x": {"type": LIST_INT}, "offset": {"type": {"simple": "INTEGER"}}}},
                "outputs": {"variables": {"o0": {"type": LIST_INT}}},
            },
            "container": {"image": "python:3.11", "command": ["python", "-c", "pass"]},
        },
        "arrayNode": {"parallelism": 4, "minSuccessRatio": 0.5, "boundInputs": ["offset"]},
        "execution": {"id": {"name": "e1"}},
        "inputs": {"x": [1, 2, 3], "offset": 10},
    }


# -- by hand ---------------------------------------------------------------------------------------------


def test_an_array_node_section_makes_the_spec_a_map() -> None:
    spec = parse_spec(hand())
    assert spec.array is not None
    assert (spec.array.parallelism, spec.array.min_success_ratio, spec.array.min_successes) == (4, 0.5, None)
    assert spec.array.bound_inputs == ("offset",)
    assert spec.array.min_attempts == 3  # the template's retries + 1
    assert spec.array.timeout == 30.0
    assert len(spec.inputs.literals["x"].collection.literals) == 3


def test_a_spec_without_the_section_is_a_single_task() -> None:
    doc = hand()
    del doc["arrayNode"]
    assert parse_spec(doc).array is None


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ({}, (None, None, None, 3, 30.0)),
        ({"parallelism": 0}, (0, None, None, 3, 30.0)),
        ({"minSuccesses": 2}, (None, 2, None, 3, 30.0)),
        ({"retries": 0, "timeout": "1m30s"}, (None, None, None, 1, 90.0)),
        ({"timeout": 5}, (None, None, None, 3, 5.0)),
        (None, (None, None, None, 3, 30.0)),
    ],
)
def test_array_fields_default_to_unset_and_the_templates_retries_and_timeout(
    section: dict[str, Any] | None, expected: tuple[Any, ...]
) -> None:
    doc = hand()
    doc["arrayNode"] = section
    array = parse_spec(doc).array
    assert array is not None
    assert (
        array.parallelism,
        array.min_successes,
        array.min_success_ratio,
        array.min_attempts,
        array.timeout,
    ) == expected


def test_execution_max_attempts_sets_the_elements_attempts() -> None:
    doc = hand()
    doc["execution"]["maxAttempts"] = 5
    array = parse_spec(doc).array
    assert array is not None and array.min_attempts == 5


def _set(path: str, value: Any):
    def mutate(doc: dict[str, Any]) -> None:
        *parents, leaf = path.split(".")
        node = doc
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value

    return mutate


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (_set("arrayNode", [1]), "arrayNode"),
        (_set("arrayNode.concurrency", 2), "arrayNode.concurrency"),
        (_set("arrayNode.parallelism", -1), "arrayNode.parallelism"),
        (_set("arrayNode.parallelism", "2"), "arrayNode.parallelism"),
        (_set("arrayNode.parallelism", True), "arrayNode.parallelism"),
        (_set("arrayNode.minSuccesses", 2), "arrayNode.minSuccessRatio"),  # both given
        (_set("arrayNode.minSuccessRatio", 1.5), "arrayNode.minSuccessRatio"),
        (_set("arrayNode.minSuccessRatio", "half"), "arrayNode.minSuccessRatio"),
        (_set("arrayNode.boundInputs", "offset"), "arrayNode.boundInputs"),
        (_set("arrayNode.boundInputs", ["offset", "y"]), "arrayNode.boundInputs[1]"),
        (_set("arrayNode.boundInputs", [3]), "arrayNode.boundInputs[0]"),
        (_set("arrayNode.retries", -1), "arrayNode.retries"),
        (_set("arrayNode.timeout", "soon"), "arrayNode.timeout"),
        (_set("node", "n1"), "node"),
        (_set("workflow", "wf"), "workflow"),
        (_set("inputs.x", [1, "two"]), "inputs.x[1]"),
    ],
)
def test_a_malformed_array_field_is_named(mutate, path: str) -> None:
    doc = copy.deepcopy(hand())
    mutate(doc)
    with pytest.raises(SpecError) as err:
        parse_spec(doc)
    assert err.value.path == path
    assert str(err.value).startswith(path + ": ")


# -- from what pyflyte writes ----------------------------------------------------------------------------


def _id(kind: int, name: str) -> identifier_pb2.Identifier:
    return identifier_pb2.Identifier(resource_type=kind, project="p", domain="d", name=name, version="v1")


def _map_task(name: str = "wf.map_square_x-arraynode") -> tasks_pb2.TaskTemplate:
    template = tasks_pb2.TaskTemplate(
        id=_id(identifier_pb2.TASK, name), type="python-task", task_type_version=1
    )
    template.metadata.retries.retries = 1
    variables = template.interface.inputs.variables
    variables["x"].type.collection_type.simple = types_pb2.INTEGER
    variables["offset"].type.simple = types_pb2.INTEGER
    template.interface.outputs.variables["o0"].type.collection_type.simple = types_pb2.INTEGER
    template.container.image = "localhost/x:v1"
    template.container.args.extend(["pyflyte-map-execute", "--inputs", "{{.input}}"])
    return template


def _binding(var: str, **value: Any) -> literals_pb2.Binding:
    return literals_pb2.Binding(var=var, binding=literals_pb2.BindingData(**value))


def _array_node(
    node_id: str = "n0", *, task: str = "wf.map_square_x-arraynode", from_node: str = ""
) -> core_workflow_pb2.Node:
    bindings = [
        _binding("offset", scalar=literals_pb2.Scalar(primitive=literals_pb2.Primitive(integer=1))),
        _binding("x", promise=types_pb2.OutputReference(node_id=from_node, var="xs")),
    ]
    sub = core_workflow_pb2.Node(
        id=task,
        inputs=bindings,
        task_node=core_workflow_pb2.TaskNode(reference_id=_id(identifier_pb2.TASK, task)),
    )
    sub.metadata.retries.retries = 3
    sub.metadata.timeout.CopyFrom(duration_pb2.Duration(seconds=600))
    sub.metadata.interruptible = True
    sub.task_node.overrides.container_image = "localhost/other:v2"
    sub.task_node.overrides.resources.limits.append(
        tasks_pb2.Resources.ResourceEntry(name=tasks_pb2.Resources.MEMORY, value="1Gi")
    )
    array = core_workflow_pb2.ArrayNode(
        node=sub, parallelism=5, min_success_ratio=0.5, bound_inputs=["offset"]
    )
    return core_workflow_pb2.Node(id=node_id, inputs=bindings, array_node=array)


def _workflow(
    name: str = "wf.wf", nodes: list[core_workflow_pb2.Node] | None = None
) -> workflow_pb2.WorkflowSpec:
    template = core_workflow_pb2.WorkflowTemplate(id=_id(identifier_pb2.WORKFLOW, name))
    template.interface.inputs.variables["xs"].CopyFrom(
        interface_pb2.Variable(
            type=types_pb2.LiteralType(collection_type=types_pb2.LiteralType(simple=types_pb2.INTEGER))
        )
    )
    template.nodes.extend(nodes if nodes is not None else [_array_node()])
    return workflow_pb2.WorkflowSpec(template=template)


def _launch_plan(workflow: str = "wf.wf", default: list[int] | None = None) -> launch_plan_pb2.LaunchPlan:
    plan = launch_plan_pb2.LaunchPlan(id=_id(identifier_pb2.LAUNCH_PLAN, workflow))
    plan.spec.workflow_id.CopyFrom(_id(identifier_pb2.WORKFLOW, workflow))
    if default is not None:
        parameter = plan.spec.default_inputs.parameters["xs"]
        parameter.var.type.collection_type.simple = types_pb2.INTEGER
        for value in default:
            parameter.default.collection.literals.add().scalar.primitive.integer = value
    return plan


def _serialize(
    folder: Path, workflow: workflow_pb2.WorkflowSpec | None = None, *, lp_default: list[int] | None = None
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "0_wf.square_1.pb").write_bytes(
        task_pb2.TaskSpec(template=_map_task("wf.square")).SerializeToString()
    )
    (folder / "1_wf.map_square_x-arraynode_1.pb").write_bytes(
        task_pb2.TaskSpec(template=_map_task()).SerializeToString()
    )
    path = folder / "2_wf.wf_2.pb"
    path.write_bytes((workflow or _workflow()).SerializeToString())
    (folder / "3_wf.wf_3.pb").write_bytes(_launch_plan(default=lp_default).SerializeToString())
    return path


def _spec(path: Path | str, **extra: Any) -> dict[str, Any]:
    """A spec running the workflow's array node ``n0`` alone (``node``); ``node=None`` runs the workflow."""
    doc = {"templateFile": str(path), "execution": {"id": {"name": "e1"}}, "inputs": {"xs": [4, 5]}}
    doc["node"] = "n0"
    doc.update(extra)
    if doc["node"] is None:
        del doc["node"]
    return doc


def test_a_serialized_workflow_gives_its_array_node_the_map_task_and_the_bound_inputs(tmp_path: Path) -> None:
    spec = parse_spec(_spec(_serialize(tmp_path)))
    assert spec.template == _map_task()
    assert spec.array is not None
    assert (spec.array.parallelism, spec.array.min_success_ratio, spec.array.bound_inputs) == (
        5,
        0.5,
        ("offset",),
    )
    assert spec.array.min_attempts == 4  # the sub-node's retries (with_overrides) win over the task's
    assert spec.array.timeout == 600.0
    assert spec.array.workflow == "wf.wf"
    assert [lit.scalar.primitive.integer for lit in spec.inputs.literals["x"].collection.literals] == [4, 5]
    assert spec.inputs.literals["offset"].scalar.primitive.integer == 1
    meta = spec.metadata
    assert meta.task_execution_id.id.node_execution_id.node_id == "n0"
    assert meta.interruptible is True  # the sub-node's
    assert meta.overrides.container_image == "localhost/other:v2"
    assert meta.overrides.resources is not None and str(meta.overrides.resources.limits["memory"]) == "1Gi"


def test_a_template_file_relative_to_the_spec_is_found_with_its_siblings(tmp_path: Path) -> None:
    _serialize(tmp_path / "out")
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(_spec("out/2_wf.wf_2.pb")))
    assert load_spec(tmp_path / "spec.yaml").array is not None


def test_min_successes_unset_parallelism_and_no_bound_inputs_are_kept_unset(tmp_path: Path) -> None:
    node = _array_node()
    node.array_node.ClearField("parallelism")
    node.array_node.min_successes = 1
    del node.array_node.bound_inputs[:]
    array = parse_spec(_spec(_serialize(tmp_path, _workflow(nodes=[node])))).array
    assert array is not None
    assert (array.parallelism, array.min_successes, array.min_success_ratio, array.bound_inputs) == (
        None,
        1,
        None,
        (),
    )


def test_the_launch_plans_default_fills_a_workflow_input_not_given(tmp_path: Path) -> None:
    doc = _spec(_serialize(tmp_path, lp_default=[7, 8, 9]))
    del doc["inputs"]
    spec = parse_spec(doc)
    assert [lit.scalar.primitive.integer for lit in spec.inputs.literals["x"].collection.literals] == [
        7,
        8,
        9,
    ]


def test_a_package_archive_works_the_same_way(tmp_path: Path) -> None:
    _serialize(tmp_path / "files")
    archive = tmp_path / "flyte-package.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        for path in sorted((tmp_path / "files").iterdir()):
            tar.add(path, arcname=path.name)
    spec = parse_spec(_spec(archive))
    assert spec.template == _map_task()
    assert spec.array is not None and spec.array.parallelism == 5


def _archive(path: Path, workflows: list[workflow_pb2.WorkflowSpec]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        entries = [task_pb2.TaskSpec(template=_map_task()).SerializeToString()]
        entries += [w.SerializeToString() for w in workflows]
        for i, data in enumerate(entries):
            info = tarfile.TarInfo(f"{i}_entity.pb")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_an_archive_with_several_mapping_workflows_needs_one_named(tmp_path: Path) -> None:
    archive = _archive(tmp_path / "p.tgz", [_workflow("wf.a"), _workflow("wf.b")])
    with pytest.raises(SpecError) as err:
        parse_spec(_spec(archive))
    assert err.value.path == "workflow" and "['wf.a', 'wf.b']" in str(err.value)
    assert parse_spec(_spec(archive, workflow="wf.b")).array is not None
    with pytest.raises(SpecError) as err:
        parse_spec(_spec(archive, workflow="wf.c"))
    assert err.value.path == "workflow"


def test_without_node_the_whole_workflow_runs_and_node_picks_one_array_node(tmp_path: Path) -> None:
    path = _serialize(tmp_path, _workflow(nodes=[_array_node("n0"), _array_node("n1")]))
    whole = parse_spec(_spec(path, node=None))
    assert whole.kind is NodeKind.WORKFLOW
    assert whole.workflow is not None
    assert [n.id for n in whole.workflow.template.nodes] == ["start-node", "end-node", "n0", "n1"]
    spec = parse_spec(_spec(path, node="n1"))
    assert spec.metadata.task_execution_id.id.node_execution_id.node_id == "n1"


@pytest.mark.parametrize(
    ("workflow", "extra", "path", "words"),
    [
        (_workflow(nodes=[_array_node(task="wf.missing")]), {}, "templateFile", "'wf.missing'"),
        (_workflow(nodes=[_array_node(from_node="n9")]), {}, "inputs.x", "node 'n9'"),
        (_workflow(), {"node": "n7"}, "node", "no node 'n7'"),
        (_workflow(), {"arrayNode": {}}, "arrayNode", "not with a workflow"),
        (
            _workflow(nodes=[core_workflow_pb2.Node(id="n0", task_node=core_workflow_pb2.TaskNode())]),
            {},
            "node",
            "is not an array node",
        ),
    ],
)
def test_a_workflow_that_cannot_be_run_as_one_array_node_is_refused_by_field(
    tmp_path: Path, workflow: workflow_pb2.WorkflowSpec, extra: dict[str, Any], path: str, words: str
) -> None:
    with pytest.raises(SpecError) as err:
        parse_spec(_spec(_serialize(tmp_path, workflow), **extra))
    assert err.value.path == path
    assert words in str(err.value)


def test_a_missing_workflow_input_without_a_default_is_named(tmp_path: Path) -> None:
    doc = _spec(_serialize(tmp_path))
    del doc["inputs"]
    with pytest.raises(SpecError) as err:
        parse_spec(doc)
    assert err.value.path == "inputs.xs"


# -- rendering a map ---------------------------------------------------------------------------------------


def test_rendering_a_map_gives_its_first_elements_pod_named_labelled_and_indexed_as_propeller_does(
    tmp_path: Path,
) -> None:
    from taskplug.executor import Platform, render_object

    example = Path(__file__).resolve().parents[2] / "examples" / "map-task" / "by-hand.yaml"
    spec = load_spec(example)
    pod = render_object(Platform.load(), spec, data_root=str(tmp_path))
    assert pod["metadata"]["name"] == "by-hand-1-n0-0-n0-0"
    assert pod["metadata"]["labels"]["node-id"] == "n0"
    assert pod["metadata"]["labels"]["execution-id"] == "by-hand-1"
    container = pod["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["BATCH_JOB_ARRAY_INDEX_VAR_NAME"] == "FLYTE_K8S_ARRAY_INDEX"
    assert env["FLYTE_K8S_ARRAY_INDEX"] == "0"
    assert env["FLYTE_ATTEMPT_NUMBER"] == "0"
    script = container["args"][0]
    assert "= 1 * 1 + 10" in script  # the element's x and the bound offset
    assert f"{tmp_path}/metadata/flytesnacks/development/by-hand-1/n0/0/0/0" in script


# -- config ------------------------------------------------------------------------------------------------


def test_the_array_node_config_reaches_the_executor_settings() -> None:
    from taskplug.executor import Platform, executor_settings

    platform = Platform.load(
        document={
            "executor": {
                "max-system-failures": 5,
                "array-node": {
                    "default-parallelism-behavior": "hybrid",
                    "max-parallelism": 7,
                    "default-max-attempts": 2,
                    "ignore-retry-cause": True,
                    "node-execution-worker-count": 3,
                },
            }
        }
    )
    settings = executor_settings(platform)
    assert settings.max_system_failures == 5
    array = settings.array
    assert (array.parallelism_behavior, array.max_parallelism, array.workers) == ("hybrid", 7, 3)
    # The retry keys written under array-node (as earlier versions documented them) govern every node.
    assert (settings.default_max_attempts, settings.ignore_retry_cause) == (2, True)
    assert executor_settings(Platform.load()).array.parallelism_behavior == "unlimited"


def test_the_node_retry_keys_govern_every_node_and_the_old_place_may_not_disagree() -> None:
    from taskplug.core import ConfigError
    from taskplug.executor import Platform, executor_settings

    node = {"executor": {"node": {"default-max-attempts": 3, "ignore-retry-cause": True}}}
    settings = executor_settings(Platform.load(document=node))
    assert (settings.default_max_attempts, settings.ignore_retry_cause) == (3, True)
    assert settings.node_settings().default_max_attempts == 3
    both = {"executor": {"node": {"default-max-attempts": 3}, "array-node": {"default-max-attempts": 2}}}
    with pytest.raises(ConfigError) as caught:
        Platform.load(document=both)
    assert "executor.array-node.default-max-attempts (2) and executor.node.default-max-attempts (3)" in str(
        caught.value
    )


@pytest.mark.parametrize(
    ("section", "path"),
    [
        ({"default-parallelism-behavior": "some"}, "executor.array-node.default-parallelism-behavior"),
        ({"max-parallelism": -1}, "executor.array-node.max-parallelism"),
        ({"event-version": 1}, "executor.array-node.event-version"),
        ({"use-map-plugin-logs": True}, "executor.array-node.use-map-plugin-logs"),
    ],
)
def test_a_bad_array_node_config_key_is_named(section: dict[str, Any], path: str) -> None:
    from taskplug.core import ConfigError
    from taskplug.executor import Platform

    with pytest.raises(ConfigError) as err:
        Platform.load(document={"executor": {"array-node": section}})
    assert str(err.value).startswith(path)


# -- reading archives and sibling files within bounds ------------------------------------------------------


def _package(path: Path, folder: Path, mode: str = "w:gz", extra: Sequence[tuple[str, bytes]] = ()) -> Path:
    with tarfile.open(path, mode) as tar:
        for entity in sorted(folder.iterdir()):
            tar.add(entity, arcname=entity.name)
        for name, data in extra:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


@pytest.mark.parametrize("mode", ["w", "w:gz", "w:bz2", "w:xz"])
def test_a_package_archive_is_read_whatever_its_compression_and_name(tmp_path: Path, mode: str) -> None:
    _serialize(tmp_path / "files")
    # No archive suffix: recognised by its content, as pyflyte's output may be renamed.
    archive = _package(tmp_path / "package.bin", tmp_path / "files", mode)
    spec = parse_spec(_spec(archive))
    assert spec.template == _map_task()


def test_a_file_of_zeros_is_not_taken_for_an_archive(tmp_path: Path) -> None:
    # tarfile.is_tarfile says yes to it (an empty archive's end blocks); it holds no member, so it is read as
    # the template file it claims to be, and refused as one.
    zeros = tmp_path / "task.pb"
    zeros.write_bytes(bytes(10240))
    assert tarfile.is_tarfile(zeros)
    assert not is_archive(zeros)
    with pytest.raises(SpecError) as err:
        parse_spec(_spec(zeros, node=None))
    assert err.value.path == "templateFile"
    assert "archive" not in err.value.reason


def test_an_archive_member_over_the_entity_bound_is_refused_naming_it_before_it_is_read(
    tmp_path: Path,
) -> None:
    _serialize(tmp_path / "files")
    big = bytes(MAX_ENTITY_BYTES + 1)  # compresses to a few kilobytes: a tar bomb in small
    archive = _package(tmp_path / "p.tgz", tmp_path / "files", extra=[("9_big.pb", big)])
    with pytest.raises(SpecError) as err:
        parse_spec(_spec(archive))
    assert err.value.path == "templateFile"
    assert "member '9_big.pb' is larger than" in err.value.reason
    assert "p.tgz" in err.value.reason


def test_an_archive_that_unpacks_past_the_bound_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(workflow_reader, "MAX_WORKFLOW_BYTES", 64 * 1024)
    _serialize(tmp_path / "files")
    # Members that are not .pb files still unpack (tarfile passes over their data): they count too.
    extra = [(f"junk{i}.bin", bytes(20 * 1024)) for i in range(5)]
    archive = _package(tmp_path / "p.tgz", tmp_path / "files", extra=extra)
    with pytest.raises(SpecError) as err:
        parse_spec(_spec(archive))
    assert err.value.path == "templateFile"
    assert "unpacks to more than 65536 bytes" in err.value.reason


def test_a_pax_header_bomb_is_refused_while_unpacking(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # tarfile reads a pax extended header whole into memory before it returns the member it describes; the
    # bounded stream refuses it as it unpacks, whatever the header claims.
    monkeypatch.setattr(workflow_reader, "MAX_WORKFLOW_BYTES", 64 * 1024)
    archive = tmp_path / "p.tgz"
    with tarfile.open(archive, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("0_entity.pb")
        info.pax_headers = {"comment": "x" * (256 * 1024)}
        tar.addfile(info, io.BytesIO(b""))
    with pytest.raises(SpecError) as err:
        parse_spec(_spec(archive))
    assert "unpacks to more than 65536 bytes" in err.value.reason


def test_an_archive_with_too_many_members_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workflow_reader, "MAX_ARCHIVE_MEMBERS", 5)
    _serialize(tmp_path / "files")
    archive = _package(tmp_path / "p.tgz", tmp_path / "files", extra=[(f"e{i}", b"") for i in range(3)])
    with pytest.raises(SpecError) as err:
        parse_spec(_spec(archive))
    assert "holds more than 5 members" in err.value.reason


def test_a_sibling_file_over_the_bound_is_refused_naming_it(tmp_path: Path) -> None:
    path = _serialize(tmp_path)
    with (tmp_path / "9_huge.pb").open("wb") as f:
        f.truncate(MAX_ENTITY_BYTES + 1)  # sparse: no disk used
    with pytest.raises(SpecError) as err:
        parse_spec(_spec(path))
    assert err.value.path == "templateFile"
    assert "9_huge.pb" in err.value.reason and "is larger than" in err.value.reason


def test_sibling_files_over_the_bound_together_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(workflow_reader, "MAX_WORKFLOW_BYTES", 2048)
    path = _serialize(tmp_path)
    for i in range(4):
        (tmp_path / f"9_{i}.pb").write_bytes(bytes(1024))
    with pytest.raises(SpecError) as err:
        parse_spec(_spec(path))
    assert "hold more than 2048 bytes" in err.value.reason
