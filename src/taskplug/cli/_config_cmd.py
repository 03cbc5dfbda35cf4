"""``taskplug config show|validate``: the effective config with every default, and a strict check of a file."""

from __future__ import annotations

from pathlib import Path

import click

from taskplug.cli._output import dump, handles_bad_input
from taskplug.executor import Platform

__all__ = ["config"]


@click.group()
def config() -> None:
    """Inspect and check platform config files (Flyte's layout: plugins.k8s.*, tasks.*, ...)."""


@config.command()
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("-o", "--output", "fmt", type=click.Choice(["yaml", "json"]), default="yaml", show_default=True)
@handles_bad_input
def show(config_path: Path | None, fmt: str) -> None:
    """Print the effective config: the file over the platform defaults, every key with its value."""
    platform = Platform.load(config_path)
    click.echo(dump(platform.config.effective(), fmt), nl=False)


@config.command()
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@handles_bad_input
def validate(path: Path) -> None:
    """Check a config file strictly: an unknown key or a bad value fails, naming the key path."""
    platform = Platform.load(path)
    sections = sorted(s.path for s in Platform.sections_for(platform.registry))
    click.echo(f"{path}: ok ({len(sections)} sections known: {', '.join(sections)})")
