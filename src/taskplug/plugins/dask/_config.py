"""The ``plugins.dask`` config section, with Flyte's keys and defaults.

Follows flyteplugins/go/tasks/plugins/k8s/dask/config.go: one key, ``logs``, whose default is the global
``plugins.logs`` default (a Kubernetes link with the localhost template).
"""

from __future__ import annotations

from pydantic import Field

from taskplug.core import StrictModel
from taskplug.k8s import LogConfig

__all__ = ["DaskConfig"]


class DaskConfig(StrictModel):
    """``plugins.dask``: settings of the Dask plugin (flyteplugins/go/tasks/plugins/k8s/dask/config.go)."""

    logs: LogConfig = Field(default_factory=LogConfig)
    """Log links of the job runner pod (named ``(Dask Runner Logs)``); independent of ``plugins.logs``, with
    the same defaults."""
