"""``--store`` of ``serve``, ``executor`` and ``gc``: a PostgreSQL URL checked at the edge, its password kept
out of every message.

libpq quotes the whole connection string in some of its errors (``invalid URI query parameter``, an
unterminated IPv6 host …), password and all; psycopg passes them on. So every message about the store goes
through :func:`redact`, which hides the URL's password (as typed and percent-decoded) and any
``password=`` parameter. :func:`check_store` parses the URL as libpq will before anything connects, so a
malformed URL or an unknown parameter (``?bogus=1``) is exit 2 naming ``--store``, never a traceback.

A password written in ``--store`` is visible to every user of the machine (``ps``, ``/proc/PID/cmdline``):
:func:`warn_if_password` says so on stderr. libpq reads ``PGPASSWORD`` and the password file
(``PGPASSFILE``, ``~/.pgpass`` by default) instead; :data:`PASSWORD_HELP` says so in ``--help``.
Follows no Flyte file: flyteadmin reads its database password from a file (``passwordPath``) for the same
reason.
"""

from __future__ import annotations

import contextlib
import re
from typing import Final
from urllib.parse import unquote, urlsplit

import click

from taskplug.core import SpecError

__all__ = ["PASSWORD_HELP", "check_store", "redact", "store_error", "warn_if_password"]

PASSWORD_HELP: Final = (
    "Put no password in the URL (other users see a command line): libpq reads it from PGPASSWORD or "
    "from the password file PGPASSFILE (default ~/.pgpass, mode 0600)."
)

_URL_PASSWORD: Final = re.compile(r"(postgres(?:ql)?://[^:/?#@\s\"']*:)([^@\s\"']*)(@)")
_PARAM_PASSWORD: Final = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&\"']*)", re.IGNORECASE)
_HIDDEN: Final = "***"


def _password(store: str) -> str | None:
    try:
        return urlsplit(store).password
    except ValueError:
        match = _URL_PASSWORD.search(store)
        return match.group(2) if match else None


def redact(text: str, store: str) -> str:
    """``text`` with the password of ``store`` (and any URL's or ``password=`` parameter's) hidden."""
    password = _password(store)
    if password:
        for spelling in {password, unquote(password)}:
            if spelling:
                text = text.replace(spelling, _HIDDEN)
    text = _URL_PASSWORD.sub(rf"\1{_HIDDEN}\3", text)
    return _PARAM_PASSWORD.sub(rf"\1{_HIDDEN}", text)


def store_error(store: str, error: BaseException, doing: str = "cannot use the database") -> SpecError:
    """The error to exit 2 with: ``--store: <doing>: <libpq's words, redacted>``."""
    return SpecError("--store", f"{doing}: {redact(str(error).strip() or type(error).__name__, store)}")


def check_store(store: str) -> None:
    """Refuse (:class:`SpecError` naming ``--store``, redacted) what is not a PostgreSQL URL libpq takes."""
    if not store.startswith(("postgresql://", "postgres://")):
        raise SpecError(
            "--store", f"{redact(store, store)!r} is not a postgresql:// URL (the replicas' shared database)"
        )
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    try:
        conninfo_to_dict(store)
    except psycopg.Error as e:
        raise store_error(store, e, "not a connection URL libpq takes") from None


def warn_if_password(store: str) -> None:
    """Say on stderr that a password on the command line is readable by every user of the machine."""
    query = ""
    with contextlib.suppress(ValueError):
        query = urlsplit(store).query
    if _password(store) or re.search(r"(^|&)password=", query, re.IGNORECASE):
        click.echo(
            "warning: --store holds a password, which every user of this machine can read in the process "
            "list; set PGPASSWORD or use a password file (PGPASSFILE, ~/.pgpass) instead",
            err=True,
        )
