"""Control characters where they cannot go: refused naming the parameter or field, before any database work.

PostgreSQL's text and jsonb cannot hold a NUL character (a query with one fails in the driver: a 500 and a
traceback, then a reset connection), and a key, a filter or a label is one line of text. So:

- :class:`ControlCharacters` answers a request whose path or query holds a C0 control character or DEL
  (``%00``, ``%0a``…) with 422 naming it — ``path.key`` for an execution's URLs, ``query.<name>`` for a
  query parameter — in the API's error shape under ``/api`` and as a page elsewhere;
- :func:`control_character_field` finds, in a submitted document, the first string holding NUL (anywhere:
  an env value, an argument, an input, a map key) or any control character in a label, and names its path
  (``spec.template.container.env[0].value``), which the API answers with 422.

Newlines and tabs stay allowed inside a spec's strings (a script argument has them). Follows no Flyte
file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import parse_qsl

from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["ControlCharacters", "control_character_field", "has_control_character"]

_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")
_EXECUTION_URL: Final = re.compile(r"^(/api/v1)?/executions/")


def has_control_character(text: str) -> bool:
    """Whether ``text`` holds a C0 control character or DEL."""
    return _CONTROL.search(text) is not None


def _refused_field(scope: Scope) -> str | None:
    path: str = scope.get("path", "")
    if has_control_character(path):
        return "path.key" if _EXECUTION_URL.match(path) else "path"
    query = scope.get("query_string", b"").decode("latin-1")
    for name, value in parse_qsl(query, keep_blank_values=True):
        if has_control_character(name) or has_control_character(value):
            return f"query.{name}" if not has_control_character(name) else "query"
    return None


class ControlCharacters:
    """422 for a control character in the path or a query parameter, naming which (see the module doc)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            field = _refused_field(scope)
            if field is not None:
                await _refusal(scope, field)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _refusal(scope: Scope, field: str) -> Response:
    message = f"{field} holds a control character (such as NUL or a newline), which it cannot hold"
    path: str = scope.get("path", "")
    if path.startswith("/api/") or path in ("/healthz", "/metrics"):
        return JSONResponse({"error": {"message": message, "field": field}}, status_code=422)
    # A page: no template (the request never reached the app), the text escaped by hand.
    text = message.replace("&", "&amp;").replace("<", "&lt;")
    page = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Refused · taskplug</title>'
        f'<link rel="stylesheet" href="/static/style.css"></head><body><main><h1>Refused</h1>'
        f'<p class="error" id="refused">{text}</p><p><a href="/executions">All executions</a></p>'
        "</main></body></html>"
    )
    return HTMLResponse(page, status_code=422)


def control_character_field(document: Mapping[str, Any]) -> str | None:
    """The path of the first string in a submission that holds what it cannot: NUL anywhere, any control
    character in ``labels`` (names and values) or ``key``; None when there is none."""
    for name in ("key", "labels"):
        found = _find(document.get(name), name, _CONTROL)
        if found is not None:
            return found
    return _find(document, "", re.compile("\x00"))


def _find(value: Any, path: str, pattern: re.Pattern[str]) -> str | None:
    if isinstance(value, str):
        return path if pattern.search(value) else None
    if isinstance(value, Mapping):
        for k, v in value.items():
            child = f"{path}.{k}" if path else str(k)
            if isinstance(k, str) and pattern.search(k):
                return path or "body"
            found = _find(v, child, pattern)
            if found is not None:
                return found
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found = _find(item, f"{path}[{i}]", pattern)
            if found is not None:
                return found
    return None
