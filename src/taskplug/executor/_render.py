"""What ``taskplug render`` and ``taskplug status`` compute: one object built, one status mapped, nothing run."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from taskplug.core import BadTaskSpecification, PhaseInfo, StaticTaskExecutionContext
from taskplug.executor._platform import Platform
from taskplug.executor._spec import ExecutionSpec, NodeKind
from taskplug.executor._tasks import task_context_for
from taskplug.k8s import K8S_SECTION, PluginState, StaticPluginContext, build_object

__all__ = ["observed_phase", "render_object"]


def _context(spec: ExecutionSpec, data_root: str, max_length: int | None) -> StaticTaskExecutionContext:
    if spec.kind is NodeKind.ARRAY:
        # Imported here: only a map's spec needs the ArrayNode's element machinery.
        from taskplug.executor.nodes._array_context import element_task_context

        # A map: what its first element's first attempt would create.
        return element_task_context(spec, data_root, 0, generated_name_max_length=max_length)
    return task_context_for(spec, data_root, generated_name_max_length=max_length)


def render_object(platform: Platform, spec: ExecutionSpec, *, data_root: str) -> dict[str, Any]:
    """The exact object the plugin manager would create for ``spec`` (name, namespace, labels, annotations,
    finalizers and all): the manager's own :func:`taskplug.k8s.build_object`. For a map (an ArrayNode),
    the object of its element 0.

    What cannot be built is a :class:`BadTaskSpecification`: the same refusal ``taskplug run`` gets at
    submit from the plugin manager's ``check_task``, which calls the same ``build_object`` on the same
    context (anything else a plugin raises while building becomes one, as the manager reports it)."""
    entry = platform.k8s_entry_for(spec.template.type)
    plugin = entry.load_plugin(platform.k8s_setup())
    max_length = plugin.get_properties().generated_name_max_length
    tctx = _context(spec, data_root, max_length)
    try:
        return build_object(plugin, tctx, platform.config.get(K8S_SECTION), watched=entry.resource_to_watch)
    except BadTaskSpecification:
        raise
    except Exception as e:
        raise BadTaskSpecification(str(e) or type(e).__name__) from e


def observed_phase(
    platform: Platform,
    spec: ExecutionSpec,
    resource: dict[str, Any],
    *,
    now: datetime,
    state: PluginState,
    data_root: str,
) -> PhaseInfo:
    """The PhaseInfo the task's plugin reports for an observed object."""
    entry = platform.k8s_entry_for(spec.template.type)
    plugin = entry.load_plugin(platform.k8s_setup())
    max_length = plugin.get_properties().generated_name_max_length
    tctx = _context(spec, data_root, max_length)
    pctx = StaticPluginContext(
        tctx.metadata, tctx.task_reader, tctx.input_reader, tctx.output_writer, state, now
    )
    return plugin.get_task_phase(pctx, resource)
