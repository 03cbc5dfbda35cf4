"""What ``taskplug render`` and ``taskplug status`` compute: one object built, one status mapped, nothing run."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from taskplug.core import PhaseInfo
from taskplug.executor._platform import Platform
from taskplug.executor._spec import ExecutionSpec
from taskplug.executor._tasks import task_context_for
from taskplug.k8s import K8S_SECTION, PluginState, StaticPluginContext
from taskplug.k8s._plugin_manager import add_object_metadata
from taskplug.k8s._secrets import k8s_task_execution_metadata

__all__ = ["observed_phase", "render_object"]


def render_object(platform: Platform, spec: ExecutionSpec, *, data_root: str) -> dict[str, Any]:
    """The exact object the plugin manager would create for ``spec`` (name, namespace, labels, annotations,
    finalizers and all)."""
    entry = platform.k8s_entry_for(spec.template.type)
    plugin = entry.load_plugin(platform.k8s_setup())
    tctx = task_context_for(spec, data_root)
    tctx.metadata = k8s_task_execution_metadata(tctx.metadata, spec.template)
    obj = plugin.build_resource(tctx)
    properties = plugin.get_properties()
    # Flyte's identity pod says kind "pod"; controller-runtime sends the scheme's kind, which is what we show.
    obj["kind"] = entry.resource_to_watch.kind
    return add_object_metadata(
        tctx.metadata,
        obj,
        platform.config.get(K8S_SECTION),
        spec.template,
        inject_owner_references=not properties.disable_inject_owner_references,
        inject_finalizer=not properties.disable_inject_finalizer,
    )


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
    tctx = task_context_for(spec, data_root)
    pctx = StaticPluginContext(
        tctx.metadata, tctx.task_reader, tctx.input_reader, tctx.output_writer, state, now
    )
    return plugin.get_task_phase(pctx, resource)
