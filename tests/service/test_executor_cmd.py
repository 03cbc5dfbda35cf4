"""``taskplug executor``: bad input is exit 2 naming the option; a database it cannot reach too."""

from __future__ import annotations

from click.testing import CliRunner

from support.net import free_port
from taskplug.cli._executor_cmd import executor


def test_a_store_that_is_not_postgresql_is_refused_naming_the_option() -> None:
    result = CliRunner().invoke(executor, ["--store", "sqlite:///state.db"])
    assert result.exit_code == 2
    assert "--store" in result.output and "taskplug run" in result.output


def test_a_heartbeat_too_slow_for_the_ttl_is_refused() -> None:
    result = CliRunner().invoke(
        executor,
        ["--store", "postgresql://u@127.0.0.1:1/db", "--heartbeat", "2", "--ttl", "3", "--margin", "1"],
    )
    assert result.exit_code == 2
    assert "heartbeat" in result.output


def test_a_database_that_cannot_be_reached_is_exit_2_naming_the_store() -> None:
    dsn = f"postgresql://nobody@127.0.0.1:{free_port()}/none?connect_timeout=2"
    result = CliRunner().invoke(executor, ["--store", dsn, "--cluster-mode", "simulated"])
    assert result.exit_code == 2, result.output
    assert "--store" in result.output


def test_a_margin_not_below_the_ttl_is_refused() -> None:
    result = CliRunner().invoke(
        executor, ["--store", "postgresql://u@127.0.0.1:1/db", "--ttl", "3", "--margin", "3"]
    )
    assert result.exit_code == 2
    assert "margin" in result.output
