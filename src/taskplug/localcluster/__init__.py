"""taskplug's embedded Kubernetes API (in the spirit of kwok): store, quota, scheduler, kubelet, HTTP façade.

``async with LocalCluster(mode="process" | "simulated") as cluster:`` then ``cluster.client()`` (an
in-process :class:`taskplug.k8s.KubeClient`) or ``await cluster.serve_http()`` for kubectl and lightkube.
"""

from taskplug.localcluster._client import LocalKubeClient
from taskplug.localcluster._cluster import LocalCluster
from taskplug.localcluster._faults import Faults
from taskplug.localcluster._kubeconfig import CONTEXT_NAME
from taskplug.localcluster._nodes import DEFAULT_NODE, NodeConfig
from taskplug.localcluster._resources import NAMESPACE, NODE, POD_TEMPLATE, RESOURCE_QUOTA
from taskplug.localcluster._simulated import (
    ANNOTATION_DURATION,
    ANNOTATION_EXIT_CODE,
    ANNOTATION_LOGS,
    ANNOTATION_OOM,
)
from taskplug.localcluster._zygote import FLYTEKIT_PRELOAD, PrepareFailed, Zygote

__all__ = [
    "ANNOTATION_DURATION",
    "ANNOTATION_EXIT_CODE",
    "ANNOTATION_LOGS",
    "ANNOTATION_OOM",
    "CONTEXT_NAME",
    "DEFAULT_NODE",
    "FLYTEKIT_PRELOAD",
    "NAMESPACE",
    "NODE",
    "POD_TEMPLATE",
    "RESOURCE_QUOTA",
    "Faults",
    "LocalCluster",
    "LocalKubeClient",
    "NodeConfig",
    "PrepareFailed",
    "Zygote",
]
