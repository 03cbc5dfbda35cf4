"""Reading an ArrayNode out of what flytekit writes: ``pyflyte serialize`` files or a ``pyflyte package``
archive.

``pyflyte --pkgs P serialize workflows -f DIR`` writes one file per entity: admin ``TaskSpec``s
(``0_<task>_1.pb``), the workflow's admin ``WorkflowSpec`` (``<n>_<wf>_2.pb``) and its ``LaunchPlan``
(``<n>_<wf>_3.pb``); ``pyflyte package`` puts the same files into a ``.tgz``. An execution spec whose
``templateFile`` is that workflow (or that archive) runs the workflow's ArrayNode: the map task's template
is found among the files beside it, the node's bindings are resolved against the workflow's inputs (the
spec's ``inputs``, completed with the launch plan's defaults), and the node's ``parallelism``,
``min_successes`` / ``min_success_ratio``, ``bound_inputs`` and sub-node metadata (retries, timeout,
interruptible, task-node overrides) describe the map. This is what FlyteAdmin's compiler and propeller's
``preExecute`` do for the node (flytepropeller/pkg/compiler, nodes/executor.go), for the one node.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import tarfile
import zlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final

from flyteidl.admin import launch_plan_pb2, task_pb2, workflow_pb2
from flyteidl.core import identifier_pb2, literals_pb2, tasks_pb2
from flyteidl.core import workflow_pb2 as core_workflow_pb2
from google.protobuf.message import DecodeError

from taskplug.core import MAX_DOCUMENT_BYTES, SpecError, literal_map_from_plain

__all__ = [
    "MAX_ARCHIVE_MEMBERS",
    "MAX_ENTITY_BYTES",
    "MAX_WORKFLOW_BYTES",
    "WorkflowArrayNode",
    "is_archive",
    "read_workflow_array_node",
]

MAX_ENTITY_BYTES: Final = MAX_DOCUMENT_BYTES
"""Largest serialized entity (a ``.pb`` file or archive member) read: the bound of any document. flyteadmin
keeps task and workflow closures far smaller (gRPC's default message limit is 4 MiB)."""
MAX_WORKFLOW_BYTES: Final = 16 * MAX_DOCUMENT_BYTES
"""Most bytes a workflow's files may hold together (the ``.pb`` files beside it, or every member of its
archive, read or passed over): 64 MiB, where a ``pyflyte package`` of a project is kilobytes."""
MAX_ARCHIVE_MEMBERS: Final = 10_000
"""Most members an archive may have (pyflyte writes a few per task and workflow)."""

_START_NODE = "start-node"


@dataclass(frozen=True)
class WorkflowArrayNode:
    """The ArrayNode chosen in a serialized workflow, and everything needed to run it."""

    workflow: core_workflow_pb2.WorkflowTemplate
    node: core_workflow_pb2.Node
    task: tasks_pb2.TaskTemplate
    defaults: Mapping[str, literals_pb2.Literal]

    @property
    def array(self) -> core_workflow_pb2.ArrayNode:
        return self.node.array_node

    @property
    def sub_node(self) -> core_workflow_pb2.Node:
        return self.node.array_node.node

    def node_inputs(self, raw_inputs: Mapping[str, Any]) -> literals_pb2.LiteralMap:
        """The ArrayNode's inputs (``inputs.pb``, full lists): its bindings resolved against the workflow's
        inputs, which the spec gives as ``inputs`` (typed by the workflow's interface)."""
        interface = self.workflow.interface.inputs if self.workflow.HasField("interface") else None
        given = literal_map_from_plain(raw_inputs, interface, "inputs")
        workflow_inputs = dict(self.defaults)
        workflow_inputs.update(given.literals)
        out = literals_pb2.LiteralMap()
        for binding in self.node.inputs:
            out.literals[binding.var].CopyFrom(
                _resolve(binding.binding, workflow_inputs, f"inputs.{binding.var}", self.node.id)
            )
        return out


def is_archive(path: Path) -> bool:
    """Whether ``path`` is named as a tar archive or is one. ``tarfile.is_tarfile`` alone says yes to a file
    of zeros (an empty archive: its end-of-archive blocks); an archive here must hold a member."""
    name = path.name.lower()
    if name.endswith((".tgz", ".tar.gz", ".tar")):
        return True
    if not path.is_file():
        return False
    try:
        with _open_archive(path) as archive:
            return archive.next() is not None
    except (OSError, tarfile.TarError, EOFError, zlib.error, lzma.LZMAError, SpecError):
        return False


def read_workflow_array_node(
    path: Path, data: bytes | None, *, node_id: str | None, workflow_name: str | None
) -> WorkflowArrayNode | None:
    """The ArrayNode of the workflow at ``path`` (a ``WorkflowSpec`` file, whose bytes are ``data``, or a
    ``pyflyte package`` archive); None when ``path`` is neither (then it is a task template file)."""
    if data is None or is_archive(path):
        entries = _archive_entries(path)
        workflows = [w for w in (_as_workflow(d) for d in entries) if w is not None]
        if not workflows:
            raise SpecError("templateFile", f"{str(path)!r} holds no workflow written by pyflyte")
        workflow = _choose_workflow(workflows, workflow_name, path)
    else:
        found = _as_workflow(data)
        if found is None:
            return None
        workflow = found
        if workflow_name and workflow.template.id.name != workflow_name:
            raise SpecError(
                "workflow", f"{str(path)!r} is workflow {workflow.template.id.name!r}, not {workflow_name!r}"
            )
        entries = _sibling_entries(path)
    template = workflow.template
    node = _choose_node(template, node_id)
    sub_node = node.array_node.node
    if sub_node.WhichOneof("target") != "task_node" or not sub_node.task_node.HasField("reference_id"):
        raise SpecError(
            "node",
            f"array node {node.id!r} maps a {sub_node.WhichOneof('target') or 'missing'} sub-node; "
            "taskplug runs array nodes over tasks only",
        )
    task = _find_task(entries, sub_node.task_node.reference_id, path)
    return WorkflowArrayNode(template, node, task, _launch_plan_defaults(entries, template.id))


# -- reading the files -----------------------------------------------------------------------------------


class _BoundedStream(io.RawIOBase):
    """A decompressed archive read through a bound: past ``limit`` bytes the read is refused, naming the
    archive, so that a member's or a header's declared size (a pax or GNU long-name header is read whole
    into memory by tarfile) cannot make a few compressed kilobytes unpack to gigabytes."""

    def __init__(self, inner: IO[bytes] | io.BufferedIOBase, limit: int, path: Path) -> None:
        self._inner, self._left, self._path = inner, limit, path

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = self._inner.read(min(len(view), self._left + 1))
        if len(data) > self._left:
            raise SpecError(
                "templateFile", f"archive {str(self._path)!r} unpacks to more than {MAX_WORKFLOW_BYTES} bytes"
            )
        self._left -= len(data)
        view[: len(data)] = data
        return len(data)


def _decompressed(raw: IO[bytes]) -> IO[bytes] | gzip.GzipFile | bz2.BZ2File | lzma.LZMAFile:
    head = raw.read(6)
    raw.seek(0)
    if head.startswith(b"\x1f\x8b"):
        return gzip.GzipFile(fileobj=raw)
    if head.startswith(b"BZh"):
        return bz2.BZ2File(raw)
    if head.startswith(b"\xfd7zXZ\x00"):
        return lzma.LZMAFile(raw)
    return raw


@contextmanager
def _open_archive(path: Path) -> Iterator[tarfile.TarFile]:
    """The archive at ``path``, unpacked through :class:`_BoundedStream` and read in stream mode (front to
    back once, never seeking back over what was unpacked)."""
    with path.open("rb") as raw, _decompressed(raw) as unpacked:
        bounded = io.BufferedReader(_BoundedStream(unpacked, MAX_WORKFLOW_BYTES, path))
        with tarfile.open(fileobj=bounded, mode="r|") as archive:
            yield archive


def _archive_entries(path: Path) -> list[bytes]:
    """The ``.pb`` members of a ``pyflyte package`` archive (tar, gzip / bzip2 / xz compressed or not),
    each at most :data:`MAX_ENTITY_BYTES`, everything unpacked (headers and every member's data, read or
    passed over) at most :data:`MAX_WORKFLOW_BYTES`: a tar bomb is refused naming the archive, and the member
    when its header says it is too large, before its data is read."""
    out: list[bytes] = []
    total = members = 0
    try:
        with _open_archive(path) as archive:
            while (member := archive.next()) is not None:
                members += 1
                if members > MAX_ARCHIVE_MEMBERS:
                    raise SpecError(
                        "templateFile",
                        f"archive {str(path)!r} holds more than {MAX_ARCHIVE_MEMBERS} members",
                    )
                wanted = member.isfile() and member.name.endswith(".pb")
                if wanted and member.size > MAX_ENTITY_BYTES:
                    raise SpecError(
                        "templateFile",
                        f"archive {str(path)!r}: member {member.name!r} is larger than {MAX_ENTITY_BYTES} "
                        "bytes (not a file pyflyte writes)",
                    )
                total += member.size
                if total > MAX_WORKFLOW_BYTES:
                    raise SpecError(
                        "templateFile",
                        f"archive {str(path)!r} unpacks to more than {MAX_WORKFLOW_BYTES} bytes "
                        f"(at member {member.name!r})",
                    )
                handle = archive.extractfile(member) if wanted else None
                if handle is not None:
                    out.append(handle.read(member.size))
        return out
    except (OSError, tarfile.TarError, EOFError, zlib.error, lzma.LZMAError) as e:
        raise SpecError("templateFile", f"cannot read archive {str(path)!r}: {e}") from e


def _sibling_entries(path: Path) -> list[bytes]:
    """The ``.pb`` files beside a serialized workflow, each at most :data:`MAX_ENTITY_BYTES`, all of them at
    most :data:`MAX_WORKFLOW_BYTES`; one over the bound is refused naming it."""
    out: list[bytes] = []
    total = 0
    for sibling in sorted(path.parent.glob("*.pb")):
        try:
            with sibling.open("rb") as f:
                data = f.read(MAX_ENTITY_BYTES + 1)
        except OSError:
            continue  # a directory named *.pb, a file we may not read: not one of pyflyte's
        if len(data) > MAX_ENTITY_BYTES:
            raise SpecError(
                "templateFile",
                f"{str(sibling)!r} (beside {path.name!r}) is larger than {MAX_ENTITY_BYTES} bytes "
                "(not a file pyflyte writes)",
            )
        total += len(data)
        if total > MAX_WORKFLOW_BYTES:
            raise SpecError(
                "templateFile",
                f"the .pb files beside {str(path)!r} hold more than {MAX_WORKFLOW_BYTES} bytes "
                f"(at {sibling.name!r})",
            )
        out.append(data)
    return out


def _as_workflow(data: bytes) -> workflow_pb2.WorkflowSpec | None:
    spec = workflow_pb2.WorkflowSpec()
    try:
        spec.ParseFromString(data)
    except DecodeError:
        return None
    template = spec.template
    if template.id.resource_type != identifier_pb2.WORKFLOW or not template.nodes:
        return None
    return spec


def _as_task(data: bytes) -> tasks_pb2.TaskTemplate | None:
    spec = task_pb2.TaskSpec()
    try:
        spec.ParseFromString(data)
    except DecodeError:
        spec = None
    if spec is not None and spec.template.type and spec.template.id.resource_type == identifier_pb2.TASK:
        return spec.template
    template = tasks_pb2.TaskTemplate()
    try:
        template.ParseFromString(data)
    except DecodeError:
        return None
    if template.type and template.id.resource_type == identifier_pb2.TASK:
        return template
    return None


def _array_nodes(template: core_workflow_pb2.WorkflowTemplate) -> list[core_workflow_pb2.Node]:
    return [n for n in template.nodes if n.WhichOneof("target") == "array_node"]


def _choose_workflow(
    workflows: list[workflow_pb2.WorkflowSpec], name: str | None, path: Path
) -> workflow_pb2.WorkflowSpec:
    if name:
        for workflow in workflows:
            if workflow.template.id.name == name:
                return workflow
        names = sorted(w.template.id.name for w in workflows)
        raise SpecError("workflow", f"{str(path)!r} has no workflow {name!r} (it has {names})")
    with_arrays = [w for w in workflows if _array_nodes(w.template)]
    if len(with_arrays) == 1:
        return with_arrays[0]
    if not with_arrays:
        raise SpecError("templateFile", f"no workflow in {str(path)!r} has an array node (a map_task)")
    names = sorted(w.template.id.name for w in with_arrays)
    raise SpecError("workflow", f"{str(path)!r} has several workflows with array nodes {names}: name one")


def _choose_node(template: core_workflow_pb2.WorkflowTemplate, node_id: str | None) -> core_workflow_pb2.Node:
    arrays = _array_nodes(template)
    if node_id:
        for node in template.nodes:
            if node.id == node_id:
                if node.WhichOneof("target") != "array_node":
                    raise SpecError("node", f"node {node_id!r} of {template.id.name!r} is not an array node")
                return node
        raise SpecError(
            "node",
            f"workflow {template.id.name!r} has no node {node_id!r} (array nodes: {[n.id for n in arrays]})",
        )
    if len(arrays) == 1:
        return arrays[0]
    if not arrays:
        raise SpecError("templateFile", f"workflow {template.id.name!r} has no array node (a map_task)")
    raise SpecError(
        "node",
        f"workflow {template.id.name!r} has {len(arrays)} array nodes {[n.id for n in arrays]}: name one",
    )


def _same_task(a: identifier_pb2.Identifier, b: identifier_pb2.Identifier) -> bool:
    return (a.name, a.version, a.project, a.domain) == (b.name, b.version, b.project, b.domain)


def _find_task(
    entries: list[bytes], reference: identifier_pb2.Identifier, path: Path
) -> tasks_pb2.TaskTemplate:
    for data in entries:
        task = _as_task(data)
        if task is not None and _same_task(task.id, reference):
            return task
    raise SpecError(
        "templateFile",
        f"the map task {reference.name!r} (version {reference.version!r}) is not among the files beside "
        f"{str(path)!r}: serialize the workflow's tasks with it (pyflyte serialize / package)",
    )


def _launch_plan_defaults(
    entries: list[bytes], workflow_id: identifier_pb2.Identifier
) -> dict[str, literals_pb2.Literal]:
    for data in entries:
        plan = launch_plan_pb2.LaunchPlan()
        try:
            plan.ParseFromString(data)
        except DecodeError:
            continue
        if plan.id.resource_type != identifier_pb2.LAUNCH_PLAN:
            continue
        if not _same_task(plan.spec.workflow_id, workflow_id):
            continue
        out = {}
        for name, parameter in plan.spec.default_inputs.parameters.items():
            if parameter.HasField("default"):
                out[name] = parameter.default
        return out
    return {}


# -- bindings --------------------------------------------------------------------------------------------


def _resolve(
    binding: literals_pb2.BindingData,
    workflow_inputs: Mapping[str, literals_pb2.Literal],
    path: str,
    node_id: str,
) -> literals_pb2.Literal:
    kind = binding.WhichOneof("value")
    if kind == "scalar":
        return literals_pb2.Literal(scalar=binding.scalar)
    if kind == "collection":
        return literals_pb2.Literal(
            collection=literals_pb2.LiteralCollection(
                literals=[
                    _resolve(item, workflow_inputs, f"{path}[{i}]", node_id)
                    for i, item in enumerate(binding.collection.bindings)
                ]
            )
        )
    if kind == "map":
        return literals_pb2.Literal(
            map=literals_pb2.LiteralMap(
                literals={
                    key: _resolve(item, workflow_inputs, f"{path}.{key}", node_id)
                    for key, item in binding.map.bindings.items()
                }
            )
        )
    if kind == "promise":
        promise = binding.promise
        if promise.node_id not in ("", _START_NODE):
            raise SpecError(
                path,
                f"node {node_id!r} takes this input from node {promise.node_id!r}'s output {promise.var!r}; "
                "taskplug runs one array node, whose inputs must be workflow inputs or constants",
            )
        if promise.attr_path:
            raise SpecError(path, "bindings to an attribute of a workflow input are not supported")
        literal = workflow_inputs.get(promise.var)
        if literal is None:
            raise SpecError(f"inputs.{promise.var}", "the workflow needs this input and none was given")
        return literal
    raise SpecError(path, f"a binding of kind {kind!r} is not supported")
