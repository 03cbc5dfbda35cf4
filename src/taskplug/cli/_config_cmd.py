"""``taskplug config show|validate``: the effective config with every default, and a strict check of a file.

``validate`` means the config will run: what :meth:`Platform.load` checks (every key's type and range, the
plugin ids and wiring, the data root's protocol) and what :meth:`Platform.validate` adds (the enabled web-API
plugins' load-time ranges), and the pod templates given with ``--pod-templates`` as ``run`` loads them.
"""

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
@click.option(
    "--pod-templates",
    "pod_templates",
    multiple=True,
    type=click.Path(path_type=Path),
    help="PodTemplate manifests (a file or a folder) to check with the config; repeatable.",
)
@handles_bad_input
def validate(path: Path, pod_templates: tuple[Path, ...]) -> None:
    """Check a config file strictly, as a run would use it: an unknown key, a bad value, an unknown plugin
    id, a data root fsspec cannot reach or a malformed pod template fails, naming the key path."""
    platform = Platform.load(path, pod_template_paths=pod_templates)
    platform.validate()
    sections = sorted(s.path for s in Platform.sections_for(platform.registry))
    templates = f"; {len(platform.pod_templates)} pod template(s)" if pod_templates else ""
    click.echo(f"{path}: ok ({len(sections)} sections known: {', '.join(sections)}{templates})")
