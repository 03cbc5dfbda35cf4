"""The compiler's errors: one :class:`CompileError` per problem found, all of them raised together as
:class:`CompileErrors`.

Follows flytepropeller/pkg/compiler/errors (``error.go``, ``sets.go``, ``compiler_errors.go``): the compiler
does not stop at the first problem; it collects every error (a set, so one found twice is reported once),
and reports them sorted by code, then by text. Scopes (``NewScope``) only decide whether a step found
something, so that a later step can be skipped; every error lands in the one set.

    TaskplugError
     └── CompileErrors        code ``CompileError``: the workflow does not compile; ``.errors`` lists why
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from taskplug.core import TaskplugError

__all__ = ["COMPILE_ERROR", "CompileError", "CompileErrors"]

COMPILE_ERROR: Final = "CompileError"
"""The code of :class:`CompileErrors` (a user error: the CLI exits 2 with the message)."""


@dataclass(frozen=True, slots=True)
class CompileError:
    """One problem: Flyte's error code (``ParameterNotBound``), the node it is about and the description."""

    code: str
    node_id: str
    description: str

    def __str__(self) -> str:
        return f"Code: {self.code}, Node Id: {self.node_id}, Description: {self.description}"


def _ordered(errors: Iterable[CompileError]) -> tuple[CompileError, ...]:
    return tuple(sorted(set(errors), key=lambda e: (e.code, str(e))))


class CompileErrors(TaskplugError):
    """The workflow does not compile. ``errors`` holds each problem once, sorted by code then text.

    The message is the one error's text when there is one, else Flyte's ``Collected Errors: <n>`` followed by
    one ``\\tError <i>: …`` line per error (Go ends every line with a newline; the last one is left off here).
    """

    code = COMPILE_ERROR

    def __init__(self, errors: Iterable[CompileError]) -> None:
        self.errors = _ordered(errors)
        if len(self.errors) == 1:
            message = str(self.errors[0])
        else:
            lines = [f"Collected Errors: {len(self.errors)}"]
            lines.extend(f"\tError {i}: {e}" for i, e in enumerate(self.errors))
            message = "\n".join(lines)
        super().__init__(message)


class _Scope:
    """Where errors are collected (``compileErrors``): a scope counts what it and its sub-scopes found."""

    __slots__ = ("_count", "_found", "_parent")

    def __init__(self, parent: _Scope | None = None) -> None:
        self._parent = parent
        self._count = 0
        self._found: list[CompileError] = [] if parent is None else parent._found

    def collect(self, code: str, node_id: str, description: str) -> None:
        self._found.append(CompileError(code, node_id, description))
        scope: _Scope | None = self
        while scope is not None:
            scope._count += 1
            scope = scope._parent

    def scope(self) -> _Scope:
        return _Scope(self)

    @property
    def has_errors(self) -> bool:
        return self._count > 0

    @property
    def found(self) -> list[CompileError]:
        return self._found

    def raise_if_any(self) -> None:
        if self._found:
            raise CompileErrors(self._found)
