"""Reading what flytekit writes for registration, within bounds: ``pyflyte serialize`` files and ``pyflyte
package`` archives.

``pyflyte --pkgs P serialize workflows -f DIR`` writes one file per entity (flytekit's
``tools/serialize_helpers.py persist_registrable_entities``): ``<i>_<name>_1.pb`` an admin ``TaskSpec``,
``<i>_<name>_2.pb`` an admin ``WorkflowSpec``, ``<i>_<name>_3.pb`` an admin ``LaunchPlan`` (every workflow
gets its default launch plan, named as the workflow). ``pyflyte package`` (``tools/repo.py package``) puts
the same files, flat, into a gzip tar. :func:`read_entities` reads either (or a folder of such files, or the
files beside one of them) into :class:`SerializedEntities`, recognising each entity by the resource type of
its identifier rather than by its file name (a renamed file still reads).

Everything read is bounded: an entity at most :data:`MAX_ENTITY_BYTES`, all of them (and for an archive every
byte unpacked, headers and skipped members included) at most :data:`MAX_WORKFLOW_BYTES`, an archive at most
:data:`MAX_ARCHIVE_MEMBERS` members. A tar bomb is refused naming the archive (and the member, when its header
already says it is too large).
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import tarfile
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final

from flyteidl.admin import launch_plan_pb2, task_pb2, workflow_pb2
from flyteidl.core import identifier_pb2, tasks_pb2
from google.protobuf.message import DecodeError

from taskplug.core import MAX_DOCUMENT_BYTES, SpecError

__all__ = [
    "MAX_ARCHIVE_MEMBERS",
    "MAX_ENTITY_BYTES",
    "MAX_WORKFLOW_BYTES",
    "SerializedEntities",
    "as_launch_plan",
    "as_task",
    "as_workflow_spec",
    "entities_of",
    "is_archive",
    "read_entities",
]

MAX_ENTITY_BYTES: Final = MAX_DOCUMENT_BYTES
"""Largest serialized entity (a ``.pb`` file or archive member) read: the bound of any document. flyteadmin
keeps task and workflow closures far smaller (gRPC's default message limit is 4 MiB)."""
MAX_WORKFLOW_BYTES: Final = 16 * MAX_DOCUMENT_BYTES
"""Most bytes a workflow's files may hold together (the ``.pb`` files beside it, or every member of its
archive, read or passed over): 64 MiB, where a ``pyflyte package`` of a project is kilobytes."""
MAX_ARCHIVE_MEMBERS: Final = 10_000
"""Most members an archive may have (pyflyte writes a few per task and workflow)."""


@dataclass(frozen=True, slots=True)
class SerializedEntities:
    """The entities found in files flytekit wrote, in the order read (file name order for files)."""

    workflows: tuple[workflow_pb2.WorkflowSpec, ...]
    tasks: tuple[tasks_pb2.TaskTemplate, ...]
    launch_plans: tuple[launch_plan_pb2.LaunchPlan, ...]
    source: str
    """Where they were read from, for messages."""


def read_entities(path: Path, *, field: str = "templateFile") -> SerializedEntities:
    """Every task, workflow and launch plan in ``path``: a ``pyflyte package`` archive, a folder of
    ``pyflyte serialize`` files, or one such file (then the ``.pb`` files beside it are read too, as flytekit
    writes an entity's dependencies beside it). Errors are :class:`SpecError` at ``field``."""
    if path.is_dir():
        blobs = _folder_entries(path, path, field)
    elif is_archive(path):
        blobs = _archive_entries(path, field)
    elif path.is_file():
        blobs = _folder_entries(path.parent, path, field)
    else:
        raise SpecError(field, f"no such file or folder: {str(path)!r}")
    return entities_of(blobs, str(path))


def entities_of(blobs: Iterable[bytes], source: str) -> SerializedEntities:
    """The entities among serialized messages; what is none of the three is passed over (pyflyte writes
    nothing else, but a folder may hold other ``.pb`` files)."""
    workflows: list[workflow_pb2.WorkflowSpec] = []
    tasks: list[tasks_pb2.TaskTemplate] = []
    plans: list[launch_plan_pb2.LaunchPlan] = []
    for data in blobs:
        if (workflow := as_workflow_spec(data)) is not None:
            workflows.append(workflow)
        elif (task := as_task(data)) is not None:
            tasks.append(task)
        elif (plan := as_launch_plan(data)) is not None:
            plans.append(plan)
    return SerializedEntities(tuple(workflows), tuple(tasks), tuple(plans), source)


# -- recognising an entity -----------------------------------------------------------------------------------


def as_workflow_spec(data: bytes) -> workflow_pb2.WorkflowSpec | None:
    """``data`` as an admin ``WorkflowSpec`` (its template's id says WORKFLOW), else None. A task spec parses
    as one too (both hold a template whose first field is its id): the resource type tells them apart."""
    spec = workflow_pb2.WorkflowSpec()
    try:
        spec.ParseFromString(data)
    except DecodeError:
        return None
    if spec.template.id.resource_type != identifier_pb2.WORKFLOW or not spec.template.id.name:
        return None
    return spec


def as_task(data: bytes) -> tasks_pb2.TaskTemplate | None:
    """``data`` as a task template: an admin ``TaskSpec``'s (what pyflyte writes) or a bare ``TaskTemplate``
    (what a YAML spec's ``templateFile`` may name); else None."""
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


def as_launch_plan(data: bytes) -> launch_plan_pb2.LaunchPlan | None:
    """``data`` as an admin ``LaunchPlan`` (its id says LAUNCH_PLAN, its workflow id WORKFLOW), else None."""
    plan = launch_plan_pb2.LaunchPlan()
    try:
        plan.ParseFromString(data)
    except DecodeError:
        return None
    if plan.id.resource_type != identifier_pb2.LAUNCH_PLAN or not plan.id.name:
        return None
    if plan.spec.workflow_id.resource_type != identifier_pb2.WORKFLOW:
        return None
    return plan


# -- archives --------------------------------------------------------------------------------------------------


def is_archive(path: Path) -> bool:
    """Whether ``path`` is named as a tar archive or is one. ``tarfile.is_tarfile`` alone says yes to a file
    of zeros (an empty archive: its end-of-archive blocks); an archive here must hold a member."""
    name = path.name.lower()
    if name.endswith((".tgz", ".tar.gz", ".tar")):
        return True
    if not path.is_file():
        return False
    try:
        with _open_archive(path, "templateFile") as archive:
            return archive.next() is not None
    except (OSError, tarfile.TarError, EOFError, zlib.error, lzma.LZMAError, SpecError):
        return False


class _BoundedStream(io.RawIOBase):
    """A decompressed archive read through a bound: past ``limit`` bytes the read is refused, naming the
    archive, so that a member's or a header's declared size (a pax or GNU long-name header is read whole
    into memory by tarfile) cannot make a few compressed kilobytes unpack to gigabytes."""

    def __init__(self, inner: IO[bytes] | io.BufferedIOBase, limit: int, path: Path, field: str) -> None:
        self._inner, self._left, self._limit, self._path, self._field = inner, limit, limit, path, field

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = self._inner.read(min(len(view), self._left + 1))
        if len(data) > self._left:
            raise SpecError(
                self._field, f"archive {str(self._path)!r} unpacks to more than {self._limit} bytes"
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
def _open_archive(path: Path, field: str) -> Iterator[tarfile.TarFile]:
    """The archive at ``path``, unpacked through :class:`_BoundedStream` and read in stream mode (front to
    back once, never seeking back over what was unpacked)."""
    with path.open("rb") as raw, _decompressed(raw) as unpacked:
        bounded = io.BufferedReader(_BoundedStream(unpacked, MAX_WORKFLOW_BYTES, path, field))
        with tarfile.open(fileobj=bounded, mode="r|") as archive:
            yield archive


def _archive_entries(path: Path, field: str) -> list[bytes]:
    """The ``.pb`` members of a ``pyflyte package`` archive (tar, gzip / bzip2 / xz compressed or not)."""
    out: list[bytes] = []
    total = members = 0
    try:
        with _open_archive(path, field) as archive:
            while (member := archive.next()) is not None:
                members += 1
                if members > MAX_ARCHIVE_MEMBERS:
                    raise SpecError(
                        field, f"archive {str(path)!r} holds more than {MAX_ARCHIVE_MEMBERS} members"
                    )
                wanted = member.isfile() and member.name.endswith(".pb")
                if wanted and member.size > MAX_ENTITY_BYTES:
                    raise SpecError(
                        field,
                        f"archive {str(path)!r}: member {member.name!r} is larger than {MAX_ENTITY_BYTES} "
                        "bytes (not a file pyflyte writes)",
                    )
                total += member.size
                if total > MAX_WORKFLOW_BYTES:
                    raise SpecError(
                        field,
                        f"archive {str(path)!r} unpacks to more than {MAX_WORKFLOW_BYTES} bytes "
                        f"(at member {member.name!r})",
                    )
                handle = archive.extractfile(member) if wanted else None
                if handle is not None:
                    out.append(handle.read(member.size))
        return out
    except (OSError, tarfile.TarError, EOFError, zlib.error, lzma.LZMAError) as e:
        raise SpecError(field, f"cannot read archive {str(path)!r}: {e}") from e


def _folder_entries(folder: Path, given: Path, field: str) -> list[bytes]:
    """The ``.pb`` files in ``folder`` (which holds ``given``, or is it), in name order."""
    out: list[bytes] = []
    total = 0
    where = f"in {str(folder)!r}" if given == folder else f"beside {given.name!r}"
    for entry in sorted(folder.glob("*.pb")):
        try:
            with entry.open("rb") as f:
                data = f.read(MAX_ENTITY_BYTES + 1)
        except OSError:
            continue  # a directory named *.pb, a file we may not read: not one of pyflyte's
        if len(data) > MAX_ENTITY_BYTES:
            raise SpecError(
                field,
                f"{str(entry)!r} ({where}) is larger than {MAX_ENTITY_BYTES} bytes (not a file pyflyte writes)",
            )
        total += len(data)
        if total > MAX_WORKFLOW_BYTES:
            raise SpecError(
                field, f"the .pb files {where} hold more than {MAX_WORKFLOW_BYTES} bytes (at {entry.name!r})"
            )
        out.append(data)
    return out
