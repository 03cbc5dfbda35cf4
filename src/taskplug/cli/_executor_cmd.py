"""``taskplug executor --store postgresql://…``: run one executor replica until SIGTERM or SIGINT.

Run as many as wanted against one database: they share the executions submitted to it (``taskplug serve``'s
API), each driving the ones it claimed, taking over a silent replica's within ``--ttl`` seconds, handing its
own over at once when stopped (see ``taskplug.service``'s replica protocol). Objects are created on the
cluster of ``--kubeconfig`` (a real one, or ``taskplug cluster serve``'s), or on an embedded cluster in this
process when none is given (useful for one replica only). Exit codes: 0 stopped, 2 bad input.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path

import click

from taskplug.cli._cluster_options import cluster_options, kube_client
from taskplug.cli._process import tune_collector_for_executor
from taskplug.cli._store import PASSWORD_HELP, check_store, store_error, warn_if_password
from taskplug.core import SpecError
from taskplug.executor import Platform, executor_settings
from taskplug.service import Replica, ReplicaSettings

__all__ = ["executor"]


@click.command("executor", epilog=PASSWORD_HELP)
@click.option(
    "--store",
    required=True,
    help="The executions' database: postgresql://user@host:port/db (taskplug run keeps SQLite); the "
    "password from PGPASSWORD or PGPASSFILE.",
)
@cluster_options(
    kubeconfig_help="Create objects on this cluster (default: an embedded cluster in this process).",
    cluster_mode_help="The embedded cluster (no --kubeconfig): run containers as local processes, or simulate them.",
)
@click.option(
    "--capacity", type=click.IntRange(1), default=500, show_default=True, help="Executions at once."
)
@click.option("--heartbeat", type=click.FloatRange(0.05), default=2.0, show_default=True, help="Seconds.")
@click.option(
    "--ttl",
    type=click.FloatRange(0.5),
    default=10.0,
    show_default=True,
    help="Seconds of silence after which another replica takes this one's executions over.",
)
@click.option(
    "--margin",
    type=click.FloatRange(0),
    default=3.0,
    show_default=True,
    help="Seconds before the ttl at which creates and deletes stop (at least a create call's timeout).",
)
@click.option("--poll", type=click.FloatRange(0.01), default=1.0, show_default=True, help="Seconds.")
@click.option("--claim-batch", type=click.IntRange(1), default=50, show_default=True)
@click.option("--reap", type=click.FloatRange(0.1), default=5.0, show_default=True, help="Seconds.")
@click.option(
    "--keep-log-bytes",
    type=click.IntRange(0),
    default=1024 * 1024,
    show_default=True,
    help="The most of each container's log kept in the database when its pod ends (the end of it; 0 keeps "
    "none): taskplug serve shows it after the pod is gone.",
)
@click.option("--no-fencing", is_flag=True, hidden=True, help="Tests' negative control only.")
@click.option("-v", "--verbose", is_flag=True, help="Log the protocol's steps (claims, hand-overs).")
def executor(
    store: str,
    config_path: Path | None,
    kubeconfig: Path | None,
    pod_templates: tuple[Path, ...],
    cluster_mode: str,
    capacity: int,
    heartbeat: float,
    ttl: float,
    margin: float,
    poll: float,
    claim_batch: int,
    reap: float,
    keep_log_bytes: int,
    no_fencing: bool,
    verbose: bool,
) -> None:
    """Run one executor replica until stopped.

    The replica drives executions stored in the PostgreSQL database of --store together with any number of
    other replicas; SIGTERM or SIGINT hands its executions over to them at once.
    """
    from taskplug.cli._output import fail

    if not store.startswith(("postgresql://", "postgres://")):
        raise click.BadParameter(
            "must be a postgresql:// URL; a single process with SQLite is `taskplug run --state-db`",
            param_hint="--store",
        )
    try:
        check_store(store)
    except SpecError as e:
        fail(str(e))
    warn_if_password(store)
    try:
        settings = ReplicaSettings(
            capacity=capacity,
            heartbeat=heartbeat,
            ttl=ttl,
            margin=margin,
            poll=poll,
            claim_batch=claim_batch,
            reap=reap,
            keep_log_bytes=keep_log_bytes,
            fencing=not no_fencing,
        )
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--heartbeat/--ttl/--margin") from e
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    if verbose:
        logging.getLogger("taskplug").setLevel(logging.INFO)
    try:
        platform = Platform.load(config_path, pod_template_paths=pod_templates)
        tune_collector_for_executor()
        asyncio.run(_serve(store, platform, kubeconfig, cluster_mode, settings))
    except SpecError as e:
        fail(str(e))
    except Exception as e:
        import psycopg

        # Any error of the driver is the database's (libpq's words may quote the URL: redacted).
        if isinstance(e, psycopg.Error):
            fail(str(store_error(store, e)))
        raise


async def _serve(
    dsn: str, platform: Platform, kubeconfig: Path | None, mode: str, settings: ReplicaSettings
) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        async with kube_client(platform, kubeconfig, mode) as kube:
            replica = Replica(
                dsn,
                platform,
                kube,
                settings=settings,
                executor_settings=executor_settings(platform),
                on_incarnation=lambda rid: click.echo(f"replica {rid} running", err=True),
            )
            await replica.run(stop)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


if __name__ == "__main__":
    executor()
