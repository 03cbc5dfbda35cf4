"""What one client may hold of ``taskplug serve`` (uvicorn on 127.0.0.1, a real PostgreSQL): live streams are
capped in total and per client address (503 with ``Retry-After`` past the cap, while ``/healthz`` and
submissions still answer), and a request's headers, its body and an idle connection are bounded in time
(here ~1 s, so that the tests do not wait a minute)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from service.test_api_replica_double import pod_spec
from support.net import free_port, stop_process, wait_until_ready
from taskplug.service import ServeLimits
from taskplug.service._api_app import create_app, uvicorn_config

BOUND = 20.0
"""Seconds a socket waits for the server before the test fails (far above the 1 s deadlines)."""


@contextmanager
def serving(app: Any, limits: ServeLimits) -> Iterator[int]:
    port = free_port()
    config = uvicorn_config(app, host="127.0.0.1", port=port, limits=limits)
    config.log_level = "warning"
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)  # readiness polling of the server thread, not a test timing
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(timeout=15)


def connect(port: int, source: str = "127.0.0.1") -> socket.socket:
    """A connection from ``source`` (any 127.0.0.0/8 address is this machine's loopback: a distinct client)."""
    conn = socket.create_connection(("127.0.0.1", port), timeout=BOUND, source_address=(source, 0))
    return conn


def request(conn: socket.socket, method: str, path: str, body: bytes = b"", **headers: str) -> None:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
    lines += [f"{k.replace('_', '-')}: {v}" for k, v in headers.items()]
    if body or method == "POST":
        lines.append(f"Content-Length: {len(body)}")
    conn.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)


