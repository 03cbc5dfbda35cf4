"""A workflow read the ways a Flyte user has it (``pyflyte serialize`` files, a folder of them, a ``pyflyte
package`` archive) into one bundle: the workflow chosen, its launch plan, everything it reaches by id, the
identifiers hydrated alike everywhere, and what cannot run here refused naming it."""

from __future__ import annotations

import io
import shutil
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from flyteidl.core import identifier_pb2, workflow_pb2
from google.protobuf.message import Message

from support.flytekit_workflows import Serialized
from taskplug.compiler import MAX_ENTITY_BYTES, WorkflowBundle, hydrate, id_key, read_bundle
from taskplug.core import SpecError


def _keys(bundle: WorkflowBundle) -> tuple[set[str], set[str], set[str]]:
    return set(bundle.sub_workflows), set(bundle.tasks), set(bundle.launch_plans)


def test_a_folder_gives_the_workflow_its_default_launch_plan_and_everything_it_reaches(
    demo: Serialized,
) -> None:
    bundle = read_bundle(demo.folder, workflow="loader_demo.wf")
    assert bundle.workflow.id.name == "loader_demo.wf"
    workflows, tasks, plans = _keys(bundle)
    assert workflows == {
        "WORKFLOW:::loader_demo.wf:",
        "WORKFLOW:::loader_demo.sub:",
        "WORKFLOW:::loader_demo.inner:",
    }
    assert "TASK:::loader_demo.add:" in tasks and "TASK:::loader_demo.double:" in tasks
    assert any("arraynode" in key for key in tasks)
    assert {
        "LAUNCH_PLAN:::sub_lp:",
        "LAUNCH_PLAN:::loader_demo.wf:",
        "LAUNCH_PLAN:::loader_demo.sub:",
    } <= plans
    # The default launch plan carries the Python default of y; x is required.
    assert bundle.launch_plan.id.name == "loader_demo.wf"
    parameters = bundle.launch_plan.spec.default_inputs.parameters
    assert parameters["y"].default.scalar.primitive.integer == 3
    assert parameters["x"].required
    assert bundle.source == str(demo.folder)


def test_without_a_name_the_one_workflow_no_other_runs_is_chosen(demo: Serialized) -> None:
    # sub runs as a sub-workflow and through sub_lp, inner inside a branch: wf is the only top-level one.
    assert read_bundle(demo.folder, workflow=None).workflow.id.name == "loader_demo.wf"


def test_a_package_archive_reads_as_the_folder_does(demo: Serialized) -> None:
    from_archive = read_bundle(demo.package, workflow=None)
    from_folder = read_bundle(demo.folder, workflow=None)
    assert _keys(from_archive) == _keys(from_folder)
    # Two pyflyte runs list a node's upstream ids in set order: compare them as sets.
    assert _upstream_sorted(from_archive.workflow) == _upstream_sorted(from_folder.workflow)
    assert from_archive.launch_plan == from_folder.launch_plan


def _upstream_sorted(template: workflow_pb2.WorkflowTemplate) -> workflow_pb2.WorkflowTemplate:
    copy = workflow_pb2.WorkflowTemplate()
    copy.CopyFrom(template)
    for node in copy.nodes:
        upstream = sorted(node.upstream_node_ids)
        del node.upstream_node_ids[:]
        node.upstream_node_ids.extend(upstream)
    return copy


def test_a_workflow_file_runs_that_workflow_with_the_files_beside_it(demo: Serialized) -> None:
    bundle = read_bundle(demo.file("loader_demo.sub_2.pb"), workflow=None)
    assert bundle.workflow.id.name == "loader_demo.sub"
    assert bundle.launch_plan.id.name == "loader_demo.sub"
    assert "TASK:::loader_demo.add:" in bundle.tasks


def test_a_launch_plan_file_runs_that_launch_plan(demo: Serialized) -> None:
    bundle = read_bundle(demo.file("sub_lp_3.pb"), workflow=None)
    assert bundle.launch_plan.id.name == "sub_lp"
    assert bundle.workflow.id.name == "loader_demo.sub"
    assert bundle.launch_plan.spec.fixed_inputs.literals["a"].scalar.primitive.integer == 1


