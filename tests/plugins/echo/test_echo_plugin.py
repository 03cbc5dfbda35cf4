"""The echo core plugin, rule by rule (Flyte's plugins/testing/echo.go), with a fake clock.

Each case drives ``handle`` round after round as the executor does: the plugin state one round writes is what
the next round reads; time only moves when the test advances the clock.
"""

from __future__ import annotations

import dataclasses
import logging
from datetime import timedelta
from typing import Any

import pytest
from flyteidl.core import literals_pb2
from google.protobuf import json_format

from taskplug.core import (
    ConfigError,
    ErrorCode,
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
    literal_map_to_plain,
    load_platform_config,
    load_plugin,
)
from taskplug.k8s import PLUGINS_ROOT_SECTION, owner_key
from taskplug.plugins import echo
from taskplug.plugins.echo import (
    ECHO_SECTION,
    ECHO_TASK_TYPE,
    EchoConfig,
    EchoPlugin,
    echo_outputs,
    output_variable_mapping,
    plugin_entries,
)
from taskplug.testing import DEFAULT_EXECUTION, fake_task_context, next_round

INT = {"type": {"simple": "INTEGER"}}


def template(inputs: dict[str, Any] | None, outputs: dict[str, Any] | None) -> dict[str, Any]:
    """An echo task template; ``None`` for both leaves the interface out."""
    document: dict[str, Any] = {
        "id": {"resourceType": "TASK", "project": "p", "domain": "d", "name": "echo", "version": "v1"},
        "type": ECHO_TASK_TYPE,
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
) -> StaticTaskExecutionContext:
    return fake_task_context(template(inputs, outputs), inputs=values)


def plugin(sleep: str = "0s", clock: FakeClock | None = None) -> tuple[EchoPlugin, list[tuple[str, str]]]:
    woken: list[tuple[str, str]] = []
    config = EchoConfig.model_validate({"sleep-duration": sleep})
    return EchoPlugin(config, enqueue_owner=lambda ns, name: woken.append((ns, name)), clock=clock), woken


async def outputs_of(tctx: StaticTaskExecutionContext) -> dict[str, Any] | None:
    writer = tctx.output_writer
    if writer.reader is None:
        return None
    read = await writer.reader.read()
    return None if read is None else literal_map_to_plain(read)


# -- config (testing/config.go) ----------------------------------------------------------------------------


def test_the_section_is_plugins_echo_with_flytes_default_of_no_sleep() -> None:
    assert ECHO_SECTION.path == "plugins.echo"
    config = load_platform_config({}, [PLUGINS_ROOT_SECTION, ECHO_SECTION]).get(ECHO_SECTION)
    assert config.sleep_duration == timedelta(0)
    assert config.model_dump(mode="json", by_alias=True) == {"sleep-duration": "0s"}


@pytest.mark.parametrize(
    ("value", "expected"),
    [("5s", timedelta(seconds=5)), ("1m30s", timedelta(seconds=90)), ("250ms", timedelta(milliseconds=250))],
)
def test_sleep_duration_reads_go_durations(value: str, expected: timedelta) -> None:
    document = {"plugins": {"echo": {"sleep-duration": value}}}
    config = load_platform_config(document, [PLUGINS_ROOT_SECTION, ECHO_SECTION]).get(ECHO_SECTION)
    assert config.sleep_duration == expected


