"""Reading a kubeconfig: the bounded document reader, then typed fields, before lightkube sees it.

A kubeconfig is a file someone else wrote: it is read like every other document (:func:`taskplug.core.
load_document`: a size cap, UTF-8, bounded YAML, JSON's values only) and its fields are typed before lightkube
sees them, so a bad file is an error naming the file and the field (``clusters[0].cluster.server``), never a
``UnicodeDecodeError`` or ``KeyError`` from the client library. Only what the client reads is checked; keys it
ignores (``preferences``, ``extensions``, ``proxy-url`` …) are kept as kubectl keeps them. The references are
checked too: the current context exists, and so do the cluster and user each context names.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from taskplug.core import ConfigError, DocumentError, load_document

__all__ = ["DEFAULT_TIMEOUT", "default_kubeconfig_path", "load_kubeconfig"]

DEFAULT_TIMEOUT: Final = 30.0
"""Seconds one API request may take when the caller gives no timeout: Flyte's ``kube-client-config.timeout``
default."""


class _Model(BaseModel):
    # Strict: a number where a string belongs is a mistake, not a value to convert. Unknown keys are kept.
    # Built when a kubeconfig is first read, not when a run on the embedded cluster imports the engine.
    model_config = ConfigDict(
        extra="allow", strict=True, frozen=True, populate_by_name=True, defer_build=True
    )


class _Cluster(_Model):
    server: str = "http://localhost:8080"
    certificate_authority: str | None = Field(default=None, alias="certificate-authority")
    certificate_authority_data: str | None = Field(default=None, alias="certificate-authority-data")
    insecure_skip_tls_verify: bool = Field(default=False, alias="insecure-skip-tls-verify")


class _NamedCluster(_Model):
    name: str
    cluster: _Cluster


class _Context(_Model):
    cluster: str
    user: str | None = None
    namespace: str | None = None


class _NamedContext(_Model):
    name: str
    context: _Context


class _NameValue(_Model):
    name: str
    value: str


class _Exec(_Model):
    api_version: str = Field(alias="apiVersion")
    command: str
    env: list[_NameValue] | None = None
    args: list[str] | None = None
    install_hint: str | None = Field(default=None, alias="installHint")


class _User(_Model):
    exec: _Exec | None = None
    username: str | None = None
    password: str | None = None
    token: str | None = None
    token_file: str | None = Field(default=None, alias="tokenFile")
    auth_provider: dict[str, Any] | None = Field(default=None, alias="auth-provider")
    client_certificate: str | None = Field(default=None, alias="client-certificate")
    client_certificate_data: str | None = Field(default=None, alias="client-certificate-data")
    client_key: str | None = Field(default=None, alias="client-key")
    client_key_data: str | None = Field(default=None, alias="client-key-data")


class _NamedUser(_Model):
    name: str
    user: _User


class _KubeConfigFile(_Model):
    clusters: list[_NamedCluster] = Field(default_factory=list)
    contexts: list[_NamedContext] = Field(default_factory=list)
    users: list[_NamedUser] = Field(default_factory=list)
    current_context: str | None = Field(default=None, alias="current-context")


def _where(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _error(source: str, field: str, reason: str) -> ConfigError:
    return ConfigError(field, f"{reason} (kubeconfig {source})")


def default_kubeconfig_path() -> Path:
    """Where a kubeconfig is looked for when none is given: ``$KUBECONFIG``, else ``~/.kube/config``."""
    return Path(os.environ.get("KUBECONFIG") or "~/.kube/config").expanduser()


def load_kubeconfig(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The kubeconfig at ``path`` as a document lightkube can take: read through the bounded document reader,
    every field lightkube reads typed, the server URLs, base64 data and references checked. Every error names
    the file, and the field when it is one field's fault."""
    source = str(path)
    try:
        document = load_document(Path(path).expanduser(), source, what="kubeconfig")
    except DocumentError as e:
        raise ConfigError(e.path, e.reason) from None
    if document is None:
        document = {}
    if not isinstance(document, Mapping):
        raise _error(
            source, "kubeconfig", f"must be a mapping at the top level, got {type(document).__name__}"
        )
    try:
        parsed = _KubeConfigFile.model_validate(document, by_alias=True, by_name=False)
    except ValidationError as e:
        first = e.errors()[0]
        raise _error(source, _where(tuple(first["loc"])) or "kubeconfig", first["msg"]) from None
    for i, named in enumerate(parsed.clusters):
        _check_cluster(source, f"clusters[{i}].cluster", named.cluster)
    for i, named_user in enumerate(parsed.users):
        for key in ("client-certificate-data", "client-key-data"):
            _check_base64(source, f"users[{i}].user.{key}", getattr(named_user.user, key.replace("-", "_")))
    clusters = {c.name for c in parsed.clusters}
    users = {u.name for u in parsed.users}
    for i, named_context in enumerate(parsed.contexts):
        ctx = named_context.context
        if ctx.cluster not in clusters:
            raise _error(
                source, f"contexts[{i}].context.cluster", f"names no cluster of clusters: {ctx.cluster!r}"
            )
        if ctx.user and ctx.user not in users:
            raise _error(source, f"contexts[{i}].context.user", f"names no user of users: {ctx.user!r}")
    current = parsed.current_context
    if current and current not in {c.name for c in parsed.contexts}:
        raise _error(source, "current-context", f"names no context of contexts: {current!r}")
    out: dict[str, Any] = parsed.model_dump(by_alias=True, exclude_none=True)
    return out


def _check_cluster(source: str, where: str, cluster: _Cluster) -> None:
    try:
        url = urlsplit(cluster.server)
        port = url.port  # parses it: a port beyond 65535 or not a number is a ValueError
    except ValueError as e:
        raise _error(source, f"{where}.server", f"is not a URL: {cluster.server!r} ({e})") from None
    if url.scheme not in ("http", "https") or not url.hostname:
        raise _error(source, f"{where}.server", f"must be an http(s) URL with a host, got {cluster.server!r}")
    del port
    _check_base64(source, f"{where}.certificate-authority-data", cluster.certificate_authority_data)


def _check_base64(source: str, where: str, value: str | None) -> None:
    if value is None:
        return
    try:
        # Line breaks are allowed, as Go's decoder of []byte fields allows them.
        base64.b64decode("".join(value.split()), validate=True)
    except (binascii.Error, ValueError):
        raise _error(source, where, "is not base64 data") from None
