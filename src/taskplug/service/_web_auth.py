"""Signing in to the web view with an API token, and signing out (``/signin``, ``/signout``).

The form takes a token (never put in a URL), checks it, and answers with a cookie holding a session bound to
that token (:meth:`~._tokens.TokenStore.open_session`): ``HttpOnly`` (no script reads it), ``SameSite=Strict``
(no other site's page sends it), ``Secure`` when the page came over HTTPS (directly, or through a trusted
proxy that says so). Revoking the token ends the session. Behind an authenticating proxy there is nothing to
sign in to: every request carries the proxy's user header. Flyte's console signs in through flyteadmin's
``/login`` (OAuth2) and keeps a session cookie the same way (``flyteadmin/auth/handlers.go``).
"""

from __future__ import annotations

from typing import Final
from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from taskplug.service._auth import SESSION_COOKIE, Authenticator
from taskplug.service._tokens import SESSION_HOURS, TokenStore

__all__ = ["router"]

router = APIRouter(include_in_schema=False)

_FORM_LIMIT: Final = 4096


def _safe_next(target: str | None) -> str:
    """Where to go after signing in: a path on this server only (never ``//other.site`` or a URL)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/executions"
    return target


def _page(
    request: Request, status: int = 200, *, message: str = "", target: str = "/executions"
) -> HTMLResponse:
    principal = request.scope.get("state", {}).get("principal")
    page = request.app.state.templates.get_template("signin.html").render(
        message=message, next=target, viewer=principal
    )
    return HTMLResponse(page, status_code=status)


@router.get("/signin", response_class=HTMLResponse)
async def signin_page(request: Request, next: str | None = None) -> HTMLResponse:
    return _page(request, target=_safe_next(next))


@router.post("/signin")
async def signin(request: Request) -> Response:
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > _FORM_LIMIT:
            return _page(request, 413, message="the form is larger than a token")
    form = parse_qs(body.decode("utf-8", "replace"), max_num_fields=4)
    token = (form.get("token") or [""])[0].strip()
    target = _safe_next((form.get("next") or [""])[0])
    auth: Authenticator = request.app.state.auth
    tokens: TokenStore = auth.tokens
    principal = await tokens.verify_token(token) if token.startswith("tp_") else None
    if principal is None:
        return _page(
            request, 401, message="that token is not known, was revoked, or has expired", target=target
        )
    session = await tokens.open_session(principal)
    response = RedirectResponse(target, status_code=303)
    secure = request.url.scheme == "https" or (
        auth.trusted_peer(request.scope) and request.headers.get("x-forwarded-proto") == "https"
    )
    response.set_cookie(
        SESSION_COOKIE,
        session,
        max_age=SESSION_HOURS * 3600,
        path="/",
        httponly=True,
        samesite="strict",
        secure=secure,
    )
    return response


@router.post("/signout")
async def signout(request: Request) -> Response:
    cookie = request.cookies.get(SESSION_COOKIE)
    if cookie:
        auth: Authenticator = request.app.state.auth
        await auth.tokens.close_session(cookie)
    response = RedirectResponse("/signin", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
    return response
