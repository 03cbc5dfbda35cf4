"""A ``Host`` header as both HTTP servers compare it: the host part, lower case, an IP literal canonical.

``taskplug serve`` and ``taskplug cluster serve`` each answer only the names they serve, which stops a page
whose name was re-pointed at this machine (DNS rebinding). Both read a ``Host`` header, and an IP literal in
any spelling a browser's URL parser takes (``127.1``, ``0x7f.0.0.1``, ``[::1]``), the same way: here.
Follows no Flyte file.
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import urlsplit

__all__ = ["LOOPBACK_NAMES", "canonical_host", "host_of"]

LOOPBACK_NAMES: Final = frozenset({"localhost", "127.0.0.1", "::1"})
_NUMERIC_LABEL: Final = re.compile(r"^(0x[0-9a-f]*|[0-9]+)$")


def canonical_host(name: str) -> str:
    """A host as compared: lower case, brackets and a trailing dot off, an IP literal in its canonical form
    (IPv4 in the legacy spellings ``inet_aton`` and browsers take too: ``127.1``, ``0177.0.0.1``)."""
    # Imported here: every command loads taskplug.core, only the two servers compare hosts.
    import ipaddress
    import socket

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