def test_a_named_launch_plan_runs_its_workflow(demo: Serialized) -> None:
    bundle = read_bundle(demo.package, workflow=None, launch_plan="sub_lp")
    assert bundle.workflow.id.name == "loader_demo.sub"
    assert bundle.launch_plan.id.name == "sub_lp"
    with pytest.raises(SpecError) as err:
        read_bundle(demo.package, workflow="loader_demo.wf", launch_plan="sub_lp")
    assert err.value.path == "launchPlan"
    assert "runs workflow 'loader_demo.sub', not 'loader_demo.wf'" in err.value.reason


def test_a_workflow_is_named_by_its_full_or_its_short_name(demo: Serialized) -> None:
    assert read_bundle(demo.folder, workflow="sub").workflow.id.name == "loader_demo.sub"


@pytest.mark.parametrize(
    ("workflow", "launch_plan", "path", "words"),
    [
        ("nope", None, "workflow", "has no workflow 'nope' (it has ['loader_demo.inner', 'loader_demo.sub'"),
        (None, "nope_lp", "launchPlan", "has no launch plan 'nope_lp' (it has ['loader_demo.inner'"),
    ],
)
def test_a_name_not_in_the_files_is_refused_listing_what_is(
    demo: Serialized, workflow: str | None, launch_plan: str | None, path: str, words: str
) -> None:
    with pytest.raises(SpecError) as err:
        read_bundle(demo.folder, workflow=workflow, launch_plan=launch_plan)
    assert err.value.path == path
    assert words in err.value.reason


def test_several_top_level_workflows_need_one_named(two: Serialized) -> None:
    with pytest.raises(SpecError) as err:
        read_bundle(two.package, workflow=None)
    assert err.value.path == "workflow"
    assert (
        "several workflows ['loader_two.first', 'loader_two.second']: name the one to run" in err.value.reason
    )
    assert read_bundle(two.package, workflow="second").workflow.id.name == "loader_two.second"


def _identifiers(message: Message) -> Iterator[identifier_pb2.Identifier]:
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        if field.message_type.GetOptions().map_entry:
            items = list(value.values()) if field.message_type.fields_by_name["value"].message_type else []
        else:
            items = list(value) if field.is_repeated else [value]
        for item in items:
            if isinstance(item, identifier_pb2.Identifier):
                yield item
            else:
                yield from _identifiers(item)


def _all_identifiers(bundle: WorkflowBundle) -> list[identifier_pb2.Identifier]:
    messages: list[Message] = [bundle.workflow, bundle.launch_plan]
    messages += [*bundle.sub_workflows.values(), *bundle.tasks.values(), *bundle.launch_plans.values()]
    return [i for m in messages for i in _identifiers(m)]


def test_hydrate_fills_every_identifier_alike_and_references_still_resolve(demo: Serialized) -> None:
    bundle = read_bundle(demo.folder, workflow=None)
    found = _all_identifiers(bundle)
    assert found and all(not i.project and not i.version for i in found)

    hydrated = hydrate(bundle, project="p1", domain="dev", version="v7")
    found = _all_identifiers(hydrated)
    # Node references (task, sub-workflow, launch plan, the map task's, the branch's), entity ids, launch-plan
    # workflow ids: every one filled, none missed.
    assert len(found) == len(_all_identifiers(bundle))
    assert all((i.project, i.domain, i.version) == ("p1", "dev", "v7") for i in found)
    for i in found:
        kind = i.resource_type
        index = {
            identifier_pb2.TASK: hydrated.tasks,
            identifier_pb2.WORKFLOW: hydrated.sub_workflows,
            identifier_pb2.LAUNCH_PLAN: hydrated.launch_plans,
        }[kind]
        assert id_key(i) in index, id_key(i)
    assert hydrated.launch_plan.id.name == "loader_demo.wf"
    assert id_key(hydrated.launch_plan.spec.workflow_id) == id_key(hydrated.workflow.id)
    # The bundle given is not changed.
    assert not bundle.workflow.id.project


