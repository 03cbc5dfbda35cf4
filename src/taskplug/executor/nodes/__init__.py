"""propeller's node machinery: the generic node step and a handler per node kind.

The step (:mod:`._step`, after flytepropeller/pkg/controller/nodes/executor.go) runs every node's rounds —
attempts, retry budgets, deadlines, the decision saved before cleanup, bounded cleanup — over a
:class:`NodeState`; a :class:`NodeHandler` is what one node kind does in a round (the task handler,
:mod:`._task`, calls a plugin). Container kinds (the map task's array handler) run their children through the
same step. ``docs/executor.md`` walks through it and says where a new node kind goes.

The phases and the pure rules load at once (``taskplug render`` names element phases); the step and the
handlers, which reach the data store, on first use (PEP 562).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from taskplug.core import lazy_exports
from taskplug.executor.nodes._deadlines import (
    ACTIVE_DEADLINE_CODE,
    EXECUTION_DEADLINE_CODE,
    deadline_passed,
    next_deadline,
)
from taskplug.executor.nodes._phase import NodePhase
from taskplug.executor.nodes._retry import (
    RetryDecision,
    decide_retry,
    max_attempts_for,
    retries_exhausted,
    retry_delay,
)
from taskplug.executor.nodes._settings import (
    ArrayNodeSettings,
    NodeSettings,
    ParallelismBehavior,
    RunSettings,
)

if TYPE_CHECKING:
    from taskplug.executor._store import Closing
    from taskplug.executor.nodes._step import (
        CLEANUP_FAILED,
        Cleanup,
        Evaluation,
        GivenUp,
        HandlerResult,
        NodeHandler,
        NodeRuntime,
        NodeState,
        NodeStep,
        error_json,
    )
    from taskplug.executor.nodes._task import (
        FUTURES_FILE,
        TaskHandler,
        dynamic_workflow_error,
        needs_template_file,
        outputs_declared,
    )

__all__ = [
    "ACTIVE_DEADLINE_CODE",
    "CLEANUP_FAILED",
    "EXECUTION_DEADLINE_CODE",
    "FUTURES_FILE",
    "ArrayNodeSettings",
    "Cleanup",
    "Closing",
    "Evaluation",
    "GivenUp",
    "HandlerResult",
    "NodeHandler",
    "NodePhase",
    "NodeRuntime",
    "NodeSettings",
    "NodeState",
    "NodeStep",
    "ParallelismBehavior",
    "RetryDecision",
    "RunSettings",
    "TaskHandler",
    "deadline_passed",
    "decide_retry",
    "dynamic_workflow_error",
    "error_json",
    "max_attempts_for",
    "needs_template_file",
    "next_deadline",
    "outputs_declared",
    "retries_exhausted",
    "retry_delay",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "Closing": "taskplug.executor._store",
        **dict.fromkeys(
            [
                "CLEANUP_FAILED",
                "Cleanup",
                "Evaluation",
                "GivenUp",
                "HandlerResult",
                "NodeHandler",
                "NodeRuntime",
                "NodeState",
                "NodeStep",
                "error_json",
            ],
            "taskplug.executor.nodes._step",
        ),
        **dict.fromkeys(
            [
                "FUTURES_FILE",
                "TaskHandler",
                "dynamic_workflow_error",
                "needs_template_file",
                "outputs_declared",
            ],
            "taskplug.executor.nodes._task",
        ),
    },
)
