"""The live view of an execution a ``taskplug run`` follows, locally or on a server (``--server``): one line per
phase event and a status line that ticks; for an ArrayNode (a map task) its elements' counts by phase, a bar,
and the reason the last failing element gave; for a workflow, the workflow's phase and the tree of its nodes
(:mod:`taskplug.cli._workflow_view`), each node's line updated by its node and task events.

What is shown comes from tasks, errors and the cluster, so no console here reads Rich markup or emoji codes:
``[bold]`` or ``[SystemError]`` in a message is printed as it is, and styles are set on
:class:`~rich.text.Text`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from taskplug.cli._text import error_text
from taskplug.cli._workflow_view import NodeOutline, NodeView, WorkflowNodes
from taskplug.executor import Event, NodeRecord

if TYPE_CHECKING:
    # Rich is imported where something is drawn: a run with `-o json` or without a terminal draws nothing.
    from rich.console import Console, RenderableType
    from rich.table import Table
    from rich.text import Text

__all__ = [
    "ArrayProgress",
    "EventLines",
    "Progress",
    "phase_text",
    "plain_console",
    "same_file",
]


OUTPUT_LINES = 8
"""How many of the task's last printed lines the live view shows under its timeline."""

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


class ArrayProgress:
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

    def done(self) -> int:
        counts = self.counts()
        return counts["succeeded"] + counts["failed"] + counts["aborted"]

    def summary(self) -> str:
        """``4/6 elements done  succeeded 3  failed 1  running 2`` (the live view's line, as plain text)."""
        counts = self.counts()
        groups = "  ".join(f"{group} {count}" for group, count in counts.items() if count)
        return f"{self.done()}/{len(self.phases)} elements done  {groups}".rstrip()

    def render(self) -> RenderableType:
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        counts = self.counts()
        total = len(self.phases)
        done = self.done()
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
            parts.append(Text(f"element {index} failed: {error_text(reason, 200)}", style="red"))
        return Group(*parts)


class Progress:
    """The live view: one line per phase event, and a status line that ticks; for a map, its elements."""

    def __init__(
        self,
        console: Console | None,
        key: str,
        *,
        output: Callable[[], str] | None = None,
        outline: Sequence[NodeOutline] | None = None,
    ) -> None:
        self._console = console
        self.key = key
        self.started = time.monotonic()
        self.events: list[Event] = []
        self.array: ArrayProgress | None = None
        self.output = output
        """What the running attempt's container has printed so far (the embedded cluster's log file), shown
        under the timeline as it grows."""
        self.outline = outline
        self.workflow: WorkflowNodes | None = WorkflowNodes(outline) if outline is not None else None
        """A workflow's nodes (from its outline, :func:`~taskplug.cli._workflow_view.workflow_outline`, or
        from its first node or workflow event when none was given)."""

    @property
    def console(self) -> Console:
        """The console it draws on: the one given, or (None given) a plain console on stderr, made when first
        asked for."""
        if self._console is None:
            self._console = plain_console(stderr=True)
        return self._console

    @console.setter
    def console(self, console: Console) -> None:
        self._console = console

    def on_event(self, key: str, event: Event) -> None:
        if key != self.key:
            return
        if event.kind != "task" or event.node is not None:
            if self.workflow is None:
                self.workflow = WorkflowNodes()
            self.workflow.on_event(event)
            return
        self.events.append(event)
        if event.external_resources is not None:
            if self.array is None:
                self.array = ArrayProgress()
            self.array.update(event.external_resources)

    def seed(self, records: Sequence[NodeRecord], *, workflow_state: Mapping[str, Any] | None) -> None:
        """Start a workflow's view from its stored node records (a resumed run: its finished nodes send no
        events again)."""
        if self.workflow is None:
            self.workflow = WorkflowNodes(self.outline)
        self.workflow.apply_records(records, workflow_state=workflow_state)

    def __rich__(self) -> RenderableType:
        # What a rich Live refreshing on its own renders: the elapsed time ticks between events.
        return self.render()

    def render(self) -> RenderableType:
        from rich.console import Group
        from rich.text import Text

        parts: list[RenderableType] = []
        if self.workflow is not None:
            # As many node lines as the terminal holds under the header, the notes and the task's output.
            height = self.console.size.height
            rows = max(5, height - 8 - (OUTPUT_LINES + 1 if self.output is not None else 0))
            elapsed = Text(f"{time.monotonic() - self.started:5.1f}s elapsed", style="dim")
            parts.extend((self.workflow.render(max_rows=rows), elapsed))
        else:
            parts.append(self._timeline())
        if self.array is not None:
            parts.append(self.array.render())
        printed = self.output() if self.output is not None else ""
        lines = printed.splitlines()[-OUTPUT_LINES:]
        if lines:
            what = (
                "the output a node's task printed last (taskplug logs --node for a node's)"
                if self.workflow is not None
                else "the task's output (taskplug logs for all of it)"
            )
            parts.append(Text(f"{what}:", style="dim"))
            # What the task prints is plain text, never Rich markup.
            parts.extend(Text(f"  | {line[:200]}") for line in lines)
        return parts[0] if len(parts) == 1 else Group(*parts)

    def _timeline(self) -> Table:
        from rich.table import Table
        from rich.text import Text

        table = Table(box=None, show_header=True, header_style="bold")
        for column in ("attempt", "phase", "version", "reason", "elapsed"):
            table.add_column(column)
        # A map's events come one per round: its elements' view below says more than a long list of them.
        shown = self.events[-6:] if self.array is not None else self.events[-15:]
        if len(shown) < len(self.events):
            left_out = len(self.events) - len(shown)
            table.add_row("…", Text(f"{left_out} earlier event(s) not shown", style="dim"), "", "", "")
        for event in shown:
            # Reasons come from Kubernetes ("... [container-name]"): plain text, never Rich markup.
            reason = Text(error_text(event.reason, 160))
            table.add_row(str(event.attempt), phase_text(event.phase), str(event.version), reason, "")
        elapsed = f"{time.monotonic() - self.started:5.1f}s"
        current = self.events[-1].phase if self.events else "Submitting"
        table.add_row("", phase_text(current), "", "", elapsed)
        return table


