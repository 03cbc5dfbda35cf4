"""``taskplug serve --store postgresql://…``: the HTTP API and the live web view of a replicas' database.

The server reads and writes only the database the replicas share (``taskplug executor --store`` runs them):
it never drives an execution, so any number of servers can run beside any number of replicas. It binds
127.0.0.1 unless ``--host`` says otherwise; the API is at ``/api/v1`` (OpenAPI at ``/api/v1/docs``), the web
view at ``/executions``. Who may use it: API tokens (``taskplug token``), an authenticating proxy's user
header, OIDC bearer tokens (``taskplug.service._auth``); bound to loopback with none of these, its one user is
let in as ``local``; bound elsewhere with none, it refuses to start. It answers only the ``Host`` names of its bind address (``--allowed-host`` adds
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
    help="The platform config the replicas run with: a submission whose task type no enabled plugin runs, "
    "or that asks for more than its executor.limits, is refused (422); a connector task's log is asked of "
    "its connector.",
)
@click.option(
    "--kubeconfig",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The cluster the replicas run on (their --kubeconfig): a running attempt's log is read from it "
    "(pods/log). Without it, an attempt's log shows once the replica that ran it kept it (its pod ended).",
)
@click.option(
    "--replica-ttl",
    default=10.0,
    show_default=True,
    type=click.FloatRange(min=0.1),
    help="Seconds without a heartbeat after which a replica is shown as silent (the replicas' --ttl).",
)
@click.option(
    "--trusted-proxy",
    "trusted_proxies",
    multiple=True,
    metavar="ADDRESS",
    help="An authenticating proxy's address or network (repeat for more): its --proxy-user-header is "
    "believed; from any other peer the header is ignored.",
)
@click.option("--proxy-user-header", metavar="HEADER", help="The header the proxy names the user in.")
@click.option(
    "--proxy-role-header",
    metavar="HEADER",
    help="A header the proxy lists the user's roles or groups in: the highest of read/submit/admin named.",
)
@click.option(
    "--proxy-role",
    type=click.Choice(["read", "submit", "admin"]),
    default="read",
    show_default=True,
    help="A proxy user's role when --proxy-role-header names none.",
)
@click.option("--oidc-issuer", metavar="URL", help="Accept bearer JWTs of this OpenID Connect issuer.")
@click.option("--oidc-audience", metavar="AUD", help="The audience (client id) those tokens must be for.")
@click.option("--oidc-role-claim", metavar="CLAIM", help="A claim naming the role (a string or a list).")
@click.option(
    "--oidc-role",
    type=click.Choice(["read", "submit", "admin"]),
    default="read",
    show_default=True,
    help="An OIDC user's role when --oidc-role-claim names none.",
)
@click.option(
    "--insecure-no-auth",
    is_flag=True,
    help="Bound to a non-loopback address with no tokens, proxy or OIDC: let everyone in (a trusted network "
    "only).",
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
    kubeconfig: Path | None,
    replica_ttl: float,
    max_streams: int,
    max_streams_per_client: int,
    header_timeout: float,
    body_timeout: float,
    idle_timeout: float,
    trusted_proxies: tuple[str, ...],
    proxy_user_header: str | None,
    proxy_role_header: str | None,
    proxy_role: str,
    oidc_issuer: str | None,
    oidc_audience: str | None,
    oidc_role_claim: str | None,
    oidc_role: str,
    insecure_no_auth: bool,
) -> None:
    """Serve the HTTP API and the live web view of the executions in a PostgreSQL store.

    Who may use it: holders of API tokens (`taskplug token create`; roles read, submit, admin), users an
    authenticating proxy names (--trusted-proxy, --proxy-user-header), OIDC users (--oidc-issuer,
    --oidc-audience).

    Bound to loopback (the default) with none of these configured and no token created yet, requests
    without credentials are let in as `local`: anyone who can connect to this port on this machine can
    run commands as the user running taskplug serve. Bound to any other address with none configured,
    serve refuses to start unless --insecure-no-auth is given.
    """
    check_store(store)
    warn_if_password(store)
    if bool(oidc_issuer) != bool(oidc_audience):
        raise SpecError(
            "--oidc-audience" if oidc_issuer else "--oidc-issuer",
            "--oidc-issuer and --oidc-audience go together",
        )
    import psycopg

    from taskplug.service import (
        JobLogs,
        OidcSettings,
        ServeLimits,
        auth_settings,
        host_policy,
        local_warning,
        migrate,
        platform_task_types,
        serve_http,
    )

    try:
        host_policy(host, extra=allowed_hosts)
    except ValueError as e:
        raise SpecError("--host", str(e)) from None
    if kubeconfig is not None:
        import asyncio

        from taskplug.engine.k8s import connect

        # Read and checked now: a malformed kubeconfig is exit 2 naming it, not a server that fails to start.
        asyncio.run(connect(kubeconfig).close())
    task_types = None
    submission_limits = None
    job_logs = None
    if config_path is not None:
        from taskplug.executor import Platform
        from taskplug.executor import submission_limits as limits_of

        platform = Platform.load(config_path)
        task_types = platform_task_types(platform)
        submission_limits = limits_of(platform)
        job_logs = JobLogs(platform)
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
            row = conn.execute("SELECT EXISTS (SELECT 1 FROM taskplug_tokens)").fetchone()
    except psycopg.Error as e:
        raise store_error(store, e) from None
    oidc = None
    if oidc_issuer and oidc_audience:
        if oidc_role_claim is not None and not oidc_role_claim.strip():
            raise SpecError("--oidc-role-claim", "is empty")
        oidc = OidcSettings(oidc_issuer, oidc_audience, role_claim=oidc_role_claim, role=oidc_role)  # type: ignore[arg-type]
    settings = auth_settings(
        host=host,
        tokens_exist=bool(row and row[0]),
        insecure_no_auth=insecure_no_auth,
        trusted_proxies=trusted_proxies,
        proxy_user_header=proxy_user_header,
        proxy_role_header=proxy_role_header,
        proxy_role=proxy_role,
        oidc=oidc,
    )
    if settings.anonymous is not None and not (row and row[0]):
        click.echo(f"warning: {local_warning()}", err=True)
    serve_http(
        store,
        host=host,
        port=port,
        replica_ttl=replica_ttl,
        allowed_hosts=allowed_hosts,
        limits=limits,
        task_types=task_types,
        auth=settings,
        submission_limits=submission_limits,
        kubeconfig=kubeconfig,
        job_logs=job_logs,
    )
