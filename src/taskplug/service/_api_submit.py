"""A submission as the API receives it, checked like every other input before anything is written.

The body is read up to a bound (413 past it), parsed by the same bounded JSON reader as spec files, its
envelope (``spec``, ``labels``, ``key``) checked by pydantic, and the spec by
:func:`taskplug.executor.parse_spec`: a malformed field is a :class:`~taskplug.core.SpecError` whose path
starts at the body (``spec.template.container.image``), which the API answers with 422 naming that path.

The stored spec is the one the replicas parse again, so it must name its execution: an unnamed spec gets
its name here (from the idempotency key when one is given, so that submitting it again is the same
execution; a fresh one otherwise, as ``taskplug run`` runs an unnamed spec as a new execution each time).
"""

from __future__ import annotations

import copy
import hashlib
import re
import secrets
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from taskplug.core import PluginError, SpecError, load_document
from taskplug.executor import ExecutionSpec, Platform, SubmissionLimits, check_limits, parse_spec
from taskplug.k8s import MACHINERY_ANNOTATIONS, MACHINERY_LABELS
from taskplug.service._children import PARENT_LABEL
from taskplug.service._controls import control_character_field

__all__ = [
    "KEY_PATTERN",
    "MAX_BODY_BYTES",
    "RELAUNCH_LABEL",
    "RESERVED_KEY_SUFFIXES",
    "Submission",
    "SubmitRequest",
    "TaskTypeCheck",
    "parse_submission",
    "platform_task_types",
    "relaunch_submission",
]

KEY_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9._:@-]*(/[A-Za-z0-9._:@-]+)*$"
"""An execution key: segments of URL-safe characters joined by ``/`` (it is a path in the API's URLs)."""

MAX_BODY_BYTES: Final = 4 * 1024 * 1024
"""The largest request body read: the bound spec files have (4 MiB; what a spec describes ends up in objects
the Kubernetes API server takes, at most 1.5 MiB each)."""

RESERVED_KEY_SUFFIXES: Final = frozenset(
    {"events", "attempts", "elements", "nodes", "outputs", "abort", "relaunch", "stream", "signals"}
)
"""Last segments a key cannot end with: ``/executions/{key}/events`` would be ambiguous."""

DEFAULT_SUBMISSION_LIMITS: Final = SubmissionLimits()
"""What a submission may ask for when ``taskplug serve`` is given no ``--config`` (``executor.limits``'s defaults)."""

RELAUNCH_LABEL: Final = "relaunch-of"
"""The label a relaunched execution carries: the key of the execution it was relaunched from."""

TaskTypeCheck = Callable[[str], str | None]
"""Given a task type, why no enabled plugin runs it; None when one does."""

_NAME_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"  # flyteadmin's (k8s rand's): no vowels, no words


class SubmitRequest(BaseModel):
    """``POST /api/v1/executions``: an execution spec document (as ``taskplug run`` reads from a file, with
    the task template inline), labels shown in the views, and an optional idempotency key."""

    model_config = ConfigDict(extra="forbid", strict=True)

    spec: dict[str, Any] = Field(description="The execution spec document (docs/spec.md), template inline.")
    labels: Annotated[dict[str, Annotated[str, Field(max_length=1024)]], Field(max_length=64)] = Field(
        default_factory=dict, description="Free-form labels shown with the execution."
    )
    key: Annotated[str, Field(max_length=256, pattern=KEY_PATTERN)] | None = Field(
        default=None,
        description="Idempotency key: submitting the same key again returns the existing execution. "
        "Defaults to the execution key project/domain/name/nodeId of the spec.",
    )


@dataclass(frozen=True, slots=True)
class Submission:
    """What is inserted: the key, the task type (``workflow`` for a workflow), the spec (naming its execution)
    and the labels; ``task_types``: every task type it runs (a workflow's tasks'), each of which a plugin
    must run."""

    key: str
    task_type: str
    spec: dict[str, Any]
    labels: dict[str, str]
    task_types: tuple[str, ...] = ()