@pytest.mark.parametrize(
    ("section", "path"),
    [
        ({"sleep-time": "5s"}, "plugins.echo.sleep-time"),
        ({"sleep_duration": "5s"}, "plugins.echo.sleep_duration"),  # Flyte's key only, never the field name
        ({"sleep-duration": "five seconds"}, "plugins.echo.sleep-duration"),
    ],
)
def test_a_bad_key_or_value_is_refused_naming_its_path(section: dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_platform_config({"plugins": {"echo": section}}, [PLUGINS_ROOT_SECTION, ECHO_SECTION])
    assert caught.value.path == path


# -- registration (pluginmachinery/registry.go) --------------------------------------------------------------------------------


def test_the_entry_is_a_core_plugin_for_task_type_echo_that_is_not_a_default() -> None:
    [entry] = plugin_entries()
    assert isinstance(entry, PluginEntry)
    assert (entry.id, entry.registered_task_types, entry.kind, entry.is_default) == (
        "echo",
        ("echo",),
        PluginKind.CORE,
        False,
    )
    registry = PluginRegistry()
    registry.register(entry)
    assert [s.path for s in registry.config_sections] == ["plugins.echo"]


def test_the_installed_entry_point_registers_echo_with_its_section() -> None:
    registry = PluginRegistry.discover()
    [found] = [e for e in registry.entries if e.id == "echo"]
    assert found.kind == PluginKind.CORE
    assert ECHO_SECTION in registry.config_sections


async def test_the_loader_reads_plugins_echo_from_the_platform_config_and_uses_the_setup_clock() -> None:
    config = load_platform_config(
        {"plugins": {"echo": {"sleep-duration": "7s"}}}, [PLUGINS_ROOT_SECTION, ECHO_SECTION]
    )
    clock = FakeClock()
    [entry] = plugin_entries()
    loaded = await load_plugin(
        entry, SetupContext(enqueue_owner=lambda ns, name: None, clock=clock, config=config)
    )
    assert isinstance(loaded, EchoPlugin)
    assert loaded.id == "echo"
    assert loaded.config.sleep_duration == timedelta(seconds=7)
    tctx = context({"a": INT}, {"o0": INT}, {"a": 1})
    await loaded.handle(tctx)
    assert tctx.plugin_state.written[2] == {"startTime": clock.now().isoformat()}
    await loaded.aclose()


async def test_without_a_platform_config_the_loader_uses_the_defaults() -> None:
    [entry] = plugin_entries()
    loaded = await load_plugin(entry, SetupContext(enqueue_owner=lambda ns, name: None))
    assert isinstance(loaded, EchoPlugin)
    assert loaded.config == EchoConfig()


def test_the_package_exports_each_name_once() -> None:
    # The order is ruff's (RUF022, isort-style), checked by the linter.
    assert len(set(echo.__all__)) == len(echo.__all__)
    assert all(hasattr(echo, name) for name in echo.__all__)


# -- the copy (echo.go 93-171) ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("inputs", "outputs", "values", "expected"),
    [
        pytest.param({"a": INT}, {"o0": INT}, {"a": 42}, {"o0": 42}, id="one-input-to-the-one-output"),
        pytest.param({"x": INT}, {"x": INT}, {"x": -3}, {"x": -3}, id="same-name"),
        pytest.param(
            {"a": {"type": {"collectionType": {"simple": "STRING"}}}},
            {"o0": {"type": {"collectionType": {"simple": "STRING"}}}},
            {"a": ["p", "q"]},
            {"o0": ["p", "q"]},
            id="any-literal-verbatim",
        ),
    ],
)
async def test_one_input_is_copied_to_the_one_output_and_the_task_succeeds(
    inputs: dict[str, Any], outputs: dict[str, Any], values: dict[str, Any], expected: dict[str, Any]
) -> None:
    echo_plugin, _ = plugin()
    tctx = context(inputs, outputs, values)
    transition = await echo_plugin.handle(tctx)
    assert transition.info.phase is Phase.SUCCESS
    assert tctx.output_writer.was_put
    assert await outputs_of(tctx) == expected


async def test_the_output_literal_is_the_input_literal_itself() -> None:
    echo_plugin, _ = plugin()
    blob = {
        "scalar": {"blob": {"uri": "s3://bucket/key", "metadata": {"type": {"dimensionality": "MULTIPART"}}}}
    }
    tctx = context(
        {"a": {"type": {"blob": {"dimensionality": "MULTIPART"}}}},
        {"o0": {"type": {"blob": {"dimensionality": "MULTIPART"}}}},
        {"a": blob},
    )
    await echo_plugin.handle(tctx)
    assert tctx.output_writer.reader is not None
    read = await tctx.output_writer.reader.read()
    assert read is not None
    assert read.literals["o0"] == json_format.ParseDict(blob, literals_pb2.Literal())


