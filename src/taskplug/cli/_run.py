"""``taskplug run``: execute a task to a terminal phase, on the embedded local cluster or a real one.

Shows live progress (phase, reason, elapsed); for an ArrayNode (a map task) also its elements' counts by
phase, a bar, and the reason the last failing element gave. Ctrl-C aborts what was created and finalizes;
``-o json`` prints one document at the end (with each element's phase, attempts, error and log links for a
map). Exit codes: 0 success, 1 the task failed or was aborted, 2 bad input.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import click
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from taskplug.cli._output import EXIT_TASK_FAILED, dump, handles_bad_input
from taskplug.engine import local_operators
from taskplug.engine.k8s import connect
from taskplug.executor import (
    EXECUTOR_SECTION,
    Event,
    ExecutionResult,
    Executor,
    Platform,
    SQLiteStateStore,
    load_spec,
    open_executor,
)
from taskplug.k8s import KubeClient

__all__ = ["run"]


@contextlib.asynccontextmanager
async def _kube_client(platform: Platform, kubeconfig: Path | None, mode: str) -> AsyncIterator[KubeClient]:
    if kubeconfig is not None:
        client = connect(kubeconfig)
        try:
            yield client
        finally:
            await client.close()
        return
    # Only a run on the embedded cluster loads it.
    from taskplug.localcluster import LocalCluster

    async with LocalCluster(mode="simulated" if mode == "simulated" else "process") as cluster:
        # The embedded cluster has no operators of its own: every enabled plugin that brings one for its
        # custom resource (Spark, a plugin author's CRD) gets it registered here.
        for operator in local_operators(platform.config, platform.registry):
            cluster.register_operator(operator.resource_type, operator.make())
        yield cluster.client()


# An element's latest reported phase (the external resources' phase names) → the group it is counted in.
_ELEMENT_GROUPS = {
    "Undefined": "waiting",
    "NotReady": "queued",
    "WaitingForResources": "queued",
    "Queued": "queued",
    "Initializing": "queued",
    "WaitingForCache": "queued",
    "Running": "running",
    "Success": "succeeded",
    "RetryableFailure": "retrying",
    "PermanentFailure": "failed",
    "Aborted": "aborted",
}
_GROUP_STYLES = {
    "waiting": "dim",
    "queued": "cyan",
    "running": "blue",
    "retrying": "yellow",
    "succeeded": "green",
    "failed": "red",
    "aborted": "red",
}


class _ArrayProgress:
    """An ArrayNode's elements as its events report them: each one's latest phase, the last failure."""

    def __init__(self) -> None:
        self.phases: dict[int, str] = {}
        self.failure: tuple[int, str] | None = None

    def update(self, resources: list[dict[str, object]]) -> None:
        for resource in resources:
            index = int(str(resource.get("index", 0)))
            phase = str(resource.get("phase", "Undefined"))
            self.phases[index] = phase
            if phase in ("PermanentFailure", "RetryableFailure") and resource.get("reason"):
                self.failure = (index, str(resource["reason"]))

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(_GROUP_STYLES, 0)
        for phase in self.phases.values():
            counts[_ELEMENT_GROUPS.get(phase, "running")] += 1
        return counts

    def render(self) -> RenderableType:
        counts = self.counts()
        total = len(self.phases)
        done = counts["succeeded"] + counts["failed"] + counts["aborted"]
        line = Text()
        line.append(f"{done}/{total} elements done  ")
        for group, count in counts.items():
            if count:
                line.append(f"{group} {count}  ", style=_GROUP_STYLES[group])
        bar = Table.grid(padding=(0, 1))
        bar.add_row(ProgressBar(total=max(total, 1), completed=done, width=30), line)
        parts: list[RenderableType] = [bar]
        if self.failure is not None:
            index, reason = self.failure
            parts.append(Text(f"element {index} failed: {_last_line(reason)[:200]}", style="red"))
        return Group(*parts)


def _last_line(text: str) -> str:
    """The line that says most in a long error (a traceback's last line is the exception)."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


class _Progress:
    """The live view: one line per phase event, and a status line that ticks; for a map, its elements."""

    def __init__(self, console: Console, key: str) -> None:
        self.console = console
        self.key = key
        self.started = time.monotonic()
        self.events: list[Event] = []
        self.array: _ArrayProgress | None = None

    def on_event(self, key: str, event: Event) -> None:
        if key != self.key:
            return
        self.events.append(event)
        if event.external_resources is not None:
            if self.array is None:
                self.array = _ArrayProgress()
            self.array.update(event.external_resources)

    def render(self) -> RenderableType:
        table = self._timeline()
        if self.array is None:
            return table
        return Group(table, self.array.render())

    def _timeline(self) -> Table:
        table = Table(box=None, show_header=True, header_style="bold")
        for column in ("attempt", "phase", "version", "reason", "elapsed"):
            table.add_column(column)
        # A map's events come one per round: its elements' view below says more than a long list of them.
        for event in self.events[-6:] if self.array is not None else self.events[-15:]:
            # Reasons come from Kubernetes ("... [container-name]"): plain text, never Rich markup.
            reason = Text(event.reason[:160])
            table.add_row(str(event.attempt), _phase_text(event.phase), str(event.version), reason, "")
        elapsed = f"{time.monotonic() - self.started:5.1f}s"
        current = self.events[-1].phase if self.events else "Submitting"
        table.add_row("", _phase_text(current), "", "", elapsed)
        return table


def _phase_text(phase: str) -> Text:
    style = {
        "Success": "green",
        "RetryableFailure": "yellow",
        "PermanentFailure": "red",
        "Aborted": "red",
    }.get(phase, "cyan")
    return Text(phase, style=style)


async def _run(
    spec_path: Path,
    config_path: Path | None,
    kubeconfig: Path | None,
    state_db: Path | None,
    pod_templates: tuple[Path, ...],
    mode: str,
    as_json: bool,
) -> ExecutionResult:
    platform = Platform.load(config_path, pod_template_paths=pod_templates)
    spec = load_spec(spec_path)
    store = SQLiteStateStore(state_db or platform.config.get(EXECUTOR_SECTION).state_db)
    console = Console(stderr=True)
    progress = _Progress(console, spec.execution_key)
    try:
        async with (
            _kube_client(platform, kubeconfig, mode) as client,
            open_executor(platform, kube_client=client, store=store, on_event=progress.on_event) as ex,
        ):
            key = await ex.submit(spec)
            _abort_on_interrupt(ex, key, console)
            if as_json:
                return await ex.wait(key)
            with Live(progress.render(), console=console, refresh_per_second=8, transient=False) as live:
                waiter = asyncio.ensure_future(ex.wait(key))
                while not waiter.done():
                    live.update(progress.render())
                    await asyncio.wait({waiter}, timeout=0.125)
                live.update(progress.render())
            console.print()
            return waiter.result()
    finally:
        store.close()


def _abort_on_interrupt(ex: Executor, key: str, console: Console) -> None:
    loop = asyncio.get_running_loop()

    def interrupted() -> None:
        console.print("[yellow]interrupted: aborting the execution (deleting what it created)…[/yellow]")
        ex.abort(key)

    with contextlib.suppress(NotImplementedError):  # not on every platform
        loop.add_signal_handler(signal.SIGINT, interrupted)
        loop.add_signal_handler(signal.SIGTERM, interrupted)


def _print_outcome(result: ExecutionResult) -> None:
    console = Console()
    style = "green" if result.succeeded else "red"
    console.print(f"[bold {style}]{result.phase}[/bold {style}] after {result.attempts} attempt(s)")
    if result.elements is not None:
        _print_elements(console, result.elements)
    if result.error:
        code = f"[{result.error['code']}] " if result.error.get("code") else ""
        console.print(Text(f"error {code}({result.error['kind']}): {result.error['message']}"))
    if result.outputs:
        console.print("outputs:")
        console.print_json(data=result.outputs)


def _print_elements(console: Console, elements: list[dict[str, object]]) -> None:
    by_phase: dict[str, int] = {}
    for element in elements:
        by_phase[str(element["phase"])] = by_phase.get(str(element["phase"]), 0) + 1
    summary = ", ".join(f"{count} {phase}" for phase, count in sorted(by_phase.items()))
    console.print(f"{len(elements)} element(s): {summary}")
    for element in elements:
        error = element.get("error")
        if isinstance(error, dict) and element["phase"] in ("Failed", "Failing", "TimedOut"):
            message = _last_line(str(error.get("message", "")))
            console.print(
                Text(f"  element {element['index']} ({element['attempts']} attempt(s)): {message}"),
                style="red",
            )


@click.command()
@click.argument("spec", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Run on this cluster instead of the embedded one.",
)
@click.option(
    "--state-db",
    type=click.Path(dir_okay=False, path_type=Path),
    help="SQLite file for execution state (resume).",
)
@click.option("--pod-templates", multiple=True, type=click.Path(path_type=Path))
@click.option(
    "--cluster-mode",
    type=click.Choice(["process", "simulated"]),
    default="process",
    show_default=True,
    help="The embedded cluster: run containers as local processes, or simulate them.",
)
@click.option("-o", "--output", "fmt", type=click.Choice(["live", "json"]), default="live", show_default=True)
@handles_bad_input
def run(
    spec: Path,
    config_path: Path | None,
    kubeconfig: Path | None,
    state_db: Path | None,
    pod_templates: tuple[Path, ...],
    cluster_mode: str,
    fmt: str,
) -> None:
    """Run a task execution to a terminal phase and print its timeline and outputs."""
    result = asyncio.run(
        _run(spec, config_path, kubeconfig, state_db, pod_templates, cluster_mode, fmt == "json")
    )
    if fmt == "json":
        click.echo(dump(result.to_json()), nl=False)
    else:
        _print_outcome(result)
    if not result.succeeded:
        sys.exit(EXIT_TASK_FAILED)
