"""The three kubeflow plugins' registrations: what the ``taskplug.plugins`` entry points load.

Discovery runs on every command (``taskplug render`` too), so this module imports neither the plugins nor
their config's model: the plugins — the job builders, flyteidl's kubeflow messages — are imported by the
loader, which runs only when an executor loads one; the ``plugins.kf-operator`` model when a command reads
the section; the training operators when ``taskplug run`` registers them on the embedded cluster.
"""

from __future__ import annotations

from collections.abc import Callable

from taskplug.k8s import K8sPlugin, K8sPluginEntry, K8sPluginSetup, Operator
from taskplug.plugins.kubeflow._kinds import MPI, PYTORCH, TENSORFLOW, JobKind
from taskplug.plugins.kubeflow._section import KF_OPERATOR_SECTION

__all__ = ["mpi_entries", "plugin_entries", "pytorch_entries", "tensorflow_entries"]


def _loader(plugin: str) -> Callable[[K8sPluginSetup], K8sPlugin]:
    """The loader of one plugin class (``PyTorchPlugin``, ...)."""

    def load(setup: K8sPluginSetup) -> K8sPlugin:
        # Imported here, not at the top: see the module docstring.
        from taskplug.plugins.kubeflow import _plugin

        loaded: K8sPlugin = getattr(_plugin, plugin).load(setup)
        return loaded

    return load


def _operator(name: str) -> Callable[[], Operator]:
    """A factory of the training operator for one job kind (``PyTorchJobOperator``, ...)."""

    def make() -> Operator:
        # Imported when `taskplug run` registers it on the embedded cluster: discovery never loads it.
        from taskplug.plugins.kubeflow import _local_operator

        operator: Operator = getattr(_local_operator, name)()
        return operator

    return make


def _entry(kind: JobKind, plugin: str, operator: str) -> K8sPluginEntry:
    return K8sPluginEntry(
        id=kind.task_type,
        registered_task_types=(kind.task_type,),
        resource_to_watch=kind.resource,
        load_plugin=_loader(plugin),
        is_default=False,
        config_sections=(KF_OPERATOR_SECTION,),
        local_operator=_operator(operator),
    )


def pytorch_entries() -> list[K8sPluginEntry]:
    """The PyTorch plugin's registration: id and task type ``pytorch``, watching PyTorchJobs."""
    return [_entry(PYTORCH, "PyTorchPlugin", "PyTorchJobOperator")]


def tensorflow_entries() -> list[K8sPluginEntry]:
    """The TensorFlow plugin's registration: id and task type ``tensorflow``, watching TFJobs."""
    return [_entry(TENSORFLOW, "TensorFlowPlugin", "TFJobOperator")]


def mpi_entries() -> list[K8sPluginEntry]:
    """The MPI plugin's registration: id and task type ``mpi``, watching MPIJobs."""
    return [_entry(MPI, "MPIPlugin", "MPIJobOperator")]


def plugin_entries() -> list[K8sPluginEntry]:
    """The three registrations (ids and task types ``pytorch``, ``tensorflow``, ``mpi``); none a default."""
    return [*pytorch_entries(), *tensorflow_entries(), *mpi_entries()]
