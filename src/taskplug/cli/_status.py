"""``taskplug status``: the phase a plugin reports for an observed object."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
import orjson

from taskplug.cli._output import dump, fail, handles_bad_input
from taskplug.core import Phase, SpecError
from taskplug.executor import EXECUTOR_SECTION, Platform, load_spec, observed_phase
from taskplug.k8s import PluginState

__all__ = ["status"]


def _read_json(path: Path, what: str) -> Any:
    try:
        return orjson.loads(path.read_bytes())
    except OSError as e:
        fail(f"{what}: cannot read {str(path)!r}: {e.strerror}")
    except orjson.JSONDecodeError as e:
        fail(f"{what}: {str(path)!r} is not valid JSON: {e}")


def _plugin_state(data: Any) -> PluginState:
    if not isinstance(data, dict):
        raise SpecError(
            "--state", 'must be a JSON object such as {"phase": "Queued", "phaseVersion": 0, "reason": ""}'
        )
    phase = data.get("phase", 0)
    try:
        parsed = Phase.from_name(phase) if isinstance(phase, str) else Phase(int(phase))
    except ValueError as e:
        raise SpecError("--state.phase", str(e)) from e
    version = data.get("phaseVersion", data.get("version", 0))
    if not isinstance(version, int) or version < 0:
        raise SpecError("--state.phaseVersion", f"must be a non-negative integer, got {version!r}")
    return PluginState(parsed, version, str(data.get("reason", "")))


def _parse_now(value: str | None) -> datetime:
    if value is None:
        return datetime.now(UTC)
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as e:
        raise SpecError(
            "--now", f"must be an RFC 3339 time such as 2026-01-01T00:00:00Z, got {value!r}"
        ) from e
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


@click.command()
@click.argument("spec", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--resource",
    "resource_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The observed object as JSON (e.g. kubectl get pod NAME -o json).",
)
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--now", "now", help="The current time, RFC 3339 (default: now).")
@click.option(
    "--state",
    "state_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The plugin state from the last round, as JSON {phase, phaseVersion, reason}.",
)
@handles_bad_input
def status(
    spec: Path, resource_path: Path, config_path: Path | None, now: str | None, state_path: Path | None
) -> None:
    """Print the PhaseInfo the plugin reports for an observed object, as JSON."""
    platform = Platform.load(config_path)
    loaded = load_spec(spec)
    resource = _read_json(resource_path, "--resource")
    if not isinstance(resource, dict):
        fail("--resource: must be a JSON object (one Kubernetes object)")
    state = _plugin_state(_read_json(state_path, "--state")) if state_path else PluginState()
    info = observed_phase(
        platform,
        loaded,
        resource,
        now=_parse_now(now),
        state=state,
        data_root=platform.config.get(EXECUTOR_SECTION).data_root,
    )
    click.echo(dump(info.to_json()), nl=False)
