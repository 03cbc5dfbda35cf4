"""The documents a map task reads and writes under its output prefix, and the assembly of its outputs.

Follows flyteplugins/go/tasks/plugins/array/outputs.go (the output worker), subtask_phase.go
(``CheckTaskOutput``) and pluginmachinery/ioutils (remote-file output reader and writer).

Every sub-task writes under the map task's output prefix, at its original index (flytekit's legacy
``MapTaskResolver`` appends the index): ``{prefix}/{i}/outputs.pb`` (a LiteralMap) or ``{prefix}/{i}/error.pb``
(an ErrorDocument). The map task's own ``outputs.pb`` holds one list per output variable, in index order,
with a ``none`` literal for every sub-task that did not succeed; its ``error.pb`` the error summary.

The data store is any fsspec URL, like the executor's: local paths are read directly (small files), other
file systems in a worker thread, at most ``workers`` at once. fsspec is imported on first use, so that plugin
discovery stays cheap.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from flyteidl.core import errors_pb2, execution_pb2, literals_pb2
from google.protobuf.message import DecodeError

from taskplug.core import ErrorKind, ExecutionError, Phase

__all__ = [
    "ArrayDataStore",
    "assemble_outputs",
    "none_literal",
    "subtask_path",
]


def subtask_path(output_prefix: str, index: int, name: str) -> str:
    """``{prefix}/{index}/{name}``: where sub-task ``index`` writes ``outputs.pb`` or ``error.pb``."""
    return f"{output_prefix.rstrip('/')}/{index}/{name}"


def none_literal() -> literals_pb2.Literal:
    """Flyte's ``nilLiteral``: a scalar ``none``, standing in for a sub-task without outputs."""
    literal = literals_pb2.Literal()
    literal.scalar.none_type.SetInParent()
    return literal


def assemble_outputs(
    var_names: Sequence[str], outputs: Sequence[literals_pb2.LiteralMap | None]
) -> literals_pb2.LiteralMap:
    """The map task's outputs (Flyte's output worker): one collection per output variable, element ``i``
    from sub-task ``i``'s outputs, or ``none`` when it has none (failed, or wrote nothing).

    Deviation: every list gets exactly one element per sub-task. Flyte appends each literal of a sub-task's
    map under its own key, so a sub-task whose outputs lack a variable shifts that variable's list.
    """
    final = literals_pb2.LiteralMap()
    for name in var_names:
        final.literals[name].collection.SetInParent()
    for sub in outputs:
        for name in var_names:
            element = final.literals[name].collection.literals.add()
            if sub is not None and name in sub.literals:
                element.CopyFrom(sub.literals[name])
            else:
                element.CopyFrom(none_literal())
    return final


def error_document(err: ExecutionError, *, recoverable: bool) -> errors_pb2.ErrorDocument:
    """What a remote-file output writer writes for an error (ioutils.RemoteFileOutputWriter.Put)."""
    origin = (
        execution_pb2.ExecutionError.SYSTEM
        if err.kind is ErrorKind.SYSTEM
        else execution_pb2.ExecutionError.USER
    )
    kind = errors_pb2.ContainerError.RECOVERABLE if recoverable else errors_pb2.ContainerError.NON_RECOVERABLE
    return errors_pb2.ErrorDocument(
        error=errors_pb2.ContainerError(code=err.code, message=err.message, kind=kind, origin=origin)
    )


