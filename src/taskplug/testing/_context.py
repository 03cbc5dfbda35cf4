"""Fake contexts for plugin tests: a real task-execution context over an execution spec, a plugin context
for ``get_task_phase``, and the setup a plugin loader is given.

Nothing here is a mock: the task context is the one ``taskplug render`` and the executor build (an
execution spec parsed by :func:`taskplug.executor.parse_spec`, paths and readers from
:func:`taskplug.executor.task_context_for`), so a plugin sees exactly what it will see in production.
Flyte's equivalent is the hand-wired mocks in flyteplugins' ``pluginmachinery/core/mocks``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, TypeAlias

from flyteidl.core import tasks_pb2
from google.protobuf import json_format

from taskplug.core import (
    Clock,
    FakeClock,
    PluginRegistry,
    PluginStateHolder,
    StaticTaskExecutionContext,
    TaskExecutionContext,
)
from taskplug.executor import Platform, parse_spec, task_context_for
from taskplug.k8s import (
    K8sPlugin,
    K8sPluginEntry,
    K8sPluginSetup,
    PluginState,
    PodTemplateStore,
    StaticPluginContext,
)

__all__ = [
    "DEFAULT_DATA_ROOT",
    "DEFAULT_EXECUTION",
    "TaskLike",
    "fake_plugin_context",
    "fake_plugin_setup",
    "fake_task_context",
    "load_k8s_plugin",
    "next_round",
    "spec_document",
]

TaskLike: TypeAlias = Mapping[str, Any] | tasks_pb2.TaskTemplate
"""A task for the fakes: an execution-spec document (with ``template`` or ``templateFile``), a bare
``TaskTemplate`` document (protobuf JSON, with ``type``), or a ``flyteidl.core.TaskTemplate`` message."""

DEFAULT_DATA_ROOT = "s3://taskplug-testing/data"
"""Where the fake context's input, output and checkpoint paths point (nothing is read or written there)."""

DEFAULT_EXECUTION: Mapping[str, Any] = {
    "id": {"project": "testproject", "domain": "development", "name": "exec1", "nodeId": "n0"},
}
"""The execution the fakes use when the task gives none: generated name ``exec1-n0-0``, namespace
``testproject-development``."""


