"""The data store: inputs written, outputs and error documents read, through fsspec.

Flyte's storage layer (flytestdlib/storage) over S3/GCS/local; here any fsspec URL, a local folder by
default. Local files are read and written directly, without fsspec (they are small and fast, and a workflow
reads and writes several per node); other file systems go through a worker thread so the event loop never
blocks on the network.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from flyteidl.core import errors_pb2, execution_pb2, literals_pb2
from google.protobuf.message import DecodeError

from taskplug.core import ErrorKind, ExecutionError

__all__ = ["DataStore"]


class DataStore:
    def __init__(self) -> None:
        self._fs_cache: dict[str, Any] = {}

    def _fs(self, path: str) -> tuple[Any, str]:
        protocol = path.split("://", 1)[0] if "://" in path else "file"
        fs = self._fs_cache.get(protocol)
        if fs is None:
            import fsspec  # here, not at the top: a local data root is read and written without it

            fs = fsspec.filesystem(protocol)
            self._fs_cache[protocol] = fs
        return fs, path

    def _is_local(self, path: str) -> bool:
        return "://" not in path or path.startswith("file://")

    async def write(self, path: str, data: bytes, *, new_folder: bool = False) -> None:
        """Write ``data`` at ``path``. ``new_folder``: the file is the first in a folder that most likely does not
        exist yet (a node's first file): on a local file system the folder is made first instead of after a
        failed open (a workflow writes one such file per node)."""
        if self._is_local(path):
            _write_local(_local_path(path), data, new_folder=new_folder)
        else:
            await asyncio.to_thread(self._write_sync, path, data)

    def _write_sync(self, path: str, data: bytes) -> None:
        fs, p = self._fs(path)
        parent = p.rsplit("/", 1)[0]
        fs.makedirs(parent, exist_ok=True)
        with fs.open(p, "wb") as f:
            f.write(data)

    async def make_folder(self, path: str) -> None:
        """Create the folder ``path`` on a local file system (with its parents); an object store has no folders,
        so elsewhere nothing is done. Flyte 2's ``a0`` writes its outputs with plain file writes, which need
        the output folder to exist on a local data root."""
        if self._is_local(path):
            fs, p = self._fs(path)
            fs.makedirs(p, exist_ok=True)

    async def read(self, path: str) -> bytes | None:
        if self._is_local(path):
            return _read_local(_local_path(path))
        return await asyncio.to_thread(self._read_sync, path)

    def _read_sync(self, path: str) -> bytes | None:
        fs, p = self._fs(path)
        try:
            with fs.open(p, "rb") as f:
                data: bytes = f.read()
                return data
        except FileNotFoundError:
            return None

    async def read_outputs(self, path: str) -> literals_pb2.LiteralMap | None:
        """``outputs.pb`` as a LiteralMap; None when the task wrote none. Bad bytes raise ValueError."""
        data = await self.read(path)
        if data is None:
            return None
        try:
            return literals_pb2.LiteralMap.FromString(data)
        except DecodeError as e:
            raise ValueError(f"{path} is not a flyteidl LiteralMap: {e}") from e

    async def read_error(self, path: str) -> ExecutionError | None:
        """``error.pb`` (an ErrorDocument written by flytekit on failure), as an ExecutionError."""
        found = await self.read_error_recoverable(path)
        return found[0] if found is not None else None

    async def read_error_recoverable(self, path: str) -> tuple[ExecutionError, bool] | None:
        """``error.pb`` as an ExecutionError and whether a retry may help (Flyte's RemoteFileOutputReader:
        recoverable unless the document's kind is NON_RECOVERABLE)."""
        document = await self._read_error_document(path)
        return None if document is None else _execution_error(document)

    async def read_earliest_error_recoverable(self, output_prefix: str) -> tuple[ExecutionError, bool] | None:
        """Of the error documents under ``output_prefix`` (``error*.pb``: ``error.pb`` and the
        ``error-<uuid>.pb`` flytekit writes when ``_F_DES`` is set), the one with the earliest timestamp, as
        :meth:`read_error_recoverable` reads one (Flyte's earliestFileErrorReader)."""
        if self._is_local(output_prefix):
            paths = self._list_errors_sync(output_prefix)
        else:
            paths = await asyncio.to_thread(self._list_errors_sync, output_prefix)
        earliest: errors_pb2.ErrorDocument | None = None
        for path in paths:
            document = await self._read_error_document(path)
            if document is None:
                continue
            stamp = (document.error.timestamp.seconds, document.error.timestamp.nanos)
            if earliest is None or stamp < (earliest.error.timestamp.seconds, earliest.error.timestamp.nanos):
                earliest = document
        return None if earliest is None else _execution_error(earliest)

    def _list_errors_sync(self, output_prefix: str) -> list[str]:
        fs, prefix = self._fs(output_prefix)
        try:
            names = fs.ls(prefix, detail=False)
        except FileNotFoundError:
            return []
        found = []
        for name in names:
            base = str(name).rsplit("/", 1)[-1]
            if base.startswith("error") and base.endswith(".pb"):
                found.append(f"{output_prefix}/{base}")
        return sorted(found)

    async def _read_error_document(self, path: str) -> errors_pb2.ErrorDocument | None:
        data = await self.read(path)
        if data is None:
            return None
        try:
            return errors_pb2.ErrorDocument.FromString(data)
        except DecodeError:
            return None


def _local_path(path: str) -> str:
    return path[len("file://") :] if path.startswith("file://") else path


_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0)
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)


def _write_local(path: str, data: bytes, *, new_folder: bool = False) -> None:
    """A local file written with the system calls alone (fsspec's layers, even Python's file objects, cost
    more than the write of a small file): its folder made only when it is missing, not checked before every
    write — or, for a ``new_folder``, made first (its parent usually exists), which spares the failed open."""
    folder = os.path.dirname(path) or "."
    if new_folder:
        _make_folders(folder)
    try:
        fd = os.open(path, _WRITE_FLAGS, 0o666)
    except FileNotFoundError:
        _make_folders(folder)
        fd = os.open(path, _WRITE_FLAGS, 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def _make_folders(folder: str) -> None:
    """``os.makedirs(folder, exist_ok=True)`` that tries ``mkdir`` first: a node's new folder usually lacks only
    itself, where ``makedirs`` first asks whether its parent exists (a ``stat`` beside the ``mkdir``)."""
    try:
        os.mkdir(folder)
    except FileExistsError:
        if not os.path.isdir(folder):
            raise
    except FileNotFoundError:
        os.makedirs(folder, exist_ok=True)


def _read_local(path: str) -> bytes | None:
    try:
        fd = os.open(path, _READ_FLAGS)
    except FileNotFoundError:
        return None
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _execution_error(document: errors_pb2.ErrorDocument) -> tuple[ExecutionError, bool]:
    """An error document as an ExecutionError and whether a retry may help (recoverable unless its kind is
    NON_RECOVERABLE)."""
    origin_is_system = document.error.origin == execution_pb2.ExecutionError.SYSTEM
    kind = ErrorKind.SYSTEM if origin_is_system else ErrorKind.USER
    recoverable = document.error.kind != errors_pb2.ContainerError.NON_RECOVERABLE
    return ExecutionError(document.error.code, document.error.message, kind), recoverable