def head(conn: socket.socket) -> tuple[int, dict[str, str]]:
    """The status and headers of the next answer on ``conn``."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        assert chunk, f"the connection closed before an answer: {data!r}"
        data += chunk
    status_line, *header_lines = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (h.split(":", 1) for h in header_lines)}
    return int(status_line.split(" ")[1]), headers


def read_to_close(conn: socket.socket) -> bytes:
    """Everything until the server closes the connection (a socket timeout fails the test)."""
    data = b""
    while chunk := conn.recv(4096):
        data += chunk
    return data


def get(port: int, path: str) -> int:
    with connect(port) as conn:
        request(conn, "GET", path, Connection="close")
        return head(conn)[0]


def submit(port: int, name: str) -> int:
    body = json.dumps({"spec": pod_spec(name)}).encode()
    with connect(port) as conn:
        request(conn, "POST", "/api/v1/executions", body, Content_Type="application/json", Connection="close")
        return head(conn)[0]


# -- stream caps ------------------------------------------------------------------------------------------


def test_streams_past_the_caps_are_503_with_retry_after_while_health_and_submissions_answer(
    postgres_dsn: str,
) -> None:
    limits = ServeLimits(max_streams=4, max_streams_per_client=2, retry_after=7)
    app = create_app(postgres_dsn, poll_interval=0.25, pool_size=4, limits=limits)
    open_streams: list[socket.socket] = []
    with serving(app, limits) as port:
        try:
            for source in ("127.0.0.2", "127.0.0.2", "127.0.0.3"):
                conn = connect(port, source)
                open_streams.append(conn)
                request(conn, "GET", "/executions/stream")
                assert head(conn)[0] == 200

            # A third from one client: past the per-client cap.
            with connect(port, "127.0.0.2") as third:
                request(third, "GET", "/executions/stream?q=x")
                status, headers = head(third)
                assert (status, headers.get("retry-after")) == (503, "7")

            conn = connect(port, "127.0.0.3")
            open_streams.append(conn)
            request(conn, "GET", "/executions/stream")
            assert head(conn)[0] == 200

            # The total is reached: a new client is refused as well.
            with connect(port, "127.0.0.4") as fifth:
                request(fifth, "GET", "/executions/p/d/any/n0/stream")
                assert head(fifth)[0] == 503

            # With the cap reached, the API still answers.
            assert get(port, "/healthz") == 200
            assert get(port, "/api/v1/healthz") == 200
            assert submit(port, "with-streams-open") == 201
            assert get(port, "/executions") == 200

            # A closed stream frees its place (the server notices the hang-up).
            open_streams.pop().close()
            deadline = time.monotonic() + BOUND
            while True:
                with connect(port, "127.0.0.4") as again:
                    request(again, "GET", "/executions/stream")
                    if head(again)[0] == 200:
                        break
                assert time.monotonic() < deadline, "a closed stream never freed its place"
                time.sleep(0.1)  # waiting for the server to see the hang-up, not a timing
        finally:
            for conn in open_streams:
                conn.close()


def test_limits_refuse_nonsense() -> None:
    with pytest.raises(ValueError, match="max_streams"):
        ServeLimits(max_streams=0)
    with pytest.raises(ValueError, match="header_timeout"):
        ServeLimits(header_timeout=0)


# -- read deadlines ---------------------------------------------------------------------------------------

FAST = ServeLimits(header_timeout=1.0, body_timeout=1.0, idle_timeout=1.0)


@pytest.fixture(scope="module")
def fast_port(postgres_dsn: str) -> Iterator[int]:
    with serving(create_app(postgres_dsn, poll_interval=0.25), FAST) as port:
        yield port


def test_half_a_requests_headers_is_answered_408_and_closed(fast_port: int) -> None:
    with connect(fast_port) as conn:
        conn.sendall(b"GET /api/v1/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        answer = read_to_close(conn)
    assert answer.startswith(b"HTTP/1.1 408 "), answer


def test_a_connection_that_sends_nothing_is_closed(fast_port: int) -> None:
    with connect(fast_port) as conn:
        answer = read_to_close(conn)
    assert answer == b"" or answer.startswith(b"HTTP/1.1 408 "), answer


def test_a_partial_body_is_answered_408_and_closed(fast_port: int) -> None:
    with connect(fast_port) as conn:
        conn.sendall(
            b"POST /api/v1/executions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b'Content-Length: 1000\r\n\r\n{"spec": '
        )
        answer = read_to_close(conn)
    assert answer.startswith(b"HTTP/1.1 408 "), answer


def test_an_idle_kept_alive_connection_is_closed_after_its_answer(fast_port: int) -> None:
    with connect(fast_port) as conn:
        request(conn, "GET", "/api/v1/healthz")
        assert b"HTTP/1.1 200 " in read_to_close(conn)


def test_a_kept_alive_connection_serves_a_second_request_and_its_deadline_starts_again(
    fast_port: int,
) -> None:
    with connect(fast_port) as conn:
        request(conn, "GET", "/api/v1/healthz")
        data = b""
        while b'"status":"ok"' not in data:  # the whole first answer, head and body
            chunk = conn.recv(4096)
            assert chunk, data
            data += chunk
        conn.sendall(b"GET /api/v1/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        answer = read_to_close(conn)
    assert answer.startswith(b"HTTP/1.1 408 "), answer


def test_a_live_stream_outlives_the_deadlines(fast_port: int) -> None:
    """The deadlines bound reading a request, not the answer: a live view stays open past them."""
    with connect(fast_port) as conn:
        request(conn, "GET", "/executions/stream")
        assert head(conn)[0] == 200
        conn.settimeout(3.0)
        received = b""
        try:
            while True:
                chunk = conn.recv(4096)
                if not chunk:
                    pytest.fail("the server closed a live stream")
                received += chunk
        except TimeoutError:
            pass  # still open three deadlines later: as it must be


def test_serve_takes_the_limits_from_its_options(postgres_dsn: str, tmp_path: Path) -> None:
    """``taskplug serve --header-timeout 1 --max-streams-per-client 1``: the options reach the server."""
    port = free_port()
    log = tmp_path / "serve.log"
    command = "import sys; from taskplug.cli._serve import serve; sys.argv[0] = 'taskplug serve'; serve()"
    options = ["--header-timeout", "1", "--max-streams-per-client", "1", "--port", str(port)]
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-c", command, "--store", postgres_dsn, *options],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:

        def healthy() -> bool:
            try:
                return get(port, "/healthz") == 200
            except OSError:
                return False

        wait_until_ready(healthy, process, log, what="taskplug serve")
        with connect(port) as first:
            request(first, "GET", "/executions/stream")
            assert head(first)[0] == 200
            with connect(port) as second:
                request(second, "GET", "/executions/stream")
                assert head(second)[0] == 503
        with connect(port) as slow:
            slow.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            assert read_to_close(slow).startswith(b"HTTP/1.1 408 ")
    finally:
        stop_process(process)


def test_serves_option_defaults_are_the_limits_defaults() -> None:
    from taskplug.cli._serve import serve

    defaults = {p.name: p.default for p in serve.params}
    limits = ServeLimits()
    for name in ("max_streams", "max_streams_per_client", "header_timeout", "body_timeout", "idle_timeout"):
        assert defaults[name] == getattr(limits, name), name
