"""The connector plugin's id (Flyte's ``connector-service``) and the task types it registers: the names the
registration, the config and the plugin share."""

from typing import Final

__all__ = ["DEFAULT_SUPPORTED_TASK_TYPES", "ID"]

ID: Final = "connector-service"

DEFAULT_SUPPORTED_TASK_TYPES: Final = ("task_type_3", "task_type_4")
"""``supportedTaskTypes``' default: the task types the entry registers (the live set is discovery's)."""