def test_hydrate_keeps_an_identifier_that_names_its_own_project() -> None:
    from flyteidl.admin import launch_plan_pb2

    from taskplug.compiler import hydrate as hydrate_

    plan = launch_plan_pb2.LaunchPlan()
    plan.id.resource_type = identifier_pb2.LAUNCH_PLAN
    plan.id.name = "lp"
    plan.spec.workflow_id.CopyFrom(
        identifier_pb2.Identifier(
            resource_type=identifier_pb2.WORKFLOW, project="p", domain="d", name="w", version="1"
        )
    )
    template = workflow_pb2.WorkflowTemplate(
        id=identifier_pb2.Identifier(resource_type=identifier_pb2.WORKFLOW, name="w")
    )
    bundle = WorkflowBundle(
        workflow=template,
        sub_workflows={id_key(template.id): template},
        tasks={},
        launch_plans={id_key(plan.id): plan},
        launch_plan=plan,
        source="test",
    )
    hydrated = hydrate_(bundle, project="mine", domain="dev", version="v2")
    assert (hydrated.launch_plan.id.project, hydrated.launch_plan.id.version) == ("mine", "v2")
    assert hydrated.launch_plan.spec.workflow_id.project == "p"
    assert hydrated.launch_plan.spec.workflow_id.version == "1"


def test_an_eager_workflow_is_refused_with_the_reason(remote: Serialized) -> None:
    with pytest.raises(SpecError) as err:
        read_bundle(remote.folder, workflow="eager_wf")
    assert "runs task 'loader_remote.eager_wf', an @eager workflow" in err.value.reason
    assert "Admin API" in err.value.reason


@pytest.mark.parametrize(
    ("workflow", "words"),
    [
        ("uses_task", "node 'n0' of workflow 'loader_remote.uses_task' runs task 'remote.t' (project 'p', "),
        (
            "uses_lp",
            "node 'n0' of workflow 'loader_remote.uses_lp' runs launch plan 'remote.lp' (project 'p', ",
        ),
    ],
)
def test_a_reference_entity_not_in_the_files_is_refused_naming_it(
    remote: Serialized, workflow: str, words: str
) -> None:
    with pytest.raises(SpecError) as err:
        read_bundle(remote.package, workflow=workflow)
    assert words in err.value.reason
    assert "version 'v1'" in err.value.reason and "registry" in err.value.reason


def test_a_task_whose_file_is_missing_is_refused_naming_it(demo: Serialized, tmp_path: Path) -> None:
    folder = shutil.copytree(demo.folder, tmp_path / "files")
    (next(folder.glob("*_loader_demo.add_1.pb"))).unlink()
    with pytest.raises(SpecError) as err:
        read_bundle(folder, workflow="wf")
    # add runs inside sub, which wf runs: the sub-workflow is named as where the reference is.
    assert "of workflow 'loader_demo.sub' runs task 'loader_demo.add', which is not in" in err.value.reason


def test_files_without_launch_plans_get_a_default_one_with_every_input_required(
    demo: Serialized, tmp_path: Path
) -> None:
    folder = shutil.copytree(demo.folder, tmp_path / "files")
    for plan in folder.glob("*_3.pb"):
        plan.unlink()
    bundle = read_bundle(folder, workflow="loader_demo.sub")
    assert bundle.launch_plan.id.name == "loader_demo.sub"
    assert bundle.launch_plan.id.resource_type == identifier_pb2.LAUNCH_PLAN
    assert {n: p.required for n, p in bundle.launch_plan.spec.default_inputs.parameters.items()} == {
        "a": True,
        "b": True,
    }


def test_a_folder_without_workflows_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as err:
        read_bundle(tmp_path, workflow=None)
    assert "holds no workflow written by pyflyte" in err.value.reason


def test_an_archive_over_the_bounds_is_refused_at_the_field_given(demo: Serialized, tmp_path: Path) -> None:
    archive = tmp_path / "p.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(demo.file("loader_demo.wf_2.pb"), arcname="0_wf_2.pb")
        info = tarfile.TarInfo("1_big_1.pb")
        info.size = MAX_ENTITY_BYTES + 1
        tar.addfile(info, io.BytesIO(bytes(info.size)))
    with pytest.raises(SpecError) as err:
        read_bundle(archive, workflow=None, field="SPEC")
    assert err.value.path == "SPEC"
    assert "member '1_big_1.pb' is larger than" in err.value.reason
