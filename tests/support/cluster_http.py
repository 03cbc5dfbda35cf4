"""Raw HTTPS to a served embedded cluster: its CA and the credential every request but health needs."""

from __future__ import annotations

import aiohttp

from taskplug.localcluster import LocalCluster


def bearer(cluster: LocalCluster) -> dict[str, str]:
    """The ``Authorization`` header for ``cluster``'s HTTP façade (after ``await cluster.serve_http()``)."""
    return {"Authorization": f"Bearer {cluster.http_token}"}


def cluster_session(cluster: LocalCluster, *, authorized: bool = True) -> aiohttp.ClientSession:
    """A session that trusts ``cluster``'s CA and, unless ``authorized=False``, sends its token."""
    return aiohttp.ClientSession(
        headers=bearer(cluster) if authorized else None,
        connector=aiohttp.TCPConnector(ssl=cluster.http_client_ssl()),
    )
