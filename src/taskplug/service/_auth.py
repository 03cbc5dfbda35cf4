"""Who may use ``taskplug serve``: each request authenticated, and its method and path checked against a role.

A request is from (first that applies):

1. an authenticating proxy: the ``--proxy-user-header`` names the user, believed only when the TCP peer is
   one of the ``--trusted-proxy`` addresses (from any other peer the header is ignored);
2. ``Authorization: Bearer`` with an API token (``tp_…``, :mod:`._tokens`) or, with ``--oidc-issuer``, a JWT
   checked against the issuer's published keys (:class:`OidcVerifier`);
3. a web session cookie (``taskplug_session``, set by signing in with a token);
4. nobody: let in as ``local`` only while the server allows it (:attr:`AuthSettings.anonymous`: bound to
   loopback with no proxy or OIDC configured, or ``--insecure-no-auth``) and no token exists in the store.

Credentials that are presented and wrong are refused (401), never treated as absent. What each role may do
is decided by the request alone (:func:`required_role`): reads need ``read``, every other method ``submit``,
``/api/v1/tokens`` ``admin``; health, the API's description, sign-in and static assets are public.

Kubernetes' API server is the model (``staging/src/k8s.io/apiserver/pkg/authentication``: a union of
authenticators — request header from a proxy whose client is trusted, bearer tokens, OIDC — tried in turn,
``pkg/authorization``: then the verb checked). Deviation: roles are three fixed levels, not RBAC rules; the
proxy is trusted by its address, not by a client certificate (what the reverse proxies teams put in front of
a service send).
"""

from __future__ import annotations

import asyncio
import dataclasses
import getpass
import ipaddress
import json
import socket
import time
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any, Final
from urllib.parse import quote

import jwt
import psycopg
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from taskplug.core import SpecError
from taskplug.service._tokens import ROLES, Principal, Role, TokenStore, role_allows

__all__ = [
    "SESSION_COOKIE",
    "AuthMiddleware",
    "AuthSettings",
    "Authenticator",
    "OidcSettings",
    "OidcVerifier",
    "Refused",
    "add_security_scheme",
    "api_description",
    "auth_settings",
    "is_loopback",
    "local_warning",
    "principal_of",
    "required_role",
]

SESSION_COOKIE: Final = "taskplug_session"
_PUBLIC_EXACT: Final = frozenset(
    {
        "/healthz",
        "/api/v1/healthz",
        "/favicon.ico",
        "/signin",
        "/signout",
        "/api/v1/openapi.json",
        "/api/v1/docs",
    }
)
_PUBLIC_PREFIXES: Final = ("/static/", "/api/v1/docs/")
_ASYMMETRIC: Final = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA", "Ed25519"}
)
"""The JWT algorithms an issuer's public key may sign with; ``none`` and HMAC (``HS*``) never."""
_ERROR_CONTENT: Final = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}


@dataclasses.dataclass(frozen=True, slots=True)
class OidcSettings:
    """An OpenID Connect issuer whose ID/access tokens are accepted as bearer tokens."""

    issuer: str
    """The ``iss`` the tokens carry; its keys are found through ``<issuer>/.well-known/openid-configuration``."""
    audience: str
    """The ``aud`` a token must be for (this server's client id)."""
    role_claim: str | None = None
    """A claim (a string or a list) naming the role: the highest of ``read``/``submit``/``admin`` it holds."""
    role: Role = "read"
    """The role of a token whose claim names none (or when there is no ``role_claim``)."""
    leeway: float = 30.0
    """Seconds of clock skew allowed on ``exp``, ``nbf`` and ``iat``."""
    refresh_interval: float = 10.0
    """Least seconds between two fetches of the keys for an unknown ``kid`` (a flood of made-up ``kid``s
    must not become a flood of requests to the issuer)."""