def parse_submission(
    body: bytes, *, max_bytes: int, limits: SubmissionLimits = DEFAULT_SUBMISSION_LIMITS
) -> Submission:
    """The submission in a request body; :class:`SpecError` naming the field when anything is wrong,
    including a spec asking for more than ``limits`` (attempts, map elements, parallelism)."""
    document = load_document(
        body, "request body", what="request body", yaml_allowed=False, max_bytes=max_bytes
    )
    if isinstance(document, Mapping):
        # Before anything parses it: PostgreSQL cannot store a NUL, a label is one line of text.
        where = control_character_field(document)
        if where is not None:
            raise SpecError(where, "holds a control character (such as NUL) it cannot hold")
    try:
        request = SubmitRequest.model_validate(document)
    except ValidationError as e:
        first = e.errors()[0]
        path = ".".join(str(part) for part in first["loc"])
        raise SpecError(path, first["msg"]) from None
    if RELAUNCH_LABEL in request.labels:
        raise SpecError(
            f"labels.{RELAUNCH_LABEL}",
            "is set by the server on a relaunch (POST /executions/{key}/relaunch); a submission cannot set it",
        )
    if PARENT_LABEL in request.labels:
        raise SpecError(
            f"labels.{PARENT_LABEL}",
            "is set by a replica on a launch plan's child execution; a submission cannot set it",
        )
    if "templateFile" in request.spec:
        raise SpecError(
            "spec.templateFile",
            "the server reads no files: give the task template inline as `template`, or a workflow as "
            "`workflowClosure` (`taskplug run SPEC --server URL` does either for you)",
        )
    spec = _named(request.spec, request.key)
    try:
        parsed = parse_spec(spec, source="api", fresh_name=False)
        check_limits(parsed, limits)
    except SpecError as e:
        raise SpecError(f"spec.{e.path}" if e.path else "spec", e.reason) from None
    _refuse_machinery_fields(spec)
    execution_key = parsed.execution_key
    if (
        request.key is not None
        and parsed.named
        and _given_name(request.spec)
        and request.key != execution_key
    ):
        raise SpecError(
            "key",
            f"the spec names its execution ({execution_key!r}): that is its key, so that two keys never "
            "run one execution name twice; leave `key` out or leave execution.id.name out",
        )
    key = request.key or execution_key
    if key.rsplit("/", 1)[-1] in RESERVED_KEY_SUFFIXES:
        raise SpecError(
            "key" if request.key else "spec.execution.id.nodeId",
            f"an execution key cannot end in one of {sorted(RESERVED_KEY_SUFFIXES)} (its URLs would be ambiguous)",
        )
    if request.key is None and not re.match(KEY_PATTERN, key):
        raise SpecError("spec.execution.id", f"the execution key {key!r} is not a valid key ({KEY_PATTERN})")
    return Submission(
        key=key,
        task_type=parsed.template.type,
        spec=spec,
        labels=dict(request.labels),
        task_types=run_task_types(parsed),
    )


def run_task_types(parsed: ExecutionSpec) -> tuple[str, ...]:
    """The task types an execution runs: its task's, or every task type of a workflow's compiled closure
    (in the order first met), which the server's plugins must all run."""
    if parsed.workflow is None:
        return (parsed.template.type,)
    return tuple(dict.fromkeys(task.template.type for task in parsed.workflow.closure.tasks))


def relaunch_submission(spec: Mapping[str, Any], labels: Mapping[str, str], *, of: str) -> Submission:
    """A new execution of what execution ``of`` ran (its ``spec`` as stored, hence the same task and inputs)
    under a fresh execution name, labelled with ``of``: flyteadmin's ``RelaunchExecution``, which copies the
    spec and inputs, draws a new name and records the reference execution.

    The stored spec is parsed again, as every submission is: a spec this version of taskplug no longer
    takes is a :class:`SpecError` naming the field, not a row no replica can run."""
    renamed = copy.deepcopy(dict(spec))
    execution = renamed.get("execution")
    ids = execution.get("id") if isinstance(execution, dict) else None
    if not isinstance(ids, dict):
        raise SpecError("spec.execution.id", "the stored spec names no execution to relaunch")
    ids["name"] = _name_for(None)
    try:
        parsed = parse_spec(renamed, source="api", fresh_name=False)
    except SpecError as e:
        raise SpecError(f"spec.{e.path}" if e.path else "spec", e.reason) from None
    return Submission(
        key=parsed.execution_key,
        task_type=parsed.template.type,
        spec=renamed,
        # A relaunched child is an execution of its own: no parent waits for it.
        labels={**{k: v for k, v in labels.items() if k != PARENT_LABEL}, RELAUNCH_LABEL: of},
        task_types=run_task_types(parsed),
    )