def spec_document(
    task: TaskLike,
    *,
    inputs: Mapping[str, Any] | None = None,
    config: Mapping[str, str] | None = None,
    interruptible: bool | None = None,
    platform_resources: Mapping[str, Any] | None = None,
    resources: Mapping[str, Any] | None = None,
    namespace: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    execution: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The execution-spec document for ``task`` with the given values applied (see :func:`fake_task_context`)."""
    if isinstance(task, tasks_pb2.TaskTemplate):
        document: dict[str, Any] = {"template": json_format.MessageToDict(task)}
    elif "template" in task or "templateFile" in task:
        document = {key: _copy(value) for key, value in task.items()}
    else:
        document = {"template": _copy(task)}
    if config:
        template = document.get("template")
        if not isinstance(template, dict):
            raise TypeError("config= needs an inline template (not templateFile)")
        template["config"] = {**(template.get("config") or {}), **config}
    run: dict[str, Any] = {**DEFAULT_EXECUTION, **(document.get("execution") or {}), **(execution or {})}
    if interruptible is not None:
        run["interruptible"] = interruptible
    if platform_resources is not None:
        run["platformResources"] = _copy(platform_resources)
    if resources is not None:
        run["overrides"] = {**(run.get("overrides") or {}), "resources": _copy(resources)}
    if namespace is not None:
        run["namespace"] = namespace
    if labels is not None:
        run["labels"] = {**(run.get("labels") or {}), **labels}
    if annotations is not None:
        run["annotations"] = {**(run.get("annotations") or {}), **annotations}
    document["execution"] = run
    if inputs is not None:
        document["inputs"] = _copy(inputs)
    return document


def fake_task_context(
    task: TaskLike,
    *,
    inputs: Mapping[str, Any] | None = None,
    config: Mapping[str, str] | None = None,
    interruptible: bool | None = None,
    platform_resources: Mapping[str, Any] | None = None,
    resources: Mapping[str, Any] | None = None,
    namespace: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    execution: Mapping[str, Any] | None = None,
    data_root: str = DEFAULT_DATA_ROOT,
    state: Mapping[str, Any] | None = None,
    state_version: int = 0,
) -> StaticTaskExecutionContext:
    """A real task-execution context for ``task``, as the executor would build it for a round.

    ``task`` is an execution spec, a template or a TaskTemplate message (:data:`TaskLike`). The keywords
    set what the spec's ``execution`` section would (docs/spec.md): ``inputs`` (plain values or Literal JSON),
    ``config`` (entries added to the template's ``config`` map, e.g. ``primary_container_name``),
    ``interruptible``, ``platform_resources`` and ``resources`` (the overrides) in Kubernetes form
    (``{"requests": {"cpu": "1"}, "limits": {...}}``), ``namespace``, ``labels``, ``annotations``, and
    ``execution`` for any other field (``id``, ``generatedName``, ``serviceAccount``, ``environment``,
    ``maxAttempts``, ``securityContext``, ``ownerReference``, ``overrides.podTemplate``, …), merged over the
    spec's own section key by key (a nested value such as ``id`` is replaced whole). The executor's paths
    (inputs, outputs, raw data, checkpoints) lie under ``data_root``.

    ``state`` and ``state_version`` are the plugin state stored by an earlier round (what the plugin put
    with ``plugin_state_writer.put(version, state)``); by default there is none, as in a first round. For
    the round after one the test ran, use :func:`next_round`.

    A malformed task raises :class:`taskplug.core.SpecError` naming the field.
    """
    document = spec_document(
        task,
        inputs=inputs,
        config=config,
        interruptible=interruptible,
        platform_resources=platform_resources,
        resources=resources,
        namespace=namespace,
        labels=labels,
        annotations=annotations,
        execution=execution,
    )
    return task_context_for(
        parse_spec(document),
        data_root,
        state_version=state_version,
        state=_copy(state) if state is not None else None,
    )


def next_round(tctx: StaticTaskExecutionContext) -> StaticTaskExecutionContext:
    """The context the executor builds for the round after ``tctx`` has been handled.

    The plugin state this round put (or reset) is what the next round reads; when the round wrote none, the
    next reads the same state again. Nothing is put on the output writer yet; the metadata, the readers,
    the paths and the managers stay those of ``tctx``, which is left as it is (its ``plugin_state.written``
    still tells what the round wrote).
    """
    changed, version, state = tctx.plugin_state.written
    holder = PluginStateHolder(version, state) if changed else PluginStateHolder(*tctx.plugin_state.get())
    writer = dataclasses.replace(tctx.output_writer, reader=None, was_put=False)
    return dataclasses.replace(tctx, output_writer=writer, plugin_state=holder)


def fake_plugin_context(
    task: TaskLike | TaskExecutionContext,
    *,
    state: PluginState | None = None,
    now: datetime | None = None,
) -> StaticPluginContext:
    """The context ``get_task_phase`` is given, for ``task`` (or for a task context already built).

    ``state`` is what the plugin reported last round (default: nothing yet); ``now`` defaults to the start
    of :class:`~taskplug.core.FakeClock` (2026-01-01T00:00:00Z), so phase times are reproducible.
    """
    tctx: TaskExecutionContext
    tctx = fake_task_context(task) if isinstance(task, Mapping | tasks_pb2.TaskTemplate) else task
    return StaticPluginContext(
        tctx.metadata,
        tctx.task_reader,
        tctx.input_reader,
        tctx.output_writer,
        state if state is not None else PluginState(),
        now if now is not None else FakeClock().now(),
    )


def fake_plugin_setup(
    config: Mapping[str, Any] | None = None,
    *,
    entries: Iterable[K8sPluginEntry] = (),
    pod_templates: PodTemplateStore | None = None,
    clock: Clock | None = None,
    environ: Mapping[str, str] | None = None,
) -> K8sPluginSetup:
    """What a Kubernetes plugin loader is given: ``config`` (a document in the config file's layout, e.g.
    ``{"plugins": {"k8s": {...}, "batchjob": {...}}}``) parsed over the platform defaults with the config
    sections of ``entries`` known, a :class:`FakeClock` and an empty environment unless given.

    A bad config raises :class:`taskplug.core.ConfigError` naming the key path.
    """
    registry = PluginRegistry()
    for entry in entries:
        registry.register(entry)
    fake_clock = clock if clock is not None else FakeClock()
    platform = Platform.load(registry=registry, document=dict(config or {}), clock=fake_clock)
    return K8sPluginSetup(
        platform.config,
        pod_templates if pod_templates is not None else platform.pod_templates,
        fake_clock,
        dict(environ or {}),
    )


def load_k8s_plugin(
    entry: K8sPluginEntry,
    *,
    config: Mapping[str, Any] | None = None,
    pod_templates: PodTemplateStore | None = None,
    clock: Clock | None = None,
    environ: Mapping[str, str] | None = None,
) -> K8sPlugin:
    """The entry's plugin, loaded with :func:`fake_plugin_setup` (the entry's own config sections known)."""
    setup = fake_plugin_setup(
        config, entries=[entry], pod_templates=pod_templates, clock=clock, environ=environ
    )
    return entry.load_plugin(setup)


def _copy(value: Any) -> Any:
    """A deep copy of plain data (so a caller's dict is never changed by the fakes)."""
    if isinstance(value, Mapping):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_copy(item) for item in value]
    return value
