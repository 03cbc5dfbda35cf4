"""What a task written by Flyte 2's SDK (``flyte``) needs from the platform beyond what Flyte 1's propeller
gives a task: the environment of Flyte 2's executor, and its output folder before it starts.

Follows Flyte 2's backend (github.com/flyteorg/flyte, branch ``main``): ``executor/pkg/plugin/
task_exec_metadata.go`` (``NewTaskExecutionMetadata``: ``ACTION_NAME``, ``RUN_NAME``, ``_U_RUN_BASE`` and
``_U_ORG_NAME`` = ``local`` in every task's environment, the platform's values winning over the run's own
env vars; the labels ``run``, ``action`` and ``attempt`` (1-based) beside Flyte 1's ``task-name``; the task
execution id's node is the action, its execution the run) and ``executor/pkg/plugin/
task_exec_context.go`` (the output prefix per action and attempt). The SDK's runtime entry point ``a0``
(``flyte/_bin/runtime.py``) reads those variables (``--run-name`` and ``--name`` stay ``{{.runName}}`` /
``{{.actionName}}`` in its arguments: no backend templating expands them, ``a0`` takes the variables instead),
and ``flyte/_internal/runtime/io.py`` writes ``outputs.pb`` or ``error.pb`` into the output prefix with plain
file writes, so on a local data root that folder must exist before the pod starts.

A task is Flyte 2's when its template says so: runtime metadata ``FLYTE_SDK`` at version 2 or later (what
``flyte``'s ``translate_task_to_wire`` writes; flytekit writes its own 1.x version there), or task type
``python`` (the type Flyte 2 gives a plain task; flytekit's is ``python-task``). Its plugin task types
(``dask``, ``spark``, ``ray``, ``pytorch`` …) are recognised by the runtime metadata alone.

The rest is what Flyte 1 and Flyte 2 share: the template parses as flyteidl's ``core.TaskTemplate``
(``flyteidl2.core`` only adds fields, and its interface's repeated key/value variables are a map's wire form);
``inputs.pb`` and ``outputs.pb`` (``flyteidl2.task.Inputs`` / ``Outputs``, repeated name/value pairs) are a
``LiteralMap``'s wire form; ``error.pb`` is the same ``ErrorDocument``, read as Flyte 2's k8s plugin manager
reads it (``executor/pkg/plugin/k8s/plugin_manager.go``: after a success, a recoverable error is a retryable
failure, else a permanent one, with the document's code, message and kind); retries are the template's
``metadata.retries`` + 1 attempts (``maxAttemptsFromTaskTemplate``).

Deviation: Flyte 2's actions service replaces ``{{.runStartTime}}`` in the container's arguments with the run's
start time when it creates the action (``actions/k8s/client.go``); taskplug leaves it, so ``a0`` falls back
to its constant (the Unix epoch) for ``flyte.ctx().run_start_time``: a value that changed between runs of one
named execution would make the same spec look like another on resume.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from flyteidl.core import tasks_pb2

from taskplug.core import TaskExecutionMetadata
from taskplug.executor._paths import normalize_root

__all__ = [
    "FLYTE2_ORG",
    "PYTHON_TASK_TYPE",
    "flyte2_environment",
    "flyte2_labels",
    "is_flyte2_task",
    "run_base",
]

PYTHON_TASK_TYPE: Final = "python"
"""Flyte 2's task type for a plain Python task (the pod plugin's, as flyteplugins on ``main`` registers it)."""

FLYTE2_ORG: Final = "local"
"""``_U_ORG_NAME``: Flyte 2's open-source executor has no organizations and sets this value."""


def is_flyte2_task(template: tasks_pb2.TaskTemplate) -> bool:
    """Whether ``template`` was written by Flyte 2's SDK (see the module's docstring for the rule)."""
    if template.type == PYTHON_TASK_TYPE:
        return True
    runtime = template.metadata.runtime
    if runtime.type != tasks_pb2.RuntimeMetadata.FLYTE_SDK:
        return False
    major = runtime.version.split(".", 1)[0].lstrip("v")
    return major.isdigit() and int(major) >= 2


def run_base(data_root: str, metadata: TaskExecutionMetadata) -> str:
    """The run's folder in the data store (Flyte 2's ``RunOutputBase``): where every node of the execution keeps
    its data (``<root>/metadata/<project>/<domain>/<name>``, see :func:`~taskplug.executor.node_dirs`)."""
    execution = metadata.task_execution_id.id.node_execution_id.execution_id
    return f"{normalize_root(data_root)}/metadata/{execution.project}/{execution.domain}/{execution.name}"


def flyte2_environment(data_root: str, metadata: TaskExecutionMetadata) -> Mapping[str, str]:
    """The execution's environment as Flyte 2's executor gives it: its four variables first, then the run's
    own variables where they do not name one of those."""
    node = metadata.task_execution_id.id.node_execution_id
    environment = {
        "ACTION_NAME": node.node_id,
        "RUN_NAME": node.execution_id.name,
        "_U_RUN_BASE": run_base(data_root, metadata),
        "_U_ORG_NAME": FLYTE2_ORG,
    }
    for key, value in metadata.environment_variables.items():
        environment.setdefault(key, value)
    return environment


def flyte2_labels(metadata: TaskExecutionMetadata) -> Mapping[str, str]:
    """The execution's labels with those Flyte 2's executor adds to every pod so that per-pod metrics can be
    joined back to the run, the action and the attempt (``RunLabel``, ``ActionLabel``, ``AttemptLabel``);
    they win over the run's own, as ``UnionMaps(ta.Labels, injectLabels)`` makes them."""
    tid = metadata.task_execution_id.id
    node = tid.node_execution_id
    labels = dict(metadata.labels)
    for key, value in (("run", node.execution_id.name), ("action", node.node_id)):
        sanitized = _label_value(value)
        if sanitized:
            labels[key] = sanitized
    labels["attempt"] = str(tid.retry_attempt + 1)
    return labels


def _label_value(value: str) -> str:
    """A label value as Flyte's ``SanitizeLabelValue`` (pluginmachinery/utils/labels.go) makes one: other
    characters than ``[a-zA-Z0-9._-]`` become ``-``, at most 63 characters, a first or last character that is
    not alphanumeric becomes ``x``; empty stays empty."""
    if not value:
        return ""
    sanitized = re.sub(r"[^a-zA-Z0-9._-]", "-", value)[:63]
    if not sanitized[0].isascii() or not sanitized[0].isalnum():
        sanitized = "x" + sanitized[1:]
    if not sanitized[-1].isascii() or not sanitized[-1].isalnum():
        sanitized = sanitized[:-1] + "x"
    return sanitized
