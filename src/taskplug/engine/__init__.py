"""What runs plugins (flytepropeller's task handler and Flyte's internal web-API machinery).

:func:`open_plugins` loads every enabled plugin behind its engine — a :class:`~taskplug.engine.k8s.PluginManager`
for a Kubernetes plugin, a web-API adapter for a web-API plugin — and yields the resolver the executor uses.
Plugins never import the engine: they see only ``taskplug.k8s`` / ``taskplug.webapi``.
"""

from taskplug.engine._wiring import LocalOperator, Wakeups, local_operators, open_plugins

__all__ = ["LocalOperator", "Wakeups", "local_operators", "open_plugins"]
