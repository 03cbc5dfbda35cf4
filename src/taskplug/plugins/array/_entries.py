"""The k8s array plugin's registration: what the ``taskplug.plugins`` entry point loads.

Discovery runs on every command (``taskplug render`` too), so this module imports neither the plugin nor its
config's models: the plugin itself — its state machine, sub-task pods, output assembly and pod watch — is
imported by the loader, which runs only when an executor loads the plugin; the ``plugins.k8s-array`` models
when a command reads the section.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from taskplug.core import ConfigSection, ErrorCode, PluginEntry, PluginError, SetupContext
from taskplug.k8s import PlatformPodConfig
from taskplug.plugins.array._id import ARRAY_TASK_TYPE, PLUGIN_ID

if TYPE_CHECKING:
    from taskplug.plugins.array._config import K8sArrayConfig
    from taskplug.plugins.array._plugin import ArrayPlugin

__all__ = ["K8S_ARRAY_SECTION", "plugin_entries"]

K8S_ARRAY_SECTION: Final[ConfigSection[K8sArrayConfig]] = ConfigSection(
    "plugins.k8s-array", "taskplug.plugins.array._config:K8sArrayConfig"
)
"""The ``plugins.k8s-array`` config section (:class:`~taskplug.plugins.array.K8sArrayConfig`)."""


async def _load(setup: SetupContext) -> ArrayPlugin:
    # Imported here, not at the top: see the module docstring.
    from taskplug.plugins.array._plugin import ArrayPlugin

    config = setup.config.get(K8S_ARRAY_SECTION) if setup.config is not None else K8S_ARRAY_SECTION.model()
    if config.remote_cluster_config.enabled:
        raise PluginError(
            ErrorCode.PLUGIN_INITIALIZATION_FAILED,
            "plugins.k8s-array.remoteClusterConfig: running sub-tasks on a remote cluster is not supported",
        )
    if setup.kube_client is None:
        raise PluginError(
            ErrorCode.PLUGIN_INITIALIZATION_FAILED,
            "the k8s-array plugin needs a Kubernetes client to create pods",
        )
    quota = config.resource_config
    if quota.is_set:
        if setup.resource_registrar is None:
            raise PluginError(
                ErrorCode.PLUGIN_INITIALIZATION_FAILED,
                "plugins.k8s-array.resourceConfig needs a resource manager, and the setup context has none",
            )
        await setup.resource_registrar.register_resource_quota(quota.primary_label, quota.limit)
    platform = (
        PlatformPodConfig.from_config(setup.config, setup.pod_templates)
        if setup.config is not None
        else PlatformPodConfig()
    )
    return ArrayPlugin(
        config,
        platform=platform,
        kube_client=setup.kube_client,
        enqueue_owner=setup.enqueue_owner,
        clock=setup.clock,
    )


def plugin_entries() -> list[PluginEntry]:
    """The k8s array plugin's registration: a core plugin for task type ``container_array``, not a default
    (Flyte's ``k8s-array``, enabled in Flyte's Helm chart)."""
    return [
        PluginEntry(
            id=PLUGIN_ID,
            registered_task_types=(ARRAY_TASK_TYPE,),
            load_plugin=_load,
            is_default=False,
            config_sections=(K8S_ARRAY_SECTION,),
        )
    ]
