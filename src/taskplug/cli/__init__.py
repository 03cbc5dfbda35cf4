"""The ``taskplug`` command line: run, render, status, plugins, config, cluster."""

import sys

from taskplug.cli._interrupts import install_early as _install_early

# ``taskplug run``'s signal handler from the first instant this package is imported as the program: importing
# click alone takes longer than a quick Ctrl-C (see cli/_interrupts.py).
_install_early(sys.argv)

from taskplug.cli._main import cli, main  # noqa: E402

__all__ = ["cli", "main"]
