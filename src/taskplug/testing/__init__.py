"""Testing helpers for plugin authors: fake contexts, a fake clock, and the Kubernetes plugin contract check.

``fake_task_context(template)`` is a real task-execution context (the one the executor builds) for a task
given as a template, an execution spec or a TaskTemplate message (with ``state=`` for a later round);
``next_round(tctx)`` the context of the round after one a test ran; ``fake_plugin_context`` the context
``get_task_phase`` is given; ``load_k8s_plugin(entry, config=...)`` loads a plugin as the platform would;
``check_k8s_plugin(entry, ...)`` checks it against what the plugin manager relies on and returns a
:class:`ContractReport` (``report.raise_if_failed()`` in a test). See ``docs/plugins.md``.
"""

from taskplug.core import FakeClock
from taskplug.testing._context import (
    DEFAULT_DATA_ROOT,
    DEFAULT_EXECUTION,
    TaskLike,
    fake_plugin_context,
    fake_plugin_setup,
    fake_task_context,
    load_k8s_plugin,
    next_round,
    spec_document,
)
from taskplug.testing._contract import CheckResult, ContractReport, check_k8s_plugin, representative_tasks

__all__ = [
    "DEFAULT_DATA_ROOT",
    "DEFAULT_EXECUTION",
    "CheckResult",
    "ContractReport",
    "FakeClock",
    "TaskLike",
    "check_k8s_plugin",
    "fake_plugin_context",
    "fake_plugin_setup",
    "fake_task_context",
    "load_k8s_plugin",
    "next_round",
    "representative_tasks",
    "spec_document",
]
