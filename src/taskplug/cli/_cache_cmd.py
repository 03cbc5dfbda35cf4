"""``taskplug cache list | show | clear``: the data catalog's kept results, in a ``taskplug run`` state file
(``--state-db``) or in the replicas' PostgreSQL database (``--store postgresql://…``).

Chosen by the task's name, its ``cache_version`` and the result's age. ``show`` prints one result with the
outputs it keeps (read from the copy under the data root). ``clear`` forgets results: the next run of their
inputs computes them again (the kept copies are left in the data root). Exit codes: 0 done, 2 bad input.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from taskplug.cli._gc import parse_age
from taskplug.cli._output import dump, handles_bad_input
from taskplug.cli._store import check_store, store_error, warn_if_password
from taskplug.core import SpecError

__all__ = ["cache"]


def _open(state_db: Path | None, store: str | None) -> Any:
    if state_db is not None and store is not None:
        raise SpecError("--store", "not with --state-db: one catalog at a time")
    if store is None:
        from taskplug.executor import SQLiteCatalog, SQLiteStateStore, check_state_file

        path = state_db or Path(".taskplug/state.db")
        if not path.exists():
            raise SpecError("--state-db", f"{str(path)!r} does not exist: no run has used it yet")
        check_state_file(path)
        SQLiteStateStore(path).close()  # brings an older file to the schema with the catalog's tables
        return SQLiteCatalog(path)
    check_store(store)
    warn_if_password(store)
    import psycopg

    from taskplug.service import PostgresCatalog, migrate

    try:
        conn = psycopg.connect(store, connect_timeout=10, autocommit=True)
        migrate(conn)
    except psycopg.Error as e:
        raise store_error(store, e) from None
    return PostgresCatalog(conn)


def _selected(catalog: Any, task: str | None, version: str | None, older_than: str | None) -> list[Any]:
    cutoff = time.time() - parse_age(older_than).total_seconds() if older_than else None
    entries: list[Any] = catalog.entries(task=task, version=version, older_than=cutoff)
    return entries


def _when(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _where(f: Any) -> Any:
    f = click.option(
        "--state-db",
        type=click.Path(dir_okay=False, path_type=Path),
        help="A taskplug run state file (default .taskplug/state.db).",
    )(f)
    f = click.option("--store", metavar="URL", help="The replicas' database: postgresql://user@host/db.")(f)
    return f


def _filters(f: Any) -> Any:
    f = click.option("--task", help="Only results of this task (its name, as flytekit names it).")(f)
    f = click.option("--version", "cache_version", help="Only results of this cache_version.")(f)
    f = click.option(
        "--older-than", metavar="AGE", help="Only results kept more than AGE ago: 7d, 36h, 90m."
    )(f)
    return f


@click.group()
def cache() -> None:
    """The data catalog: the results cacheable tasks (cache=True) keep."""


@cache.command("list")
@_where
@_filters
@click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@handles_bad_input
def list_(
    state_db: Path | None,
    store: str | None,
    task: str | None,
    cache_version: str | None,
    older_than: str | None,
    output: str,
) -> None:
    """List kept results, newest first."""
    catalog = _open(state_db, store)
    try:
        entries = _selected(catalog, task, cache_version, older_than)
    finally:
        catalog.close()
    if output == "json":
        click.echo(dump([e.to_json() for e in entries]), nl=False)
        return
    if not entries:
        click.echo("no cached results")
        return
    for e in entries:
        click.echo(
            f"{e.key.task_name}  cache_version {e.key.discovery_version}  {e.key.tag}  {_when(e.created_at)}  "
            f"from {e.source}"
        )


@cache.command()
@click.argument("tag")
@_where
@click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@handles_bad_input
def show(tag: str, state_db: Path | None, store: str | None, output: str) -> None:
    """Show the kept result whose tag is (or starts with) TAG, with its outputs."""
    catalog = _open(state_db, store)
    try:
        found = [
            e for e in catalog.entries() if e.key.tag.startswith(tag) or e.key.tag == f"flyte_cached-{tag}"
        ]
    finally:
        catalog.close()
    if len(found) != 1:
        what = "no cached result" if not found else f"{len(found)} cached results"
        raise SpecError("TAG", f"{what} with a tag starting {tag!r}")
    entry = found[0]
    document = entry.to_json()
    document["outputs"] = asyncio.run(_outputs(entry))
    if output == "json":
        click.echo(dump(document), nl=False)
        return
    for name, value in document.items():
        click.echo(f"{name}: {value}")


async def _outputs(entry: Any) -> Any:
    from taskplug.core import literal_map_to_plain
    from taskplug.executor import kept_outputs

    try:
        outputs = await kept_outputs(entry)
    except ValueError as e:
        return f"unreadable ({e}): the next run recomputes it"
    if outputs is None:
        return "missing: the next run recomputes it"
    return literal_map_to_plain(outputs)


@cache.command()
@_where
@_filters
@click.option("--all", "everything", is_flag=True, help="Forget every kept result.")
@handles_bad_input
def clear(
    state_db: Path | None,
    store: str | None,
    task: str | None,
    cache_version: str | None,
    older_than: str | None,
    everything: bool,
) -> None:
    """Forget kept results (by task, cache_version, age; or --all): their next runs compute them again."""
    if not (task or cache_version or older_than or everything):
        raise SpecError("--all", "say which results to forget: --task, --version, --older-than, or --all")
    catalog = _open(state_db, store)
    try:
        count = catalog.delete(_selected(catalog, task, cache_version, older_than))
    finally:
        catalog.close()
    click.echo(f"forgot {count} cached result(s)")
