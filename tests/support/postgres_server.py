"""A throwaway PostgreSQL on 127.0.0.1 for the replica, API and web-view tests; nothing outlives the run.

One server per pytest session (``initdb`` + ``pg_ctl``, a few seconds), a fresh database per test module
(``postgres_dsn``). ``TASKPLUG_TEST_PG_DSN`` points the tests at an existing server instead (its user must
be allowed to create databases). The server runs as the ``postgres`` user when the tests run as root, since
``initdb`` refuses root. The test is skipped when no PostgreSQL binaries are installed.

Import ``postgres_server_fixture`` and ``postgres_dsn_fixture`` into a ``conftest.py`` to use them.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.net import free_port, stop_process, wait_until_ready

__all__ = ["PostgresServer", "postgres_dsn_fixture", "postgres_server_fixture"]


@dataclass(frozen=True)
class PostgresServer:
    """A running server: ``dsn(database)`` is a libpq URL to one of its databases."""

    host: str
    port: int
    user: str

    def dsn(self, database: str = "postgres") -> str:
        return f"postgresql://{self.user}@{self.host}:{self.port}/{database}"

    def create_database(self) -> str:
        """A new, empty database; its URL."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:16]}"
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.dsn(name)


def _bindir() -> Path | None:
    on_path = shutil.which("pg_ctl")
    if on_path is not None:
        return Path(on_path).parent
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(found[-1]).parent if found else None


def _accepts(server: PostgresServer) -> bool:
    import psycopg

    try:
        with psycopg.connect(server.dsn(), connect_timeout=2):
            return True
    except psycopg.OperationalError:
        return False


@pytest.fixture(scope="session", name="postgres_server")
def postgres_server_fixture() -> Iterator[PostgresServer]:
    pytest.importorskip("psycopg", reason="psycopg is not installed (pip install -e '.[postgres]')")
    existing = os.environ.get("TASKPLUG_TEST_PG_DSN")
    if existing:
        from psycopg.conninfo import conninfo_to_dict

        info = conninfo_to_dict(existing)
        yield PostgresServer(
            str(info.get("host", "127.0.0.1")), int(info.get("port", 5432)), str(info["user"])
        )
        return
    bindir = _bindir()
    if bindir is None:
        pytest.skip("PostgreSQL is not installed (scripts/setup installs it)")
    # Not under pytest's base temp directory: that one is private to this user, and the server may run as
    # another.
    workdir = Path(tempfile.mkdtemp(prefix="taskplug-pg-"))
    data, sockets, log_path = workdir / "data", workdir / "sockets", workdir / "postgres.log"
    sockets.mkdir()
    run_as: list[str] = []
    user = pwd.getpwuid(os.getuid()).pw_name
    if os.getuid() == 0:
        # initdb refuses root: the server runs as postgres, in a directory it owns.
        user = "postgres"
        shutil.chown(workdir, user)
        shutil.chown(sockets, user)
        run_as = ["runuser", "-u", user, "--"]
    try:
        yield from _serve(bindir, workdir, data, sockets, log_path, run_as, user)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _serve(
    bindir: Path, workdir: Path, data: Path, sockets: Path, log_path: Path, run_as: list[str], user: str
) -> Iterator[PostgresServer]:
    subprocess.run(
        [
            *run_as,
            str(bindir / "initdb"),
            "-D",
            str(data),
            "-U",
            user,
            "-A",
            "trust",
            "--no-sync",
            "-E",
            "UTF8",
        ],
        check=True,
        capture_output=True,
    )
    port = free_port()
    options = (
        f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={sockets} "
        "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
    )
    with log_path.open("wb") as log:
        if run_as:
            shutil.chown(log_path, user)
        process = subprocess.Popen(
            [*run_as, str(bindir / "postgres"), "-D", str(data), *options.split()],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    server = PostgresServer("127.0.0.1", port, user)
    try:
        wait_until_ready(lambda: _accepts(server), process, log_path, what="postgres")
        yield server
    finally:
        stop_process(process)


@pytest.fixture(scope="module", name="postgres_dsn")
def postgres_dsn_fixture(postgres_server: PostgresServer) -> str:
    """The URL of a fresh database, one per test module."""
    return postgres_server.create_database()
