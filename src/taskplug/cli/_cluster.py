"""``taskplug cluster serve``: the embedded local cluster over HTTP on 127.0.0.1, until stopped.

It prints the URL and the kubeconfig it wrote (context ``taskplug-local``) so kubectl and lightkube can use
it, and stops cleanly — every controller, every container process, the HTTP server — on SIGINT or SIGTERM.
"""

from __future__ import annotations

import asyncio
import signal
import tempfile
from pathlib import Path

import click

from taskplug.localcluster import LocalCluster

__all__ = ["cluster"]


@click.group("cluster")
def cluster() -> None:
    """The embedded local Kubernetes cluster."""


@cluster.command("serve")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=0, show_default=True, help="0 picks a free port."
)
@click.option(
    "--kubeconfig-out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Where to write the kubeconfig (default: a file in the temp directory named after the port).",
)
@click.option(
    "--mode",
    type=click.Choice(["process", "simulated"]),
    default="process",
    show_default=True,
    help="process: containers run as local processes; simulated: pods succeed on a timer.",
)
def serve(port: int, kubeconfig_out: Path | None, mode: str) -> None:
    """Serve the local cluster on 127.0.0.1 until SIGINT/SIGTERM."""
    asyncio.run(_serve(port, kubeconfig_out, mode))


async def _serve(port: int, kubeconfig_out: Path | None, mode: str) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        async with LocalCluster(mode="simulated" if mode == "simulated" else "process") as local:
            url = await local.serve_http(port)
            bound_port = url.rsplit(":", 1)[1]
            path = kubeconfig_out or Path(tempfile.gettempdir()) / f"taskplug-local-{bound_port}.kubeconfig"
            local.write_kubeconfig(path, url)
            click.echo(f"Local cluster ({mode}) serving at {url}")
            click.echo(f"kubeconfig: {path}")
            click.echo(f"  kubectl --kubeconfig {path} get pods")
            await stop.wait()
            click.echo("Stopping the local cluster")
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


if __name__ == "__main__":
    cluster()
