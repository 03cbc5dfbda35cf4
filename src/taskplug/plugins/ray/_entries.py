"""The Ray plugin's registration: what the ``taskplug.plugins`` entry point loads.

Discovery runs on every command (``taskplug render`` too), so this module imports neither the plugin nor its
config's models: the plugin — the RayJob builder, flyteidl's Ray messages — is imported by the loader, which
runs only when an executor loads the plugin; the ``plugins.ray`` models when a command reads the section.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from taskplug.core import ConfigSection
from taskplug.k8s import K8sPluginEntry, K8sPluginSetup, Operator, PlatformPodConfig
from taskplug.plugins.ray._states import RAY_JOB

if TYPE_CHECKING:
    from taskplug.plugins.ray._config import RayConfig
    from taskplug.plugins.ray._plugin import RayPlugin

__all__ = ["RAY_SECTION", "RAY_TASK_TYPE", "plugin_entries"]

RAY_TASK_TYPE: Final = "ray"

RAY_SECTION: Final[ConfigSection[RayConfig]] = ConfigSection(
    "plugins.ray", "taskplug.plugins.ray._config:RayConfig"
)
"""The ``plugins.ray`` config section (:class:`~taskplug.plugins.ray.RayConfig`)."""


def _load(setup: K8sPluginSetup) -> RayPlugin:
    # Imported here, not at the top: see the module docstring.
    from taskplug.plugins.ray._plugin import RayPlugin

    return RayPlugin(
        PlatformPodConfig.from_config(setup.config, setup.pod_templates, setup.environ),
        setup.config.get(RAY_SECTION),
    )


def _local_operator() -> Operator:
    """The embedded cluster's KubeRay operator."""
    # Imported when `taskplug run` registers it on the embedded cluster: discovery (every command) never loads it.
    from taskplug.plugins.ray._local_operator import RayLocalOperator

    return RayLocalOperator()


def plugin_entries() -> list[K8sPluginEntry]:
    """The Ray plugin's registration: task type ``ray``, not a default, watching RayJobs."""
    return [
        K8sPluginEntry(
            id=RAY_TASK_TYPE,
            registered_task_types=(RAY_TASK_TYPE,),
            resource_to_watch=RAY_JOB,
            load_plugin=_load,
            is_default=False,
            config_sections=(RAY_SECTION,),
            local_operator=_local_operator,
        )
    ]
