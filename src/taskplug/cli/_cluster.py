"""``taskplug cluster serve``: the embedded local cluster over HTTP on 127.0.0.1, until stopped.

It prints the URL and the kubeconfig it wrote (context ``taskplug-local``, mode 0600, holding the bearer
token every request needs) so kubectl and lightkube can use it, and stops cleanly — every controller, every
container process, the HTTP server — on SIGINT or SIGTERM. The token is random per start unless
``--token-file`` gives one; it is never printed (anyone holding it runs commands on this machine).
"""

from __future__ import annotations

import asyncio
import os
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
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="Read the bearer token clients must send from this file (default: a random token per start). "
    "Either way it is written into the kubeconfig, never printed.",
)
@click.option(
    "--allow-privileged-pods",
    is_flag=True,
    default=False,
    help="Admit pods the Pod Security baseline level refuses (hostPath volumes, privileged containers, "
    "host namespaces, host ports, added capabilities). Off by default: such a pod is refused with 403.",
)
def serve(
    port: int, kubeconfig_out: Path | None, mode: str, token_file: Path | None, allow_privileged_pods: bool
) -> None:
    """Serve the local cluster on 127.0.0.1 until SIGINT/SIGTERM.

    A pod's command runs on this machine as this user (or as the runAsUser it asks for, when this process
    may switch users), so every request needs the bearer token in the kubeconfig written here (readable by
    you only); requests naming another Host, and cross-site requests from web pages, are refused; pods the
    Pod Security baseline level forbids are refused unless --allow-privileged-pods is given. It is not a
    sandbox: a pod shares this machine's kernel, files and network.
    """
    token = _read_token(token_file) if token_file is not None else None
    asyncio.run(_serve(port, kubeconfig_out, mode, token, allow_privileged_pods=allow_privileged_pods))


def _read_token(path: Path) -> str:
    try:
        token = path.read_text().strip()
    except (OSError, UnicodeDecodeError) as err:
        raise click.BadParameter(f"cannot read {path}: {err}", param_hint="--token-file") from None
    if not token or any(ord(c) < 0x21 or ord(c) > 0x7E for c in token):
        raise click.BadParameter(
            f"{path} must hold one token of printable ASCII characters and no spaces",
            param_hint="--token-file",
        )
    if os.stat(path).st_mode & 0o077:
        click.echo(f"warning: {path} can be read by other users; chmod 600 it", err=True)
    return token


async def _serve(
    port: int, kubeconfig_out: Path | None, mode: str, token: str | None, *, allow_privileged_pods: bool
) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        async with LocalCluster(
            mode="simulated" if mode == "simulated" else "process",
            pod_security="privileged" if allow_privileged_pods else "baseline",
        ) as local:
            url = await local.serve_http(port, token=token)
            bound_port = url.rsplit(":", 1)[1]
            path = kubeconfig_out or Path(tempfile.gettempdir()) / f"taskplug-local-{bound_port}.kubeconfig"
            local.kubeconfig(path)
            click.echo(f"Local cluster ({mode}) serving at {url}")
            if allow_privileged_pods:
                click.echo("warning: Pod Security admission is off (--allow-privileged-pods)", err=True)
            click.echo(f"kubeconfig: {path}")
            click.echo(f"  kubectl --kubeconfig {path} get pods")
            await stop.wait()
            click.echo("Stopping the local cluster")
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


if __name__ == "__main__":
    cluster()