@pytest.mark.parametrize(
    ("inputs", "outputs"),
    [
        pytest.param(None, None, id="no-interface"),
        pytest.param({}, {}, id="empty-interface"),
    ],
)
async def test_zero_inputs_succeed_without_putting_outputs(
    inputs: dict[str, Any] | None, outputs: dict[str, Any] | None
) -> None:
    echo_plugin, _ = plugin()
    tctx = context(inputs, outputs)
    transition = await echo_plugin.handle(tctx)
    assert transition.info.phase is Phase.SUCCESS
    assert not tctx.output_writer.was_put


@pytest.mark.parametrize(
    ("inputs", "outputs", "message"),
    [
        pytest.param(
            {"a": INT}, {}, "the number of input [1] and output [0] variables does not match", id="1-in-0-out"
        ),
        pytest.param(
            {},
            {"o0": INT},
            "the number of input [0] and output [1] variables does not match",
            id="0-in-1-out",
        ),
        pytest.param(
            {"a": INT, "b": INT},
            {"o0": INT},
            "the number of input [2] and output [1] variables does not match",
            id="counts-checked-first",
        ),
        pytest.param(
            {"a": INT, "b": INT},
            {"o0": INT, "o1": INT},
            "this plugin does not currently support more than one input variable",
            id="two-inputs",
        ),
    ],
)
async def test_a_mismatched_interface_is_an_error_not_a_failure_phase(
    inputs: dict[str, Any], outputs: dict[str, Any], message: str
) -> None:
    echo_plugin, _ = plugin()
    values = {name: 1 for name in inputs}
    tctx = context(inputs, outputs, values)
    with pytest.raises(PluginError) as caught:
        await echo_plugin.handle(tctx)
    assert caught.value.message == message
    assert caught.value.code == ErrorCode.SYSTEM_ERROR
    assert not tctx.output_writer.was_put


@pytest.mark.parametrize(
    "inputs",
    [
        pytest.param(None, id="no-inputs-at-all"),
        pytest.param(literals_pb2.LiteralMap(), id="input-missing-from-the-map"),
    ],
)
async def test_an_input_value_that_is_not_there_becomes_an_empty_output_literal_as_gos_nil_does(
    inputs: literals_pb2.LiteralMap | None,
) -> None:
    echo_plugin, _ = plugin()
    tctx = dataclasses.replace(
        context({"a": INT}, {"o0": INT}, {"a": 1}), input_reader=StaticInputReader(inputs)
    )
    transition = await echo_plugin.handle(tctx)
    assert transition.info.phase is Phase.SUCCESS
    assert tctx.output_writer.reader is not None
    read = await tctx.output_writer.reader.read()
    assert read == literals_pb2.LiteralMap(literals={"o0": literals_pb2.Literal()})


def test_the_mapping_and_the_outputs_are_pure_and_leave_the_inputs_alone() -> None:
    tctx = context({"a": INT}, {"o0": INT}, {"a": 5})
    mapping = output_variable_mapping(tctx.task_reader.read())
    assert mapping == {"a": "o0"}
    inputs = tctx.input_reader.get()
    assert inputs is not None
    before = inputs.SerializeToString()
    assert literal_map_to_plain(echo_outputs({"a": "o0", "missing": "o1"}, inputs)) == {"o0": 5, "o1": {}}
    assert inputs.SerializeToString() == before


async def test_a_template_that_cannot_be_read_is_an_error() -> None:
    class Broken:
        path = "task.pb"

        def read(self) -> Any:
            raise OSError("gone")

    echo_plugin, _ = plugin()
    tctx = dataclasses.replace(context({"a": INT}, {"o0": INT}, {"a": 1}), task_reader=Broken())
    with pytest.raises(PluginError, match=r"failed to read TaskTemplate: \[gone\]"):
        await echo_plugin.handle(tctx)


# -- the sleep (echo.go 36-80) ----------------------------------------------------------------------------


