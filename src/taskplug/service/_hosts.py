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
import socket
from collections.abc import Iterable
from dataclasses import dataclass

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from taskplug.core import LOOPBACK_NAMES, canonical_host, host_of

__all__ = ["HostCheck", "HostPolicy", "host_policy"]


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
