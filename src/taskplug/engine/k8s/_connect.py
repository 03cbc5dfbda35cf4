"""A Kubernetes client for a real cluster, from a kubeconfig (or the in-cluster service account)."""

from __future__ import annotations

from pathlib import Path

from taskplug.k8s import KubeClient

__all__ = ["connect"]


def connect(kubeconfig: str | Path | None = None) -> KubeClient:
    """The lightkube adapter for ``kubeconfig`` (None: in-cluster config, else ``$KUBECONFIG``/``~/.kube``)."""
    # Imported here: lightkube takes about 0.3 s to import, and only a run against a real cluster uses it.
    from taskplug.engine.k8s._lightkube import LightkubeClient

    return LightkubeClient(kubeconfig)
