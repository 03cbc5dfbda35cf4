"""The ``core-sleep`` core plugin (task type ``core-sleep``): a task that only waits for its one duration input.

Follows flyteplugins/go/tasks/plugins/core/sleep/plugin.go (Flyte 1, ``master``). A bad task (not exactly one
DURATION input, any output, a missing, non-duration or negative value) is a permanent USER failure
``BadTaskSpecification``; a template or inputs that cannot be read is an error (retried). A zero duration
succeeds at once; otherwise the first round records the start time and the task is Running until the
duration has passed. No outputs are written.

Wake-up: like Flyte's plugin, this one asks for none. Propeller re-evaluates a running task every
``workflow-reeval-duration``; the executor runs it every ``executor.resync-period``, so the task succeeds at
the first round after its duration is over (up to one resync period late).

Deviation: Flyte keeps the start time in the plugin's memory (keyed by generated name), so a propeller
restart restarts the sleep. It is kept in the plugin state here, so a resumed executor continues the sleep
where it was.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Final

from flyteidl.core import types_pb2

from taskplug.core import (
    DEFAULT_PHASE_VERSION,
    BadTaskSpecification,
    Clock,
    ErrorCode,
    InputReader,
    PhaseInfo,
    PluginEntry,
    PluginError,
    PluginProperties,
    PluginStateReader,
    SetupContext,
    SystemClock,
    TaskExecutionContext,
    TaskInfo,
    TaskReader,
    Transition,
)

__all__ = [
    "PLUGIN_STATE_VERSION",
    "SLEEP_TASK_TYPE",
    "SleepPlugin",
    "plugin_entries",
    "resolve_sleep_duration",
]

SLEEP_TASK_TYPE: Final = "core-sleep"
PLUGIN_STATE_VERSION: Final = 1
_START_TIME: Final = "startTime"


def resolve_sleep_duration(task_reader: TaskReader, input_reader: InputReader) -> timedelta:
    """The duration the task sleeps (Flyte's resolveSleepDuration), checked in Flyte's order.

    Raises BadTaskSpecification for a task that can never run (the plugin reports it as a failure), and
    PluginError when the template or the inputs cannot be read (the round is retried).
    """
    try:
        template = task_reader.read()
    except Exception as e:
        raise PluginError(ErrorCode.SYSTEM_ERROR, f"failed to read task template: {e}") from e
    if template is None:
        raise PluginError(ErrorCode.SYSTEM_ERROR, "nil task template")
    interface = template.interface if template.HasField("interface") else None
    inputs = interface.inputs.variables if interface is not None else {}
    if len(inputs) != 1:
        raise BadTaskSpecification(f"task type [{SLEEP_TASK_TYPE}] requires exactly one duration input")
    if interface is not None and len(interface.outputs.variables) != 0:
        raise BadTaskSpecification(f"task type [{SLEEP_TASK_TYPE}] does not support outputs")
    [(name, variable)] = inputs.items()
    # A type that is not simple reads as simple NONE, as Go's GetSimple() does.
    if variable.type.simple != types_pb2.SimpleType.DURATION:
        raise BadTaskSpecification(f"input [{name}] must be typed as duration")
    try:
        literals = input_reader.get()
    except Exception as e:
        raise PluginError(ErrorCode.SYSTEM_ERROR, f"failed to read task inputs: {e}") from e
    if literals is None:
        raise BadTaskSpecification(f"task type [{SLEEP_TASK_TYPE}] requires a duration input value")
    if name not in literals.literals:
        raise BadTaskSpecification(f"duration input [{name}] is missing")
    literal = literals.literals[name]
    if not (
        literal.WhichOneof("value") == "scalar"
        and literal.scalar.WhichOneof("value") == "primitive"
        and literal.scalar.primitive.WhichOneof("value") == "duration"
    ):
        raise BadTaskSpecification(f"duration input [{name}] must be a duration literal")
    duration = literal.scalar.primitive.duration
    # Checked on the message, not the timedelta: a sub-microsecond negative duration is negative in Go too.
    if duration.seconds < 0 or duration.nanos < 0:
        raise BadTaskSpecification(f"duration input [{name}] must be non-negative")
    result: timedelta = duration.ToTimedelta()
    return result


def _recorded_start_time(reader: PluginStateReader) -> datetime | None:
    _, state = reader.get()
    if state is None:
        return None
    raw = state.get(_START_TIME)
    try:
        parsed = datetime.fromisoformat(raw) if isinstance(raw, str) else None
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise PluginError(
            ErrorCode.CORRUPTED_PLUGIN_STATE,
            f"core-sleep plugin state has no valid {_START_TIME}: {dict(state)}",
        )
    return parsed


class SleepPlugin:
    """Running until the task's duration input has passed since its first round, then Success."""

    def __init__(self, *, clock: Clock | None = None) -> None:
        self._clock: Clock = clock or SystemClock()

    @property
    def id(self) -> str:
        return SLEEP_TASK_TYPE

    def get_properties(self) -> PluginProperties:
        return PluginProperties()

    async def handle(self, tctx: TaskExecutionContext) -> Transition:
        now = self._clock.now()
        try:
            duration = resolve_sleep_duration(tctx.task_reader, tctx.input_reader)
        except BadTaskSpecification as e:
            return Transition.to(
                PhaseInfo.failure(ErrorCode.BAD_TASK_SPECIFICATION, e.message, TaskInfo(occurred_at=now))
            )
        if duration == timedelta(0):
            return Transition.to(PhaseInfo.success(TaskInfo(occurred_at=now)))
        start = _recorded_start_time(tctx.plugin_state_reader)
        if start is None:
            start = now
            tctx.plugin_state_writer.put(PLUGIN_STATE_VERSION, {_START_TIME: start.isoformat()})
        if now - start >= duration:
            return Transition.to(PhaseInfo.success(TaskInfo(occurred_at=now)))
        return Transition.to(PhaseInfo.running(DEFAULT_PHASE_VERSION, TaskInfo(occurred_at=now)))

    async def abort(self, tctx: TaskExecutionContext) -> None:
        return None

    async def finalize(self, tctx: TaskExecutionContext) -> None:
        # Flyte forgets the in-memory start time here; the plugin state it lives in here is dropped by the
        # executor with the attempt, and a new attempt starts a new sleep, as in Flyte.
        return None


def _load(setup: SetupContext) -> SleepPlugin:
    return SleepPlugin(clock=setup.clock)


def plugin_entries() -> list[PluginEntry]:
    """The sleep plugin's registration: a core plugin for task type ``core-sleep``, not a default."""
    return [
        PluginEntry(
            id=SLEEP_TASK_TYPE,
            registered_task_types=(SLEEP_TASK_TYPE,),
            load_plugin=_load,
            is_default=False,
        )
    ]
