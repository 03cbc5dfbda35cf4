"""``taskplug token create|list|revoke --store postgresql://…``: the API tokens ``taskplug serve`` accepts.

A token is printed once, at ``create``, and kept only as its SHA-256 (``taskplug.service`` stores it): lost,
it is revoked and made again. ``list`` shows names, roles and times, never a secret. ``revoke`` deletes the
token and its web sessions; every server stops accepting it within its few seconds of cache. Roles: ``read``
(every GET), ``submit`` (also submit, relaunch, abort), ``admin`` (also ``/api/v1/tokens``). Kubernetes'
``kubeadm token create|list|delete`` is the model. Exit codes: 0 done, 2 bad input or an unusable database.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar

import click

from taskplug.cli._gc import parse_age
from taskplug.cli._output import dump, handles_bad_input
from taskplug.core import SpecError

__all__ = ["token"]

R = TypeVar("R")


def _with_store(store: str, work: Callable[[Any], R]) -> R:
    if not store.startswith(("postgresql://", "postgres://")):
        raise SpecError("--store", f"{store!r} is not a postgresql:// URL (the replicas' shared database)")
    import psycopg

    from taskplug.service import migrate

    try:
        with psycopg.connect(store, connect_timeout=10, autocommit=True) as conn:
            migrate(conn)
            return work(conn)
    except psycopg.Error as e:
        raise SpecError("--store", f"cannot use the database: {str(e).strip()}") from None


def _expiry(text: str | None) -> timedelta | None:
    if text is None:
        return None
    try:
        return parse_age(text)
    except SpecError as e:
        raise SpecError("--expires", e.reason) from None


_STORE = click.option(
    "--store", required=True, metavar="URL", help="The replicas' database: postgresql://user@host/db."
)


@click.group()
def token() -> None:
    """API tokens for `taskplug serve`: create, list, revoke."""


@token.command()
@_STORE
@click.option(
    "--name", required=True, help="What the token is called; recorded as who submitted (token:NAME)."
)
@click.option(
    "--role",
    type=click.Choice(["read", "submit", "admin"]),
    default="submit",
    show_default=True,
    help="read: every GET; submit: also submit, relaunch, abort; admin: also manage tokens over the API.",
)
@click.option("--expires", metavar="AGE", help="Valid for AGE (30d, 12h, 90m); until revoked when not given.")
@handles_bad_input
def create(store: str, name: str, role: str, expires: str | None) -> None:
    """Make a token and print it (once: it is kept only hashed)."""
    from taskplug.service import create_token

    lifetime = _expiry(expires)
    secret = _with_store(store, lambda conn: create_token(conn, name=name, role=role, expires_in=lifetime))
    click.echo(secret)
    click.echo(
        f"token {name!r} ({role}) made; it is shown only now. Send it as `Authorization: Bearer <token>`, "
        "or give it to `taskplug run --server URL` in TASKPLUG_TOKEN or --token-file.",
        err=True,
    )


@token.command(name="list")
@_STORE
@click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@handles_bad_input
def list_(store: str, output: str) -> None:
    """List the tokens: name, role, created, last used, expiry (never the secret)."""
    from taskplug.service import list_tokens

    tokens = _with_store(store, list_tokens)
    if output == "json":
        click.echo(
            dump(
                [
                    {
                        "name": t.name,
                        "role": t.role,
                        "created_at": t.created_at.isoformat(),
                        "last_used_at": t.last_used_at.isoformat() if t.last_used_at else None,
                        "expires_at": t.expires_at.isoformat() if t.expires_at else None,
                    }
                    for t in tokens
                ]
            ),
            nl=False,
        )
        return
    rows = [("NAME", "ROLE", "CREATED", "LAST USED", "EXPIRES")]
    for t in tokens:
        rows.append(
            (
                t.name,
                t.role,
                t.created_at.isoformat(timespec="seconds"),
                t.last_used_at.isoformat(timespec="seconds") if t.last_used_at else "never",
                t.expires_at.isoformat(timespec="seconds") if t.expires_at else "never",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    for r in rows:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())


@token.command()
@_STORE
@click.argument("name")
@handles_bad_input
def revoke(store: str, name: str) -> None:
    """Revoke the token NAME (and end the web sessions signed in with it)."""
    from taskplug.service import revoke_token

    if not _with_store(store, lambda conn: revoke_token(conn, name)):
        raise SpecError("NAME", f"no token named {name!r}")
    click.echo(f"token {name!r} revoked")
