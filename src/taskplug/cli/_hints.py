"""What to do about an error ``taskplug run`` refuses a spec with: a task type whose plugin is installed but not
enabled (Flyte's ``[UnsupportedTaskType] no plugin defined for Handler type`` from flytepropeller's
``pkg/controller/nodes/task/handler.go`` ``ResolvePlugin``), said with the plugin, the config keys that enable
it, and an example config of this repository that does."""

from __future__ import annotations

from taskplug.core import TASKS_SECTION, ErrorCode, PluginError, enabled_plugins
from taskplug.executor import Platform

__all__ = ["EXAMPLE_CONFIGS", "unsupported_task_type_hint"]

EXAMPLE_CONFIGS: dict[str, str] = {
    "batchjob": "examples/custom-plugin/config.yaml",
    "core-sleep": "examples/echo-platform.yaml",
    "dask": "examples/flytekit/config.yaml",
    "k8s-array": "examples/legacy-map/platform.yaml",
    "mpi": "examples/pytorch/config.yaml",
    "pytorch": "examples/flytekit/config.yaml",
    "ray": "examples/ray/config.yaml",
    "tensorflow": "examples/pytorch/config.yaml",
}
"""Plugin id → an example platform config in this repository that enables it (``tests/cli`` checks each)."""


def unsupported_task_type_hint(platform: Platform, task_type: str, error: PluginError) -> str | None:
    """The message for ``error`` when it says no enabled plugin handles ``task_type`` and an installed plugin
    registers it; ``None`` otherwise (the error says enough)."""
    if not error.has_code(str(ErrorCode.UNSUPPORTED_TASK_TYPE)):
        return None
    cfg = platform.config.get(TASKS_SECTION).task_plugins
    enabled, _ = enabled_plugins(cfg)
    candidates = [
        entry.id
        for entry in platform.registry.entries
        if task_type in entry.registered_task_types and entry.id.lower() not in enabled
    ]
    if not candidates:
        return None
    plugin = candidates[0]
    listed = sorted(enabled | {plugin.lower()}) if enabled else [plugin.lower()]
    which = (
        f"plugin [{plugin}]"
        if len(candidates) == 1
        else f"plugins [{'], ['.join(candidates)}] (choose one with default-for-task-types)"
    )
    example = EXAMPLE_CONFIGS.get(plugin.lower())
    example_text = (
        f"; {example} in taskplug's repository is such a config: `taskplug run --config {example} ...`"
        if example
        else ""
    )
    return (
        f"task type [{task_type}] is handled by {which}, installed but not enabled by this platform config. "
        f"Enable it in a config file given with --config: tasks.task-plugins.enabled-plugins: "
        f"[{', '.join(listed)}] (and, when more than one enabled plugin registers [{task_type}], "
        f"tasks.task-plugins.default-for-task-types: {{{task_type}: {plugin.lower()}}}){example_text}. "
        f"({error})"
    )
