"""A Kubernetes client for a real cluster, from a kubeconfig (or the in-cluster service account).

The kubeconfig is read and checked by ``_kubeconfig.load_kubeconfig`` (a bad file is an error naming the file
and the field); the client is the lightkube adapter, imported only when a real cluster is used.
"""

from __future__ import annotations

from pathlib import Path

from taskplug.engine.k8s._kubeconfig import DEFAULT_TIMEOUT
from taskplug.k8s import KubeClient

__all__ = ["connect"]


def connect(
    kubeconfig: str | Path | None = None,
    *,
    timeout: float | None = DEFAULT_TIMEOUT,
    context: str | None = None,
) -> KubeClient:
    """The lightkube adapter for ``kubeconfig`` (None: in-cluster config, else ``$KUBECONFIG``/``~/.kube``);
    ``timeout`` bounds each request, in seconds (None: no bound). A malformed kubeconfig is a
    :class:`~taskplug.core.ConfigError` naming the file (and the field)."""
    # Imported here: lightkube takes about 0.3 s to import, and only a run against a real cluster uses it.
    from taskplug.engine.k8s._lightkube import LightkubeClient

    return LightkubeClient(kubeconfig, context=context, timeout=timeout)
