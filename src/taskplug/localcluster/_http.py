"""The HTTPS façade: the REST paths kubectl and lightkube use, on 127.0.0.1, over the same store.

Follows the API server's URL layout and wire behaviour (k8s.io/apiserver/pkg/endpoints): legacy discovery
(``/api`` APIVersions, ``/apis`` APIGroupList, ``/api/v1`` and ``/apis/{g}/{v}`` APIResourceList with
verbs, ``/apis/{g}`` APIGroup), ``/version``; collections and items for namespaced
(``/namespaces/{ns}/{plural}[/{name}[/{sub}]]``) and cluster-scoped resources; ``kind: PodList`` on lists
with the list ``resourceVersion``; 201 on create; 200 with the object on delete; ``Status`` errors with
``Content-Type: application/json`` exactly (lightkube only maps that); ``?watch=true|1`` streams
newline-delimited ``{"type", "object"}`` events, with an in-stream ``ERROR`` event carrying the 410 Status
for an expired version, ``timeoutSeconds``, ``allowWatchBookmarks``; ``pods/{name}/log`` and the
``status`` subresource. Scripted faults apply as for the in-process client (429 carries ``Retry-After``).
Bodies are decoded and validated by the store exactly as the in-process client's objects are (400 for a
field of the wrong type, 422 ``Invalid`` naming each field); an error a handler did not expect is a 500
``InternalError`` Status in JSON naming it (genericapirequest's panic recovery), and the server goes on.

``kubectl get`` gets a Table (``_table.py``): a pod's columns as a real server prints them, the default NAME
and CREATED AT for other resources.

Deviation: ``limit``/``continue`` are ignored (one page), ``dryRun`` is ignored, there are no OpenAPI
documents (kubectl needs ``--validate=false``), no aggregated discovery, and no ``deletecollection``.
Every request passes :class:`~taskplug.localcluster._access.AccessPolicy` first (a bearer token, a Host this
server answers to, no cross-site request): a pod's command runs on this machine.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from typing import TYPE_CHECKING, Any, Final, Protocol

import orjson
from aiohttp import web

from taskplug.core import DocumentError, load_document
from taskplug.k8s import KubeApiError, ResourceType
from taskplug.localcluster._access import AccessPolicy
from taskplug.localcluster._errors import (
    bad_request,
    internal_error,
    method_not_allowed,
    request_entity_too_large,
    unsupported_media_type,
)
from taskplug.localcluster._patch import apply_patch
from taskplug.localcluster._podlog import LogOptions, follow_log, previous_not_found, select_log
from taskplug.localcluster._resources import POD, TypeRegistry, deep_copy
from taskplug.localcluster._selectors import FieldSelector, LabelSelector
from taskplug.localcluster._table import table, wants_table
from taskplug.localcluster._validation import decode_object

if TYPE_CHECKING:
    from taskplug.localcluster._faults import Faults
    from taskplug.localcluster._store import Store
    from taskplug.localcluster._timers import Timers

__all__ = ["ApiBackend", "start_server"]

_log = logging.getLogger(__name__)


class ApiBackend(Protocol):
    """What the HTTP façade serves: the cluster's store and types, its scripted faults, its timers, and the
    containers' logs (``LocalCluster`` is one)."""

    @property
    def store(self) -> Store: ...

    @property
    def types(self) -> TypeRegistry: ...

    @property
    def faults(self) -> Faults: ...

    @property
    def timers(self) -> Timers: ...

    def logs(self, namespace: str, name: str, container: str | None = None) -> str: ...


READ_TIMEOUT: Final = 60.0
"""Seconds a client has to send a request's headers (or anything, on a new or idle connection) and, after
them, its body; then the connection is closed (408 for a late body), as kube-apiserver's HTTP server bounds
``ReadHeaderTimeout`` and idle connections. A watch, once asked, is the server's to end: not bounded."""

MAX_BODY_BYTES: Final = 3 * 1024 * 1024
"""kube-apiserver's limit on a request body (``MaxRequestBodyBytes``, 3 MB); larger ones get a 413 Status."""

# What kube-apiserver decodes for create and update (protobuf aside, which the embedded cluster does not speak).
_OBJECT_MEDIA_TYPES: Final = ("application/json", "application/yaml")

