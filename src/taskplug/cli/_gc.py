"""``taskplug gc --store postgresql://… --older-than 7d``: delete executions that finished long ago.

Runs beside live replicas and web servers (short transactions, rows in use skipped): schedule it as a
CronJob or a timer. ``--dry-run`` counts what would go. Exit codes: 0 done, 2 bad input or an unusable
database. The executions a ``taskplug run`` keeps in its SQLite file are not touched.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import click

from taskplug.cli._output import dump, handles_bad_input
from taskplug.cli._store import PASSWORD_HELP, check_store, store_error, warn_if_password
from taskplug.core import SpecError, parse_go_duration

__all__ = ["gc"]

_DAYS = re.compile(r"^(\d{1,5})d$")


def parse_age(text: str) -> timedelta:
    """``7d`` (whole days), or a Go duration (``36h``, ``90m``, ``1h30m``)."""
    days = _DAYS.match(text.strip())
    if days is not None:
        return timedelta(days=int(days.group(1)))
    try:
        age = parse_go_duration(text)
    except ValueError as e:
        raise SpecError("--older-than", f"{e}; or whole days such as '7d'") from None
    if age < timedelta(0):
        raise SpecError("--older-than", f"{text!r} is negative")
    return age


@click.command(epilog=PASSWORD_HELP)
@click.option(
    "--store",
    required=True,
    metavar="URL",
    help="The replicas' database: postgresql://user@host/db (the password from PGPASSWORD or PGPASSFILE).",
)
@click.option(
    "--older-than",
    "older_than",
    required=True,
    metavar="AGE",
    help="Delete executions that reached a terminal phase more than AGE ago: 7d, 36h, 90m (at least 10m).",
)
@click.option(
    "--batch",
    type=click.IntRange(1, 100_000),
    default=1000,
    show_default=True,
    help="Executions per transaction.",
)
@click.option("--dry-run", is_flag=True, help="Count what would be deleted; delete nothing.")
@click.option(
    "--catalog",
    "prune_catalog",
    is_flag=True,
    help="Also forget cached results kept more than --older-than ago (the data catalog; kept otherwise).",
)
@click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@handles_bad_input
def gc(store: str, older_than: str, batch: int, dry_run: bool, prune_catalog: bool, output: str) -> None:
    """Delete executions that finished long ago (replicas' database).

    Every execution that reached a terminal phase more than --older-than ago goes, with its events,
    attempts, map elements and create intents, a batch per transaction, beside running replicas.
    """
    check_store(store)
    warn_if_password(store)
    age = parse_age(older_than)
    import psycopg

    from taskplug.service import collect_garbage, migrate

    try:
        with psycopg.connect(store, connect_timeout=10, autocommit=True) as conn:
            migrate(conn)
            report = collect_garbage(conn, older_than=age, batch=batch, dry_run=dry_run)
            cached = _prune_catalog(conn, report.cutoff.timestamp(), dry_run) if prune_catalog else None
    except psycopg.Error as e:
        raise store_error(store, e) from None
    if output == "json":
        document = {
            "cutoff": report.cutoff.isoformat(),
            "executions": report.executions,
            "events": report.events,
            "batches": report.batches,
            "dry_run": report.dry_run,
        }
        if cached is not None:
            document["cached_results"] = cached
        click.echo(dump(document), nl=False)
        return
    verb = "would delete" if dry_run else "deleted"
    click.echo(
        f"{verb} {report.executions} execution(s) and {report.events} event(s) finished before "
        f"{report.cutoff.isoformat(timespec='seconds')}"
    )
    if cached is not None:
        click.echo(f"{verb} {cached} cached result(s) kept before then")


def _prune_catalog(conn: Any, cutoff: float, dry_run: bool) -> int:
    """The catalog's results older than the cutoff, forgotten (counted only on a dry run)."""
    from taskplug.service import PostgresCatalog

    catalog = PostgresCatalog(conn)
    old = catalog.entries(older_than=cutoff)
    return len(old) if dry_run else catalog.delete(old)
