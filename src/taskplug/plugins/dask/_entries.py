"""The Dask plugin's registration: what the ``taskplug.plugins`` entry point loads.

Discovery runs on every command (``taskplug render`` too), so this module imports neither the plugin nor its
config's models: the plugin — the DaskJob builder, flyteidl's Dask messages — is imported by the loader, which runs only
when an executor loads the plugin; the ``plugins.dask`` models when a command reads the section.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from taskplug.core import ConfigSection
from taskplug.k8s import K8sPluginEntry, K8sPluginSetup, Operator, PlatformPodConfig
from taskplug.plugins.dask._states import DASK_JOB

if TYPE_CHECKING:
    from taskplug.plugins.dask._config import DaskConfig
    from taskplug.plugins.dask._plugin import DaskPlugin

__all__ = ["DASK_SECTION", "DASK_TASK_TYPE", "plugin_entries"]

DASK_TASK_TYPE: Final = "dask"

DASK_SECTION: Final[ConfigSection[DaskConfig]] = ConfigSection(
    "plugins.dask", "taskplug.plugins.dask._config:DaskConfig"
)
"""The ``plugins.dask`` config section (:class:`~taskplug.plugins.dask.DaskConfig`)."""


def _load(setup: K8sPluginSetup) -> DaskPlugin:
    # Imported here, not at the top: see the module docstring.
    from taskplug.plugins.dask._plugin import DaskPlugin

    return DaskPlugin(
        PlatformPodConfig.from_config(setup.config, setup.pod_templates, setup.environ),
        setup.config.get(DASK_SECTION),
    )


def _local_operator() -> Operator:
    """The embedded cluster's dask operator."""
    # Imported when `taskplug run` registers it on the embedded cluster: discovery (every command) never loads it.
    from taskplug.plugins.dask._local_operator import DaskLocalOperator

    return DaskLocalOperator()


def plugin_entries() -> list[K8sPluginEntry]:
    """The Dask plugin's registration: task type ``dask``, not a default, watching DaskJobs."""
    return [
        K8sPluginEntry(
            id=DASK_TASK_TYPE,
            registered_task_types=(DASK_TASK_TYPE,),
            resource_to_watch=DASK_JOB,
            load_plugin=_load,
            is_default=False,
            config_sections=(DASK_SECTION,),
            local_operator=_local_operator,
        )
    ]