def _refuse_machinery_fields(spec: Mapping[str, Any]) -> None:
    """What the machinery sets itself cannot come from a submitter: the name of an attempt's objects
    (``execution.generatedName``), the labels that route an object to its execution and the annotation that
    says which attempt made it (the relaunch label is refused above). With them a submitter could name another
    execution's pod and have it adopted, then deleted by its own abort (a spec run by ``taskplug run`` on
    one's own machine may still set them)."""
    execution = spec.get("execution")
    if not isinstance(execution, Mapping):
        return
    if execution.get("generatedName") is not None:
        raise SpecError(
            "spec.execution.generatedName",
            "the names of an attempt's objects are given by the server (execution name, node and attempt); "
            "a submission cannot set them",
        )
    for section, reserved in (("labels", MACHINERY_LABELS), ("annotations", MACHINERY_ANNOTATIONS)):
        for key in execution.get(section) or {}:
            if key in reserved:
                raise SpecError(
                    f"spec.execution.{section}.{key}",
                    f"{key!r} is set by taskplug itself on every object it creates; a submission cannot set it",
                )


def _given_name(spec: Mapping[str, Any]) -> str | None:
    execution = spec.get("execution")
    ids = execution.get("id") if isinstance(execution, Mapping) else None
    name = ids.get("name") if isinstance(ids, Mapping) else None
    return name if isinstance(name, str) and name else None


def _named(spec: dict[str, Any], key: str | None) -> dict[str, Any]:
    """``spec`` naming its execution: as given, or named from ``key`` (the same key, the same name), or
    freshly. A spec whose ``execution``/``id`` are not mappings is returned as it is (parsing names that)."""
    if _given_name(spec):
        return spec
    execution = spec.get("execution", {})
    ids = execution.get("id", {}) if isinstance(execution, Mapping) else None
    if not isinstance(execution, Mapping) or not isinstance(ids, Mapping):
        return spec
    named = copy.deepcopy(spec)
    named.setdefault("execution", {}).setdefault("id", {})["name"] = _name_for(key)
    return named


def _name_for(key: str | None) -> str:
    """An execution name of flyteadmin's form (``a`` + 19 characters): drawn from ``key``, or random."""
    digest = hashlib.sha256(key.encode() if key is not None else secrets.token_bytes(32)).digest()
    return "a" + "".join(_NAME_ALPHABET[b % len(_NAME_ALPHABET)] for b in digest[:19])


def platform_task_types(platform: Platform) -> TaskTypeCheck:
    """The check of ``taskplug serve --config``: a task type is run by a plugin the config enables, resolved
    as a replica resolves it (:meth:`Platform.entry_for`); each type's answer is remembered (a web-API
    plugin's discovery may ask a connector). Call it from a thread: resolution may block."""
    answers: dict[str, str | None] = {}
    lock = threading.Lock()

    def check(task_type: str) -> str | None:
        with lock:
            if task_type in answers:
                return answers[task_type]
        try:
            platform.entry_for(task_type)
            answer = None
        except PluginError as e:
            answer = (
                f"no enabled plugin runs task type {task_type!r}: enable a plugin that handles it in the "
                f"config's tasks.task-plugins.enabled-plugins (or set default-for-task-types) ({e})"
            )
        with lock:
            if len(answers) < 1024:  # the types a server sees are few; a flood of made-up ones is not kept
                answers[task_type] = answer
        return answer

    return check
