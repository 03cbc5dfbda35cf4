"""Which ``Host`` headers ``taskplug serve`` answers, whatever way its bind address was spelled.

A page on ``attacker.example`` whose name the attacker re-points at this server's address (DNS rebinding)
makes the browser send ``Host: attacker.example:PORT``; answering it would let that page read the API and,
Origin then matching Host, submit. So the allowed names are computed from the *canonical* bind address, not
from how ``--host`` was typed (``127.000.000.001``, ``127.1``, ``0x7f.0.0.1``, ``::1``, ``[::1]`` and
``localhost`` are all loopback):

- bound to a loopback address: the loopback names (``localhost``, ``127.0.0.1``, ``::1``) and that address;
- bound to one other address (a LAN address): that address, and the machine's own names when they resolve
  to it;
- bound to every address (``0.0.0.0``, ``::``): the loopback names, the machine's names and addresses, and
  the address the connection reached (a client that typed an IP literal reached it; a rebinding page names
  a host name, never the literal);
- in every case the names given with ``--allowed-host`` (a DNS name or a proxy's name for this server).

An IP literal in a ``Host`` header is compared in its canonical form too (``Host: 127.1`` is 127.0.0.1, as a
browser's URL parser reads it). Starlette's ``TrustedHostMiddleware`` compares names as strings (``127.1``
is not ``127.0.0.1`` to it) and knows nothing of the address a connection reached, hence this module.
Follows no Flyte file.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["HostCheck", "HostPolicy", "canonical_host", "host_of", "host_policy"]

LOOPBACK_NAMES: Final = frozenset({"localhost", "127.0.0.1", "::1"})
_NUMERIC_LABEL: Final = re.compile(r"^(0x[0-9a-f]*|[0-9]+)$")


def canonical_host(name: str) -> str:
    """A host as compared: lower case, brackets and a trailing dot off, an IP literal in its canonical form
    (IPv4 in the legacy spellings ``inet_aton`` and browsers take too: ``127.1``, ``0177.0.0.1``)."""
    name = name.strip().lower().rstrip(".")
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        pass
    # The WHATWG URL parser reads a host whose last label is a number as IPv4; a name cannot end so.
    if name and _NUMERIC_LABEL.match(name.rsplit(".", 1)[-1]):
        try:
            return socket.inet_ntoa(socket.inet_aton(name))
        except OSError:
            return name
    return name


def host_of(header: str) -> str | None:
    """The canonical host of a ``Host`` header (``name``, ``name:port``, ``[v6]:port``); None when malformed."""
    if not header or any(ord(c) < 0x21 or ord(c) == 0x7F or c in "/?#@\\" for c in header):
        return None
    try:
        parsed = urlsplit(f"//{header}")
        hostname = parsed.hostname
        parsed.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError:
        return None
    return canonical_host(hostname) if hostname else None


def _addresses(name: str) -> set[str]:
    try:
        infos = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return set()
    return {canonical_host(str(info[4][0]).split("%", 1)[0]) for info in infos}


@dataclass(frozen=True, slots=True)
class HostPolicy:
    """The ``Host`` names answered (canonical), and whether a ``Host`` naming the very address the
    connection reached is answered too (a server bound to every address)."""

    names: frozenset[str]
    local_address: bool = False

    def allows(self, header: str, reached: str | None = None) -> bool:
        host = host_of(header)
        if host is None:
            return False
        if host in self.names:
            return True
        # Only an IP literal: a rebinding page names a host name, and the client that typed the literal
        # reached this very address.
        return self.local_address and reached is not None and _is_ip(host) and host == canonical_host(reached)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def host_policy(bind: str, *, extra: Iterable[str] = ()) -> HostPolicy:
    """The policy of a server bound to ``bind`` (any spelling ``getaddrinfo`` takes), plus ``extra`` names.

    Raises ValueError naming ``bind`` when it is no address of this machine's resolver."""
    bound = _addresses(bind)
    if not bound:
        raise ValueError(f"{bind!r} is no address this machine can bind")
    given = {canonical_host(h) for h in extra if h.strip()}
    ips = {ipaddress.ip_address(a) for a in bound}
    machine = {m for m in (socket.gethostname(), socket.getfqdn()) if m}
    if any(ip.is_unspecified for ip in ips):
        everything = set(LOOPBACK_NAMES) | {canonical_host(m) for m in machine}
        for m in machine:
            everything |= _addresses(m)
        return HostPolicy(frozenset(everything | given), local_address=True)
    if all(ip.is_loopback for ip in ips):
        return HostPolicy(frozenset(LOOPBACK_NAMES | bound | given))
    names = set(bound)
    for m in machine:
        if _addresses(m) & bound:
            names.add(canonical_host(m))
    return HostPolicy(frozenset(names | given))


class HostCheck:
    """Answer 400 to a request whose ``Host`` the policy refuses (Starlette's ``TrustedHostMiddleware``
    answers 400 too: the request names a server this is not). Plain ASGI: streams pass untouched."""

    def __init__(self, app: ASGIApp, *, policy: HostPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            header = Headers(scope=scope).get("host", "")
            server = scope.get("server")
            reached = str(server[0]) if server else None
            if not self.policy.allows(header, reached):
                refused = JSONResponse(
                    {
                        "error": {
                            "message": "the Host header names no address this server answers to "
                            "(start it with --allowed-host NAME to answer a name)",
                            "field": "header.host",
                        }
                    },
                    status_code=400,
                )
                await refused(scope, receive, send)
                return
        await self.app(scope, receive, send)
