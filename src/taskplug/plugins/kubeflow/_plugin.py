"""The three kubeflow plugins (``pytorch``, ``tensorflow``, ``mpi``); their registrations are in ``_entries``.

Follows the ``init()`` registrations and ``GetProperties`` / ``BuildIdentityResource`` / ``GetTaskPhase``
of flyteplugins/go/tasks/plugins/k8s/kfoperators/{pytorch,tensorflow,mpi}: none is a
default plugin; each watches its job kind; PyTorch asks the plugin manager for the *earliest* error
aggregation when ``plugins.k8s.enable-distributed-error-aggregation`` is on. Each entry brings a training
operator for the embedded cluster (``_local_operator``), so ``taskplug run`` can run these tasks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from taskplug.core import Clock, PhaseInfo, SystemClock, TaskExecutionContext, TaskExecutionMetadata
from taskplug.k8s import (
    LOGS_SECTION,
    ErrorAggregationStrategy,
    K8sPluginProperties,
    K8sPluginSetup,
    LogConfig,
    PlatformPodConfig,
    PluginContext,
)
from taskplug.plugins.kubeflow._common import LogTarget, kubeflow_task_phase
from taskplug.plugins.kubeflow._config import KfOperatorConfig
from taskplug.plugins.kubeflow._kinds import MPI, PYTORCH, TENSORFLOW, JobKind
from taskplug.plugins.kubeflow._mpi import build_mpi_job, mpi_log_targets
from taskplug.plugins.kubeflow._pytorch import build_pytorch_job, pytorch_log_targets
from taskplug.plugins.kubeflow._section import KF_OPERATOR_SECTION
from taskplug.plugins.kubeflow._tensorflow import build_tf_job, tf_log_targets

__all__ = ["MPIPlugin", "PyTorchPlugin", "TensorFlowPlugin"]

KubeObject = dict[str, Any]

# Frozen: one value of each serves every call (each build asks twice: the plugin and build_object).
_PROPERTIES = K8sPluginProperties()
_EARLIEST_ERROR_PROPERTIES = K8sPluginProperties(error_aggregation_strategy=ErrorAggregationStrategy.EARLIEST)


class _KubeflowPlugin:
    """What the three plugins share: identity, properties and the status mapping."""

    kind: ClassVar[JobKind]

    def __init__(
        self,
        platform: PlatformPodConfig,
        config: KfOperatorConfig | None = None,
        log_config: LogConfig | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.platform = platform
        self.config = config if config is not None else KfOperatorConfig()
        self.log_config = log_config if log_config is not None else LogConfig()
        self._clock: Clock = clock if clock is not None else SystemClock()

    @classmethod
    def load(cls, setup: K8sPluginSetup) -> _KubeflowPlugin:
        return cls(
            PlatformPodConfig.from_config(setup.config, setup.pod_templates, setup.environ),
            setup.config.get(KF_OPERATOR_SECTION),
            setup.config.get(LOGS_SECTION),
            setup.clock,
        )

    def get_properties(self) -> K8sPluginProperties:
        return _PROPERTIES

    def build_identity_resource(self, meta: TaskExecutionMetadata) -> KubeObject:
        return {"apiVersion": self.kind.resource.api_version, "kind": self.kind.kind}

    def build_resource(self, tctx: TaskExecutionContext) -> KubeObject:
        raise NotImplementedError

    def log_targets(self, job: Mapping[str, Any]) -> Sequence[LogTarget]:
        """The pods to link logs for."""
        raise NotImplementedError

    def get_task_phase(self, pctx: PluginContext, resource: KubeObject) -> PhaseInfo:
        return kubeflow_task_phase(
            pctx,
            resource,
            kind=self.kind,
            targets=self.log_targets(resource),
            config=self.config,
            log_config=self.log_config,
        )


class PyTorchPlugin(_KubeflowPlugin):
    """Builds a PyTorchJob for a ``pytorch`` task and reports its phase."""

    kind = PYTORCH

    def log_targets(self, job: Mapping[str, Any]) -> Sequence[LogTarget]:
        return pytorch_log_targets(job)

    def get_properties(self) -> K8sPluginProperties:
        if self.platform.k8s.enable_distributed_error_aggregation:
            return _EARLIEST_ERROR_PROPERTIES
        return _PROPERTIES

    def build_resource(self, tctx: TaskExecutionContext) -> KubeObject:
        return build_pytorch_job(
            tctx, platform=self.platform, error_aggregation=self.get_properties().error_aggregation_strategy
        )


class TensorFlowPlugin(_KubeflowPlugin):
    """Builds a TFJob for a ``tensorflow`` task and reports its phase."""

    kind = TENSORFLOW

    def log_targets(self, job: Mapping[str, Any]) -> Sequence[LogTarget]:
        return tf_log_targets(job)

    def build_resource(self, tctx: TaskExecutionContext) -> KubeObject:
        return build_tf_job(tctx, platform=self.platform)


class MPIPlugin(_KubeflowPlugin):
    """Builds an MPIJob for an ``mpi`` task and reports its phase."""

    kind = MPI

    def log_targets(self, job: Mapping[str, Any]) -> Sequence[LogTarget]:
        return mpi_log_targets(job)

    def build_resource(self, tctx: TaskExecutionContext) -> KubeObject:
        return build_mpi_job(tctx, platform=self.platform)
