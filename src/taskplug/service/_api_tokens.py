"""``/api/v1/tokens``: the API tokens, listed and revoked over the API by an ``admin`` (never their secrets).

Tokens are made with ``taskplug token create`` (the secret is printed once, to whoever runs it against the
store); here an admin sees which exist and revokes one, which this server then stops accepting at once (the
others within their few seconds of cache). Kubernetes lists and deletes bootstrap tokens as Secrets the same
way, without showing them to a reader that may not see secrets.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict

from taskplug.service._api import ApiError, ErrorBody
from taskplug.service._auth import Authenticator

__all__ = ["router"]

router = APIRouter(prefix="/api/v1")


class TokenOut(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    role: str
    created_at: datetime
    expires_at: datetime | None
    last_used_at: datetime | None


def _auth(request: Request) -> Authenticator:
    auth: Authenticator = request.app.state.auth
    return auth


_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "No credentials, or not good ones"},
    403: {"model": ErrorBody, "description": "Not an admin"},
}


@router.get("/tokens", response_model=list[TokenOut], responses=_ERRORS)
async def list_api_tokens(request: Request) -> list[dict[str, Any]]:
    """Every API token: name, role, when made, last used (to the minute) and expiry. Admins only."""
    return await _auth(request).tokens.listed()


@router.delete(
    "/tokens/{name}",
    status_code=204,
    response_class=Response,
    responses={**_ERRORS, 404: {"model": ErrorBody, "description": "No token has this name"}},
)
async def revoke_api_token(request: Request, name: str) -> Response:
    """Revoke the token ``name`` and end the web sessions signed in with it. Admins only."""
    if not await _auth(request).tokens.revoke(name):
        raise ApiError(404, f"no token named {name!r}", field="name")
    return Response(status_code=204)
