"""taskplug.testing's fakes: a real task context over a spec, the plugin context, the loader's setup."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest
from flyteidl.core import tasks_pb2

import taskplug.testing
from taskplug.core import ConfigError, FakeClock, Phase, SpecError, StaticTaskExecutionContext
from taskplug.k8s import K8S_SECTION, PluginState
from taskplug.plugins.pod import plugin_entries as pod_entries
from taskplug.plugins.spark import SPARK_SECTION
from taskplug.plugins.spark import plugin_entries as spark_entries
from taskplug.testing import (
    fake_plugin_context,
    fake_plugin_setup,
    fake_task_context,
    load_k8s_plugin,
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
