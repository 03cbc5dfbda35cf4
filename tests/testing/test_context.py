"""taskplug.testing's fakes: a real task context over a spec, the plugin context, the loader's setup."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest
from flyteidl.core import literals_pb2, tasks_pb2

import taskplug.testing
from taskplug.core import (
    ConfigError,
    FakeClock,
    LiteralMapOutputReader,
    Phase,
    SpecError,
    StaticTaskExecutionContext,
)
from taskplug.k8s import K8S_SECTION, PluginState
from taskplug.plugins.pod import plugin_entries as pod_entries
from taskplug.plugins.spark import SPARK_SECTION
from taskplug.plugins.spark import plugin_entries as spark_entries
from taskplug.testing import (
    fake_plugin_context,
    fake_plugin_setup,
    fake_task_context,
    load_k8s_plugin,
    next_round,
)

TEMPLATE: dict[str, Any] = {
    "id": {"resourceType": "TASK", "project": "p", "domain": "d", "name": "hello", "version": "v1"},
    "type": "container",
    "container": {"image": "python:3.11", "args": ["run", "{{.input}}"]},
    "interface": {"inputs": {"variables": {"x": {"type": {"simple": "INTEGER"}}}}},
}


def test_the_exports_are_sorted_and_exist() -> None:
    names = taskplug.testing.__all__
    key = [(0 if n.isupper() else 1 if n[0].isupper() else 2, n) for n in names]
    assert key == sorted(key)
    for name in names:
        assert hasattr(taskplug.testing, name), name
    assert taskplug.testing.FakeClock is FakeClock


def test_a_template_gets_the_default_execution() -> None:
    tctx = fake_task_context(TEMPLATE, inputs={"x": 3})
    assert isinstance(tctx, StaticTaskExecutionContext)
    meta = tctx.metadata
    assert meta.task_execution_id.generated_name == "exec1-n0-0"
    assert meta.namespace == "testproject-development"
    assert tctx.task_reader.read().container.image == "python:3.11"
    inputs = tctx.input_reader.get()
    assert inputs is not None
    assert inputs.literals["x"].scalar.primitive.integer == 3
    assert tctx.input_reader.input_path.startswith("s3://taskplug-testing/data/")


def test_keywords_set_what_the_specs_execution_section_would() -> None:
    tctx = fake_task_context(
        TEMPLATE,
        inputs={"x": 1},
        config={"primary_container_name": "main"},
        interruptible=True,
        platform_resources={"requests": {"cpu": "1"}, "limits": {"cpu": "4"}},
        resources={"limits": {"memory": "2Gi"}},
        namespace="team-a",
        labels={"team": "a"},
        annotations={"note": "yes"},
        execution={"maxAttempts": 3},
    )
    meta = tctx.metadata
    assert meta.interruptible is True
    assert meta.namespace == "team-a"
    assert meta.labels["team"] == "a"
    assert meta.annotations == {"note": "yes"}
    assert meta.max_attempts == 3
    assert meta.platform_resources is not None
    assert str(meta.platform_resources.limits["cpu"]) == "4"
    assert meta.overrides.resources is not None
    assert str(meta.overrides.resources.limits["memory"]) == "2Gi"
    assert dict(tctx.task_reader.read().config) == {"primary_container_name": "main"}


def test_a_spec_document_and_a_template_message_are_accepted_too() -> None:
    spec = {"template": TEMPLATE, "execution": {"id": {"name": "other"}}, "inputs": {"x": 2}}
    assert fake_task_context(spec).metadata.task_execution_id.generated_name == "other-n0-0"
    message = tasks_pb2.TaskTemplate(type="container", container=tasks_pb2.Container(image="img:1"))
    assert fake_task_context(message).task_reader.read().container.image == "img:1"


def test_the_callers_documents_are_never_changed() -> None:
    before = copy.deepcopy(TEMPLATE)
    fake_task_context(TEMPLATE, inputs={"x": 1}, config={"k": "v"}, labels={"a": "b"})
    assert before == TEMPLATE


def test_a_malformed_task_names_the_field() -> None:
    with pytest.raises(SpecError, match=r"template\.container\.image"):
        fake_task_context({"type": "container", "container": {}})


def test_explicit_execution_values_are_merged_over_the_default_execution() -> None:
    tctx = fake_task_context(
        TEMPLATE,
        inputs={"x": 1},
        execution={
            "generatedName": "custom-name",
            "serviceAccount": "runner",
            "securityContext": {"runAs": {"k8sServiceAccount": "sa"}},
            "environment": {"ENV": "1"},
            "consoleUrl": "https://console.example.com",
            "ownerReference": {"apiVersion": "v1", "kind": "Job", "name": "j", "uid": "u"},
        },
        data_root="s3://bucket",
    )
    meta = tctx.metadata
    assert meta.task_execution_id.generated_name == "custom-name"
    assert meta.task_execution_id.id.node_execution_id.execution_id.name == "exec1"  # the default id is kept
    assert (meta.k8s_service_account, meta.security_context.run_as.k8s_service_account) == ("runner", "sa")
    assert dict(meta.environment_variables) == {"ENV": "1"}
    assert meta.console_url == "https://console.example.com"
    assert meta.owner_reference == {"apiVersion": "v1", "kind": "Job", "name": "j", "uid": "u"}
    assert tctx.input_reader.input_prefix == "s3://bucket/metadata/testproject/development/exec1/n0"
    assert tctx.output_writer.output_prefix == "s3://bucket/metadata/testproject/development/exec1/n0/0"
    assert tctx.output_writer.raw_output_prefix == "s3://bucket/raw/custom-name"


def test_a_first_round_has_no_plugin_state() -> None:
    tctx = fake_task_context(TEMPLATE, inputs={"x": 1})
    assert tctx.plugin_state_reader.get() == (0, None)
    assert tctx.plugin_state.written == (False, 0, None)


def test_state_is_what_an_earlier_round_stored_and_a_copy() -> None:
    stored: dict[str, Any] = {"phase": 2, "meta": {"job": "j-1"}}
    tctx = fake_task_context(TEMPLATE, inputs={"x": 1}, state=stored, state_version=3)
    assert tctx.plugin_state_reader.get_state_version() == 3
    version, state = tctx.plugin_state_reader.get()
    assert (version, state) == (3, stored)
    assert state is not stored
    stored["meta"]["job"] = "changed by the caller"
    assert tctx.plugin_state_reader.get() == (3, {"phase": 2, "meta": {"job": "j-1"}})
    assert tctx.plugin_state.written == (False, 0, None)  # read, nothing written yet


def test_next_round_reads_what_this_round_put_and_starts_with_nothing_put() -> None:
    first = fake_task_context(TEMPLATE, inputs={"x": 1})
    first.plugin_state_writer.put(2, {"phase": "started"})
    outputs = LiteralMapOutputReader(literals_pb2.LiteralMap())
    first.output_writer.put(outputs)
    second = next_round(first)
    assert second.plugin_state_reader.get() == (2, {"phase": "started"})
    assert second.plugin_state.written == (False, 0, None)
    assert (second.output_writer.was_put, second.output_writer.reader) == (False, None)
    assert second.output_writer.output_prefix == first.output_writer.output_prefix
    assert (second.metadata, second.task_reader, second.input_reader) == (
        first.metadata,
        first.task_reader,
        first.input_reader,
    )
    # The round before is left as it was.
    assert first.plugin_state.written == (True, 2, {"phase": "started"})
    assert first.plugin_state_reader.get() == (0, None)
    assert (first.output_writer.was_put, first.output_writer.reader) == (True, outputs)


def test_next_round_keeps_the_state_when_nothing_was_written_and_clears_it_after_a_reset() -> None:
    tctx = fake_task_context(TEMPLATE, inputs={"x": 1}, state={"phase": "started"}, state_version=2)
    unchanged = next_round(tctx)
    assert unchanged.plugin_state_reader.get() == (2, {"phase": "started"})
    unchanged.plugin_state_writer.reset()
    assert next_round(unchanged).plugin_state_reader.get() == (0, None)


def test_the_plugin_context_carries_state_and_a_reproducible_now() -> None:
    pctx = fake_plugin_context(TEMPLATE | {"interface": {}})
    assert pctx.now == FakeClock().now() == datetime(2026, 1, 1, tzinfo=UTC)
    assert pctx.plugin_state == PluginState()
    tctx = fake_task_context(TEMPLATE, inputs={"x": 1}, namespace="ns")
    state = PluginState(Phase.QUEUED, 2, "waiting")
    when = datetime(2026, 5, 1, tzinfo=UTC)
    pctx = fake_plugin_context(tctx, state=state, now=when)
    assert (pctx.plugin_state, pctx.now, pctx.metadata.namespace) == (state, when, "ns")


def test_the_setup_parses_the_config_with_the_entries_sections() -> None:
    setup = fake_plugin_setup(
        {"plugins": {"spark": {"spark-history-server-url": "http://h"}, "k8s": {"default-cpus": "2"}}},
        entries=spark_entries(),
    )
    assert setup.config.get(SPARK_SECTION).spark_history_server_url == "http://h"
    assert str(setup.config.get(K8S_SECTION).default_cpus) == "2"
    assert isinstance(setup.clock, FakeClock)
    assert dict(setup.environ) == {}
    with pytest.raises(ConfigError, match=r"plugins\.spark\.no-such-key"):
        fake_plugin_setup({"plugins": {"spark": {"no-such-key": 1}}}, entries=spark_entries())


def test_load_k8s_plugin_loads_with_the_config() -> None:
    container = pod_entries()[0]
    plugin = load_k8s_plugin(container, config={"plugins": {"k8s": {"default-memory": "3Gi"}}})
    pod = plugin.build_resource(fake_task_context(TEMPLATE, inputs={"x": 1}))
    assert pod["spec"]["containers"][0]["resources"]["requests"]["memory"] == "3Gi"