_VERBS: Final = ["create", "delete", "get", "list", "patch", "update", "watch"]
_PATCH_TYPES: Final = {
    "application/merge-patch+json": "merge",
    "application/json-patch+json": "json",
    "application/strategic-merge-patch+json": "strategic",
}
_NO_ROUTE: Final = KubeApiError(404, "NotFound", "the server could not find the requested resource")


def _json(obj: Any, status: int = 200) -> web.Response:
    # Exactly "application/json": lightkube maps a Status to ApiError only for that content type.
    return web.Response(body=orjson.dumps(obj), status=status, headers={"Content-Type": "application/json"})


def _error(err: KubeApiError) -> web.Response:
    response = _json(err.to_status(), err.status)
    retry = err.details.get("retryAfterSeconds")
    if retry is not None and err.status in (429, 500, 503, 504):
        response.headers["Retry-After"] = str(retry)
    return response


def _metadata(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The body's metadata to fill in from the URL; None when it is not an object (the store's decoding
    answers that with a 400 naming ``metadata``)."""
    meta = obj.setdefault("metadata", {})
    if meta is None:
        meta = obj["metadata"] = {}
    return meta if isinstance(meta, dict) else None


def _media_type(request: web.Request) -> str:
    return request.headers.get("Content-Type", "").split(";")[0].strip().lower()


def _truthy(value: str | None) -> bool:
    return (value or "").lower() in ("true", "1")


def _resource_entries(types: TypeRegistry, api_version: str) -> list[dict[str, Any]]:
    entries = []
    for rtype in sorted(types.in_group_version(api_version), key=lambda t: t.plural):
        entry: dict[str, Any] = {
            "name": rtype.plural,
            "singularName": rtype.kind.lower(),
            "namespaced": rtype.namespaced,
            "kind": rtype.kind,
            "verbs": _VERBS,
        }
        if short := types.short_names(rtype):
            entry["shortNames"] = short
        if rtype == POD:
            entry["categories"] = ["all"]
        entries.append(entry)
        status_verbs = ["get", "patch", "update"]
        entries.append(
            {
                "name": f"{rtype.plural}/status",
                "singularName": "",
                "namespaced": rtype.namespaced,
                "kind": rtype.kind,
                "verbs": status_verbs,
            }
        )
        if rtype == POD:
            entries.append(
                {"name": "pods/log", "singularName": "", "namespaced": True, "kind": "Pod", "verbs": ["get"]}
            )
    return entries


class _BodyTimeout(Exception):
    """The request's body did not arrive within the read timeout."""


