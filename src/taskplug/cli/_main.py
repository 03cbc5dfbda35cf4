"""The ``taskplug`` command line."""

from __future__ import annotations

import click

from taskplug import __version__
from taskplug.cli._cluster import cluster
from taskplug.cli._config_cmd import config
from taskplug.cli._plugins_cmd import plugins
from taskplug.cli._render import render
from taskplug.cli._run import run
from taskplug.cli._status import status

__all__ = ["cli", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="taskplug")
def cli() -> None:
    """taskplug: run typed Flyte tasks on Kubernetes and on remote services, through plugins."""


cli.add_command(run)
cli.add_command(render)
cli.add_command(status)
cli.add_command(plugins)
cli.add_command(config)
cli.add_command(cluster)


def main() -> None:
    cli(prog_name="taskplug")
