"""How the command line says an error or a reason in one line: a traceback's exception line, any other text
as it is. Follows no Flyte file (flytekit's errors carry the whole traceback in their message)."""

from __future__ import annotations

__all__ = ["error_text", "last_line", "reason_line"]


def last_line(text: str) -> str:
    """The line that says most in a long error (a traceback's last line is the exception)."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def reason_line(text: str) -> str:
    """What a person reads first of a reason: for a traceback (flytekit's ``Trace: … Message: …`` error, a
    Python traceback) the exception's line, ``ValueError: x=3 is not acceptable``; other reasons as they are."""
    if "Traceback (most recent call last)" in text or text.lstrip().startswith("Trace:"):
        return last_line(text)
    return text


def error_text(message: str, limit: int = 300) -> str:
    """An error as one line: a traceback's exception line (Python's, flytekit's ``Trace: … Message: …``),
    any other message with its lines joined; cut at ``limit`` characters."""
    text = " ".join(reason_line(message).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
