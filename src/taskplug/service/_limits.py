"""What one client may hold of ``taskplug serve``: live streams (capped, in total and per address) and time
(deadlines on reading a request's headers and body, and on an idle connection).

Every open live view is a server-sent-event stream that re-reads the database when an execution it shows
changes; four hundred of them took every pooled connection, so that ``/healthz`` answered 503 and a
submission waited for seconds. :class:`StreamCap` refuses a stream past ``max_streams`` (or past
``max_streams_per_client`` from one client address) with 503 and ``Retry-After``, before it opens; the
streams that are open read through at most half the pool (``stream_reads``), so the API always finds a
connection. Behind a proxy every client has the proxy's address: raise the per-client cap there.

:func:`deadline_protocol` is uvicorn's h11 protocol with a read deadline: a request whose headers are not
complete ``header_timeout`` seconds after its first byte (or after the connection opened) is answered 408
and closed; a body not complete ``body_timeout`` seconds after its headers is answered 408 (when no answer
has started) and closed. uvicorn's ``timeout_keep_alive`` closes an idle connection between requests.
Follows no Flyte file; the deadlines are those of Go's ``net/http`` server (``ReadHeaderTimeout``,
``ReadTimeout``, ``IdleTimeout``), which Go services such as flyteadmin are built on.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass
from typing import Any, Final

import h11
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = [
    "DEFAULT_LIMITS",
    "ServeLimits",
    "StreamCap",
    "deadline_protocol",
    "is_stream",
]


@dataclass(frozen=True, slots=True)
class ServeLimits:
    """The limits of one ``taskplug serve`` (its options of the same names)."""

    max_streams: int = 200
    """Live-view streams open at once (every client together); 503 past it."""
    max_streams_per_client: int = 20
    """Live-view streams open at once from one client address; 503 past it."""
    header_timeout: float = 30.0
    """Seconds a request's headers may take to arrive (after its first byte, or the connection's start)."""
    body_timeout: float = 60.0
    """Seconds a request's body may take to arrive after its headers."""
    idle_timeout: float = 60.0
    """Seconds a kept-alive connection may stay idle between requests."""
    retry_after: int = 5
    """What ``Retry-After`` tells a client refused a stream, in seconds."""

    def __post_init__(self) -> None:
        for name in ("max_streams", "max_streams_per_client", "retry_after"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        for name in ("header_timeout", "body_timeout", "idle_timeout"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")


DEFAULT_LIMITS: Final = ServeLimits()


def is_stream(scope: Scope) -> bool:
    """Whether the request opens a live view's event stream (``/executions/stream``,
    ``/executions/{key}/stream``) or follows a log (``/api/v1/executions/{key}/logs?follow=true``)."""
    path: str = scope.get("path", "")
    if scope.get("method") != "GET":
        return False
    if path.startswith("/api/v1/executions/") and path.endswith("/logs"):
        query = bytes(scope.get("query_string") or b"").lower()
        return any(
            part in (b"follow=true", b"follow=1", b"follow=on", b"follow=yes") for part in query.split(b"&")
        )
    return path.startswith("/executions/") and path.endswith("/stream")


class StreamCap:
    """Count open streams, in total and per client address; refuse one past either cap with 503."""

    def __init__(self, app: ASGIApp, *, limits: ServeLimits) -> None:
        self.app = app
        self.limits = limits
        self.open = 0
        self.by_client: Counter[str] = Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not is_stream(scope):
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        address = str(client[0]) if client else ""
        refusal = None
        if self.open >= self.limits.max_streams:
            refusal = f"{self.open} live views are open, the most this server keeps (--max-streams)"
        elif self.by_client[address] >= self.limits.max_streams_per_client:
            refusal = (
                f"{self.by_client[address]} live views are open from {address or 'this client'}, the most "
                "one client may keep (--max-streams-per-client): close some pages"
            )
        if refusal is not None:
            refused = JSONResponse(
                {"error": {"message": refusal}},
                status_code=503,
                headers={"Retry-After": str(self.limits.retry_after)},
            )
            await refused(scope, receive, send)
            return
        self.open += 1
        self.by_client[address] += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.open -= 1
            self.by_client[address] -= 1
            if self.by_client[address] <= 0:
                del self.by_client[address]


_TIMEOUT_BODY: Final = b"the request did not arrive in time\n"
_REQUEST_TIMEOUT: Final = (
    b"HTTP/1.1 408 Request Timeout\r\n"
    b"content-type: text/plain; charset=utf-8\r\n"
    b"connection: close\r\n"
    b"content-length: " + str(len(_TIMEOUT_BODY)).encode() + b"\r\n\r\n" + _TIMEOUT_BODY
)


def deadline_protocol(*, header_timeout: float, body_timeout: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol with the read deadlines (see the module docstring); give it as
    ``uvicorn.Config(http=...)``."""

    class DeadlineProtocol(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None
        _reading_body = False

        def _arm(self, seconds: float) -> None:
            self._disarm()
            self._deadline = self.loop.call_later(seconds, self._expired)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm(header_timeout)

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            # A new request's first bytes on a kept-alive connection: its headers are due from now.
            if self._deadline is None and self.conn.their_state is h11.IDLE:
                self._reading_body = False
                self._arm(header_timeout)
            super().data_received(data)
            self._follow()

        def on_response_complete(self) -> None:
            super().on_response_complete()  # arms uvicorn's keep-alive timer for the idle time
            self._disarm()
            self._reading_body = False
            if self.conn.their_state is h11.IDLE and self.conn.trailing_data[0]:
                self._arm(header_timeout)  # a pipelined request is already half here

        def _follow(self) -> None:
            state = self.conn.their_state
            if state is h11.SEND_BODY:
                if not self._reading_body:
                    self._reading_body = True
                    self._arm(body_timeout)
            elif state is not h11.IDLE:
                self._disarm()  # the request is in: what remains is the application's answer

        def _expired(self) -> None:
            self._deadline = None
            if self.transport.is_closing():
                return
            if self.cycle is None or self.cycle.response_complete or not self.cycle.response_started:
                self.transport.write(_REQUEST_TIMEOUT)
            self.transport.close()

    return DeadlineProtocol
