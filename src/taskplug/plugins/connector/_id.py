"""The connector plugin's id (Flyte's ``connector-service``): one name for the registration and the plugin."""

from typing import Final

__all__ = ["ID"]

ID: Final = "connector-service"
