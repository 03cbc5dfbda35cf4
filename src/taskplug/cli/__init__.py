"""The ``taskplug`` command line: run, render, status, plugins, config, cluster."""

from taskplug.cli._main import cli, main

__all__ = ["cli", "main"]
