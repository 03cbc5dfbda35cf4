"""``taskplug serve --store postgresql://…``: the HTTP API and the live web view of a replicas' database.

The server reads and writes only the database the replicas share (``taskplug executor --store`` runs them):
it never drives an execution, so any number of servers can run beside any number of replicas. It binds
127.0.0.1 unless ``--host`` says otherwise; the API is at ``/api/v1`` (OpenAPI at ``/api/v1/docs``), the web
view at ``/executions``.
"""

from __future__ import annotations

import click

from taskplug.cli._output import handles_bad_input
from taskplug.core import SpecError

__all__ = ["serve"]


@click.command()
@click.option(
    "--store", required=True, metavar="URL", help="The replicas' database: postgresql://user@host/db."
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (loopback by default).")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--replica-ttl",
    default=10.0,
    show_default=True,
    type=click.FloatRange(min=0.1),
    help="Seconds without a heartbeat after which a replica is shown as silent (the replicas' --ttl).",
)
@handles_bad_input
def serve(store: str, host: str, port: int, replica_ttl: float) -> None:
    """Serve the HTTP API and the live web view of the executions in a PostgreSQL store."""
    if not store.startswith(("postgresql://", "postgres://")):
        raise SpecError("--store", f"{store!r} is not a postgresql:// URL (the replicas' shared database)")
    import psycopg

    from taskplug.service import migrate, serve_http

    # Reach the database and bring its schema up before serving, so that a wrong URL or a database this
    # version cannot use is exit 2 naming --store (the app's own start-up migration then finds nothing to do).
    try:
        with psycopg.connect(store, connect_timeout=10) as conn:
            migrate(conn)
    except psycopg.Error as e:
        raise SpecError("--store", f"cannot use the database: {str(e).strip()}") from None
    serve_http(store, host=host, port=port, replica_ttl=replica_ttl)
