"""The model of the ``plugins.kf-operator`` config section shared by the PyTorch, TensorFlow and MPI plugins.

Follows flyteplugins/go/tasks/plugins/k8s/kfoperators/common/config.go: one key, ``timeout``.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import field_validator

from taskplug.core import GoDuration, StrictModel

__all__ = ["KfOperatorConfig"]


class KfOperatorConfig(StrictModel):
    """``plugins.kf-operator``."""

    timeout: GoDuration = timedelta(minutes=1)
    """How long after its creation a training job may go without ``status.startTime`` (the operator has not
    picked it up) before every status check reports an error (Go duration)."""

    @field_validator("timeout")
    @classmethod
    def _not_negative(cls, value: timedelta) -> timedelta:
        # Deviation: Flyte takes a negative duration, which times every job out at once; it is refused here.
        if value < timedelta(0):
            raise ValueError(f"must not be negative, got {value}")
        return value
