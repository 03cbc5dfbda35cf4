"""A connector task's logs and metrics on the command line: ``taskplug logs`` and ``taskplug metrics``.

A connector task runs no pod: its job runs on the connector, and the resource meta that names the job is kept
in the attempt's plugin state in the state DB (the execution's record; a workflow's node's record). ``taskplug
logs EXECUTION`` prints the job's ``GetTaskLogs`` pages in order when the execution has no pod logs;
``taskplug metrics EXECUTION --query NAME`` prints the connector's ``GetTaskMetrics`` answer. Both load the
platform's config to find the connector deployment (the connector plugin runs its discovery first), so pass the
``--config`` the run used. Only the current (last) attempt's job is kept: earlier attempts' are not shown.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import click

from taskplug.cli._output import handles_bad_input
from taskplug.core import GoDuration, SpecError
from taskplug.executor import EXECUTOR_SECTION, Platform, web_api_log_lines, web_api_resource_meta

__all__ = ["WebApiJob", "metrics", "print_job_logs", "web_api_jobs"]


@dataclass(frozen=True, slots=True)
class WebApiJob:
    """A web-API attempt that created a job: where it is in the execution, and its plugin state."""

    node: str
    attempt: int
    plugin_state: dict[str, Any]


def web_api_jobs(state_db: Path, execution: str, node: str | None = None) -> list[WebApiJob]:
    """The web-API jobs the state DB keeps for ``execution`` (its name or key): the execution's own (a task),
    or its nodes' (a workflow's; only ``node``'s when given); empty when it has none (or no state DB)."""
    if not state_db.is_file() or state_db.stat().st_size == 0:
        return []
    from taskplug.executor import SQLiteStateStore, check_state_file

    check_state_file(state_db)
    store = SQLiteStateStore(state_db)
    try:
        keys = [execution] if execution.count("/") == 3 else store.keys_named(execution)
        found: list[WebApiJob] = []
        for key in keys:
            record = store.load(key)
            if record is None:
                continue
            records = [record, *store.load_nodes(key)]
            for r in records:
                label = r.path.rpartition("/")[2] or r.path
                if node is not None and label != node:
                    continue
                if web_api_resource_meta(r.plugin_state) is not None and r.plugin_state is not None:
                    found.append(WebApiJob(label, r.attempt, dict(r.plugin_state)))
        return found
    finally:
        store.close()


def print_job_logs(platform: Platform, jobs: Sequence[WebApiJob], tail: int | None) -> None:
    """Print each job's log lines (a header before each when there are several); the last ``tail`` lines of
    each when given."""

    async def show() -> None:
        for job in jobs:
            if len(jobs) > 1:
                click.echo(f"==> node {job.node}, attempt {job.attempt}: connector job <==")
            lines = [line async for line in web_api_log_lines(platform, job.plugin_state)]
            if not lines:
                click.echo(f"(the connector sent no log lines for node {job.node}'s job)", err=True)
            for line in lines[-tail:] if tail is not None and tail > 0 else ([] if tail == 0 else lines):
                click.echo(line)

    asyncio.run(show())


def _state_db(config_path: Path | None, state_db: Path | None) -> tuple[Platform, Path]:
    platform = Platform.load(config_path)
    if state_db is None:
        state_db = Path(platform.config.get(EXECUTOR_SECTION).state_db)
    return platform, state_db


def _when(value: str | None, option: str) -> datetime | None:
    if value is None:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise SpecError(option, f"an RFC 3339 time such as 2026-01-02T03:04:05Z, got {value!r}") from None


def _step(value: str | None) -> timedelta | None:
    if value is None:
        return None
    from pydantic import TypeAdapter, ValidationError

    try:
        step: timedelta = TypeAdapter(GoDuration).validate_python(value)
    except ValidationError:
        raise SpecError("--step", f"a Go duration such as 30s or 1m, got {value!r}") from None
    return step


@click.command()
@click.argument("execution")
@click.option("--query", "queries", multiple=True, required=True, help="A metric to ask for (repeatable).")
@click.option("--start", help="Start of the range, RFC 3339 (the connector's default when left out).")
@click.option("--end", help="End of the range, RFC 3339.")
@click.option("--step", help="Resolution, a Go duration such as 30s.")
@click.option("--node", default=None, help="For a workflow: the node whose connector job to ask about.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--state-db",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The state DB the run used [default: the config's executor.state-db, .taskplug/state.db].",
)
@click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@handles_bad_input
def metrics(
    execution: str,
    queries: tuple[str, ...],
    start: str | None,
    end: str | None,
    step: str | None,
    node: str | None,
    config_path: Path | None,
    state_db: Path | None,
    output: str,
) -> None:
    """Print a connector task's metrics, as its connector gives them (GetTaskMetrics).

    EXECUTION is the execution's name or its key PROJECT/DOMAIN/NAME/NODE. The connector deployment is the one
    the config (--config, as the run used) routes the task type to.
    """
    from google.protobuf import json_format

    from taskplug.executor import web_api_metrics

    platform, db = _state_db(config_path, state_db)
    jobs = web_api_jobs(db, execution, node)
    if not jobs:
        raise SpecError("EXECUTION", f"no connector job of {execution!r} in the state DB {str(db)!r}")
    if len(jobs) > 1:
        nodes = ", ".join(j.node for j in jobs)
        raise SpecError("--node", f"{execution!r} has connector jobs on several nodes ({nodes}): pick one")
    answer = asyncio.run(
        web_api_metrics(
            platform,
            jobs[0].plugin_state,
            list(queries),
            start=_when(start, "--start"),
            end=_when(end, "--end"),
            step=_step(step),
        )
    )
    as_dict = json_format.MessageToDict(answer)
    if output == "json":
        click.echo(json.dumps(as_dict, indent=2, sort_keys=True))
        return
    for result in as_dict.get("results", []):
        click.echo(f"{result.get('metric', '')}: {json.dumps(result.get('data'), sort_keys=True)}")
