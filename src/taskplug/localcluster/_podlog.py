"""``GET pods/{name}/log``'s query, as the API server and the kubelet answer it (k8s.io/kubernetes
``pkg/registry/core/pod/rest/log.go`` validates ``PodLogOptions``; the kubelet's ``ReadLogs`` reads them):
``tailLines``, ``limitBytes``, ``sinceSeconds``, ``previous`` and ``follow``.

The selection of the text is a pure function over what the container wrote so far; following is a loop in
the HTTP layer that re-reads the log until the container has ended (its pod terminal, or gone).

Deviation: the embedded kubelet keeps a container's output without a timestamp per line, so ``sinceSeconds``
is checked and then answered with the whole log. A container in the embedded cluster is never restarted in
place, so ``previous`` is always the API server's 400 for a container with no previous instance.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from taskplug.k8s import KubeApiError
from taskplug.localcluster._errors import bad_request

if TYPE_CHECKING:  # aiohttp is loaded by a cluster served over HTTP only (an in-process run never needs it)
    from aiohttp import web

__all__ = ["LogOptions", "follow_log", "previous_not_found", "select_log"]

FOLLOW_POLL_SECONDS = 0.2
"""How often a followed log is read again for what the container appended."""


@dataclass(frozen=True, slots=True)
class LogOptions:
    """A ``PodLogOptions`` from the query (the fields the embedded cluster serves)."""

    tail_lines: int | None = None
    limit_bytes: int | None = None
    since_seconds: int | None = None
    previous: bool = False
    follow: bool = False

    @classmethod
    def from_query(cls, query: Mapping[str, str]) -> LogOptions:
        """Parsed as the API server parses them: a bad number is a 400 naming the parameter."""
        return cls(
            tail_lines=_count(query, "tailLines", minimum=0),
            limit_bytes=_count(query, "limitBytes", minimum=1),
            since_seconds=_count(query, "sinceSeconds", minimum=1),
            previous=_flag(query, "previous"),
            follow=_flag(query, "follow"),
        )


def _count(query: Mapping[str, str], name: str, *, minimum: int) -> int | None:
    raw = query.get(name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise bad_request(f"{name}: Invalid value: {raw!r}: must be an integer") from None
    if value < minimum:
        raise bad_request(
            f'PodLogOptions "" is invalid: {name}: Invalid value: {value}: must be greater than '
            f"{'or equal to ' if minimum == 0 else ''}{max(minimum - 1, 0)}"
        )
    return value


def _flag(query: Mapping[str, str], name: str) -> bool:
    return query.get(name, "false").lower() in ("true", "1")


def previous_not_found(container: str, pod: str) -> KubeApiError:
    return bad_request(f'previous terminated container "{container}" in pod "{pod}" not found')


def select_log(text: str, options: LogOptions) -> str:
    """What the log answers of ``text`` (the container's output so far)."""
    if options.tail_lines is not None:
        text = "".join(text.splitlines(keepends=True)[-options.tail_lines :]) if options.tail_lines else ""
    if options.limit_bytes is not None:
        text = text.encode()[: options.limit_bytes].decode("utf-8", "ignore")
    return text


async def follow_log(
    request: web.Request, first: str, read: Callable[[], tuple[str, bool]], *, written: int
) -> web.StreamResponse:
    """Stream ``first``, then what the container appends, as the kubelet follows a log: ``read`` gives the
    whole log so far and whether the container has ended (its pod terminal, or gone); once it has, the rest
    is sent and the stream ends. ``written`` is how much of the log ``first`` stands for."""
    from aiohttp import web

    response = web.StreamResponse(headers={"Content-Type": "text/plain"})
    await response.prepare(request)
    await response.write(first.encode())
    while True:
        text, ended = read()
        if len(text) > written:
            await response.write(text[written:].encode())
            written = len(text)
        if ended:
            break
        await asyncio.sleep(FOLLOW_POLL_SECONDS)
    await response.write_eof()
    return response