async def test_with_no_sleep_the_first_round_copies_and_records_no_start_time() -> None:
    clock = FakeClock()
    echo_plugin, woken = plugin("0s", clock)
    tctx = context({"a": INT}, {"o0": INT}, {"a": 1})
    assert (await echo_plugin.handle(tctx)).info.phase is Phase.SUCCESS
    assert tctx.plugin_state.written == (False, 0, None)
    assert echo_plugin.pending_wakeups == 0
    assert woken == []


async def test_a_sleep_runs_until_it_has_passed_then_copies_and_the_timer_wakes_the_owner() -> None:
    clock = FakeClock()
    echo_plugin, woken = plugin("30s", clock)
    tctx = context({"a": INT}, {"o0": INT}, {"a": 9})
    started = clock.now()

    first = await echo_plugin.handle(tctx)
    assert (first.info.phase, first.info.version) == (Phase.RUNNING, 0)
    assert first.info.info is not None and first.info.info.occurred_at == started
    assert tctx.plugin_state.written == (True, 1, {"startTime": started.isoformat()})
    assert not tctx.output_writer.was_put
    assert echo_plugin.pending_wakeups == 1

    await clock.advance(29)
    assert woken == []
    tctx = next_round(tctx)
    assert (await echo_plugin.handle(tctx)).info.phase is Phase.RUNNING
    assert tctx.plugin_state.written == (False, 0, None)  # the start time is recorded only once
    assert echo_plugin.pending_wakeups == 1  # still the first round's timer, not a second one

    await clock.advance(1)
    assert woken == [owner_key(tctx.metadata)]
    tctx = next_round(tctx)
    done = await echo_plugin.handle(tctx)
    assert done.info.phase is Phase.SUCCESS
    assert await outputs_of(tctx) == {"o0": 9}
    await echo_plugin.aclose()


@pytest.mark.parametrize(
    ("elapsed", "phase"),
    [(0.0, Phase.RUNNING), (9.999, Phase.RUNNING), (10.0, Phase.SUCCESS), (3600.0, Phase.SUCCESS)],
)
async def test_the_copy_happens_once_elapsed_reaches_the_sleep(elapsed: float, phase: Phase) -> None:
    clock = FakeClock()
    echo_plugin, _ = plugin("10s", clock)
    tctx = context({"a": INT}, {"o0": INT}, {"a": 1})
    await echo_plugin.handle(tctx)
    clock.set(clock.now() + timedelta(seconds=elapsed))
    assert (await echo_plugin.handle(next_round(tctx))).info.phase is phase
    await echo_plugin.aclose()


async def test_interface_errors_only_show_once_the_sleep_is_over() -> None:
    clock = FakeClock()
    echo_plugin, _ = plugin("5s", clock)
    tctx = context({"a": INT}, {}, {"a": 1})
    assert (await echo_plugin.handle(tctx)).info.phase is Phase.RUNNING
    await clock.advance(5)
    with pytest.raises(PluginError, match="does not match"):
        await echo_plugin.handle(next_round(tctx))
    await echo_plugin.aclose()


async def test_a_restarted_plugin_continues_the_sleep_from_the_state_and_rearms_the_timer_for_what_is_left() -> (
    None
):
    # Deviation from Flyte (Q15): the start time lives in the plugin state, not in the plugin's memory.
    clock = FakeClock()
    before_restart, _ = plugin("30s", clock)
    tctx = context({"a": INT}, {"o0": INT}, {"a": 2})
    await before_restart.handle(tctx)
    await before_restart.aclose()  # the process stops: its timer is gone
    await clock.advance(20)

    after_restart, woken = plugin("30s", clock)
    tctx = next_round(tctx)
    assert (await after_restart.handle(tctx)).info.phase is Phase.RUNNING
    assert after_restart.pending_wakeups == 1
    await clock.advance(9.9)
    assert woken == []
    await clock.advance(0.1)  # 30 s after the first round, not 30 s after the restart
    assert woken == [owner_key(tctx.metadata)]
    assert (await after_restart.handle(next_round(tctx))).info.phase is Phase.SUCCESS
    await after_restart.aclose()


