"""Who may talk to the embedded cluster over HTTP: a bearer token, a Host it serves, no cross-site request.

A pod's command runs on this machine, so the HTTP façade is as dangerous as a shell. Three checks stand in
front of every request, in this order:

1. **Host.** The ``Host`` header must name the address the server is bound to or a loopback name
   (``localhost``, ``127.0.0.1``, ``::1``). A page on ``attacker.example`` whose name an attacker re-points
   at 127.0.0.1 (DNS rebinding) sends ``Host: attacker.example:PORT`` and is refused with 403.
2. **Cross-site.** A browser marks what a page sends: an ``Origin`` whose host is not one the server
   serves, or ``Sec-Fetch-Site: cross-site | same-site``, is refused with 403. kubectl and lightkube send
   neither header.
3. **Credential.** ``Authorization: Bearer <token>``, compared in constant time; anything else is the API
   server's 401 ``Unauthorized`` Status. kube-apiserver lets anyone read ``/healthz``, ``/livez``,
   ``/readyz`` and ``/version`` (the ``system:public-info-viewer`` role); so does this server, Host check
   still applied.

The token is random per start unless one is given; it is written only into the kubeconfig (mode 0600).
Follows k8s.io/apiserver/pkg/authentication/request/bearertoken (the header's form, 401 on a wrong token).
Deviation: kube-apiserver checks neither Host nor Origin — it serves TLS with client credentials, which a
browser cannot forge; this server speaks plain HTTP on loopback, so it refuses what a browser would send.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Iterable, Mapping
from typing import Final
from urllib.parse import urlsplit

from taskplug.core import LOOPBACK_NAMES, canonical_host, host_of
from taskplug.k8s import KubeApiError

__all__ = ["AccessPolicy", "new_token"]

PUBLIC_PATHS: Final = frozenset({"healthz", "livez", "readyz", "version"})
"""First path segments anyone may read (kube-apiserver's ``system:public-info-viewer``)."""

_UNAUTHORIZED: Final = KubeApiError(401, "Unauthorized", "Unauthorized")
_HOSTS_REMEMBERED: Final = 64
"""Distinct Host headers whose reading is remembered (the names and spellings clients use)."""


def new_token() -> str:
    """A fresh bearer token: 256 random bits, URL-safe."""
    return secrets.token_urlsafe(32)


class AccessPolicy:
    """The three checks, for a server bound to ``bound_host`` that wants ``token``."""

    def __init__(self, token: str, *, bound_host: str, extra_hosts: Iterable[str] = ()) -> None:
        if not token:
            raise ValueError("the cluster's bearer token must not be empty")
        self.token = token
        self._expected = f"Bearer {token}".encode()
        self.hosts = frozenset(
            canonical_host(h) for h in (*LOOPBACK_NAMES, bound_host, *extra_hosts) if h.strip()
        )
        # Host header -> whether it names a host served here. A client sends the same one on every request,
        # and reading it (a URL parse, an IP literal's canonical form) cost more than the rest of the checks.
        self._host_answers: dict[str, bool] = {}

    def _answers(self, header: str) -> bool:
        known = self._host_answers.get(header)
        if known is None:
            host = host_of(header)
            known = host is not None and host in self.hosts
            if len(self._host_answers) < _HOSTS_REMEMBERED:  # any client may send any Host: bounded
                self._host_answers[header] = known
        return known

    def check(self, path_head: str, headers: Mapping[str, str]) -> KubeApiError | None:
        """The error to answer, or None when the request may go on. ``path_head`` is the first path segment."""
        if not self._answers(headers.get("Host", "")):
            return KubeApiError(
                403,
                "Forbidden",
                "forbidden: the Host header names no address this server answers to "
                f"(it answers to {', '.join(sorted(self.hosts))})",
            )
        origin = headers.get("Origin")
        if origin is not None and not self._same_site(origin):
            return KubeApiError(403, "Forbidden", "forbidden: cross-site requests are refused")
        if headers.get("Sec-Fetch-Site", "").lower() in ("cross-site", "same-site"):
            return KubeApiError(403, "Forbidden", "forbidden: cross-site requests are refused")
        if path_head in PUBLIC_PATHS:
            return None
        given = headers.get("Authorization", "").encode("utf-8", "surrogateescape")
        if not hmac.compare_digest(given, self._expected):
            return _UNAUTHORIZED
        return None

    def _same_site(self, origin: str) -> bool:
        try:
            parsed = urlsplit(origin)
            return parsed.scheme in ("http", "https") and canonical_host(parsed.hostname or "") in self.hosts
        except ValueError:
            return False
