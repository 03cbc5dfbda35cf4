"""The production :class:`~taskplug.k8s.KubeClient` (and :class:`~taskplug.k8s.ReadsPodLogs`,
:class:`~taskplug.k8s.FollowsPodLogs`): plain dicts
over lightkube's connection. The ONLY module
of taskplug that imports lightkube (checked by import-linter).

lightkube does what is hard to get right: kubeconfig, in-cluster and exec-plugin credentials, TLS, the
httpx connection pool (whose connections ride on asyncio's own transports: ``_asyncio_transport``). The requests themselves are built here from the :class:`ResourceType` and sent
through that connection as JSON dicts, because the machinery works on dicts and decoding every watch
event into typed models only to turn it back into a dict would cost more than the event itself.

Error mapping (nothing from lightkube or httpx leaks)::

    HTTP status >= 400              → KubeApiError(status, reason, message) from the Status body
    watch ERROR event (410 Expired) → KubeApiError (the informer relists)
    connect / read / protocol error → ConnectionError  ("cannot reach the Kubernetes API at <server>: …")
    any timeout                     → TimeoutError     ("… at <server> did not answer … within 30s …")
    credentials that cannot load    → taskplug ConfigError (construction) / KubeApiError 401 (exec auth)

Every transport error and every 5xx answer names the API server's address, so that a run that gives up
on an unreachable or failing API says which one. Each request is bounded by ``timeout`` as a whole (connect,
send, answer: Flyte's ``kube-client-config.timeout``), not only per network phase; a watch's connection is
bounded by it, and its stream asks the server for ``timeoutSeconds`` (5 to 10 minutes unless the caller
gives one, as client-go's reflector does) and fails when nothing at all arrives for that long plus
``timeout``.

The kubeconfig is read by ``_kubeconfig.load_kubeconfig`` (the bounded document reader, typed fields), never by
lightkube's own file reader.

Deviation from lightkube's own watch: no retry modes; a stream that ends simply ends, and 410 is raised,
because the informer owns resuming and relisting. Bookmarks are requested (``allowWatchBookmarks``).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import random
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any, Final, Literal, NoReturn

import httpx2
import orjson
from lightkube.config import client_adapter
from lightkube.config.kubeconfig import KubeConfig, SingleConfig
from lightkube.core.exceptions import ConfigError as LightkubeConfigError

from taskplug.core import ConfigError
from taskplug.engine.k8s._asyncio_transport import asyncio_transport
from taskplug.engine.k8s._kubeconfig import DEFAULT_TIMEOUT, default_kubeconfig_path, load_kubeconfig
from taskplug.k8s import POD, KubeApiError, ResourceType, WatchEvent

__all__ = ["LightkubeClient"]

KubeObject = dict[str, Any]

_PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
}
_JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}
_POOL: Final = httpx2.Limits(max_connections=32, max_keepalive_connections=32, keepalive_expiry=30.0)
"""The connection pool: at most 32 connections (each watch holds one while it lasts; the rest carry requests,
more than enough to keep an API server busy), every one kept for 30 s idle, within the 60 s after which
``taskplug cluster serve`` closes an idle one (90 s for Go servers). httpx's default (100 open, 20 kept)
closed every connection past 20 once used, so under more concurrent requests each next one opened (over TLS:
handshaked) a new connection, and its pool's bookkeeping, which walks every connection for each request,
cost more than the requests' own work at 100."""
_MIN_WATCH_TIMEOUT = 300
"""client-go's ``minWatchTimeout``: a watch without a timeout of its own asks for 5 to 10 minutes."""
_REASONS_BY_STATUS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def _load_config(kubeconfig: str | Path | None, context: str | None, in_cluster: bool) -> SingleConfig:
    where = "in-cluster service account"
    try:
        config: KubeConfig | None = None
        if in_cluster or kubeconfig is None:
            try:
                config = KubeConfig.from_service_account()
            except LightkubeConfigError:
                if in_cluster:
                    raise
        if config is None:
            # As lightkube's from_env, after the service account: the file given, $KUBECONFIG, ~/.kube/config;
            # read and checked by our own reader (a bad file names itself and the field).
            path = Path(kubeconfig).expanduser() if kubeconfig is not None else default_kubeconfig_path()
            where = str(path)
            config = KubeConfig.from_dict(load_kubeconfig(path), fname=path)
        single = config.get(context_name=context)
    except (LightkubeConfigError, OSError, KeyError, ValueError) as e:
        raise ConfigError("kubeconfig", f"cannot load Kubernetes credentials from {where}: {e}") from e
    if single is None:
        raise ConfigError("kubeconfig", f"no context {context!r} in the kubeconfig {where}")
    return single


