"""The server ``taskplug serve`` runs: the JSON API and the web view in one ASGI app over one database.

:func:`create_app` builds it (the tests drive it with Starlette's TestClient or uvicorn); :func:`serve` runs
it on uvicorn, on 127.0.0.1 unless told otherwise. At start the app applies the schema's migrations (under
their advisory lock, as every process that opens the database does), opens a small connection pool, and
starts the live feed; at stop it ends the feed and closes the pool. The server never drives an execution.
Every request passes :class:`~._auth.AuthMiddleware` (who it is from, and whether its role allows it).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

import psycopg
from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse, Response
from psycopg_pool import AsyncConnectionPool
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from taskplug.core import canonical_host
from taskplug.executor import SubmissionLimits
from taskplug.service._api import API_PREFIX, api_error_handlers, healthz, metrics
from taskplug.service._api import router as api_router
from taskplug.service._api_logs import LOG_POLL, page_router
from taskplug.service._api_logs import router as logs_router
from taskplug.service._api_nodes import ClosureCache
from taskplug.service._api_queries import ServiceDB
from taskplug.service._api_submit import MAX_BODY_BYTES, TaskTypeCheck
from taskplug.service._api_tokens import router as tokens_router
from taskplug.service._auth import (
    Authenticator,
    AuthMiddleware,
    AuthSettings,
    add_security_scheme,
    api_description,
)
from taskplug.service._controls import ControlCharacters
from taskplug.service._headers import SecurityHeaders, content_security_policy
from taskplug.service._hosts import HostCheck, HostPolicy, host_policy
from taskplug.service._job_logs import JobLogs
from taskplug.service._limits import DEFAULT_LIMITS, ServeLimits, StreamCap, deadline_protocol
from taskplug.service._migrations import migrate
from taskplug.service._tokens import TokenStore
from taskplug.service._web import router as web_router
from taskplug.service._web_auth import router as web_auth_router
from taskplug.service._web_feed import Feed
from taskplug.service._web_render import environment

__all__ = ["DEFAULT_HOST", "create_app", "serve_http", "uvicorn_config"]

DEFAULT_HOST: Final = "127.0.0.1"


def _migrate(dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        migrate(conn)


def create_app(
    dsn: str,
    *,
    replica_ttl: float = 10.0,
    max_body_bytes: int = MAX_BODY_BYTES,
    poll_interval: float = 1.0,
    pool_size: int = 10,
    db_timeout: float = 5.0,
    allowed_hosts: Sequence[str] | HostPolicy | None = None,
    auth: AuthSettings | None = None,
    limits: ServeLimits = DEFAULT_LIMITS,
    task_types: TaskTypeCheck | None = None,
    submission_limits: SubmissionLimits | None = None,
    kubeconfig: Path | None = None,
    log_poll: float = LOG_POLL,
    job_logs: JobLogs | None = None,
) -> FastAPI:
    """The API (``/api/v1``) and the web view over the database at ``dsn``.

    ``replica_ttl``: seconds after its last heartbeat a replica is shown as silent (the replicas' lease
    time); ``max_body_bytes``: the largest request body (413 past it); ``poll_interval``: how often the
    live feed reads the tables when no notification comes; ``db_timeout``: seconds a request waits for a
    database connection before it is answered 503 (the API's error body, or a page saying so), so that a
    database that went away is reported at once rather than after a client's own timeout;
    ``allowed_hosts``: the ``Host`` headers answered (all when None; a :class:`~._hosts.HostPolicy`, or
    names), so that a page of another site cannot reach a loopback server through a name it rebinds to
    127.0.0.1; ``auth``: who may do what (:mod:`._auth`; the default is a loopback server's: its one user is
    let in as ``local`` until a token exists); ``limits``: the caps on live streams
    (:class:`~._limits.ServeLimits`); ``task_types``: when given, a submission whose task type no enabled
    plugin runs is 422 (the platform config's plugins); ``submission_limits``: what one submission may ask for
    (``executor.limits``; its defaults when None); ``kubeconfig``: the cluster the replicas run on, whose
    ``pods/log`` shows a running attempt's log (without it, a log shows once the replica that ran the attempt
    kept it); ``log_poll``: seconds between two reads of a followed log; ``job_logs``: where a connector task's
    job log is asked for (:mod:`._job_logs`; the platform config's connectors), shown among its logs.

    Every answer carries the security headers (:mod:`._headers`); a path or query parameter holding a
    control character is 422 naming it (:mod:`._controls`).

    A request that changes something (submit, abort) sent by a page of another origin is refused (403):
    a browser that is signed in (or that a loopback server lets in) must not abort or submit for a
    cross-site form."""
    settings = auth if auth is not None else AuthSettings()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await asyncio.to_thread(_migrate, dsn)
        pool: AsyncConnectionPool[psycopg.AsyncConnection[tuple[object, ...]]] = AsyncConnectionPool(
            dsn, min_size=1, max_size=pool_size, open=False, name="taskplug-serve", timeout=db_timeout
        )
        await pool.open(wait=True)
        feed = Feed(dsn, pool, poll_interval=poll_interval)
        app.state.db = ServiceDB(pool)
        app.state.auth = Authenticator(settings, TokenStore(pool, cache_seconds=settings.cache_seconds))
        app.state.feed = feed
        # Live streams read through at most half the pool: the API always finds a connection.
        app.state.stream_reads = asyncio.Semaphore(max(1, pool_size // 2))
        await feed.start_position()
        app.state.log_cluster = _connect(kubeconfig) if kubeconfig is not None else None
        app.state.job_logs = job_logs
        task = asyncio.create_task(feed.run(), name="taskplug-live-feed")
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            if app.state.log_cluster is not None:
                await app.state.log_cluster.close()
            await pool.close()

    app = FastAPI(
        title="taskplug",
        summary="Task executions driven by taskplug's executor replicas: submit, follow, abort.",
        description=api_description(settings),
        version="1",
        lifespan=lifespan,
        # The docs page is served below from assets on this server (FastAPI's own would load them from a CDN).
        docs_url=None,
        redoc_url=None,
        openapi_url=f"{API_PREFIX}/openapi.json",
    )
    # Added innermost first: the headers go on every answer, the Host is checked before anything else,
    # authentication inside the cross-site check (a refused request is not looked up).
    app.add_middleware(AuthMiddleware)
    app.add_middleware(_SameOrigin)
    app.add_middleware(StreamCap, limits=limits)
    app.add_middleware(ControlCharacters)
    if allowed_hosts is not None:
        policy = (
            allowed_hosts
            if isinstance(allowed_hosts, HostPolicy)
            else HostPolicy(frozenset(canonical_host(h) for h in allowed_hosts))
        )
        app.add_middleware(HostCheck, policy=policy)
    app.add_middleware(SecurityHeaders)
    app.state.task_types = task_types
    app.state.submission_limits = submission_limits or SubmissionLimits()
    app.state.replica_ttl = replica_ttl
    app.state.log_poll = log_poll
    app.state.log_cluster = None
    app.state.max_body_bytes = max_body_bytes
    app.state.closures = ClosureCache()  # the compiled workflows whose nodes /nodes listed lately
    app.state.templates = environment()
    for exc_class, handler in api_error_handlers.items():
        app.add_exception_handler(exc_class, handler)
    app.add_exception_handler(psycopg.OperationalError, _on_database_down)
    app.include_router(tokens_router)
    app.include_router(logs_router)  # before the API's own: its /executions/{key:path} would take .../logs
    app.include_router(page_router)  # before the web view's: its /executions/{key:path}/stream would take it
    app.include_router(api_router)
    # Where probes and Prometheus look by default, beside their /api/v1 places.
    app.add_api_route("/healthz", healthz, methods=["GET"], include_in_schema=False)
    app.add_api_route("/metrics", metrics, methods=["GET"], include_in_schema=False)
    app.include_router(web_auth_router)
    app.include_router(web_router)
    app.mount("/static", StaticFiles(packages=[("taskplug.service", "web/static")]), name="static")
    favicon = resources.files("taskplug.service").joinpath("web/static/favicon.svg").read_bytes()
    _add_api_docs(app)
    add_security_scheme(app, settings)

    @app.get("/favicon.ico", include_in_schema=False)
    async def _favicon() -> Response:
        return Response(favicon, media_type="image/svg+xml", headers={"Cache-Control": "max-age=86400"})

    return app


def _connect(kubeconfig: Path) -> Any:
    """A client of the replicas' cluster (the lightkube adapter, with its default per-request timeout)."""
    from taskplug.engine.k8s import connect

    return connect(kubeconfig)


async def _on_database_down(request: Request, exc: Exception) -> Response:
    """The database does not answer (refused, gone, or no pooled connection within ``db_timeout``): 503, in
    the API's error shape or as a page, instead of a 500 and a traceback. The pool reconnects by itself."""
    message = f"the database does not answer: {type(exc).__name__}: {str(exc).strip() or 'no detail'}"
    if request.url.path.startswith(API_PREFIX) or request.url.path in ("/healthz", "/metrics"):
        return JSONResponse({"error": {"message": message}}, status_code=503)
    page = request.app.state.templates.get_template("unavailable.html").render(message=message)
    return HTMLResponse(page, status_code=503)


_DOCS_ASSETS: Final = f"{API_PREFIX}/docs/assets"
_INLINE_SCRIPT: Final = re.compile(r"<script>(.*?)</script>", re.DOTALL)


def _add_api_docs(app: FastAPI) -> None:
    """Swagger UI at ``/api/v1/docs`` with every asset from this server (fastapi-offline ships Swagger UI's
    files): the page works where the server does, offline or behind a proxy that reaches nothing outside,
    and sends no reader's browser to a third-party CDN."""
    assets = resources.files("fastapi_offline").joinpath("static")
    app.mount(_DOCS_ASSETS, StaticFiles(directory=str(assets)), name="api-docs-assets")

    @app.get(f"{API_PREFIX}/docs", include_in_schema=False)
    async def _docs() -> HTMLResponse:
        page = get_swagger_ui_html(
            openapi_url=f"{API_PREFIX}/openapi.json",
            title="taskplug API",
            swagger_js_url=f"{_DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{_DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url="/favicon.ico",
        )
        # The page starts Swagger UI with one inline script: the policy allows exactly it, by its hash.
        inline = _INLINE_SCRIPT.findall(bytes(page.body).decode())
        page.headers["Content-Security-Policy"] = content_security_policy(*inline)
        return page


class _SameOrigin:
    """Refuse a state-changing request a page of another origin sent (``Origin`` / ``Sec-Fetch-Site``, or
    ``Referer`` when a browser sent no ``Origin``).
    Plain ASGI, not ``BaseHTTPMiddleware``: the live pages' event streams pass through untouched."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] not in ("GET", "HEAD", "OPTIONS"):
            headers = Headers(scope=scope)
            origin = headers.get("origin")
            cross = headers.get("sec-fetch-site") == "cross-site"
            # A browser that sends no Origin (an old one, or a form some privacy setting strips it from)
            # still names the page in Referer: another site's is refused as its Origin would be.
            referer = headers.get("referer") if origin is None else None
            if referer is not None and urlsplit(referer).netloc != headers.get("host"):
                cross = True
            if cross or (origin is not None and urlsplit(origin).netloc != headers.get("host")):
                refused = JSONResponse(
                    {"error": {"message": "refused: a request from another site's page"}}, status_code=403
                )
                await refused(scope, receive, send)
                return
        await self.app(scope, receive, send)


def uvicorn_config(app: FastAPI, *, host: str, port: int, limits: ServeLimits = DEFAULT_LIMITS) -> Any:
    """uvicorn's config for ``app`` on ``host:port`` with the read deadlines of ``limits`` (h11 with a
    header and a body deadline, ``timeout_keep_alive`` for idle connections)."""
    import uvicorn

    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="info",
        timeout_graceful_shutdown=3,
        # The peer's address decides whether a proxy's user header is believed: uvicorn must not replace it
        # with X-Forwarded-For (which it does by default for a peer on 127.0.0.1).
        proxy_headers=False,
        http=deadline_protocol(header_timeout=limits.header_timeout, body_timeout=limits.body_timeout),
        timeout_keep_alive=max(1, round(limits.idle_timeout)),
    )


def serve_http(
    dsn: str,
    *,
    host: str = DEFAULT_HOST,
    port: int = 8080,
    replica_ttl: float = 10.0,
    allowed_hosts: Sequence[str] = (),
    limits: ServeLimits = DEFAULT_LIMITS,
    task_types: TaskTypeCheck | None = None,
    auth: AuthSettings | None = None,
    submission_limits: SubmissionLimits | None = None,
    kubeconfig: Path | None = None,
    job_logs: JobLogs | None = None,
) -> None:
    """Run the server until SIGINT/SIGTERM (uvicorn). It answers the ``Host`` names of its canonical bind
    address (:func:`~._hosts.host_policy`) and ``allowed_hosts``; ``auth`` says who may do what."""
    import uvicorn

    policy = host_policy(host, extra=allowed_hosts)
    app = create_app(
        dsn,
        replica_ttl=replica_ttl,
        allowed_hosts=policy,
        auth=auth,
        limits=limits,
        task_types=task_types,
        submission_limits=submission_limits,
        kubeconfig=kubeconfig,
        job_logs=job_logs,
    )
    uvicorn.Server(uvicorn_config(app, host=host, port=port, limits=limits)).run()
