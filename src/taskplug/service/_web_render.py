"""What the web view's templates are given: rows turned into values a page shows, with no I/O.

Phases become badge classes, times become "3.2 s" and "12:04:05", log links keep only http(s) addresses (a
``javascript:`` URI a plugin's template produced is shown as text, never as a link), and the attempts become
the bars of an inline SVG timeline. The Jinja environment autoescapes everything it renders.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final
from urllib.parse import quote, urlsplit

import yaml
from jinja2 import Environment, PackageLoader, select_autoescape

from taskplug.core import Phase
from taskplug.executor import NodePhase

__all__ = [
    "NODE_PHASES",
    "PHASES",
    "Bar",
    "environment",
    "group_of",
    "human_duration",
    "log_links",
    "node_phase_name",
    "timeline",
]

PHASES: Final = tuple(str(p) for p in Phase)
"""The phase names an execution's row takes (the plugin phases, as ``taskplug run`` prints them)."""

NODE_PHASES: Final = tuple(str(phase) for phase in NodePhase)
"""A map element's node phase by number (propeller's ``v1alpha1.NodePhase``, plus taskplug's Aborted = 13),
as the executor stores it in ``taskplug_nodes.record``."""


def node_phase_name(number: int) -> str:
    return NODE_PHASES[number] if 0 <= number < len(NODE_PHASES) else f"Phase{number}"


_GROUPS: Final = {
    "Success": "succeeded",
    "Succeeded": "succeeded",
    "PermanentFailure": "failed",
    "Failed": "failed",
    "TimedOut": "failed",
    "RetryableFailure": "retrying",
    "Aborted": "aborted",
    "Running": "running",
    "Initializing": "running",
    "Failing": "failed",
    "Succeeding": "running",
    "DynamicRunning": "running",
    "TimingOut": "failed",
    "Skipped": "aborted",
    "Recovered": "succeeded",
}


def group_of(phase: str) -> str:
    """The badge a phase wears: succeeded, failed, retrying, aborted, running or waiting."""
    return _GROUPS.get(phase, "waiting")


def human_duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def _when(value: datetime | None) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if value is not None else ""


def _iso(value: datetime | None) -> str:
    return value.isoformat() if value is not None else ""


def _elapsed(start: datetime | None, end: datetime | None) -> str:
    if start is None:
        return ""
    return human_duration(((end or datetime.now(UTC)) - start).total_seconds())


def log_links(logs: object) -> list[dict[str, Any]]:
    """``[{name, uri, href}]`` of a logs column: ``href`` only for an http(s) URI."""
    if not isinstance(logs, Sequence) or isinstance(logs, str):
        return []
    out = []
    for entry in logs:
        if not isinstance(entry, Mapping):
            continue
        uri = str(entry.get("uri", ""))
        scheme = urlsplit(uri).scheme.lower()
        out.append(
            {
                "name": str(entry.get("name", "") or uri),
                "uri": uri,
                "href": uri if scheme in ("http", "https") else None,
            }
        )
    return out


@dataclass(frozen=True, slots=True)
class Bar:
    """One bar of the timeline, in percent of its width."""

    label: str
    group: str
    left: float
    width: float
    title: str


def timeline(execution: Mapping[str, Any], attempts: Sequence[Mapping[str, Any]]) -> list[Bar]:
    """Bars from the submission to the end (or now): waiting before the first attempt, each attempt from
    its start to its end, and the gaps between attempts (back-off) as waiting."""
    start: datetime = execution["created_at"]
    end: datetime = execution["finished_at"] or datetime.now(UTC)
    span = max((end - start).total_seconds(), 1e-3)

    def pct(t: datetime) -> float:
        return min(max((t - start).total_seconds() / span * 100, 0.0), 100.0)

    bars: list[Bar] = []
    cursor = start
    for attempt in attempts:
        began = attempt["started_at"]
        if began is None:
            continue
        if began > cursor:
            gap = "queued" if cursor == start else "back-off"
            bars.append(
                Bar(
                    gap, "waiting", pct(cursor), pct(began) - pct(cursor), f"{gap}: {_elapsed(cursor, began)}"
                )
            )
        ended = attempt["finished_at"] or end
        label = f"attempt {attempt['attempt']}"
        bars.append(
            Bar(
                label,
                group_of(str(attempt["phase"])),
                pct(began),
                max(pct(ended) - pct(began), 0.5),
                f"{label}: {attempt['phase']}, {_elapsed(began, ended)}",
            )
        )
        cursor = ended
    return bars


def _path_part(value: object) -> str:
    """One URL path segment: every reserved character (``/`` too) percent-encoded."""
    return quote(str(value), safe="")


def _pretty_json(value: object) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str)


def _pretty_yaml(value: object) -> str:
    return str(yaml.safe_dump(value, sort_keys=False, default_flow_style=False, allow_unicode=True))


def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("taskplug.service", "web/templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        group=group_of,
        duration=human_duration,
        when=_when,
        iso=_iso,
        pretty_json=_pretty_json,
        pretty_yaml=_pretty_yaml,
        log_links=log_links,
        path_part=_path_part,
    )
    env.globals.update(elapsed=_elapsed, phases=PHASES)
    return env
