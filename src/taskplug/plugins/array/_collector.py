"""The error summary of a map task: sub-task errors grouped by message, with the indices that hit each.

Follows flyteplugins/go/tasks/plugins/array/errorcollector/{collector,index_range,range_collection}.go.
A summary reads ``[0-2][5]: message\\n`` per distinct message, messages in sorted order, cut off with
``... and many more.`` once it reaches the character limit.
"""

from __future__ import annotations

from typing import Final

__all__ = ["ErrorMessageCollector", "index_ranges"]

_MORE: Final = "... and many more."


def index_ranges(indices: set[int] | list[int]) -> str:
    """``[0-1][3]``: runs of adjacent indices merged, in order (Flyte's ``indexRangeCollection.String``)."""
    out: list[str] = []
    ordered = sorted(set(indices))
    i = 0
    while i < len(ordered):
        start = end = ordered[i]
        while i + 1 < len(ordered) and ordered[i + 1] == end + 1:
            i += 1
            end = ordered[i]
        out.append(f"[{start}]" if start == end else f"[{start}-{end}]")
        i += 1
    return "".join(out)


class ErrorMessageCollector:
    """Collects ``(index, message)`` pairs; :meth:`summary` renders them (Flyte's ErrorMessageCollector)."""

    __slots__ = ("_messages",)

    def __init__(self) -> None:
        self._messages: dict[str, set[int]] = {}

    def collect(self, index: int, message: str) -> None:
        self._messages.setdefault(message, set()).add(index)

    def __len__(self) -> int:
        return len(self._messages)

    def summary(self, char_limit: int) -> str:
        """At most about ``char_limit`` characters (UTF-8 bytes, as Go counts): the first line is always
        there; after the line that reaches the limit less 18 comes ``... and many more.``; a limit below 18
        gives an empty summary."""
        limit = char_limit - len(_MORE)
        if limit < 0:
            return ""
        text = ""
        for message in sorted(self._messages):
            text += f"{index_ranges(list(self._messages[message]))}: {message}\n"
            if len(text.encode()) >= limit:
                text += _MORE
                break
        return text
