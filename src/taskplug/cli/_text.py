"""How the command line says an error or a reason in one line: a traceback's exception, any other text as it
is. Follows no Flyte file (flytekit's errors carry the whole traceback in their message)."""

from __future__ import annotations

import difflib
import textwrap
from collections.abc import Iterable

__all__ = ["did_you_mean", "error_text", "exception_text", "reason_line"]

_TRACEBACK = "Traceback (most recent call last):"


def _last_line(text: str) -> str:
    """The last line of a text that is not blank, stripped."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def exception_text(text: str) -> str:
    """The exception a traceback ends with, all of its lines: ``ValueError: Cannot …`` and what its message goes
    on to say on the next lines (a traceback's last line alone can be the tail of a multi-line message, such as
    a printed literal's ``integer: 0)``). flytekit's errors say it after ``Message:``; a Python traceback after
    its last frame."""
    lines = text.strip("\n").splitlines()
    marks = [i for i, line in enumerate(lines) if line.strip() == "Message:"]
    if marks:
        return textwrap.dedent("\n".join(lines[marks[-1] + 1 :])).strip() or _last_line(text)
    starts = [i for i, line in enumerate(lines) if line.strip() == _TRACEBACK]
    if not starts:
        return _last_line(text)
    header = lines[starts[-1]]
    indent = len(header) - len(header.lstrip())
    for i in range(starts[-1] + 1, len(lines)):
        line = lines[i]
        # Frames and their source lines are indented under the header; the exception is not.
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            return textwrap.dedent("\n".join(lines[i:])).strip()
    return _last_line(text)


def reason_line(text: str) -> str:
    """What a person reads first of a reason: for a traceback (flytekit's ``Trace: … Message: …`` error, a
    Python traceback) its exception, ``ValueError: x=3 is not acceptable``; other reasons as they are."""
    if _TRACEBACK in text or text.lstrip().startswith("Trace:"):
        return exception_text(text)
    return text


def error_text(message: str, limit: int = 300) -> str:
    """An error as one line: a traceback's exception line (Python's, flytekit's ``Trace: … Message: …``),
    any other message with its lines joined; cut at ``limit`` characters."""
    text = " ".join(reason_line(message).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`` (did you mean 'partial_map'?)`` for a name one typo away from a known one; else nothing."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if close else ""
