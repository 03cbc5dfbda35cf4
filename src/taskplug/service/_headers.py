"""The security headers every answer of ``taskplug serve`` carries: no framing, no sniffing, no referrer leak.

- ``Content-Security-Policy``: scripts, styles, images and connections from this server only, no inline
  script or style, no plugins, forms posting back here only, and ``frame-ancestors 'none'`` — a page of
  another site cannot frame Abort or Relaunch under a decoy and have the user click it (clickjacking);
- ``X-Frame-Options: DENY``: the same for browsers that predate ``frame-ancestors``;
- ``X-Content-Type-Options: nosniff``: a log line or label that looks like HTML is never run as a page;
- ``Referrer-Policy: same-origin``: execution keys in URLs are not sent to the sites log links lead to.

A route that needs more (the API docs page runs one inline script to start Swagger UI) sets its own
``Content-Security-Policy``, which is kept; the other headers are set on every answer. Follows no Flyte
file (the web view is taskplug's own).
"""

from __future__ import annotations

import base64
import hashlib
from typing import Final

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["CONTENT_SECURITY_POLICY", "SecurityHeaders", "content_security_policy"]


def content_security_policy(*inline_scripts: str) -> str:
    """The policy, allowing these inline scripts by their hash (CSP's ``'sha256-…'`` source)."""
    hashes = "".join(
        f" 'sha256-{base64.b64encode(hashlib.sha256(s.encode()).digest()).decode()}'" for s in inline_scripts
    )
    return (
        "default-src 'none'; "
        f"script-src 'self'{hashes}; "
        "style-src 'self'; "
        "img-src 'self' data:; "
        "font-src 'self'; "
        "connect-src 'self'; "
        "form-action 'self'; "
        "base-uri 'none'; "
        "frame-ancestors 'none'"
    )


CONTENT_SECURITY_POLICY: Final = content_security_policy()

_ALWAYS: Final = (
    ("X-Frame-Options", "DENY"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "same-origin"),
)


class SecurityHeaders:
    """Add the headers to every HTTP answer (plain ASGI: the live pages' event streams pass untouched)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                if "content-security-policy" not in headers:
                    headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
                for name, value in _ALWAYS:
                    headers[name] = value
            await send(message)

        await self.app(scope, receive, send_with_headers)