async def test_a_new_attempt_starts_a_new_sleep() -> None:
    clock = FakeClock()
    echo_plugin, _ = plugin("10s", clock)
    first_attempt = context({"a": INT}, {"o0": INT}, {"a": 1})
    await echo_plugin.handle(first_attempt)
    await echo_plugin.finalize(first_attempt)
    await clock.advance(10)
    # The executor gives the next attempt a new generated name and an empty plugin state.
    second_attempt = fake_task_context(
        template({"a": INT}, {"o0": INT}),
        inputs={"a": 1},
        execution={"id": {**DEFAULT_EXECUTION["id"], "retryAttempt": 1}},
    )
    assert (await echo_plugin.handle(second_attempt)).info.phase is Phase.RUNNING
    assert second_attempt.plugin_state.written[2] == {"startTime": clock.now().isoformat()}
    await echo_plugin.aclose()


async def test_finalize_stops_the_executions_timer_and_aclose_stops_them_all() -> None:
    clock = FakeClock()
    echo_plugin, woken = plugin("10s", clock)
    one = context({"a": INT}, {"o0": INT}, {"a": 1})
    other = fake_task_context(
        template({"a": INT}, {"o0": INT}),
        inputs={"a": 1},
        execution={"id": {**DEFAULT_EXECUTION["id"], "name": "other"}},
    )
    await echo_plugin.handle(one)
    await echo_plugin.handle(other)
    assert echo_plugin.pending_wakeups == 2
    await echo_plugin.finalize(one)
    assert echo_plugin.pending_wakeups == 1
    await echo_plugin.aclose()
    assert echo_plugin.pending_wakeups == 0
    assert clock.sleepers == 0
    await clock.advance(60)
    assert woken == []


async def test_a_failing_enqueue_is_logged_and_the_timer_ends_cleanly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()

    def refuse(namespace: str, name: str) -> None:
        raise RuntimeError("queue closed")

    echo_plugin = EchoPlugin(
        EchoConfig.model_validate({"sleep-duration": "1s"}), enqueue_owner=refuse, clock=clock
    )
    await echo_plugin.handle(context({"a": INT}, {"o0": INT}, {"a": 1}))
    with caplog.at_level(logging.WARNING):
        await clock.advance(1)
    assert echo_plugin.pending_wakeups == 0
    assert "failed to enqueue owner" in caplog.text
    await echo_plugin.aclose()


async def test_a_negative_sleep_copies_at_once_as_go_does() -> None:
    echo_plugin, woken = plugin("-5s", FakeClock())
    tctx = context({"a": INT}, {"o0": INT}, {"a": 3})
    assert (await echo_plugin.handle(tctx)).info.phase is Phase.SUCCESS
    assert await outputs_of(tctx) == {"o0": 3}
    assert woken == []


@pytest.mark.parametrize(
    "state",
    [{}, {"startTime": "yesterday"}, {"startTime": "2026-01-01T00:00:00"}, {"startTime": 12}],
    ids=["no-key", "not-a-time", "no-zone", "not-a-string"],
)
async def test_a_corrupted_state_is_an_error_with_flytes_code(state: dict[str, Any]) -> None:
    echo_plugin, _ = plugin("10s", FakeClock())
    tctx = dataclasses.replace(
        context({"a": INT}, {"o0": INT}, {"a": 1}), plugin_state=PluginStateHolder(1, state)
    )
    with pytest.raises(PluginError) as caught:
        await echo_plugin.handle(tctx)
    assert caught.value.code == ErrorCode.CORRUPTED_PLUGIN_STATE


async def test_abort_does_nothing_and_properties_are_zero() -> None:
    echo_plugin, _ = plugin("10s", FakeClock())
    tctx = context({"a": INT}, {"o0": INT}, {"a": 1})
    await echo_plugin.abort(tctx)
    assert tctx.plugin_state.written == (False, 0, None)
    props = echo_plugin.get_properties()
    assert (props.disable_node_level_caching, props.generated_name_max_length) == (False, None)
