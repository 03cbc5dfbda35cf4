"""The k8s array plugin's id and task type: one name each for the registration and the plugin."""

from typing import Final

__all__ = ["ARRAY_TASK_TYPE", "PLUGIN_ID"]

ARRAY_TASK_TYPE: Final = "container_array"
PLUGIN_ID: Final = "k8s-array"
