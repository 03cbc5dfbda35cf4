"""``taskplug serve --store postgresql://…``: the HTTP API and the live web view of a replicas' database.

The server reads and writes only the database the replicas share (``taskplug executor --store`` runs them):
it never drives an execution, so any number of servers can run beside any number of replicas. It binds
127.0.0.1 unless ``--host`` says otherwise; the API is at ``/api/v1`` (OpenAPI at ``/api/v1/docs``), the web
view at ``/executions``. It answers only the ``Host`` names of its bind address (``--allowed-host`` adds
one), caps live streams and bounds how long a request may take to arrive (``taskplug.service``'s limits).
"""

from __future__ import annotations

from pathlib import Path

import click

from taskplug.cli._output import handles_bad_input
from taskplug.cli._store import PASSWORD_HELP, check_store, store_error, warn_if_password
from taskplug.core import SpecError

__all__ = ["serve"]


@click.command(epilog=PASSWORD_HELP)
@click.option(
    "--store",
    required=True,
    metavar="URL",
    help="The replicas' database: postgresql://user@host/db (the password from PGPASSWORD or PGPASSFILE).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (loopback by default).")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME",
    help="Also answer requests whose Host header is NAME (a DNS name or proxy name of this server); by "
    "default only the bind address's own names are answered. Repeatable.",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The platform config the replicas run with: a submission whose task type no enabled plugin runs "
    "is refused (422).",
)
@click.option(
    "--replica-ttl",
    default=10.0,
    show_default=True,
    type=click.FloatRange(min=0.1),
    help="Seconds without a heartbeat after which a replica is shown as silent (the replicas' --ttl).",
)
@click.option(
    "--max-streams",
    default=200,
    show_default=True,
    type=click.IntRange(1),
    help="Live-view streams open at once; past it 503 with Retry-After.",
)
@click.option(
    "--max-streams-per-client",
    default=20,
    show_default=True,
    type=click.IntRange(1),
    help="Live-view streams open at once from one client address (behind a proxy: the proxy's).",
)
@click.option(
    "--header-timeout",
    default=30.0,
    show_default=True,
    type=click.FloatRange(min=0.1),
    help="Seconds a request's headers may take to arrive; then 408 and the connection closed.",
)
@click.option(
    "--body-timeout",
    default=60.0,
    show_default=True,
    type=click.FloatRange(min=0.1),
    help="Seconds a request's body may take to arrive after its headers; then 408 and closed.",
)
@click.option(
    "--idle-timeout",
    default=60.0,
    show_default=True,
    type=click.FloatRange(min=1),
    help="Seconds a kept-alive connection may stay idle between requests.",
)
@handles_bad_input
def serve(
    store: str,
    host: str,
    port: int,
    allowed_hosts: tuple[str, ...],
    config_path: Path | None,
    replica_ttl: float,
    max_streams: int,
    max_streams_per_client: int,
    header_timeout: float,
    body_timeout: float,
    idle_timeout: float,
) -> None:
    """Serve the HTTP API and the live web view of the executions in a PostgreSQL store."""
    check_store(store)
    warn_if_password(store)
    import psycopg

    from taskplug.service import ServeLimits, host_policy, migrate, platform_task_types, serve_http

    try:
        host_policy(host, extra=allowed_hosts)
    except ValueError as e:
        raise SpecError("--host", str(e)) from None
    task_types = None
    if config_path is not None:
        from taskplug.executor import Platform

        task_types = platform_task_types(Platform.load(config_path))
    limits = ServeLimits(
        max_streams=max_streams,
        max_streams_per_client=max_streams_per_client,
        header_timeout=header_timeout,
        body_timeout=body_timeout,
        idle_timeout=idle_timeout,
    )
    # Reach the database and bring its schema up before serving, so that a wrong URL or a database this
    # version cannot use is exit 2 naming --store (the app's own start-up migration then finds nothing to do).
    try:
        with psycopg.connect(store, connect_timeout=10) as conn:
            migrate(conn)
    except psycopg.Error as e:
        raise store_error(store, e) from None
    serve_http(
        store,
        host=host,
        port=port,
        replica_ttl=replica_ttl,
        allowed_hosts=allowed_hosts,
        limits=limits,
        task_types=task_types,
    )