class _Api:
    def __init__(
        self, cluster: ApiBackend, address: str, access: AccessPolicy, *, read_timeout: float = READ_TIMEOUT
    ) -> None:
        self.cluster = cluster
        self.store = cluster.store
        self.types = cluster.types
        self.address = address
        self.access = access
        self.read_timeout = read_timeout

    async def handle(self, request: web.Request) -> web.StreamResponse:
        head = next((p for p in request.path.split("/") if p), "")
        refused = self.access.check(head, request.headers)
        if refused is not None:
            return _error(refused)
        try:
            return await self._dispatch(request)
        except KubeApiError as err:
            return _error(err)
        except web.HTTPRequestEntityTooLarge:
            return _error(request_entity_too_large(MAX_BODY_BYTES))
        except _BodyTimeout:
            # The rest of the body may still come: the connection cannot carry another request.
            response = _error(
                KubeApiError(408, "Timeout", f"the request body did not arrive within {self.read_timeout:g}s")
            )
            response.force_close()
            return response
        except web.HTTPException as err:
            return _error(KubeApiError(err.status, err.reason.replace(" ", ""), err.text or err.reason))
        except Exception as err:
            # What a handler did not expect is the API server's 500 InternalError Status, in JSON like every
            # other answer, and the server goes on serving.
            _log.exception("%s %s failed", request.method, request.path)
            return _error(internal_error(f"{type(err).__name__}: {err}"))

    # -- routing -----------------------------------------------------------------------------------------
    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        parts = [p for p in request.path.split("/") if p]
        if parts in (["version"], ["version", ""]):
            return _json(
                {
                    "major": "1",
                    "minor": "37",
                    "gitVersion": "v1.37.0-taskplug",
                    "gitCommit": "",
                    "gitTreeState": "clean",
                    "buildDate": "2026-01-01T00:00:00Z",
                    "goVersion": "python",
                    "compiler": "taskplug",
                    "platform": "linux/amd64",
                }
            )
        if parts and parts[0] in ("healthz", "livez", "readyz"):
            return web.Response(text="ok", content_type="text/plain")
        if parts == ["api"]:
            return _json(
                {
                    "kind": "APIVersions",
                    "versions": ["v1"],
                    "serverAddressByClientCIDRs": [
                        {"clientCIDR": "0.0.0.0/0", "serverAddress": self.address}
                    ],
                }
            )
        if parts == ["apis"]:
            groups = [self._group(g, vs) for g, vs in sorted(self.types.group_versions().items()) if g]
            return _json({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
        if parts[:1] == ["api"] and len(parts) >= 2:
            api_version, rest = parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) == 2:
            versions = self.types.group_versions().get(parts[1])
            if not versions:
                raise _NO_ROUTE
            return _json({"kind": "APIGroup", "apiVersion": "v1", **self._group(parts[1], versions)})
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            api_version, rest = f"{parts[1]}/{parts[2]}", parts[3:]
        else:
            raise _NO_ROUTE
        if not rest:
            if not self.types.in_group_version(api_version):
                raise _NO_ROUTE
            return _json(
                {
                    "kind": "APIResourceList",
                    "apiVersion": "v1",
                    "groupVersion": api_version,
                    "resources": _resource_entries(self.types, api_version),
                }
            )
        watch = False
        if rest[0] == "watch":  # the deprecated /watch/ prefix
            watch, rest = True, rest[1:]
        namespace: str | None = None
        if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
            namespace, rest = rest[1], rest[2:]
        rtype = self.types.get(api_version, rest[0])
        if rtype is None or len(rest) > 3:
            raise _NO_ROUTE
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if rtype.namespaced and name is not None and namespace is None:
            raise _NO_ROUTE
        return await self._resource(request, rtype, namespace, name, sub, watch)

    def _group(self, group: str, versions: list[str]) -> dict[str, Any]:
        listed = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {"name": group, "versions": listed, "preferredVersion": listed[0]}

    # -- resources ---------------------------------------------------------------------------------------
    async def _resource(
        self,
        request: web.Request,
        rtype: ResourceType,
        namespace: str | None,
        name: str | None,
        sub: str | None,
        watch: bool,
    ) -> web.StreamResponse:
        method, query, faults = request.method, request.query, self.cluster.faults
        if name is None:
            if method == "GET":
                watching = watch or _truthy(query.get("watch"))
                await faults.check("watch" if watching else "list", rtype.plural)
                if watching:
                    return await self._watch(request, rtype, namespace)
                items, rv = self.store.list(
                    rtype,
                    namespace,
                    labels=LabelSelector.parse(query.get("labelSelector")),
                    fields=FieldSelector.parse(query.get("fieldSelector")),
                )
                body = {
                    "kind": f"{rtype.kind}List",
                    "apiVersion": rtype.api_version,
                    "metadata": {"resourceVersion": str(rv)},
                    "items": items,
                }
                if wants_table(request.headers.get("Accept")):  # kubectl get: the columns of a real server
                    body = self._table(request, rtype, items, str(rv))
                return web.Response(body=orjson.dumps(body), headers={"Content-Type": "application/json"})
            if method == "POST":
                await faults.check("create", rtype.plural)
                obj = await self._body(request)
                meta = _metadata(obj)
                if rtype.namespaced and meta is not None:
                    given = meta.get("namespace")
                    if isinstance(given, str) and given and namespace and given != namespace:
                        raise bad_request(
                            "the namespace of the provided object does not match the namespace sent on "
                            "the request"
                        )
                    meta["namespace"] = meta.get("namespace") or namespace
                return _json(self.store.create(rtype, obj), 201)
            raise method_not_allowed(
                f"the server does not allow this method on the requested resource ({method})"
            )
        if sub == "log" and rtype == POD:
            return await self._log(request, rtype, namespace, name, query.get("container"))
        if sub not in (None, "status"):
            raise _NO_ROUTE
        if method == "GET":
            await faults.check("get", rtype.plural)
            if wants_table(request.headers.get("Accept")):
                return _json(self._table(request, rtype, [self.store.get(rtype, namespace, name)], ""))
            return _json(self.store.get(rtype, namespace, name))
        if method == "PUT":
            await faults.check("replace", rtype.plural)
            obj = await self._body(request)
            meta = _metadata(obj)
            if meta is None:
                return _json(self.store.replace(rtype, obj))  # the store answers the 400 that names it
            if meta.get("name") and meta["name"] != name:
                raise bad_request(
                    f"the name of the object ({meta['name']}) does not match the name on the URL ({name})"
                )
            meta["name"], meta["namespace"] = name, namespace
            if sub == "status":
                current = deep_copy(self.store.get(rtype, namespace, name))
                current["status"] = obj.get("status") or {}
                current["metadata"]["resourceVersion"] = meta.get("resourceVersion", "")
                obj = current
            return _json(self.store.replace(rtype, obj))
        if method == "PATCH":
            await faults.check("patch", rtype.plural)
            content_type = _media_type(request)
            patch_type = _PATCH_TYPES.get(content_type)
            if patch_type is None:
                raise unsupported_media_type(content_type, tuple(_PATCH_TYPES))
            patch = await self._raw_body(request, yaml_allowed=False)
            if sub == "status":
                current = self.store.get(rtype, namespace, name)
                patched = decode_object(rtype, apply_patch(current, patch, patch_type))
                replacement = deep_copy(current)
                replacement["status"] = deep_copy(patched.get("status") or {})
                return _json(self.store.replace(rtype, replacement))
            return _json(self.store.patch(rtype, namespace, name, patch, patch_type))
        if method == "DELETE":
            await faults.check("delete", rtype.plural)
            return _json(self.store.delete(rtype, namespace, name))
        raise method_not_allowed(
            f"the server does not allow this method on the requested resource ({method})"
        )

    def _table(
        self, request: web.Request, rtype: ResourceType, objects: list[dict[str, Any]], rv: str
    ) -> dict[str, Any]:
        include = request.query.get("includeObject", "Metadata")
        now = self.store.clock.now()
        return table(rtype, objects, now=now, resource_version=rv, include_object=include)

    async def _log(
        self,
        request: web.Request,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        container: str | None,
    ) -> web.StreamResponse:
        options = LogOptions.from_query(request.query)
        pod = self.store.get(rtype, namespace, name)
        names = [c["name"] for c in (pod.get("spec") or {}).get("containers") or []]
        init = [c["name"] for c in (pod.get("spec") or {}).get("initContainers") or []]
        if container is None and len(names) > 1:
            raise bad_request(
                f"a container name must be specified for pod {name}, choose one of: [{' '.join(names)}]"
                + (f" or one of the init containers: [{' '.join(init)}]" if init else "")
            )
        if container is not None and container not in names + init:
            raise bad_request(f"container {container} is not valid for pod {name}")
        if options.previous:
            raise previous_not_found(container or names[0], name)
        where = namespace or "default"
        text = self.cluster.logs(where, name, container)
        if not options.follow:
            return web.Response(text=select_log(text, options), content_type="text/plain")

        def read() -> tuple[str, bool]:
            now = self.store.try_get(POD, where, name)
            if now is None:
                return text, True
            ended = (now.get("status") or {}).get("phase") in ("Succeeded", "Failed")
            return self.cluster.logs(where, name, container), ended

        return await follow_log(request, select_log(text, options), read, written=len(text))

    async def _raw_body(self, request: web.Request, *, yaml_allowed: bool) -> Any:
        try:
            async with asyncio.timeout(self.read_timeout):
                raw = await request.read()
        except TimeoutError:
            raise _BodyTimeout from None
        try:
            return load_document(raw, "body", yaml_allowed=yaml_allowed)
        except DocumentError as err:
            raise bad_request(f"the body of the request was in an unknown format: {err}") from None

    async def _body(self, request: web.Request) -> dict[str, Any]:
        # Only the media types an API server decodes: a browser's cross-site "simple" request (text/plain,
        # a form, multipart) is refused before anything is created, so no web page can start a pod.
        content_type = _media_type(request)
        if content_type not in _OBJECT_MEDIA_TYPES:
            raise unsupported_media_type(content_type, _OBJECT_MEDIA_TYPES)
        body = await self._raw_body(request, yaml_allowed=content_type == "application/yaml")
        if not isinstance(body, dict):
            raise bad_request("the body of the request was in an unknown format: expected an object")
        return body

    async def _watch(
        self, request: web.Request, rtype: ResourceType, namespace: str | None
    ) -> web.StreamResponse:
        query = request.query
        watcher = self.store.watch(
            rtype,
            namespace,
            resource_version=query.get("resourceVersion"),
            labels=LabelSelector.parse(query.get("labelSelector")),
            fields=FieldSelector.parse(query.get("fieldSelector")),
            bookmarks=_truthy(query.get("allowWatchBookmarks")),
        )
        timeout = query.get("timeoutSeconds")
        deadline = (
            self.cluster.timers.call_later(float(timeout), watcher.close)
            if timeout and timeout.isdigit()
            else None
        )
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        try:
            ended = False
            while not ended:
                chunks: list[bytes] = []
                try:
                    item = await watcher.next()
                    while item is not None:
                        type_, event = item
                        chunks.append(
                            b'{"type":"' + type_.encode() + b'","object":' + event.raw_object() + b"}\n"
                        )
                        if len(chunks) >= 256:
                            break
                        try:
                            item = watcher.next_nowait()
                        except asyncio.QueueEmpty:
                            break
                    ended = item is None
                except KubeApiError as err:
                    chunks.append(b'{"type":"ERROR","object":' + orjson.dumps(err.to_status()) + b"}\n")
                    ended = True
                except Exception as err:
                    # The response is under way: the error ends the stream as an ERROR event, as a real
                    # server's watch does, instead of cutting it.
                    _log.exception("watch of %s failed", rtype.plural)
                    status = internal_error(f"{type(err).__name__}: {err}").to_status()
                    chunks.append(b'{"type":"ERROR","object":' + orjson.dumps(status) + b"}\n")
                    ended = True
                if chunks:
                    await response.write(b"".join(chunks))
            await response.write_eof()
        except (ConnectionResetError, ConnectionError):
            pass  # the client went away
        finally:
            if deadline is not None:
                deadline.cancel()
            watcher.close()
        return response


async def start_server(
    cluster: ApiBackend,
    *,
    host: str,
    port: int,
    token: str,
    tls: ssl.SSLContext,
    read_timeout: float = READ_TIMEOUT,
) -> tuple[web.AppRunner, str]:
    """Serve ``cluster`` over TLS on ``host:port`` to clients holding ``token``; returns the runner and the
    base URL. ``read_timeout``: seconds for a request's headers (or a connection's first or next request,
    aiohttp's keep-alive timer, which also runs from a connection's start) and for its body."""
    app = web.Application(client_max_size=MAX_BODY_BYTES)
    holder: dict[str, _Api] = {}

    async def handle(request: web.Request) -> web.StreamResponse:
        return await holder["api"].handle(request)

    app.router.add_route("*", "/{tail:.*}", handle)
    # handler_cancellation: a watch whose client hung up must end, not wait for its next event.
    # keepalive_timeout runs from a connection's start and between requests (aiohttp's idle timer), so it
    # bounds a request's headers too; lingering_time bounds reading what is left of a refused body.
    runner = web.AppRunner(
        app,
        access_log=None,
        handler_cancellation=True,
        keepalive_timeout=read_timeout,
        lingering_time=min(10.0, read_timeout),
    )
    await runner.setup()
    # asyncio bounds the TLS handshake itself (60 s); aiohttp's keep-alive timer runs once it is done.
    site = web.TCPSite(runner, host, port, ssl_context=tls)
    await site.start()
    bound_host, bound_port = runner.addresses[0][:2]
    holder["api"] = _Api(
        cluster,
        f"{bound_host}:{bound_port}",
        AccessPolicy(token, bound_host=bound_host),
        read_timeout=read_timeout,
    )
    netloc = f"[{bound_host}]" if ":" in bound_host else bound_host
    return runner, f"https://{netloc}:{bound_port}"