class ArrayDataStore:
    """Reads and writes the map task's documents (see the module docstring)."""

    def __init__(self) -> None:
        self._fs_cache: dict[str, Any] = {}

    # -- bytes ------------------------------------------------------------------------------------------
    @staticmethod
    def _is_local(path: str) -> bool:
        return "://" not in path or path.startswith("file://")

    @staticmethod
    def _local(path: str) -> Path:
        return Path(path.removeprefix("file://"))

    def _fs(self, path: str) -> Any:
        import fsspec  # here, not at the top: discovery imports this module

        protocol = path.split("://", 1)[0]
        fs = self._fs_cache.get(protocol)
        if fs is None:
            fs = self._fs_cache[protocol] = fsspec.filesystem(protocol)
        return fs

    def _read_remote(self, path: str) -> bytes | None:
        try:
            with self._fs(path).open(path, "rb") as f:
                data: bytes = f.read()
                return data
        except FileNotFoundError:
            return None

    def _write_remote(self, path: str, data: bytes) -> None:
        fs = self._fs(path)
        fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        with fs.open(path, "wb") as f:
            f.write(data)

    async def read(self, path: str) -> bytes | None:
        if self._is_local(path):
            try:
                return self._local(path).read_bytes()
            except FileNotFoundError:
                return None
        import asyncio  # here, not at the top: discovery (every command) imports this module

        return await asyncio.to_thread(self._read_remote, path)

    async def write(self, path: str, data: bytes) -> None:
        if self._is_local(path):
            target = self._local(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            return
        import asyncio  # here, not at the top: discovery (every command) imports this module

        await asyncio.to_thread(self._write_remote, path, data)

    async def exists(self, path: str) -> bool:
        if self._is_local(path):
            return self._local(path).exists()
        import asyncio  # here, not at the top: discovery (every command) imports this module

        return bool(await asyncio.to_thread(self._fs(path).exists, path))

    async def read_many(self, paths: Sequence[str], *, workers: int = 10) -> list[bytes | None]:
        """Every path's bytes (None where missing), in order, at most ``workers`` reads at once."""
        import asyncio  # here, not at the top: discovery (every command) imports this module

        limit = asyncio.Semaphore(max(1, workers))

        async def one(path: str) -> bytes | None:
            async with limit:
                return await self.read(path)

        return list(await asyncio.gather(*(one(p) for p in paths)))

    # -- documents --------------------------------------------------------------------------------------
    @staticmethod
    def parse_outputs(path: str, data: bytes | None) -> literals_pb2.LiteralMap | None:
        """A sub-task's ``outputs.pb``; None when missing; bad bytes raise ValueError."""
        if data is None:
            return None
        try:
            return literals_pb2.LiteralMap.FromString(data)
        except DecodeError as e:
            raise ValueError(f"{path} is not a flyteidl LiteralMap: {e}") from e

    @staticmethod
    def parse_error(data: bytes | None) -> tuple[ExecutionError, bool] | None:
        """An ``error.pb`` as the error and whether it is recoverable (ioutils.RemoteFileOutputReader)."""
        if data is None:
            return None
        try:
            document = errors_pb2.ErrorDocument.FromString(data)
        except DecodeError:
            return None
        kind = (
            ErrorKind.SYSTEM
            if document.error.origin == execution_pb2.ExecutionError.SYSTEM
            else ErrorKind.USER
        )
        recoverable = document.error.kind != errors_pb2.ContainerError.NON_RECOVERABLE
        return ExecutionError(document.error.code, document.error.message, kind), recoverable

    async def read_error(self, path: str) -> tuple[ExecutionError, bool] | None:
        return self.parse_error(await self.read(path))

    async def write_error(self, path: str, err: ExecutionError, *, recoverable: bool) -> None:
        await self.write(path, error_document(err, recoverable=recoverable).SerializeToString())

    async def check_task_output(self, output_prefix: str, index: int) -> Phase | None:
        """Flyte's ``CheckTaskOutput`` for a sub-task whose pod succeeded: None when it wrote outputs (or
        nothing at all); when it wrote only an ``error.pb`` (flytekit writes one and exits 0 when the user's
        code raises), the failure phase: retryable, or permanent when the document says the error is not
        recoverable.

        Deviation: a sub-task that wrote only a non-recoverable error document fails permanently. Flyte
        marks it retryable whatever the document says, so a sub-task whose code raised a non-recoverable
        error is run again until its attempts are spent; Flyte's task handler honours the document's kind
        for every other task.
        """
        if await self.exists(subtask_path(output_prefix, index, "outputs.pb")):
            return None
        data = await self.read(subtask_path(output_prefix, index, "error.pb"))
        if data is None:
            return None
        found = self.parse_error(data)
        if found is not None and not found[1]:
            return Phase.PERMANENT_FAILURE
        return Phase.RETRYABLE_FAILURE
