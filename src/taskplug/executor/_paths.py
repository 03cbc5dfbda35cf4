"""Where an execution's inputs, outputs, raw data and checkpoints live in the data store.

Follows the layout flytepropeller gives a node execution (metadata prefix per node and attempt, raw output
data prefix per attempt, checkpoints under the raw prefix). The data store is any fsspec URL; the default is
a local folder, which local processes and the embedded cluster read directly.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from flyteidl.core import identifier_pb2

from taskplug.core import TaskExecutionMetadata

__all__ = ["ExecutionPaths", "node_dirs", "normalize_root"]


@functools.lru_cache(maxsize=64)
def normalize_root(root: str) -> str:
    """A data root as a URL-ish prefix: local paths become absolute, URLs are kept as they are."""
    if "://" in root:
        return root.rstrip("/")
    return str(Path(root).expanduser().resolve())


def node_dirs(
    root: str,
    execution: identifier_pb2.WorkflowExecutionIdentifier,
    path: str,
    attempts: Sequence[int],
) -> tuple[str, str]:
    """A node's data dir (its inputs, its children's data) and output dir (its outputs and error document) for
    the node at ``path`` (``n0``, ``n0/3``) of ``execution``, ``attempts`` giving the attempt of each of the
    path's nodes from the root down.

    As propeller lays them out: a top-level node's data dir is ``<root>/metadata/<project>/<domain>/<name>/
    <node id>`` and its output dir that plus ``/<attempt>``; a child's (array/handler.go
    ``constructOutputReferences``) are its parent's data dir and output dir each followed by
    ``/<segment>/<attempt>``."""
    segments = path.split("/")
    if len(segments) != len(attempts):
        raise ValueError(f"node path {path!r} has {len(segments)} segment(s) but {len(attempts)} attempt(s)")
    data_dir = f"{normalize_root(root)}/metadata/{execution.project}/{execution.domain}/{execution.name}"
    data_dir = f"{data_dir}/{segments[0]}"
    output_dir = f"{data_dir}/{attempts[0]}"
    for segment, attempt in zip(segments[1:], attempts[1:], strict=True):
        data_dir = f"{data_dir}/{segment}/{attempt}"
        output_dir = f"{output_dir}/{segment}/{attempt}"
    return data_dir, output_dir


@dataclass(frozen=True, slots=True)
class ExecutionPaths:
    """The data-store locations of one attempt (:meth:`for_attempt`): inputs, outputs and the error document
    under the node's metadata prefix, raw data and checkpoints under the attempt's raw prefix."""

    input_prefix: str
    output_prefix: str
    raw_output_prefix: str
    checkpoint_prefix: str
    prev_checkpoint_prefix: str

    @property
    def input_path(self) -> str:
        return f"{self.input_prefix}/inputs.pb"

    @property
    def outputs_path(self) -> str:
        return f"{self.output_prefix}/outputs.pb"

    @property
    def error_path(self) -> str:
        return f"{self.output_prefix}/error.pb"

    @classmethod
    def for_attempt(cls, root: str, meta: TaskExecutionMetadata) -> ExecutionPaths:
        tid = meta.task_execution_id.id
        execution = tid.node_execution_id.execution_id
        node = tid.node_execution_id.node_id or "n0"
        attempt = tid.retry_attempt
        base, output = node_dirs(root, execution, node, (attempt,))
        raw = f"{normalize_root(root)}/raw/{meta.task_execution_id.generated_name}"
        prev = ""
        if attempt > 0:
            # The previous attempt's raw prefix: the generated name ends with the attempt number.
            previous_name = meta.task_execution_id.generated_name.rsplit("-", 1)[0] + f"-{attempt - 1}"
            prev = f"{normalize_root(root)}/raw/{previous_name}/_flytecheckpoints"
        return cls(
            input_prefix=base,
            output_prefix=output,
            raw_output_prefix=raw,
            checkpoint_prefix=f"{raw}/_flytecheckpoints",
            prev_checkpoint_prefix=prev,
        )
