"""A node's data and output dirs come from its node path, by one function, as propeller lays them out."""

from __future__ import annotations

from pathlib import Path

import pytest
from flyteidl.core import identifier_pb2

from taskplug.executor import ExecutionPaths
from taskplug.executor._paths import node_dirs
from taskplug.executor.nodes._array_context import array_paths, element_parts

from .test_arraynode_executor import map_spec

EXECUTION = identifier_pb2.WorkflowExecutionIdentifier(project="p", domain="d", name="m1")


def test_a_top_level_node_has_its_attempt_under_its_data_dir(tmp_path: Path) -> None:
    base = f"{tmp_path}/metadata/p/d/m1"
    assert node_dirs(str(tmp_path), EXECUTION, "n0", (2,)) == (f"{base}/n0", f"{base}/n0/2")


def test_a_child_node_is_under_its_parents_dirs_by_segment_and_attempt(tmp_path: Path) -> None:
    base = f"{tmp_path}/metadata/p/d/m1/n0"
    assert node_dirs(str(tmp_path), EXECUTION, "n0/3", (1, 4)) == (f"{base}/3/4", f"{base}/1/3/4")
    with pytest.raises(ValueError, match="n0/3"):
        node_dirs(str(tmp_path), EXECUTION, "n0/3", (1,))


def test_map_element_and_single_task_paths_are_those_flytekit_reads(tmp_path: Path) -> None:
    spec = map_spec([1, 2, 3, 4])
    base = f"{tmp_path}/metadata/p/d/m1/n0"
    assert array_paths(spec, str(tmp_path)) == (base, f"{base}/0")
    element = element_parts(spec, str(tmp_path), 3, attempt=2)
    assert (element.output_prefix, element.task_reader.path) == (f"{base}/0/3/2", f"{base}/3/2/task.pb")
    single = ExecutionPaths.for_attempt(str(tmp_path), spec.for_attempt(1).metadata)
    assert (single.input_path, single.outputs_path) == (f"{base}/inputs.pb", f"{base}/1/outputs.pb")
