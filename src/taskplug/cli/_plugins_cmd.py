"""``taskplug plugins``: what is registered, what is enabled, and which plugin handles each task type."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from taskplug.cli._output import dump, handles_bad_input
from taskplug.core import TASKS_SECTION, PluginKind, enabled_plugins
from taskplug.executor import Platform

__all__ = ["plugins"]


@click.command()
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "-o", "--output", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
@handles_bad_input
def plugins(config_path: Path | None, fmt: str) -> None:
    """List the registered plugins and the task types each one handles."""
    platform = Platform.load(config_path)
    enabled, _ = enabled_plugins(platform.config.get(TASKS_SECTION).task_plugins)
    resolver = platform.resolver()
    handles: dict[str, list[str]] = {}
    for task_type in resolver.task_types:
        handles.setdefault(resolver.resolve(task_type).id.lower(), []).append(task_type)
    rows = []
    for entry in platform.registry.entries:
        is_enabled = not enabled or entry.id.lower() in enabled
        rows.append(
            {
                "id": entry.id,
                "kind": str(entry.kind),
                "taskTypes": list(entry.registered_task_types),
                "enabled": is_enabled,
                "handles": sorted(handles.get(entry.id.lower(), [])) if is_enabled else [],
                "default": entry.is_default,
                "resource": _resource(entry),
            }
        )
    if fmt == "json":
        click.echo(dump(rows), nl=False)
        return
    table = Table(title="taskplug plugins")
    for column in ("id", "kind", "registered task types", "enabled", "handles", "watches"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            str(row["id"]),
            str(row["kind"]),
            ", ".join(row["taskTypes"]),  # type: ignore[arg-type]
            "yes" if row["enabled"] else "no",
            ", ".join(row["handles"]) or "-",  # type: ignore[arg-type]
            str(row["resource"] or "-"),
        )
    Console(width=160).print(table)


def _resource(entry: object) -> str | None:
    rtype = getattr(entry, "resource_to_watch", None)
    if rtype is None or getattr(entry, "kind", None) != PluginKind.K8S:
        return None
    return f"{rtype.kind}.{rtype.api_version}"