@dataclasses.dataclass(frozen=True, slots=True)
class AuthSettings:
    """How ``serve`` authenticates. The default is a loopback server's: its one user is let in as ``local``
    until a token exists."""

    anonymous: str | None = "local"
    """The identity of a request without credentials while no token exists (None: always refused)."""
    trusted_proxies: tuple[str, ...] = ()
    """Addresses or networks (``10.0.0.5``, ``10.0.0.0/24``) whose ``proxy_user_header`` is believed."""
    proxy_user_header: str | None = None
    proxy_role_header: str | None = None
    """A header the proxy sets to the user's roles or groups (comma-separated): the highest role named."""
    proxy_role: Role = "read"
    """A proxy user's role when ``proxy_role_header`` is absent or names none."""
    oidc: OidcSettings | None = None
    cache_seconds: float = 5.0
    """How long a verified token or session is believed without asking the database again."""

    @property
    def configured(self) -> bool:
        """Whether a proxy or an OIDC issuer is configured (then nobody is let in without credentials)."""
        return bool(self.proxy_user_header and self.trusted_proxies) or self.oidc is not None


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` listens on loopback only, however the address is spelled (``127.0.0.1``,
    ``127.000.000.001``, ``::1``, ``localhost``); a name that resolves anywhere else is not."""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return False
    addresses = {info[4][0] for info in infos}
    return bool(addresses) and all(
        ipaddress.ip_address(str(a).split("%", 1)[0]).is_loopback for a in addresses
    )


def local_warning(user: str | None = None) -> str:
    """What a server that lets its one user in without credentials means, in plain words."""
    who = user or _user()
    return (
        f"Without credentials, anyone who can connect to this port on this machine can run commands as "
        f"{who!r} (the user running taskplug serve) on the replicas' cluster, until the first API token is "
        "created (`taskplug token create`) or a proxy or OIDC issuer is configured."
    )


def api_description(settings: AuthSettings) -> str:
    """The OpenAPI document's description: who may call this API, and how."""
    lines = [
        "Every request but `/healthz` needs credentials: `Authorization: Bearer <token>` with an API token "
        "(`taskplug token create`, roles `read` < `submit` < `admin`: `read` for GETs, `submit` to submit, "
        "relaunch and abort, `admin` for `/api/v1/tokens`); 401 without, 403 naming the role needed."
    ]
    if settings.oidc is not None:
        lines.append(
            f"OIDC tokens of `{settings.oidc.issuer}` for audience `{settings.oidc.audience}` are accepted."
        )
    if settings.proxy_user_header is not None:
        lines.append(
            f"Behind the authenticating proxy, its `{settings.proxy_user_header}` header names the user "
            "(believed from the proxy's address only)."
        )
    if settings.anonymous is not None and not settings.configured:
        lines.append(local_warning())
    return "\n\n".join(lines)


def add_security_scheme(app: Any, settings: AuthSettings) -> None:
    """Declare bearer authentication in the app's OpenAPI document (Swagger UI's "Authorize" then sends the
    token with every try): optional while a server may let its one user in without (until a token exists),
    none on the public routes."""
    build = app.openapi
    required: list[dict[str, list[str]]] = [{"bearer": []}]
    if settings.anonymous is not None and not settings.configured:
        required.append({})

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build()
            schema.setdefault("components", {})["securitySchemes"] = {
                "bearer": {"type": "http", "scheme": "bearer", "description": "An API token or an OIDC JWT"}
            }
            schema["security"] = required
            for path, operations in schema.get("paths", {}).items():
                for method, operation in operations.items():
                    if not isinstance(operation, dict):
                        continue
                    need = required_role(method.upper(), path)
                    if need is None:
                        operation["security"] = []
                        continue
                    responses = operation.setdefault("responses", {})
                    for status, meaning in (
                        ("401", "No credentials, or not good ones (`WWW-Authenticate: Bearer`)"),
                        ("403", f"The credentials' role is below `{need}`"),
                    ):
                        responses.setdefault(status, {"description": meaning, "content": _ERROR_CONTENT})
            app.openapi_schema = schema
        result: dict[str, Any] = app.openapi_schema
        return result

    app.openapi = openapi


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "the user running taskplug serve"


def auth_settings(
    *,
    host: str,
    tokens_exist: bool,
    insecure_no_auth: bool = False,
    trusted_proxies: Sequence[str] = (),
    proxy_user_header: str | None = None,
    proxy_role_header: str | None = None,
    proxy_role: str = "read",
    oidc: OidcSettings | None = None,
) -> AuthSettings:
    """The settings ``serve`` runs with, from its options; :class:`SpecError` naming the option when they
    cannot be used. Bound anywhere but loopback with no credential of any kind (no token in the store, no
    proxy, no OIDC), it refuses unless ``insecure_no_auth``: anyone on the network could run commands."""
    for proxy in trusted_proxies:
        try:
            ipaddress.ip_network(proxy, strict=False)
        except ValueError:
            raise SpecError("--trusted-proxy", f"{proxy!r} is not an IP address or network") from None
    if bool(trusted_proxies) != bool(proxy_user_header):
        raise SpecError(
            "--proxy-user-header" if trusted_proxies else "--trusted-proxy",
            "--trusted-proxy and --proxy-user-header go together: the header is believed only from those peers",
        )
    if proxy_role not in ROLES:
        raise SpecError("--proxy-role", f"{proxy_role!r} is not a role (one of {', '.join(ROLES)})")
    settings = AuthSettings(
        anonymous=None,
        trusted_proxies=tuple(trusted_proxies),
        proxy_user_header=proxy_user_header,
        proxy_role_header=proxy_role_header,
        proxy_role=proxy_role,
        oidc=oidc,
    )
    if settings.configured:
        return settings
    if is_loopback(host):
        return dataclasses.replace(settings, anonymous="local")
    if insecure_no_auth:
        return dataclasses.replace(settings, anonymous="anonymous")
    if tokens_exist:
        return settings
    raise SpecError(
        "--host",
        f"{host!r} is not a loopback address and no authentication is configured: anyone who can reach it "
        "could run commands as this machine's user. Create an API token (`taskplug token create --store URL "
        "--name NAME --role admin`), or give --trusted-proxy with --proxy-user-header, or --oidc-issuer with "
        "--oidc-audience; or --insecure-no-auth if the network itself is trusted",
    )


