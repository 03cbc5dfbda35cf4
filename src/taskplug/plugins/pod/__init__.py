"""The pod plugin (task types container, python-task, python, raw-container, sidecar)."""

from taskplug.plugins.pod._plugin import PodPlugin, plugin_entries

__all__ = ["PodPlugin", "plugin_entries"]
