"""``cluster serve``'s HTTPS façade bounds how long a client may take to send a request: half a request's
headers, nothing at all, an idle kept-alive connection and a partial body are closed (408 for the body)
within the read timeout (1 s here; 60 s by default), while a watch, once asked, stays open past it."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from aiohttp import web

from taskplug.core import FakeClock
from taskplug.localcluster import LocalCluster
from taskplug.localcluster._http import READ_TIMEOUT, start_server
from taskplug.localcluster._tls import ServingCertificate

BOUND = 20.0
"""Seconds the test waits for the server before it fails (far above the 1 s read timeout)."""


@dataclass
class Served:
    port: int
    token: str
    client_ssl: ssl.SSLContext


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    async with LocalCluster(mode="simulated", clock=FakeClock()) as cluster:
        certificate = ServingCertificate.generate()
        runner: web.AppRunner
        runner, url = await start_server(
            cluster,
            host="127.0.0.1",
            port=0,
            token="t0ken",
            tls=certificate.server_context(),
            read_timeout=1.0,
        )
        try:
            yield Served(int(url.rsplit(":", 1)[1]), "t0ken", certificate.client_context())
        finally:
            await runner.cleanup()


async def _open(served: Served) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection(
        "127.0.0.1", served.port, ssl=served.client_ssl, server_hostname="127.0.0.1"
    )


async def _until_closed(reader: asyncio.StreamReader) -> bytes:
    async with asyncio.timeout(BOUND):
        return await reader.read()


async def test_the_default_read_timeout_is_about_a_minute() -> None:
    assert READ_TIMEOUT == 60.0


async def test_half_a_requests_headers_is_closed(served: Served) -> None:
    reader, writer = await _open(served)
    writer.write(b"GET /version HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    await writer.drain()

    assert await _until_closed(reader) == b""
    writer.close()


async def test_a_connection_that_sends_nothing_is_closed(served: Served) -> None:
    reader, writer = await _open(served)

    assert await _until_closed(reader) == b""
    writer.close()


async def test_an_idle_kept_alive_connection_is_closed_after_its_answer(served: Served) -> None:
    reader, writer = await _open(served)
    writer.write(b"GET /version HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    await writer.drain()

    answer = await _until_closed(reader)

    assert answer.startswith(b"HTTP/1.1 200 ")
    writer.close()


async def test_a_partial_body_is_a_408_status_and_the_connection_closed(served: Served) -> None:
    reader, writer = await _open(served)
    writer.write(
        b"POST /api/v1/namespaces/default/pods HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Authorization: Bearer t0ken\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
        b'{"apiVersion": "v1", '
    )
    await writer.drain()

    answer = await _until_closed(reader)

    assert answer.startswith(b"HTTP/1.1 408 "), answer
    assert b'"reason":"Timeout"' in answer
    writer.close()


async def test_a_watch_stays_open_past_the_read_timeout(served: Served) -> None:
    reader, writer = await _open(served)
    writer.write(
        b"GET /api/v1/namespaces/default/pods?watch=true HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Authorization: Bearer t0ken\r\n\r\n"
    )
    await writer.drain()
    async with asyncio.timeout(BOUND):
        head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ")

    data: bytes | None = None
    try:
        async with asyncio.timeout(3.0):  # three read timeouts
            data = await reader.read(1)
    except TimeoutError:
        pass  # still open, nothing sent: no pod changed
    assert data is None, "the server closed a watch (or sent an event no pod made)"
    writer.close()
