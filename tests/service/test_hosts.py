"""``taskplug serve``'s Host check holds for every spelling of its bind address: the names answered are those
of the canonical address (loopback names for loopback, the machine's for 0.0.0.0 / ::, ``--allowed-host``),
and a foreign ``Host`` (a DNS-rebinding page's) is refused whatever ``--host`` said."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from support.net import free_port, stop_process, wait_until_ready
from taskplug.core import canonical_host, host_of
from taskplug.service import host_policy
from taskplug.service._api_app import create_app

FOREIGN = ("attacker.example", "attacker.example:8080", "127.0.0.1.attacker.example", "localhost.evil:80")


@pytest.mark.parametrize(
    ("spelling", "canonical"),
    [
        ("127.000.000.001", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("0x7f.0.0.1", "127.0.0.1"),
        ("[::1]", "::1"),
        ("0:0:0:0:0:0:0:1", "::1"),
        ("LOCALHOST.", "localhost"),
        ("Example.COM", "example.com"),
    ],
)
def test_a_host_is_compared_in_its_canonical_spelling(spelling: str, canonical: str) -> None:
    assert canonical_host(spelling) == canonical


def test_a_malformed_host_header_is_no_host() -> None:
    for header in ("", "user@127.0.0.1", "127.0.0.1/x", "127.0.0.1:port", "a b", "127.0.0.1\x00"):
        assert host_of(header) is None, header
    assert host_of("[::1]:8080") == "::1"


@pytest.mark.parametrize("bind", ["127.0.0.1", "127.000.000.001", "127.1", "localhost", "::1"])
def test_a_loopback_bind_in_any_spelling_answers_the_loopback_names_only(bind: str) -> None:
    policy = host_policy(bind)

    for allowed in ("127.0.0.1:8080", "localhost:8080", "[::1]:8080", "127.000.000.001:8080", "localhost"):
        assert policy.allows(allowed), (bind, allowed)
    for foreign in FOREIGN:
        assert not policy.allows(foreign), (bind, foreign)


@pytest.mark.parametrize("bind", ["0.0.0.0", "::"])
def test_a_wildcard_bind_answers_the_machines_names_and_the_address_reached_but_no_other_name(
    bind: str,
) -> None:
    policy = host_policy(bind, extra=["taskplug.internal.example"])

    assert policy.allows(f"{socket.gethostname()}:8080")
    assert policy.allows("localhost:8080")
    assert policy.allows("taskplug.internal.example")
    # A client that typed the address it reached; a name equal to the "reached" string is not an address.
    assert policy.allows("192.0.2.7:8080", reached="192.0.2.7")
    assert not policy.allows("192.0.2.8:8080", reached="192.0.2.7")
    assert not policy.allows("testserver", reached="testserver")
    for foreign in FOREIGN:
        assert not policy.allows(foreign, reached="192.0.2.7"), foreign


def test_a_lan_bind_answers_that_address_and_not_loopback_names() -> None:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outgoing address
            lan = probe.getsockname()[0]
    except OSError:
        pytest.skip("this machine has no route off loopback")
    if ipaddress_is_loopback(lan):
        pytest.skip("this machine has no non-loopback address")

    policy = host_policy(lan, extra=["ci.example"])

    assert policy.allows(f"{lan}:8080")
    assert policy.allows("ci.example:8080")
    assert not policy.allows(
        "localhost:8080"
    )  # a page on this machine naming localhost reached another server
    for foreign in FOREIGN:
        assert not policy.allows(foreign, reached=lan), foreign


def ipaddress_is_loopback(address: str) -> bool:
    import ipaddress

    return ipaddress.ip_address(address).is_loopback


def test_a_bind_address_no_resolver_knows_is_refused() -> None:
    with pytest.raises(ValueError, match=r"no-such-host\.invalid"):
        host_policy("no-such-host.invalid")


@pytest.mark.parametrize("bind", ["127.000.000.001", "::1", "0.0.0.0"])
def test_the_app_refuses_a_foreign_host_for_every_bind_spelling(postgres_dsn: str, bind: str) -> None:
    with TestClient(create_app(postgres_dsn, allowed_hosts=host_policy(bind))) as client:
        assert client.get("/api/v1/healthz", headers={"host": "localhost:8080"}).status_code == 200
        assert client.get("/api/v1/healthz", headers={"host": "[::1]:8080"}).status_code == 200
        for foreign in FOREIGN:
            refused = client.get("/api/v1/executions", headers={"host": foreign})
            assert refused.status_code == 400, foreign
            assert refused.json()["error"]["field"] == "header.host"
            submitted = client.post(
                "/api/v1/executions",
                json={"spec": {}},
                headers={"host": foreign, "origin": f"http://{foreign}"},
            )
            assert submitted.status_code == 400, foreign


def test_serve_bound_with_a_leading_zero_spelling_refuses_a_foreign_host(
    postgres_dsn: str, tmp_path: Path
) -> None:
    """The finding: ``--host 127.000.000.001`` answered ``Host: attacker.example`` with 200."""
    port = free_port()
    log = tmp_path / "serve.log"
    command = "import sys; from taskplug.cli._serve import serve; sys.argv[0] = 'taskplug serve'; serve()"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                command,
                "--store",
                postgres_dsn,
                "--host",
                "127.000.000.001",
                "--port",
                str(port),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until_ready(lambda: _status(port, "127.0.0.1") == 200, process, log, what="taskplug serve")
        assert _status(port, f"attacker.example:{port}") == 400
        assert _status(port, f"127.0.0.1.attacker.example:{port}") == 400
        assert _status(port, f"localhost:{port}") == 200
        assert _status(port, f"127.000.000.001:{port}") == 200
    finally:
        stop_process(process)


def _status(port: int, host: str) -> int | None:
    """The status of GET /api/v1/healthz sent with this Host header (None when nothing answers)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
            conn.sendall(
                f"GET /api/v1/healthz HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()
            )
            head = conn.recv(64)
    except OSError:
        return None
    parts = head.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