class LightkubeClient:
    """A :class:`~taskplug.k8s.KubeClient` for a real cluster (or ``taskplug cluster serve``).

    Credentials come from ``kubeconfig`` (a file), the in-cluster service account (``in_cluster=True``), or
    by default lightkube's ``KubeConfig.from_env()`` (in-cluster, then ``$KUBECONFIG``, then
    ``~/.kube/config``).
    """

    def __init__(
        self,
        kubeconfig: str | Path | None = None,
        *,
        context: str | None = None,
        in_cluster: bool = False,
        timeout: float | None = DEFAULT_TIMEOUT,
        trust_env: bool = True,
        field_manager: str = "taskplug",
    ) -> None:
        self.config = _load_config(kubeconfig, context, in_cluster)
        self.server = str(self.config.cluster.server)
        """The API server's address, as every transport error names it."""
        self.timeout = timeout if timeout is not None and timeout > 0 else None
        params = client_adapter.ConnectionParams(timeout=httpx2.Timeout(self.timeout), trust_env=trust_env)
        try:
            # lightkube's AsyncClient, with the pool's limits set (lightkube's own has httpx's: see _POOL) and
            # its connections on asyncio's transports (lightkube's go through anyio's TLS: see the module).
            settings = params.httpx_params(self.config)
            settings["transport"] = asyncio_transport(settings["verify"], _POOL)
            self._http: httpx2.AsyncClient = httpx2.AsyncClient(**settings, limits=_POOL)
        except (LightkubeConfigError, OSError, ValueError) as e:
            where = f" (kubeconfig {self.config.fname})" if self.config.fname else ""
            raise ConfigError(
                "kubeconfig", f"cannot set up the connection to {self.server}{where}: {e}"
            ) from e
        self._field_manager = field_manager

    @property
    def namespace(self) -> str:
        """The kubeconfig context's namespace."""
        return self.config.namespace

    # -- paths ---------------------------------------------------------------------------------------
    @staticmethod
    def _collection(rtype: ResourceType, namespace: str | None) -> str:
        base = f"/api/{rtype.version}" if not rtype.group else f"/apis/{rtype.group}/{rtype.version}"
        if rtype.namespaced and namespace:
            return f"{base}/namespaces/{namespace}/{rtype.plural}"
        return f"{base}/{rtype.plural}"

    def _item(self, rtype: ResourceType, namespace: str | None, name: str) -> str:
        return f"{self._collection(rtype, namespace)}/{name}"

    # -- transport -----------------------------------------------------------------------------------
    async def _request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] = _JSON_HEADERS,
    ) -> Any:
        content = orjson.dumps(body) if body is not None else None
        try:
            async with asyncio.timeout(self.timeout):
                response = await self._http.request(
                    method, path, content=content, params=params, headers=headers
                )
        except TimeoutError as e:
            raise TimeoutError(
                f"the Kubernetes API at {self.server} did not answer {method} {path} within "
                f"{self.timeout:g}s (propeller.kube-client-config.timeout)"
            ) from e
        except Exception as e:
            _raise_transport(e, self.server)
        if response.status_code >= 400:
            raise _api_error(response.status_code, response.content, self.server)
        try:
            return orjson.loads(response.content) if response.content else None
        except orjson.JSONDecodeError as e:
            raise ConnectionError(
                f"the Kubernetes API at {self.server} answered {method} {path} with a body that is not JSON"
            ) from e

    # -- KubeClient ----------------------------------------------------------------------------------
    async def create(self, rtype: ResourceType, obj: KubeObject) -> KubeObject:
        namespace = (obj.get("metadata") or {}).get("namespace") or self.namespace
        created: KubeObject = await self._request(
            "POST", self._collection(rtype, namespace), body=obj, params={"fieldManager": self._field_manager}
        )
        return created

    async def get(self, rtype: ResourceType, namespace: str, name: str) -> KubeObject:
        obj: KubeObject = await self._request("GET", self._item(rtype, namespace, name))
        return obj

    async def list(
        self, rtype: ResourceType, namespace: str | None = None, *, label_selector: str | None = None
    ) -> tuple[list[KubeObject], str]:
        params = {"labelSelector": label_selector} if label_selector else None
        body = await self._request("GET", self._collection(rtype, namespace), params=params)
        items: list[KubeObject] = body.get("items") or []
        # List items carry no apiVersion/kind on the wire; callers get whole objects, as from a watch.
        for item in items:
            item.setdefault("apiVersion", rtype.api_version)
            item.setdefault("kind", rtype.kind)
        return items, str((body.get("metadata") or {}).get("resourceVersion") or "")

    async def watch(
        self,
        rtype: ResourceType,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str | None = None,
        timeout_seconds: int | None = None,
    ) -> AsyncIterator[WatchEvent]:
        params: dict[str, str] = {"watch": "true", "allowWatchBookmarks": "true"}
        if resource_version:
            params["resourceVersion"] = resource_version
        if label_selector:
            params["labelSelector"] = label_selector
        if timeout_seconds is None:
            # As client-go's reflector: every watch asks the server to end it within 5 to 10 minutes (the
            # informer resumes from the last version), so that a server that stops answering without
            # closing the connection is found out — no byte within that time and the request timeout is a
            # TimeoutError — instead of leaving a cache that looks current for ever.
            timeout_seconds = int(_MIN_WATCH_TIMEOUT * (1 + random.random()))
        params["timeoutSeconds"] = str(timeout_seconds)
        idle = timeout_seconds + (self.timeout or DEFAULT_TIMEOUT)
        try:
            request = self._http.build_request(
                "GET",
                self._collection(rtype, namespace),
                params=params,
                headers={"Accept": "application/json"},
                timeout=httpx2.Timeout(self.timeout, read=idle),
            )
            response = await self._http.send(request, stream=True)
        except Exception as e:
            _raise_transport(e, self.server)
        try:
            if response.status_code >= 400:
                raise _api_error(response.status_code, await response.aread(), self.server)
            try:
                async for line in response.aiter_lines():
                    if not line:
                        continue
                    event = orjson.loads(line)
                    kind = event.get("type")
                    obj = event.get("object") or {}
                    if kind == "ERROR":
                        raise KubeApiError.from_status(obj)
                    yield WatchEvent(kind, obj)
            except KubeApiError:
                raise
            except orjson.JSONDecodeError as e:
                raise ConnectionError(f"malformed watch event from {self.server}: {e}") from e
            except Exception as e:
                _raise_transport(e, self.server)
        finally:
            with contextlib.suppress(Exception):
                await response.aclose()

    async def patch(
        self,
        rtype: ResourceType,
        namespace: str,
        name: str,
        patch: Mapping[str, Any],
        *,
        patch_type: Literal["merge", "json", "strategic"] = "merge",
    ) -> KubeObject:
        headers = {"Content-Type": _PATCH_CONTENT_TYPES[patch_type], "Accept": "application/json"}
        patched: KubeObject = await self._request(
            "PATCH",
            self._item(rtype, namespace, name),
            body=patch,
            headers=headers,
            params={"fieldManager": self._field_manager},
        )
        return patched

    async def replace(self, rtype: ResourceType, obj: KubeObject) -> KubeObject:
        meta = obj.get("metadata") or {}
        replaced: KubeObject = await self._request(
            "PUT",
            self._item(rtype, meta.get("namespace") or self.namespace, str(meta.get("name") or "")),
            body=obj,
            params={"fieldManager": self._field_manager},
        )
        return replaced

    async def delete(self, rtype: ResourceType, namespace: str, name: str) -> KubeObject | None:
        body = await self._request("DELETE", self._item(rtype, namespace, name))
        if not isinstance(body, dict) or body.get("kind") == "Status":
            return None
        return body

    # -- ReadsPodLogs ---------------------------------------------------------------------------------
    async def pod_log(
        self, namespace: str, name: str, container: str | None = None, *, tail_lines: int | None = None
    ) -> str:
        """``GET pods/{name}/log``: plain text, not JSON."""
        params = {"container": container} if container else {}
        if tail_lines is not None:
            params["tailLines"] = str(tail_lines)
        path = f"{self._item(POD, namespace, name)}/log"
        try:
            async with asyncio.timeout(self.timeout):
                response = await self._http.request("GET", path, params=params)
        except TimeoutError as e:
            raise TimeoutError(
                f"the Kubernetes API at {self.server} did not answer GET {path} within {self.timeout:g}s"
            ) from e
        except Exception as e:
            _raise_transport(e, self.server)
        if response.status_code >= 400:
            raise _api_error(response.status_code, response.content, self.server)
        return response.content.decode("utf-8", "replace")

    # -- FollowsPodLogs -------------------------------------------------------------------------------
    async def follow_pod_log(
        self, namespace: str, name: str, container: str | None = None
    ) -> AsyncIterator[str]:
        """``GET pods/{name}/log?follow=true``: the log from its beginning, then as it is written, until the
        server ends the answer (the container ended). No read deadline: a container may print nothing for
        long; the caller stops following when it knows the pod ended."""
        params = {"follow": "true", **({"container": container} if container else {})}
        path = f"{self._item(POD, namespace, name)}/log"
        try:
            request = self._http.build_request(
                "GET", path, params=params, timeout=httpx2.Timeout(self.timeout, read=None)
            )
            response = await self._http.send(request, stream=True)
        except Exception as e:
            _raise_transport(e, self.server)
        try:
            if response.status_code >= 400:
                raise _api_error(response.status_code, await response.aread(), self.server)
            decoder = codecs.getincrementaldecoder("utf-8")("replace")
            try:
                async for chunk in response.aiter_bytes():
                    text = decoder.decode(chunk)
                    if text:
                        yield text
            except Exception as e:
                _raise_transport(e, self.server)
            if rest := decoder.decode(b"", final=True):
                yield rest
        finally:
            with contextlib.suppress(Exception):
                await response.aclose()

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self._http.aclose()


