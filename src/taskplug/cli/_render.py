"""``taskplug render``: the exact object the plugin manager would create, created nowhere."""

from __future__ import annotations

from pathlib import Path

import click

from taskplug.cli._output import dump, handles_bad_input
from taskplug.executor import EXECUTOR_SECTION, Platform, load_spec, render_object

__all__ = ["render"]


@click.command()
@click.argument("spec", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--config", "config_path", type=click.Path(dir_okay=False, path_type=Path), help="Platform config YAML."
)
@click.option(
    "--pod-templates",
    "pod_templates",
    multiple=True,
    type=click.Path(path_type=Path),
    help="PodTemplate manifests (a file or a folder); repeatable.",
)
@click.option("-o", "--output", "fmt", type=click.Choice(["json", "yaml"]), default="json", show_default=True)
@handles_bad_input
def render(spec: Path, config_path: Path | None, pod_templates: tuple[Path, ...], fmt: str) -> None:
    """Print the Kubernetes object a task execution would create, with every piece of platform config."""
    platform = Platform.load(config_path, pod_template_paths=pod_templates)
    loaded = load_spec(spec)
    obj = render_object(platform, loaded, data_root=platform.config.get(EXECUTOR_SECTION).data_root)
    click.echo(dump(obj, fmt), nl=False)
