"""The ``plugins.echo`` config section, with Flyte's key and default.

Follows flyteplugins/go/tasks/plugins/testing/config.go (a sub-section ``echo`` of ``plugins``).
"""

from __future__ import annotations

from datetime import timedelta

from taskplug.core import ConfigSection, GoDuration, StrictModel

__all__ = ["ECHO_SECTION", "EchoConfig"]


class EchoConfig(StrictModel):
    """``plugins.echo``: how the echo plugin (task type ``echo``, a core plugin copying a task's input to its
    output) behaves (flyteplugins/go/tasks/plugins/testing/config.go)."""

    sleep_duration: GoDuration = timedelta(0)
    """How long an echo task stays Running before its input is copied to its output; ``0s``: at once."""


ECHO_SECTION = ConfigSection("plugins.echo", EchoConfig)
