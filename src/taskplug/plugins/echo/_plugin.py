"""The ``echo`` core plugin (task type ``echo``): copies a task's one input to its one output.

Follows flyteplugins/go/tasks/plugins/testing/echo.go (Flyte 1, ``master``). flytekit's
``flytekit.core.task.Echo`` produces such tasks (no target, outputs ``o0…`` mirroring the inputs); propeller
runs them without creating anything. With ``plugins.echo.sleep-duration`` set, the task first stays Running
that long: the first round records its start time and starts a timer that wakes the execution (through the
setup context's ``enqueue_owner``) once the time is up, as Flyte's goroutine does.

Deviation: Flyte keeps the start time in the plugin's memory, so a propeller restart restarts the wait. It
is kept in the plugin state here, so a resumed executor continues the wait where it was (and re-arms the
timer for what is left of it).

Deviation: Flyte writes ``outputs.pb`` under the output prefix and hands over a remote-file output reader; a
core plugin here has no data store, so the outputs are handed to the executor in memory, as a web-API plugin
hands over the outputs a connector returned.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Final

from flyteidl.core import literals_pb2, tasks_pb2

from taskplug.core import (
    DEFAULT_PHASE_VERSION,
    Clock,
    ErrorCode,
    LiteralMapOutputReader,
    PhaseInfo,
    PluginEntry,
    PluginError,
    PluginProperties,
    PluginStateReader,
    SetupContext,
    SystemClock,
    TaskExecutionContext,
    TaskInfo,
    Transition,
)
from taskplug.k8s import owner_key
from taskplug.plugins.echo._config import ECHO_SECTION, EchoConfig

if TYPE_CHECKING:
    import asyncio

__all__ = [
    "ECHO_TASK_TYPE",
    "PLUGIN_STATE_VERSION",
    "EchoPlugin",
    "echo_outputs",
    "output_variable_mapping",
    "plugin_entries",
]

log = logging.getLogger(__name__)

ECHO_TASK_TYPE: Final = "echo"
PLUGIN_STATE_VERSION: Final = 1
_START_TIME: Final = "startTime"


# -- the copy (pure) --------------------------------------------------------------------------------------


def output_variable_mapping(template: tasks_pb2.TaskTemplate) -> dict[str, str]:
    """Input variable → the output variable it is copied to (Flyte's compileInputToOutputVariableMappings).

    Raises PluginError (a system error, retried: Flyte returns these as errors, not failure phases) when the
    numbers of inputs and outputs differ, or when there is more than one input.
    """
    inputs = template.interface.inputs.variables if template.HasField("interface") else {}
    outputs = template.interface.outputs.variables if template.HasField("interface") else {}
    if len(inputs) != len(outputs):
        raise PluginError(
            ErrorCode.SYSTEM_ERROR,
            f"the number of input [{len(inputs)}] and output [{len(outputs)}] variables does not match",
        )
    if len(inputs) > 1:
        raise PluginError(
            ErrorCode.SYSTEM_ERROR, "this plugin does not currently support more than one input variable"
        )
    # At most one of each now, so the only input goes to the only output (Flyte's "first unused output";
    # its "no castable output variable" error cannot happen with equal counts of at most one).
    return {name: output for name, output in zip(inputs, outputs, strict=True)}


def echo_outputs(
    mapping: Mapping[str, str], inputs: literals_pb2.LiteralMap | None
) -> literals_pb2.LiteralMap:
    """The output literal map: each mapped input's literal under its output name.

    An input the map lacks (or no inputs at all) gives an empty literal, as Go's nil literal marshals.
    """
    out = literals_pb2.LiteralMap()
    for input_name, output_name in mapping.items():
        literal = out.literals[output_name]  # created empty
        if inputs is not None and input_name in inputs.literals:
            literal.CopyFrom(inputs.literals[input_name])
    return out


# -- the plugin --------------------------------------------------------------------------------------------


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
            ErrorCode.CORRUPTED_PLUGIN_STATE, f"echo plugin state has no valid {_START_TIME}: {dict(state)}"
        )
    return parsed


class EchoPlugin:
    """Copies the one input to the one output, after ``plugins.echo.sleep-duration``."""

    def __init__(
        self,
        config: EchoConfig,
        *,
        enqueue_owner: Callable[[str, str], None],
        clock: Clock | None = None,
    ) -> None:
        self.config = config
        self._enqueue_owner = enqueue_owner
        self._clock: Clock = clock or SystemClock()
        # Generated name → the timer that wakes that execution when its sleep is over.
        self._timers: dict[str, asyncio.Task[None]] = {}

    @property
    def id(self) -> str:
        return ECHO_TASK_TYPE

    def get_properties(self) -> PluginProperties:
        return PluginProperties()

    @property
    def pending_wakeups(self) -> int:
        """Timers not yet fired (one per execution still sleeping)."""
        return sum(1 for timer in self._timers.values() if not timer.done())

    async def handle(self, tctx: TaskExecutionContext) -> Transition:
        sleep = self.config.sleep_duration
        # A negative sleep acts as none, as Go's time.Since(start) >= negative holds at once.
        if sleep <= timedelta(0):
            return self._copy_inputs_to_outputs(tctx)
        now = self._clock.now()
        start = _recorded_start_time(tctx.plugin_state_reader)
        if start is None:
            start = now
            tctx.plugin_state_writer.put(PLUGIN_STATE_VERSION, {_START_TIME: start.isoformat()})
        remaining = sleep - (now - start)
        if remaining <= timedelta(0):
            return self._copy_inputs_to_outputs(tctx)
        self._arm_timer(tctx, remaining)
        return Transition.to(PhaseInfo.running(DEFAULT_PHASE_VERSION, TaskInfo(occurred_at=now)))

    async def abort(self, tctx: TaskExecutionContext) -> None:
        return None

    async def finalize(self, tctx: TaskExecutionContext) -> None:
        # Flyte forgets the start time here (its goroutine still fires later, harmlessly); the start time is
        # plugin state here, so what is left to forget is the timer.
        import asyncio  # here, not at the top: discovery (every command) imports this module

        timer = self._timers.pop(tctx.metadata.task_execution_id.generated_name, None)
        if timer is not None:
            timer.cancel()
            # gather, not a suppressed await: a cancellation of finalize itself must still propagate.
            await asyncio.gather(timer, return_exceptions=True)

    async def aclose(self) -> None:
        """Stop every pending timer (the engine calls this when it unloads the plugin)."""
        import asyncio  # here, not at the top: discovery (every command) imports this module

        timers, self._timers = list(self._timers.values()), {}
        for timer in timers:
            timer.cancel()
        await asyncio.gather(*timers, return_exceptions=True)

    def _arm_timer(self, tctx: TaskExecutionContext, remaining: timedelta) -> None:
        # One timer per execution: the first round arms it; a round after a restart (state kept, timer lost)
        # or after a timer that fired a little early arms a new one for what is left.
        import asyncio  # here, not at the top: discovery (every command) imports this module

        name = tctx.metadata.task_execution_id.generated_name
        timer = self._timers.get(name)
        if timer is not None and not timer.done():
            return
        owner = owner_key(tctx.metadata)
        # The deadline is fixed now, not when the task first runs: time may pass before it does.
        deadline = self._clock.monotonic() + remaining.total_seconds()
        self._timers[name] = asyncio.create_task(self._wake_at(owner, deadline), name=f"echo-wakeup-{name}")

    async def _wake_at(self, owner: tuple[str, str], deadline: float) -> None:
        await self._clock.sleep(deadline - self._clock.monotonic())
        try:
            self._enqueue_owner(*owner)
        except Exception as e:  # the executor's resync still comes; Flyte logs and moves on too
            log.warning("failed to enqueue owner [%s/%s]: %s", owner[0], owner[1], e)

    def _copy_inputs_to_outputs(self, tctx: TaskExecutionContext) -> Transition:
        try:
            template = tctx.task_reader.read()
        except Exception as e:
            raise PluginError(ErrorCode.SYSTEM_ERROR, f"failed to read TaskTemplate: [{e}]") from e
        mapping = output_variable_mapping(template)
        if mapping:
            tctx.output_writer.put(LiteralMapOutputReader(echo_outputs(mapping, tctx.input_reader.get())))
        return Transition.to(PhaseInfo.success(TaskInfo(occurred_at=self._clock.now())))


# -- registration ------------------------------------------------------------------------------------------


def _load(setup: SetupContext) -> EchoPlugin:
    config = setup.config.get(ECHO_SECTION) if setup.config is not None else EchoConfig()
    return EchoPlugin(config, enqueue_owner=setup.enqueue_owner, clock=setup.clock)


def plugin_entries() -> list[PluginEntry]:
    """The echo plugin's registration: a core plugin for task type ``echo``, not a default."""
    return [
        PluginEntry(
            id=ECHO_TASK_TYPE,
            registered_task_types=(ECHO_TASK_TYPE,),
            load_plugin=_load,
            is_default=False,
            config_sections=(ECHO_SECTION,),
        )
    ]
