"""taskplug: Flyte's task plugin system in Python."""

__version__ = "0.1.0"
