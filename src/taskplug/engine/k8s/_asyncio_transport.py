"""httpx's connection pool on asyncio's own sockets and TLS, for the Kubernetes client.

httpx (through httpcore) reaches the network through anyio by default, and anyio does TLS itself, in Python,
over a plain socket stream (``anyio.streams.tls.TLSStream``: an ``ssl.SSLObject`` fed through memory BIOs,
one await per record). asyncio's event loop does the same work in its own TLS transport, with a buffered
protocol and no stream layers above it. Measured with the cluster served over TLS (create, get and delete
of a pod, 16 at a time, CPU per request): the client spent 886 µs with anyio's TLS, 635 µs on asyncio's
transports, and 763 µs over plain HTTP with anyio before ``cluster serve`` asked for TLS and a token; the
server's CPU per request fell too (527 → 443 µs), because a request now leaves in one write.

This module is the network backend httpcore lets a caller choose (``AsyncNetworkBackend``): a TCP
connection from ``loop.create_connection``, TLS from ``loop.start_tls``, reads from a buffered protocol with
flow control both ways (a watch that is not read pauses its socket; a write waits while the kernel's buffer
is full). Errors are httpcore's own (``ConnectError``, ``ReadTimeout``, …), so httpx maps them as it does
for its default backend and :mod:`taskplug.engine.k8s._lightkube` maps httpx's in turn.

Proxies taken from the environment keep httpx's own transports (``trust_env``); only the direct connection
to the API server goes through here.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Iterable
from typing import Any, Final, cast

import httpcore2
import httpx2
from httpcore2 import AsyncNetworkBackend, AsyncNetworkStream

__all__ = ["AsyncioBackend", "asyncio_transport"]

_CHUNK: Final = 64 * 1024
"""Bytes the protocol hands the loop to read into at once (one TLS record is at most 16 KiB)."""
_HIGH_WATER: Final = 1024 * 1024
"""Bytes received and not yet read above which the socket stops being read (a watch nobody reads)."""


class _Receiver(asyncio.BufferedProtocol):
    """What arrived on one connection, until the stream reads it; wakes the one reader waiting."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.received = bytearray()
        self.eof = False
        self.error: BaseException | None = None
        # A memoryview, not the bytearray: asyncio's TLS transport reads into slices of what get_buffer gives,
        # and a slice of a bytearray is a copy.
        self._chunk = memoryview(bytearray(_CHUNK))
        self._reader: asyncio.Future[None] | None = None
        self._writable: asyncio.Future[None] | None = None
        self._paused_reading = False

    # -- asyncio.BufferedProtocol --------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # Not an isinstance check: uvloop's transports (the loop uvicorn picks when uvloop is installed, as in
        # `taskplug serve --kubeconfig`) are transports by their methods, not subclasses of asyncio.Transport.
        self.transport = cast(asyncio.Transport, transport)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._chunk

    def buffer_updated(self, nbytes: int) -> None:
        self.received += self._chunk[:nbytes]
        if len(self.received) > _HIGH_WATER and self.transport is not None and not self._paused_reading:
            self._paused_reading = True
            self.transport.pause_reading()
        self._wake_reader()

    def eof_received(self) -> bool:
        self.eof = True
        self._wake_reader()
        return False  # close the connection: HTTP/1.1 never writes after the server's end

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        self.error = exc
        self._wake_reader()
        self.resume_writing()

    def pause_writing(self) -> None:
        if self._writable is None:
            self._writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        writable, self._writable = self._writable, None
        if writable is not None and not writable.done():
            writable.set_result(None)

    # -- for the stream --------------------------------------------------------------------------------
    def _wake_reader(self) -> None:
        if self._reader is not None and not self._reader.done():
            self._reader.set_result(None)

    async def wait_readable(self) -> None:
        self._reader = asyncio.get_running_loop().create_future()
        try:
            await self._reader
        finally:
            self._reader = None

    async def wait_writable(self) -> None:
        if self._writable is not None:
            await asyncio.shield(self._writable)

    def take(self, max_bytes: int) -> bytes:
        data = bytes(self.received[:max_bytes])
        del self.received[:max_bytes]
        if self._paused_reading and len(self.received) <= _HIGH_WATER // 2 and self.transport is not None:
            self._paused_reading = False
            self.transport.resume_reading()
        return data


