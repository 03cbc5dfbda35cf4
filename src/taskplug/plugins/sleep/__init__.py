"""The core-sleep plugin (task type ``core-sleep``): a core plugin whose task only waits for its one duration
input."""

from taskplug.plugins.sleep._plugin import (
    PLUGIN_STATE_VERSION,
    SLEEP_TASK_TYPE,
    SleepPlugin,
    plugin_entries,
    resolve_sleep_duration,
)

__all__ = [
    "PLUGIN_STATE_VERSION",
    "SLEEP_TASK_TYPE",
    "SleepPlugin",
    "plugin_entries",
    "resolve_sleep_duration",
]
