"""What ``taskplug run`` and ``taskplug executor`` share: the options that choose the platform and the cluster
(``--config``, ``--kubeconfig``, ``--pod-templates``, ``--cluster-mode``) and the Kubernetes client they
open from them — a real cluster through its kubeconfig, or the embedded one in this process."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click

from taskplug.engine import local_operators
from taskplug.executor import Platform
from taskplug.k8s import KubeClient

if TYPE_CHECKING:
    from taskplug.localcluster import Zygote

__all__ = ["cluster_options", "kube_client"]

F = TypeVar("F", bound=Callable[..., object])


def cluster_options(*, kubeconfig_help: str, cluster_mode_help: str) -> Callable[[F], F]:
    """The four options, in this order, with each command's own words for the two whose meaning differs."""

    def decorate(command: F) -> F:
        for option in reversed(
            (
                click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path)),
                click.option(
                    "--kubeconfig", type=click.Path(dir_okay=False, path_type=Path), help=kubeconfig_help
                ),
                click.option("--pod-templates", multiple=True, type=click.Path(path_type=Path)),
                click.option(
                    "--cluster-mode",
                    type=click.Choice(["process", "simulated"]),
                    default="process",
                    show_default=True,
                    help=cluster_mode_help,
                ),
            )
        ):
            command = option(command)
        return command

    return decorate


@contextlib.asynccontextmanager
async def kube_client(
    platform: Platform,
    kubeconfig: Path | None,
    mode: str,
    *,
    workdir: Path | None = None,
    zygote: Zygote | None = None,
) -> AsyncIterator[KubeClient]:
    """The cluster of ``kubeconfig``, or (None) an embedded one in ``mode``, with the operators the enabled
    plugins bring for their custom resources; ``workdir`` is where the embedded one keeps its pods' folders
    (their logs), a temporary folder when not given; its kubelet forks Python entry points from ``zygote``
    when given."""
    if kubeconfig is not None:
        client = platform.connect(kubeconfig)
        try:
            yield client
        finally:
            await client.close()
        return
    # Only a run on the embedded cluster loads it.
    from taskplug.localcluster import LocalCluster

    async with LocalCluster(
        mode="simulated" if mode == "simulated" else "process", workdir=workdir, zygote=zygote
    ) as cluster:
        # The embedded cluster has no operators of its own: every enabled plugin that brings one for its
        # custom resource (Spark, a plugin author's CRD) gets it registered here.
        for operator in local_operators(platform.config, platform.registry):
            cluster.register_operator(operator.resource_type, operator.make())
        yield cluster.client()