def _api_error(status: int, content: bytes, server: str) -> KubeApiError:
    try:
        body = orjson.loads(content) if content else None
    except orjson.JSONDecodeError:
        body = None
    if isinstance(body, dict) and body.get("kind") == "Status":
        error = KubeApiError.from_status(body, status)
    else:
        text = content.decode("utf-8", "replace").strip()[:1000] if content else ""
        error = KubeApiError(
            status, _REASONS_BY_STATUS.get(status, ""), text or f"the server answered {status}"
        )
    if error.status >= 500:
        # A failing server: say which one. (4xx messages stay as sent: they are matched, e.g. "exceeded quota".)
        error = KubeApiError(
            error.status,
            error.reason,
            f"{error.message} (the Kubernetes API at {server} answered {error.status})",
            details=error.details,
        )
    return error


def _raise_transport(e: BaseException, server: str) -> NoReturn:
    """Map an exception raised while talking to the server; re-raise anything that is not transport."""
    if isinstance(e, KubeApiError | ConnectionError | TimeoutError):
        raise e
    if isinstance(e, httpx2.TimeoutException):
        raise TimeoutError(f"the Kubernetes API at {server} did not answer in time: {e}") from e
    if isinstance(e, httpx2.TransportError | httpx2.StreamError | httpx2.DecodingError):
        raise ConnectionError(f"cannot reach the Kubernetes API at {server}: {e}") from e
    if isinstance(e, LightkubeConfigError):
        # Credentials are resolved per request (exec plugins, token files): a failure there is an auth failure.
        raise KubeApiError(401, "Unauthorized", f"cannot obtain credentials: {e}") from e
    if isinstance(e, httpx2.HTTPError):
        raise ConnectionError(f"a request to the Kubernetes API at {server} failed: {e}") from e
    raise e