class EventLines:
    """The events of one execution as lines written as they happen, for a stream that is not a terminal (a
    pipe, a file: ``taskplug run … > log``), where a live view would write nothing until it ends. Each line
    is flushed, so that a run killed mid-way leaves what it saw."""

    def __init__(self, stream: TextIO, key: str, *, outline: Sequence[NodeOutline] | None = None) -> None:
        self.stream = stream
        self.key = key
        self.started = time.monotonic()
        self.array: ArrayProgress | None = None
        self.outline = outline
        self.workflow: WorkflowNodes | None = WorkflowNodes(outline) if outline is not None else None
        self.arrays: dict[str, ArrayProgress] = {}

    def seed(self, records: Sequence[NodeRecord], *, workflow_state: Mapping[str, Any] | None) -> None:
        """Start from a workflow's stored node records (a resumed run), as :meth:`Progress.seed`."""
        if self.workflow is None:
            self.workflow = WorkflowNodes(self.outline)
        self.workflow.apply_records(records, workflow_state=workflow_state)

    def on_event(self, key: str, event: Event) -> None:
        if key != self.key:
            return
        if event.kind != "task" or event.node is not None:
            if self.workflow is None:
                self.workflow = WorkflowNodes()
            self._write(self._workflow_lines(event, self.workflow))
            return
        reason = error_text(event.reason)
        lines = [f"{time.monotonic() - self.started:7.1f}s  attempt {event.attempt}  {event.phase}"]
        if reason:
            lines[0] += f"  {reason}"
        if event.cache is not None:  # a cacheable task: where its result came from or went
            lines[0] += f"  [{event.cache.get('status')}]"
        if event.external_resources is not None:
            # A map task: what its elements did, as the live view shows it — the counts, and each failure.
            lines[0] += f"  ({len(event.external_resources)} element(s) changed)"
            if self.array is None:
                self.array = ArrayProgress()
            self.array.update(event.external_resources)
            lines.append(f"          {self.array.summary()}")
            for resource in event.external_resources:
                failed = resource.get("phase") in ("PermanentFailure", "RetryableFailure")
                if failed and resource.get("reason"):
                    text = error_text(str(resource["reason"]), 200)
                    lines.append(f"          element {resource.get('index')} failed: {text}")
        self._write(lines)

    def _workflow_lines(self, event: Event, workflow: WorkflowNodes) -> list[str]:
        """A workflow's event as lines: ``n1 double: Running`` for a node's, ``n1 double: attempt 0 Queued
        …`` for its task's, ``workflow: Running`` for the workflow's; the workflow's end names the nodes
        that failed and their errors. Start and end nodes' events say nothing."""
        view = workflow.on_event(event)
        at = f"{time.monotonic() - self.started:7.1f}s  "
        if event.kind == "workflow":
            if workflow.ended:
                return [at + workflow.end_line()]
            reason = f"  {error_text(event.reason)}" if event.reason else ""
            return [f"{at}workflow: {event.phase}{reason}"]
        if view is None:
            return []
        if event.kind == "node":
            line = f"{at}{view.label}: {event.phase}"
            if event.reason:
                line += f"  {error_text(event.reason)}"
            return [line]
        reason = error_text(event.reason)
        line = f"{at}{view.label}: attempt {event.attempt} {event.phase}"
        if reason:
            line += f"  {reason}"
        lines = [line]
        if event.external_resources is not None:
            array = self.arrays.setdefault(view.id, ArrayProgress())
            array.update(event.external_resources)
            lines.append(f"          {view.label}: {array.summary()}")
            lines.extend(_element_failures(view, event.external_resources))
        return lines

    def _write(self, lines: list[str]) -> None:
        if not lines:
            return
        try:
            self.stream.write("\n".join(lines) + "\n")
            self.stream.flush()
        except (OSError, ValueError):  # a closed pipe: the run goes on, its outcome still decides the exit
            pass


def _element_failures(view: NodeView, resources: list[dict[str, object]]) -> list[str]:
    lines = []
    for resource in resources:
        failed = resource.get("phase") in ("PermanentFailure", "RetryableFailure")
        if failed and resource.get("reason"):
            text = error_text(str(resource["reason"]), 200)
            lines.append(f"          {view.label}: element {resource.get('index')} failed: {text}")
    return lines


def same_file(a: TextIO, b: TextIO) -> bool:
    """Whether two streams write to the same file (``> log 2>&1``)."""
    try:
        one, two = os.fstat(a.fileno()), os.fstat(b.fileno())
    except (OSError, ValueError):
        return False
    return (one.st_dev, one.st_ino) == (two.st_dev, two.st_ino)


def phase_text(phase: str) -> Text:
    from rich.text import Text

    style = {
        "Success": "green",
        "RetryableFailure": "yellow",
        "PermanentFailure": "red",
        "Aborted": "red",
    }.get(phase, "cyan")
    return Text(phase, style=style)


def plain_console(*, stderr: bool = False) -> Console:
    """A console that never reads its text as Rich markup or emoji codes: what it prints comes from tasks,
    errors and the cluster (``[bold]``, ``[SystemError]``, ``:x:`` are text there); styles are given as
    :class:`~rich.text.Text` styles."""
    from rich.console import Console

    return Console(stderr=stderr, markup=False, emoji=False, highlight=False)
