"""The executor: drives task executions through their plugins; the execution spec; the platform."""

from taskplug.executor._paths import ExecutionPaths
from taskplug.executor._platform import EXECUTOR_SECTION, PLATFORM_DEFAULTS, ExecutorConfig, Platform
from taskplug.executor._render import observed_phase, render_object
from taskplug.executor._spec import ExecutionSpec, load_spec, parse_spec
from taskplug.executor._tasks import task_context_for

__all__ = [
    "EXECUTOR_SECTION",
    "PLATFORM_DEFAULTS",
    "ExecutionPaths",
    "ExecutionSpec",
    "ExecutorConfig",
    "Platform",
    "load_spec",
    "observed_phase",
    "parse_spec",
    "render_object",
    "task_context_for",
]
