"""``taskplug status``: the phase a plugin reports for an observed object (``--resource``); without one, what
the local state DB knows of an execution (``cli/_state_status.py``).

The object is read as any file taskplug reads (``taskplug.core.load_document``: a size cap, strict UTF-8,
bounded YAML; JSON is YAML). A Pod is checked field by field before its status is read (``taskplug.k8s``'s
status helpers: a field of the wrong type names its path); any other kind is read by its plugin, and what that
plugin raises on an object it cannot read names the object. Either way: exit 2, no traceback.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import click

from taskplug.cli._output import dump, handles_bad_input
from taskplug.core import ConfigError, Phase, PhaseInfo, SpecError, TaskplugError, load_document
from taskplug.executor import EXECUTOR_SECTION, ExecutionSpec, Platform, load_spec, observed_phase
from taskplug.k8s import PluginState, describe_object

__all__ = ["observed_status", "status"]

_MAX_DETAIL: Final = 500


def _read_document(path: Path, what: str) -> Any:
    return load_document(path, f"{what} {path}", what="the file")


def observed_status(
    platform: Platform, spec: ExecutionSpec, resource: Any, *, now: datetime, state: PluginState
) -> PhaseInfo:
    """The PhaseInfo the task's plugin reports for ``resource``, or a :class:`~taskplug.core.SpecError`:
    for a Pod, one naming the field of the wrong type; for any kind, one naming the object when its plugin
    cannot read it."""
    if not isinstance(resource, dict):
        raise SpecError("--resource", "must be a JSON object (one Kubernetes object)")
    task_type = spec.template.type
    # Whether a Kubernetes plugin runs this task type at all is the spec's question, asked before the
    # object is: its error must not be read as the object's.
    platform.k8s_entry_for(task_type)
    try:
        return observed_phase(
            platform,
            spec,
            resource,
            now=now,
            state=state,
            data_root=platform.config.get(EXECUTOR_SECTION).data_root,
        )
    except (SpecError, ConfigError):
        raise  # a Pod's field of the wrong type (taskplug.k8s names the object and the field), or a config
    except Exception as e:
        # A custom resource's status has no schema to check first: what its plugin raises on it is the
        # answer, "could not decide" (a PluginError) or a crash on a value it did not expect. The plugin
        # manager names the object the same way for a running task.
        detail = str(e) if isinstance(e, TaskplugError) else f"{type(e).__name__}: {e}"
        if len(detail) > _MAX_DETAIL:  # the object's own values may be in it
            detail = detail[: _MAX_DETAIL - 3] + "..."
        raise SpecError(
            "--resource",
            f"{describe_object(resource) or 'object ?'}: no phase from the plugin for task type [{task_type}]: {detail}",
        ) from e


_UINT32_MAX: Final = 2**32 - 1


def _plugin_state(data: Any) -> PluginState:
    if not isinstance(data, dict):
        raise SpecError(
            "--state", 'must be a JSON object such as {"phase": "Queued", "phaseVersion": 0, "reason": ""}'
        )
    phase = data.get("phase", 0)
    try:
        if isinstance(phase, str):
            parsed = Phase.from_name(phase)
        elif isinstance(phase, int) and not isinstance(phase, bool):
            parsed = Phase(phase)
        else:
            raise ValueError(f"must be a phase name such as Queued, or its number, got {phase!r}")
    except ValueError as e:
        raise SpecError("--state.phase", str(e)) from None
    version = data.get("phaseVersion", data.get("version", 0))
    # Flyte's PhaseInfo version is a uint32.
    if not isinstance(version, int) or isinstance(version, bool) or not 0 <= version <= _UINT32_MAX:
        raise SpecError(
            "--state.phaseVersion", f"must be an integer from 0 to {_UINT32_MAX}, got {version!r}"
        )
    reason = data.get("reason", "")
    if not isinstance(reason, str):
        raise SpecError("--state.reason", f"must be a string, got {reason!r}")
    return PluginState(parsed, version, reason)


def _parse_now(value: str | None) -> datetime:
    if value is None:
        return datetime.now(UTC)
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        parsed = parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
        parsed.astimezone(UTC)  # year 1 east of Greenwich or 9999 west of it is out of range in UTC
    except (ValueError, OverflowError):
        raise SpecError(
            "--now", f"must be an RFC 3339 time such as 2026-01-01T00:00:00Z, got {value!r}"
        ) from None
    return parsed


@click.command()
@click.argument("target", required=False, metavar="[SPEC | KEY]")
@click.option(
    "--resource",
    "resource_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The observed object as JSON or YAML (e.g. kubectl get pod NAME -o json): print the PhaseInfo the "
    "plugin of SPEC's task reports for it.",
)
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--now", "now", help="With --resource: the current time, RFC 3339 (default: now).")
@click.option(
    "--state",
    "state_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="With --resource: the plugin state from the last round, as JSON {phase, phaseVersion, reason}.",
)
@click.option(
    "--state-db",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Without --resource: the state DB to read [default: the config's executor.state-db, "
    ".taskplug/state.db].",
)
@click.option(
    "-o",
    "--output",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Without --resource: a table, or one JSON document.",
)
@handles_bad_input
def status(
    target: str | None,
    resource_path: Path | None,
    config_path: Path | None,
    now: str | None,
    state_path: Path | None,
    state_db: Path | None,
    fmt: str,
) -> None:
    """Print an execution's state from the state DB (a workflow's nodes), or the PhaseInfo the plugin reports
    for an observed object.

    Without --resource: KEY is an execution's key PROJECT/DOMAIN/NAME/NODE (or its name alone) in the state
    DB `taskplug run` used; without KEY, every execution it holds is listed. With --resource: SPEC is the
    execution spec whose task's plugin reads the object, and the PhaseInfo is printed as JSON.
    """
    if resource_path is None:
        if target is not None and Path(target).is_file():
            # A spec file: the observed-object form, its object missing.
            raise click.MissingParameter(param_hint="'--resource'", param_type="option")
        if state_path is not None or now is not None:
            raise SpecError("--state" if state_path is not None else "--now", "only with --resource")
        from taskplug.cli._state_status import execution_status

        if state_db is None:
            state_db = Path(Platform.load(config_path).config.get(EXECUTOR_SECTION).state_db)
        execution_status(state_db, target, as_json=fmt == "json")
        return
    if target is None:
        raise click.MissingParameter(param_hint="'SPEC'", param_type="argument")
    if state_db is not None:
        raise SpecError("--state-db", "not with --resource: the observed object is read, not the state DB")
    platform = Platform.load(config_path)
    loaded = load_spec(Path(target), fresh_name=False)
    resource = _read_document(resource_path, "--resource")
    state = _plugin_state(_read_document(state_path, "--state")) if state_path else PluginState()
    info = observed_status(platform, loaded, resource, now=_parse_now(now), state=state)
    click.echo(dump(info.to_json()), nl=False)
