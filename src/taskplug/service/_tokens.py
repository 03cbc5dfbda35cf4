"""API tokens and web sessions of ``taskplug serve``: made, listed, revoked, and looked up per request.

A token is ``tp_<id>_<secret>``: the id (public) finds its row, the secret is kept only as its SHA-256 and
compared in constant time (:func:`hmac.compare_digest`), as GitHub's and Kubernetes' bootstrap tokens split an
id from a secret. It carries a role, ``read`` < ``submit`` < ``admin``, and may expire. A browser signs in with
a token and is given a session (``<id>.<secret>``, kept the same way) bound to that token: revoking the token
(deleting its row) ends its sessions with it. The CLI (``taskplug token``) writes through a plain connection;
the server reads through its pool and keeps what it verified for a few seconds (:class:`TokenStore`), so that
a request costs no database round trip — revoking takes effect on every server within that time.

Kubernetes' static token file and its bootstrap tokens are the model (``pkg/serviceaccount``,
``plugin/pkg/auth/authenticator/token/bootstrap``): a bearer token that names an identity and a group.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, Final, Literal

from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from taskplug.core import SpecError

__all__ = [
    "ROLES",
    "Principal",
    "Role",
    "TokenInfo",
    "TokenStore",
    "create_token",
    "list_tokens",
    "revoke_token",
    "role_allows",
]

Role = Literal["read", "submit", "admin"]
ROLES: Final[tuple[Role, ...]] = ("read", "submit", "admin")
"""Weakest first: each role may do what the ones before it may."""

TOKEN_PREFIX: Final = "tp_"
SESSION_HOURS: Final = 12
"""A web session lasts this long (or until its token expires or is revoked, whichever is first)."""

_NAME: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,62}$")
_TOKEN: Final = re.compile(r"^tp_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$")
_SESSION: Final = re.compile(r"^([0-9a-f]{16})\.([A-Za-z0-9_-]{43})$")


def role_allows(have: Role, need: Role) -> bool:
    """Whether ``have`` may do what ``need`` is needed for."""
    return ROLES.index(have) >= ROLES.index(need)


@dataclasses.dataclass(frozen=True, slots=True)
class Principal:
    """Who a request is from: the identity recorded on what it submits (``token:ci``, ``proxy:alice``,
    ``oidc:alice@example.com``, ``local``), its role, and how it was authenticated."""

    identity: str
    role: Role
    via: Literal["token", "session", "proxy", "oidc", "local"]
    token_id: str | None = None
    """The token a ``token`` or ``session`` principal holds (a session is made for it at sign-in)."""


@dataclasses.dataclass(frozen=True, slots=True)
class TokenInfo:
    """A token as ``taskplug token list`` shows it: never its secret."""

    name: str
    role: Role
    created_at: datetime
    expires_at: datetime | None
    last_used_at: datetime | None


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


def _check_name(name: str) -> None:
    if not _NAME.match(name):
        raise SpecError(
            "--name",
            f"{name!r} is not a token name: 1-63 letters, digits, '.', '_', '@', '-', starting with a letter "
            "or digit",
        )


def _check_role(role: str) -> Role:
    if role not in ROLES:
        raise SpecError("--role", f"{role!r} is not a role (one of {', '.join(ROLES)})")
    return role


def create_token(conn: Any, *, name: str, role: str, expires_in: timedelta | None = None) -> str:
    """Make a token named ``name`` with ``role`` (in the database of the psycopg connection ``conn``); the
    token, which is not kept anywhere: shown once. :class:`SpecError` naming ``--name`` when the name is taken."""
    _check_name(name)
    checked = _check_role(role)
    token_id = secrets.token_hex(8)
    secret = secrets.token_urlsafe(32)
    with conn.transaction():
        cur = conn.execute(
            "INSERT INTO taskplug_tokens (id, name, role, secret_sha256, expires_at)"
            " VALUES (%s, %s, %s, %s, now() + %s) ON CONFLICT (name) DO NOTHING RETURNING id",
            (token_id, name, checked, _digest(secret), expires_in),
        )
        if cur.fetchone() is None:
            raise SpecError(
                "--name", f"a token named {name!r} exists: revoke it first, or choose another name"
            )
    return f"{TOKEN_PREFIX}{token_id}_{secret}"


def list_tokens(conn: Any) -> list[TokenInfo]:
    """Every token, oldest first."""
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(
            "SELECT name, role, created_at, expires_at, last_used_at FROM taskplug_tokens ORDER BY created_at, name"
        )
        return [TokenInfo(**row) for row in cur.fetchall()]


def revoke_token(conn: Any, name: str) -> bool:
    """Delete the token named ``name`` and its web sessions; whether there was one."""
    with conn.transaction():
        cur = conn.execute("DELETE FROM taskplug_tokens WHERE name = %s RETURNING id", (name,))
        return cur.fetchone() is not None


class TokenStore:
    """The server's side: tokens and sessions looked up through the pool, what was verified kept for
    ``cache_seconds`` (never past the credential's own expiry) under the SHA-256 of what was presented.

    ``clock`` is monotonic seconds (tests pass their own)."""

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        *,
        cache_seconds: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.pool = pool
        self.cache_seconds = cache_seconds
        self.clock = clock
        self._verified: dict[bytes, tuple[float, Principal]] = {}
        self._any: tuple[float, bool] | None = None

    def _cached(self, presented: str) -> tuple[bytes, Principal | None]:
        key = _digest(presented)
        hit = self._verified.get(key)
        if hit is not None and hit[0] > self.clock():
            return key, hit[1]
        if hit is not None:
            del self._verified[key]
        return key, None

    def _keep(self, key: bytes, principal: Principal, remaining: float | None) -> None:
        lifetime = self.cache_seconds if remaining is None else min(self.cache_seconds, remaining)
        if lifetime <= 0:
            return
        if len(self._verified) > 10_000:  # bounded: a flood of distinct valid credentials cannot grow it
            self._verified.clear()
        self._verified[key] = (self.clock() + lifetime, principal)

    def forget(self, token_id: str | None = None) -> None:
        """Drop what was verified (of one token and its sessions, or all): after a revoke or a sign-out here."""
        if token_id is None:
            self._verified.clear()
        else:
            self._verified = {k: v for k, v in self._verified.items() if v[1].token_id != token_id}
        self._any = None

    async def any_tokens(self) -> bool:
        """Whether any token exists (a loopback server with none lets its one user in without one)."""
        now = self.clock()
        if self._any is not None and self._any[0] > now:
            return self._any[1]
        async with self.pool.connection() as conn:
            cur = await conn.execute("SELECT EXISTS (SELECT 1 FROM taskplug_tokens)")
            row = await cur.fetchone()
        found = bool(row and row[0])
        self._any = (now + self.cache_seconds, found)
        return found

    async def verify_token(self, presented: str) -> Principal | None:
        """The principal of a ``tp_…`` token, or None when it is not one that exists and has not expired."""
        key, cached = self._cached(presented)
        if cached is not None:
            return cached
        match = _TOKEN.match(presented)
        if match is None:
            return None
        token_id, secret = match.groups()
        async with self.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            # Marks it used (at most once a minute: a busy client does not write per request) as it reads it.
            await cur.execute(
                "UPDATE taskplug_tokens SET last_used_at = CASE WHEN last_used_at IS NULL"
                " OR last_used_at < now() - interval '1 minute' THEN now() ELSE last_used_at END"
                " WHERE id = %s AND (expires_at IS NULL OR expires_at > now())"
                " RETURNING name, role, secret_sha256, extract(epoch FROM expires_at - now())::float8 AS remaining",
                (token_id,),
            )
            row = await cur.fetchone()
        if row is None or not hmac.compare_digest(bytes(row["secret_sha256"]), _digest(secret)):
            return None
        principal = Principal(f"token:{row['name']}", row["role"], "token", token_id)
        self._keep(key, principal, row["remaining"])
        return principal

    async def listed(self) -> list[dict[str, Any]]:
        """Every token as :class:`TokenInfo`'s fields, oldest first."""
        async with self.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(
                "SELECT name, role, created_at, expires_at, last_used_at FROM taskplug_tokens"
                " ORDER BY created_at, name"
            )
            return list(await cur.fetchall())

    async def revoke(self, name: str) -> bool:
        """Delete the token ``name`` and its sessions, and stop believing it here at once; whether it existed."""
        async with self.pool.connection() as conn:
            cur = await conn.execute("DELETE FROM taskplug_tokens WHERE name = %s RETURNING id", (name,))
            row = await cur.fetchone()
        if row is None:
            return False
        self.forget(str(row[0]))
        return True

    async def open_session(self, token: Principal) -> str:
        """A web session for the (verified) token's holder; the cookie's value."""
        assert token.token_id is not None
        session_id = secrets.token_hex(8)
        secret = secrets.token_urlsafe(32)
        async with self.pool.connection() as conn:
            await conn.execute(
                "INSERT INTO taskplug_sessions (id, token_id, secret_sha256, expires_at)"
                " SELECT %s, t.id, %s, least(now() + %s, coalesce(t.expires_at, 'infinity'))"
                " FROM taskplug_tokens t WHERE t.id = %s",
                (session_id, _digest(secret), timedelta(hours=SESSION_HOURS), token.token_id),
            )
        return f"{session_id}.{secret}"

    async def verify_session(self, cookie: str) -> Principal | None:
        """The principal of a session cookie, or None when it is not a live session of a live token."""
        key, cached = self._cached(cookie)
        if cached is not None:
            return cached
        match = _SESSION.match(cookie)
        if match is None:
            return None
        session_id, secret = match.groups()
        async with self.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(
                "SELECT t.id AS token_id, t.name, t.role, s.secret_sha256,"
                " extract(epoch FROM least(s.expires_at, coalesce(t.expires_at, 'infinity')) - now())::float8"
                " AS remaining FROM taskplug_sessions s JOIN taskplug_tokens t ON t.id = s.token_id"
                " WHERE s.id = %s AND s.expires_at > now() AND (t.expires_at IS NULL OR t.expires_at > now())",
                (session_id,),
            )
            row = await cur.fetchone()
        if row is None or not hmac.compare_digest(bytes(row["secret_sha256"]), _digest(secret)):
            return None
        principal = Principal(f"token:{row['name']}", row["role"], "session", row["token_id"])
        self._keep(key, principal, row["remaining"])
        return principal

    async def close_session(self, cookie: str) -> None:
        """Sign out: the session is deleted (and forgotten here at once)."""
        self._verified.pop(_digest(cookie), None)
        match = _SESSION.match(cookie)
        if match is None:
            return
        async with self.pool.connection() as conn:
            await conn.execute(
                "DELETE FROM taskplug_sessions WHERE id = %s AND secret_sha256 = %s",
                (match.group(1), _digest(match.group(2))),
            )
