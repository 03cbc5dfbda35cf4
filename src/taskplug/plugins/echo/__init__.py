"""The echo plugin (task type ``echo``): a core plugin copying a task's input to its output, optionally after
``plugins.echo.sleep-duration``."""

from taskplug.plugins.echo._config import ECHO_SECTION, EchoConfig
from taskplug.plugins.echo._plugin import (
    ECHO_TASK_TYPE,
    PLUGIN_STATE_VERSION,
    EchoPlugin,
    echo_outputs,
    output_variable_mapping,
    plugin_entries,
)

__all__ = [
    "ECHO_SECTION",
    "ECHO_TASK_TYPE",
    "PLUGIN_STATE_VERSION",
    "EchoConfig",
    "EchoPlugin",
    "echo_outputs",
    "output_variable_mapping",
    "plugin_entries",
]