class _AsyncioStream(AsyncNetworkStream):
    def __init__(self, transport: asyncio.Transport, receiver: _Receiver) -> None:
        self._transport = transport
        self._receiver = receiver

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
        receiver = self._receiver
        if not receiver.received and not receiver.eof:
            try:
                async with asyncio.timeout(timeout):
                    while not receiver.received and not receiver.eof:
                        await receiver.wait_readable()
            except TimeoutError as e:
                raise httpcore2.ReadTimeout(f"nothing arrived within {timeout:g}s") from e
        if receiver.received:
            return receiver.take(max_bytes)
        if receiver.error is not None:
            raise httpcore2.ReadError(str(receiver.error) or type(receiver.error).__name__)
        return b""  # the server closed the connection: httpcore tells a clean end from a cut one

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
        if not buffer:
            return
        if self._transport.is_closing():
            raise httpcore2.WriteError("the connection is closed")
        self._transport.write(buffer)
        try:
            async with asyncio.timeout(timeout):
                await self._receiver.wait_writable()
        except TimeoutError as e:
            raise httpcore2.WriteTimeout(f"the request could not be sent within {timeout:g}s") from e

    async def aclose(self) -> None:
        self._transport.close()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            tls = await loop.start_tls(
                self._transport,
                self._receiver,
                ssl_context,
                server_hostname=server_hostname,
                ssl_handshake_timeout=timeout,
            )
        except TimeoutError as e:
            self._transport.close()
            raise httpcore2.ConnectTimeout(f"the TLS handshake did not finish within {timeout:g}s") from e
        except (OSError, ssl.SSLError, ConnectionError) as e:
            self._transport.close()
            raise httpcore2.ConnectError(str(e)) from e
        if tls is None:  # the connection was closed during the handshake
            raise httpcore2.ConnectError("the server closed the connection during the TLS handshake")
        self._receiver.transport = tls  # no isinstance check: uvloop's (see _Receiver.connection_made)
        return _AsyncioStream(tls, self._receiver)

    def get_extra_info(self, info: str) -> Any:
        if info == "ssl_object":
            return self._transport.get_extra_info("ssl_object")
        if info == "client_addr":
            return self._transport.get_extra_info("sockname")
        if info == "server_addr":
            return self._transport.get_extra_info("peername")
        if info == "socket":
            return self._transport.get_extra_info("socket")
        if info == "is_readable":
            # httpcore asks this of an idle pooled connection: anything readable there (data or the end) means
            # the server closed it or broke the protocol, so the pool drops it instead of reusing it.
            return self._receiver.eof or bool(self._receiver.received)
        return None


class AsyncioBackend(AsyncNetworkBackend):
    """httpcore's network backend on asyncio's transports (see the module docstring)."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                transport, receiver = await loop.create_connection(
                    _Receiver, host, port, local_addr=(local_address, 0) if local_address else None
                )
        except TimeoutError as e:
            raise httpcore2.ConnectTimeout(f"no connection within {timeout:g}s") from e
        except OSError as e:
            raise httpcore2.ConnectError(str(e) or type(e).__name__) from e
        sock = transport.get_extra_info("socket")
        for option in socket_options or ():
            sock.setsockopt(*option)
        return _AsyncioStream(transport, receiver)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109
        socket_options: Iterable[Any] | None = None,
    ) -> AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                transport, receiver = await loop.create_unix_connection(_Receiver, path)
        except TimeoutError as e:
            raise httpcore2.ConnectTimeout(f"no connection within {timeout:g}s") from e
        except OSError as e:
            raise httpcore2.ConnectError(str(e) or type(e).__name__) from e
        return _AsyncioStream(transport, receiver)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class _Transport(httpx2.AsyncHTTPTransport):
    def __init__(self, ssl_context: ssl.SSLContext, limits: httpx2.Limits) -> None:
        super().__init__(verify=ssl_context, limits=limits)
        # httpx's transport takes no network backend; its pool (httpcore's) does. The pool is built again,
        # with the same settings httpx gives it, and the backend.
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=AsyncioBackend(),
        )


def asyncio_transport(ssl_context: ssl.SSLContext, limits: httpx2.Limits) -> httpx2.AsyncHTTPTransport:
    """An httpx transport to one API server whose connections are asyncio's (``ssl_context``: its trust and
    client certificate; ``limits``: the pool's bounds)."""
    return _Transport(ssl_context, limits)
