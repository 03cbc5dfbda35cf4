"""``--store`` of ``serve``, ``executor`` and ``gc``: a malformed URL never prints its password, every bad
``--store`` is exit 2 without a traceback, a password on the command line is warned about, and ``--help``
says where a password goes instead (PGPASSWORD, PGPASSFILE)."""

from __future__ import annotations

import pytest
from click import Command
from click.testing import CliRunner

from support.net import free_port
from taskplug.cli._executor_cmd import executor
from taskplug.cli._gc import gc
from taskplug.cli._serve import serve
from taskplug.cli._store import redact

SECRET = "s3cr3t-Pa55"

COMMANDS = [
    pytest.param(serve, [], id="serve"),
    pytest.param(executor, ["--cluster-mode", "simulated"], id="executor"),
    pytest.param(gc, ["--older-than", "7d"], id="gc"),
]


def _bad_urls() -> list[str]:
    closed = free_port()
    return [
        # libpq quotes the whole URI in these messages.
        f"postgresql://admin:{SECRET}@[::1/db",
        f"postgresql://admin:{SECRET}@127.0.0.1:{closed}/db?bogus=1",
        f"postgresql://admin:{SECRET}@127.0.0.1:notaport/db",
        f"postgresql://admin:{SECRET}@127.0.0.1:{closed}/db?sslmode=sometimes",
        f"postgresql://admin@127.0.0.1:{closed}/db?password={SECRET}&bogus=1",
        # Reached nothing: the connection error.
        f"postgresql://admin:{SECRET}@127.0.0.1:{closed}/db",
    ]


@pytest.mark.parametrize(("command", "extra"), COMMANDS)
def test_a_bad_store_is_exit_2_without_the_password_or_a_traceback(
    command: Command, extra: list[str]
) -> None:
    for url in _bad_urls():
        result = CliRunner().invoke(command, ["--store", url, *extra])

        assert result.exit_code == 2, (url, result.output, result.exception)
        assert "--store" in result.output, url
        assert SECRET not in result.output, (url, result.output)
        assert "Traceback" not in result.output, url
        assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), url


@pytest.mark.parametrize(("command", "extra"), COMMANDS)
def test_a_password_on_the_command_line_is_warned_about(command: Command, extra: list[str]) -> None:
    closed = free_port()
    result = CliRunner().invoke(
        command, ["--store", f"postgresql://admin:{SECRET}@127.0.0.1:{closed}/db", *extra]
    )

    assert result.exit_code == 2
    assert "warning: --store holds a password" in result.stderr
    assert "PGPASSWORD" in result.stderr
    quiet = CliRunner().invoke(command, ["--store", f"postgresql://admin@127.0.0.1:{closed}/db", *extra])
    assert "warning" not in quiet.stderr


@pytest.mark.parametrize(("command", "extra"), COMMANDS)
def test_help_says_where_a_password_goes(command: Command, extra: list[str]) -> None:
    text = " ".join(CliRunner().invoke(command, ["--help"]).output.split())

    assert "PGPASSWORD" in text and "PGPASSFILE" in text


def test_redact_hides_the_password_as_typed_and_decoded_and_in_parameters() -> None:
    url = "postgresql://u:p%40ss%3Aword@h/db?password=other"
    message = f'invalid URI: "{url}" (password p@ss:word, password=other)'

    redacted = redact(message, url)

    assert "p%40ss%3Aword" not in redacted and "p@ss:word" not in redacted and "other" not in redacted
    assert "postgresql://u:***@h/db" in redacted