def required_role(method: str, path: str) -> Role | None:
    """The role a request needs (None: public)."""
    if path in _PUBLIC_EXACT or path.startswith(_PUBLIC_PREFIXES):
        return None
    if path == "/api/v1/tokens" or path.startswith("/api/v1/tokens/"):
        return "admin"
    return "read" if method in ("GET", "HEAD", "OPTIONS") else "submit"


class Refused(Exception):
    """Credentials presented and not good (401), or the issuer's keys out of reach (503)."""

    def __init__(self, message: str, *, status: int = 401) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class OidcVerifier:
    """Checks a JWT against the issuer's keys: found by discovery, kept, fetched again for an unknown ``kid``
    (no oftener than ``refresh_interval``). The algorithm is the key's, never the token header's choice.

    ``fetch`` gets a URL's JSON (blocking: it runs in a thread); ``clock`` is monotonic seconds."""

    def __init__(
        self,
        settings: OidcSettings,
        *,
        fetch: Callable[[str], Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self._fetch = fetch or _fetch_json
        self._clock = clock
        self._keys: dict[str | None, jwt.PyJWK] = {}
        self._fetched_at: float | None = None
        self._lock = asyncio.Lock()

    async def verify(self, token: str) -> dict[str, Any]:
        """The token's claims; :class:`Refused` saying why not."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as e:
            raise Refused(f"not a JWT: {e}") from None
        kid = header.get("kid")
        key = await self._key(kid if isinstance(kid, str) else None)
        algorithm = key.algorithm_name
        if algorithm not in _ASYMMETRIC:
            raise Refused(f"the issuer's key {kid!r} is for {algorithm}, which this server does not accept")
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key=key.key,
                algorithms=[algorithm],
                audience=self.settings.audience,
                issuer=self.settings.issuer,
                leeway=self.settings.leeway,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except jwt.PyJWTError as e:
            raise Refused(f"the token is not valid: {e}") from None
        return claims

    async def _key(self, kid: str | None) -> jwt.PyJWK:
        async with self._lock:
            if self._fetched_at is None or (
                kid not in self._keys and self._clock() - self._fetched_at >= self.settings.refresh_interval
            ):
                await self._refresh()
            key = self._keys.get(kid)
            if key is None and kid is None and len(self._keys) == 1:
                key = next(iter(self._keys.values()))
            if key is None:
                raise Refused(f"the issuer has no key {kid!r}")
            return key

    async def _refresh(self) -> None:
        issuer = self.settings.issuer.rstrip("/")
        try:
            discovery = await asyncio.to_thread(self._fetch, f"{issuer}/.well-known/openid-configuration")
            if not isinstance(discovery, dict) or discovery.get("issuer") != self.settings.issuer:
                raise Refused("the issuer's discovery document names another issuer", status=503)
            jwks = await asyncio.to_thread(self._fetch, str(discovery["jwks_uri"]))
        except (OSError, ValueError, KeyError) as e:
            raise Refused(f"cannot fetch the issuer's keys: {e}", status=503) from None
        keys: dict[str | None, jwt.PyJWK] = {}
        for entry in jwks.get("keys", []) if isinstance(jwks, dict) else []:
            if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
                continue
            try:
                key = jwt.PyJWK.from_dict(entry)
            except jwt.PyJWTError:
                continue  # a key of a type this server cannot use: skipped, as the others still can be
            keys[entry.get("kid")] = key
        self._keys = keys
        self._fetched_at = self._clock()

    def principal(self, claims: dict[str, Any]) -> Principal:
        who = claims.get("email") if isinstance(claims.get("email"), str) else None
        role = self.settings.role
        if self.settings.role_claim is not None:
            role = _highest(claims.get(self.settings.role_claim), role)
        return Principal(f"oidc:{who or claims['sub']}", role, "oidc")


def _fetch_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read(1 << 20))


def _highest(value: object, default: Role) -> Role:
    """The highest role named by a claim or header value (a string, comma-separated, or a list)."""
    names = value.split(",") if isinstance(value, str) else value if isinstance(value, list) else []
    named = [str(n).strip() for n in names]
    found = [r for r in ROLES if r in named]
    return found[-1] if found else default


class Authenticator:
    """The request's :class:`Principal`, by :class:`AuthSettings` (None: no credentials, and none let in)."""

    def __init__(self, settings: AuthSettings, tokens: TokenStore) -> None:
        self.settings = settings
        self.tokens = tokens
        self.oidc = OidcVerifier(settings.oidc) if settings.oidc is not None else None
        self._proxies = tuple(ipaddress.ip_network(p, strict=False) for p in settings.trusted_proxies)

    def trusted_peer(self, scope: Scope) -> bool:
        """Whether the TCP peer is one of the trusted proxies."""
        client = scope.get("client")
        if not client or not self._proxies:
            return False
        try:
            peer = ipaddress.ip_address(str(client[0]))
        except ValueError:
            return False
        return any(peer in network for network in self._proxies)

    async def authenticate(self, scope: Scope) -> Principal | None:
        headers = Headers(scope=scope)
        settings = self.settings
        if settings.proxy_user_header is not None and self.trusted_peer(scope):
            user = headers.get(settings.proxy_user_header)
            if user is not None:
                if not user.strip() or len(user) > 256 or not user.isprintable():
                    raise Refused(f"the proxy's {settings.proxy_user_header} header is not a user name")
                role = settings.proxy_role
                if settings.proxy_role_header is not None:
                    role = _highest(headers.get(settings.proxy_role_header, ""), role)
                return Principal(f"proxy:{user.strip()}", role, "proxy")
        authorization = headers.get("authorization")
        if authorization is not None:
            scheme, _, credential = authorization.partition(" ")
            credential = credential.strip()
            if scheme.lower() != "bearer" or not credential:
                raise Refused("the Authorization header must be `Bearer <token>`")
            if credential.startswith("tp_"):
                principal = await self.tokens.verify_token(credential)
                if principal is None:
                    raise Refused("the token is not known, was revoked, or has expired")
                return principal
            if self.oidc is not None:
                return self.oidc.principal(await self.oidc.verify(credential))
            raise Refused("the token is not known, was revoked, or has expired")
        cookie = _cookie(headers, SESSION_COOKIE)
        if cookie is not None:
            principal = await self.tokens.verify_session(cookie)
            if principal is not None:
                return principal
            # A stale cookie is not an error: the page asks its holder to sign in again.
        if settings.anonymous is not None and not settings.configured and not await self.tokens.any_tokens():
            return Principal(settings.anonymous, "admin", "local")
        return None


def _cookie(headers: Headers, name: str) -> str | None:
    for part in headers.get("cookie", "").split(";"):
        key, _, value = part.strip().partition("=")
        if key == name and value:
            return value
    return None


def principal_of(request: Request) -> Principal:
    """The principal :class:`AuthMiddleware` found for the request (``local`` when the app runs without it)."""
    principal = request.scope.get("state", {}).get("principal")
    return principal if isinstance(principal, Principal) else Principal("local", "admin", "local")


def _wants_json(scope: Scope) -> bool:
    path: str = scope["path"]
    accept = Headers(scope=scope).get("accept", "")
    return (
        path.startswith("/api/")
        or path in ("/metrics",)
        or path.endswith("/stream")
        or "text/event-stream" in accept
        or ("application/json" in accept and "text/html" not in accept)
    )


class AuthMiddleware:
    """Authenticate each HTTP request and check its role; the principal goes to ``scope["state"]``.

    Plain ASGI (the live pages' event streams pass through untouched). The :class:`Authenticator` is the
    app's ``state.auth``, set when the app starts (it needs the database pool); before, only public paths
    are answered."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        need = required_role(scope["method"], scope["path"])
        authenticator: Authenticator | None = getattr(scope["app"].state, "auth", None)
        if need is None:
            await self.app(scope, receive, send)
            return
        if authenticator is None:  # not started (no lifespan ran): nothing to check against, so nobody
            await _refuse(scope, 503, "the server has not started")(scope, receive, send)
            return
        try:
            principal = await authenticator.authenticate(scope)
        except Refused as e:
            await _refuse(scope, e.status, e.message)(scope, receive, send)
            return
        except psycopg.OperationalError as e:  # as the app answers it: 503, not a 500 from a middleware
            message = (
                f"the database does not answer: {type(e).__name__}"  # no libpq text: it may quote the URL
            )
            await _refuse(scope, 503, message)(scope, receive, send)
            return
        if principal is None:
            await _refuse(scope, 401, "sign in: send `Authorization: Bearer <token>`")(scope, receive, send)
            return
        if not role_allows(principal.role, need):
            message = f"this needs the {need} role; {principal.identity} has {principal.role}"
            await _refuse(scope, 403, message)(scope, receive, send)
            return
        scope.setdefault("state", {})["principal"] = principal
        await self.app(scope, receive, send)


def _refuse(scope: Scope, status: int, message: str) -> Response:
    if _wants_json(scope):
        headers = {"WWW-Authenticate": 'Bearer realm="taskplug"'} if status == 401 else None
        return JSONResponse({"error": {"message": message}}, status_code=status, headers=headers)
    if status == 401 and scope["method"] in ("GET", "HEAD"):
        here = scope["path"] + (
            f"?{scope['query_string'].decode('latin-1')}" if scope["query_string"] else ""
        )
        return RedirectResponse(f"/signin?next={quote(here, safe='')}", status_code=303)
    templates = scope["app"].state.templates
    if status == 503:
        return HTMLResponse(
            templates.get_template("unavailable.html").render(message=message), status_code=503
        )
    page = templates.get_template("signin.html").render(message=message, next="/executions")
    return HTMLResponse(page, status_code=status)
