"""The core-sleep plugin, rule by rule (Flyte's plugins/core/sleep/plugin.go), with a fake clock.

Each case drives ``handle`` as the executor does: the plugin state one round writes is what the next round
reads; time only moves when the test moves the clock.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest
from flyteidl.core import literals_pb2

from taskplug.core import (
    ErrorCode,
    ErrorKind,
    FakeClock,
    Phase,
    PluginEntry,
    PluginError,
    PluginKind,
    PluginRegistry,
    PluginStateHolder,
    SetupContext,
    StaticInputReader,
    StaticTaskExecutionContext,
    load_plugin,
)
from taskplug.plugins import sleep
from taskplug.plugins.sleep import SLEEP_TASK_TYPE, SleepPlugin, plugin_entries, resolve_sleep_duration
from taskplug.testing import DEFAULT_EXECUTION, fake_task_context, next_round

DURATION = {"type": {"simple": "DURATION"}}


def duration(value: str) -> dict[str, Any]:
    """A duration input as Literal JSON (plain values cannot carry a DURATION)."""
    return {"scalar": {"primitive": {"duration": value}}}


def template(inputs: dict[str, Any] | None, outputs: dict[str, Any] | None = None) -> dict[str, Any]:
    document: dict[str, Any] = {
        "id": {"resourceType": "TASK", "project": "p", "domain": "d", "name": "nap", "version": "v1"},
        "type": SLEEP_TASK_TYPE,
    }
    if inputs is not None or outputs is not None:
        document["interface"] = {
            "inputs": {"variables": inputs or {}},
            "outputs": {"variables": outputs or {}},
        }
    return document


def context(
    inputs: dict[str, Any] | None = None,
    outputs: dict[str, Any] | None = None,
    values: dict[str, Any] | None = None,
    **execution: Any,
) -> StaticTaskExecutionContext:
    return fake_task_context(template(inputs, outputs), inputs=values, execution=execution or None)


def sleeping(value: str, **execution: Any) -> StaticTaskExecutionContext:
    return context({"d": DURATION}, None, {"d": duration(value)}, **execution)


# -- registration (pluginmachinery/registry.go) --------------------------------------------------------------------------------


def test_the_entry_is_a_core_plugin_for_task_type_core_sleep_that_is_not_a_default() -> None:
    [entry] = plugin_entries()
    assert isinstance(entry, PluginEntry)
    assert (entry.id, entry.registered_task_types, entry.kind, entry.is_default) == (
        "core-sleep",
        ("core-sleep",),
        PluginKind.CORE,
        False,
    )


def test_the_installed_entry_point_registers_core_sleep() -> None:
    registry = PluginRegistry.discover()
    [found] = [e for e in registry.entries if e.id == "core-sleep"]
    assert found.kind == PluginKind.CORE


async def test_the_loader_gives_the_plugin_the_setup_clock() -> None:
    clock = FakeClock()
    [entry] = plugin_entries()
    loaded = await load_plugin(entry, SetupContext(enqueue_owner=lambda ns, name: None, clock=clock))
    assert isinstance(loaded, SleepPlugin)
    assert loaded.id == "core-sleep"
    props = loaded.get_properties()
    assert (props.disable_node_level_caching, props.generated_name_max_length) == (False, None)
    tctx = sleeping("5s")
    await loaded.handle(tctx)
    assert tctx.plugin_state.written[2] == {"startTime": clock.now().isoformat()}


def test_the_package_exports_each_name_once() -> None:
    # The order is ruff's (RUF022, isort-style), checked by the linter.
    assert len(set(sleep.__all__)) == len(sleep.__all__)
    assert all(hasattr(sleep, name) for name in sleep.__all__)


# -- invalid tasks: PermanentFailure BadTaskSpecification, USER (plugin.go 90-140) ------------------------


def _without_inputs() -> StaticTaskExecutionContext:
    return dataclasses.replace(sleeping("5s"), input_reader=StaticInputReader(None))


def _input_missing() -> StaticTaskExecutionContext:
    return dataclasses.replace(sleeping("5s"), input_reader=StaticInputReader(literals_pb2.LiteralMap()))


INVALID: list[Any] = [
    pytest.param(
        lambda: context(), "task type [core-sleep] requires exactly one duration input", id="no-interface"
    ),
    pytest.param(
        lambda: context({}, {}), "task type [core-sleep] requires exactly one duration input", id="no-inputs"
    ),
    pytest.param(
        lambda: context({"a": DURATION, "b": DURATION}, None, {"a": duration("1s"), "b": duration("1s")}),
        "task type [core-sleep] requires exactly one duration input",
        id="two-inputs",
    ),
    pytest.param(
        lambda: context(
            {"a": DURATION, "b": DURATION}, {"o": DURATION}, {"a": duration("1s"), "b": duration("1s")}
        ),
        "task type [core-sleep] requires exactly one duration input",
        id="input-count-checked-before-outputs",
    ),
    pytest.param(
        lambda: context({"d": DURATION}, {"o": DURATION}, {"d": duration("1s")}),
        "task type [core-sleep] does not support outputs",
        id="an-output",
    ),
    pytest.param(
        lambda: context({"d": {"type": {"simple": "STRING"}}}, {"o": DURATION}, {"d": "1s"}),
        "task type [core-sleep] does not support outputs",
        id="outputs-checked-before-the-type",
    ),
    pytest.param(
        lambda: context({"d": {"type": {"simple": "STRING"}}}, None, {"d": "1s"}),
        "input [d] must be typed as duration",
        id="typed-string",
    ),
    pytest.param(
        lambda: context({"d": {"type": {"simple": "INTEGER"}}}, None, {"d": 5}),
        "input [d] must be typed as duration",
        id="typed-integer",
    ),
    pytest.param(
        lambda: context(
            {"d": {"type": {"collectionType": {"simple": "DURATION"}}}}, None, {"d": [duration("1s")]}
        ),
        "input [d] must be typed as duration",
        id="a-list-of-durations",
    ),
    pytest.param(_without_inputs, "task type [core-sleep] requires a duration input value", id="inputs-nil"),
    pytest.param(_input_missing, "duration input [d] is missing", id="value-missing"),
    pytest.param(
        lambda: dataclasses.replace(
            sleeping("5s"),
            input_reader=StaticInputReader(
                literals_pb2.LiteralMap(
                    literals={
                        "d": literals_pb2.Literal(
                            scalar=literals_pb2.Scalar(primitive=literals_pb2.Primitive(integer=5))
                        )
                    }
                )
            ),
        ),
        "duration input [d] must be a duration literal",
        id="an-integer-value",
    ),
    pytest.param(
        lambda: dataclasses.replace(
            sleeping("5s"),
            input_reader=StaticInputReader(
                literals_pb2.LiteralMap(
                    literals={"d": literals_pb2.Literal(collection=literals_pb2.LiteralCollection())}
                )
            ),
        ),
        "duration input [d] must be a duration literal",
        id="a-collection-value",
    ),
    pytest.param(lambda: sleeping("-1s"), "duration input [d] must be non-negative", id="negative"),
    pytest.param(
        lambda: sleeping("-0.000000001s"), "duration input [d] must be non-negative", id="negative-1ns"
    ),
]


@pytest.mark.parametrize(("make", "message"), INVALID)
async def test_an_invalid_task_is_a_permanent_user_failure_with_flytes_message(
    make: Any, message: str
) -> None:
    tctx = make()
    transition = await SleepPlugin(clock=FakeClock()).handle(tctx)
    info = transition.info
    assert info.phase is Phase.PERMANENT_FAILURE
    assert info.err is not None
    assert (info.err.code, info.err.message, info.err.kind) == (
        "BadTaskSpecification",
        message,
        ErrorKind.USER,
    )
    assert tctx.plugin_state.written == (False, 0, None)
    assert not tctx.output_writer.was_put


# -- unreadable template or inputs: an error, retried --------------------------------------------------------


class _BrokenTaskReader:
    path = "task.pb"

    def read(self) -> Any:
        raise OSError("no such object")


class _NilTaskReader:
    path = "task.pb"

    def read(self) -> Any:
        return None


class _BrokenInputReader:
    input_prefix = "in"
    input_path = "in/inputs.pb"

    def get(self) -> Any:
        raise OSError("read timeout")


@pytest.mark.parametrize(
    ("replace", "message"),
    [
        ({"task_reader": _BrokenTaskReader()}, "failed to read task template: no such object"),
        ({"task_reader": _NilTaskReader()}, "nil task template"),
        ({"input_reader": _BrokenInputReader()}, "failed to read task inputs: read timeout"),
    ],
    ids=["template-unreadable", "template-nil", "inputs-unreadable"],
)
async def test_what_cannot_be_read_is_an_error_not_a_failure(replace: dict[str, Any], message: str) -> None:
    tctx = dataclasses.replace(sleeping("5s"), **replace)
    with pytest.raises(PluginError) as caught:
        await SleepPlugin(clock=FakeClock()).handle(tctx)
    assert caught.value.message == message
    assert caught.value.code == ErrorCode.SYSTEM_ERROR


def test_resolve_reads_the_duration_to_the_microsecond() -> None:
    tctx = sleeping("90.25s")
    assert resolve_sleep_duration(tctx.task_reader, tctx.input_reader) == timedelta(
        seconds=90, milliseconds=250
    )


# -- the wait (plugin.go 58-78) ---------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["0s", "-0s"])
async def test_a_zero_duration_succeeds_at_once_without_recording_a_start_time(value: str) -> None:
    tctx = sleeping(value)
    transition = await SleepPlugin(clock=FakeClock()).handle(tctx)
    assert transition.info.phase is Phase.SUCCESS
    assert tctx.plugin_state.written == (False, 0, None)
    assert not tctx.output_writer.was_put


@pytest.mark.parametrize(
    ("elapsed", "phase"),
    [
        (0.0, Phase.RUNNING),
        (29.0, Phase.RUNNING),
        (29.999, Phase.RUNNING),
        (30.0, Phase.SUCCESS),
        (31.0, Phase.SUCCESS),
    ],
)
async def test_the_task_runs_until_the_duration_has_passed_since_its_first_round(
    elapsed: float, phase: Phase
) -> None:
    clock = FakeClock()
    plugin = SleepPlugin(clock=clock)
    tctx = sleeping("30s")
    started = clock.now()
    first = await plugin.handle(tctx)
    assert (first.info.phase, first.info.version) == (Phase.RUNNING, 0)
    assert first.info.info is not None and first.info.info.occurred_at == started
    assert tctx.plugin_state.written == (True, 1, {"startTime": started.isoformat()})

    await clock.advance(elapsed)
    later = next_round(tctx)
    transition = await plugin.handle(later)
    assert (transition.info.phase, transition.info.version) == (phase, 0)
    assert transition.info.info is not None and transition.info.info.occurred_at == clock.now()
    assert later.plugin_state.written == (False, 0, None)  # the start time is recorded once
    assert not later.output_writer.was_put  # no outputs, ever


async def test_a_restarted_plugin_continues_the_sleep_from_the_state() -> None:
    # Deviation from Flyte (Q15): Flyte's start times live in the plugin's memory; here in the plugin state.
    clock = FakeClock()
    tctx = sleeping("30s")
    await SleepPlugin(clock=clock).handle(tctx)
    await clock.advance(30)
    restarted = SleepPlugin(clock=clock)
    assert (await restarted.handle(next_round(tctx))).info.phase is Phase.SUCCESS


async def test_a_new_attempt_sleeps_again_and_finalize_and_abort_change_nothing() -> None:
    clock = FakeClock()
    plugin = SleepPlugin(clock=clock)
    first_attempt = sleeping("30s")
    await plugin.handle(first_attempt)
    await plugin.abort(first_attempt)
    await plugin.finalize(first_attempt)
    assert first_attempt.plugin_state.written[0]  # only the first round's put
    await clock.advance(30)
    second_attempt = sleeping("30s", id={**DEFAULT_EXECUTION["id"], "retryAttempt": 1})
    assert (await plugin.handle(second_attempt)).info.phase is Phase.RUNNING
    assert second_attempt.plugin_state.written[2] == {"startTime": clock.now().isoformat()}


@pytest.mark.parametrize(
    "state",
    [{}, {"startTime": "soon"}, {"startTime": "2026-01-01T00:00:00"}, {"startTime": None}],
    ids=["no-key", "not-a-time", "no-zone", "null"],
)
async def test_a_corrupted_state_is_an_error_with_flytes_code(state: dict[str, Any]) -> None:
    tctx = dataclasses.replace(sleeping("30s"), plugin_state=PluginStateHolder(1, state))
    with pytest.raises(PluginError) as caught:
        await SleepPlugin(clock=FakeClock()).handle(tctx)
    assert caught.value.code == ErrorCode.CORRUPTED_PLUGIN_STATE
