"""Plugin registry, entry-point discovery, enabled plugins, wrangling and resolution (Flyte's
pluginmachinery/core/plugin.go and registry.go, flytepropeller's task/plugin_config.go and task/config)."""

from __future__ import annotations

import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from taskplug.core import (
    ENTRY_POINT_GROUP,
    ErrorCode,
    PluginEntry,
    PluginError,
    PluginKind,
    PluginProperties,
    PluginRegistry,
    PluginResolver,
    SetupContext,
    TaskPluginsConfig,
    Transition,
    enabled_plugins,
    load_plugin,
    wrangle_plugins,
)

# -- doubles ---------------------------------------------------------------------------------------------


@dataclass
class FakePlugin:
    id: str
    properties: PluginProperties = field(default_factory=PluginProperties)

    def get_properties(self) -> PluginProperties:
        return self.properties

    async def handle(self, tctx: object) -> Transition:
        return Transition()

    async def abort(self, tctx: object) -> None:
        return None

    async def finalize(self, tctx: object) -> None:
        return None


def entry(
    plugin_id: str, *task_types: str, is_default: bool = False, kind: PluginKind = PluginKind.CORE
) -> PluginEntry:
    return PluginEntry(plugin_id, task_types, lambda setup: FakePlugin(plugin_id), is_default, kind)


def loaded(*entries: PluginEntry) -> list[tuple[PluginEntry, FakePlugin]]:
    return [(e, FakePlugin(e.id)) for e in entries]


def cfg(enabled: list[str] | None = None, defaults: dict[str, str] | None = None) -> TaskPluginsConfig:
    return TaskPluginsConfig(enabled_plugins=enabled or [], default_for_task_types=defaults or {})


SETUP = SetupContext(enqueue_owner=lambda ns, name: None)

# -- enabled plugins (GetEnabledPlugins) -----------------------------------------------------------------


def test_enabled_plugin_names_are_trimmed_and_lower_cased() -> None:
    enabled, defaults = enabled_plugins(cfg([" Container ", "SIDECAR", ""]))
    assert enabled == {"container", "sidecar"}
    assert defaults == {}


def test_default_for_task_types_is_reversed_into_plugin_to_task_types() -> None:
    _, defaults = enabled_plugins(
        cfg(
            ["container", "spark"],
            {"python-task": "container", " Container-Task ": " CONTAINER ", "spark": "spark"},
        )
    )
    assert defaults == {"container": ["python-task", "container-task"], "spark": ["spark"]}


def test_no_enabled_plugins_means_all_enabled_and_no_validation() -> None:
    enabled, defaults = enabled_plugins(cfg([], {"python-task": "anything"}))
    assert enabled == set()
    assert defaults == {"anything": ["python-task"]}


def test_a_default_plugin_that_is_not_enabled_is_an_error() -> None:
    with pytest.raises(PluginError) as err:
        enabled_plugins(cfg(["container"], {"spark": "spark", "pyspark": "spark"}))
    assert err.value.message == (
        "cannot set default plugin [spark] for task types [spark pyspark] when it is not configured to be an enabled plugin"
    )
    assert err.value.code == ErrorCode.PLUGIN_INITIALIZATION_FAILED


def test_mixed_case_default_plugins_keep_all_their_task_types() -> None:
    # Flyte loses task types here (it looks up by the raw name and stores by the cleaned one); taskplug does not.
    _, defaults = enabled_plugins(cfg(["spark"], {"spark": "Spark", "pyspark": "spark"}))
    assert defaults == {"spark": ["spark", "pyspark"]}


# -- registry --------------------------------------------------------------------------------------------


def test_register_validates_and_keeps_registration_order() -> None:
    registry = PluginRegistry()
    registry.register(entry("b", "t1"))
    registry.register(entry("a", "t2"))
    assert [e.id for e in registry.entries] == ["b", "a"]
    assert registry.of_kind(PluginKind.CORE) == registry.entries
    assert registry.of_kind(PluginKind.K8S) == []


@pytest.mark.parametrize("bad", [entry("", "t"), entry("x")], ids=["no-id", "no-task-types"])
def test_an_invalid_entry_is_refused(bad: PluginEntry) -> None:
    with pytest.raises(PluginError):
        PluginRegistry().register(bad)


def test_the_same_id_of_the_same_kind_cannot_register_twice() -> None:
    registry = PluginRegistry()
    registry.register(entry("x", "t"))
    with pytest.raises(PluginError, match=r"\[x\] is already registered"):
        registry.register(entry("x", "u"))
    registry.register(entry("x", "u", kind=PluginKind.K8S))  # another kind may reuse the id


# -- entry-point discovery -------------------------------------------------------------------------------


def _install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str, source: str, entry_points: str
) -> None:
    """A distribution on sys.path: a module plus a dist-info whose entry_points.txt names it."""
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(source))
    dist = tmp_path / f"{module}-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{textwrap.dedent(entry_points)}")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, module, raising=False)


GOOD_MODULE = """
from taskplug.core import PluginEntry

class _Plugin:
    id = "third-party"

def _load(setup):
    return _Plugin()

ONE = PluginEntry("third-party", ("third-party-task",), _load)

def many():
    return [PluginEntry("third-a", ("a",), _load), PluginEntry("third-b", ("b",), _load)]
"""


def test_discovery_loads_an_entry_a_list_and_a_function(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _install(
        tmp_path,
        monkeypatch,
        "tp_fake_good",
        GOOD_MODULE,
        """
        one = tp_fake_good:ONE
        many = tp_fake_good:many
        """,
    )
    registry = PluginRegistry.discover()
    ids = [e.id for e in registry.entries]
    assert {"third-party", "third-a", "third-b"} <= set(ids)
    # The built-in pod plugin registers through the same group.
    assert "container" in ids


@pytest.mark.parametrize(
    ("source", "target", "problem"),
    [
        ("raise ImportError('no such dependency')\n", "tp_fake_broken:X", "no such dependency"),
        ("X = 1\n", "tp_fake_broken:missing", "missing"),
        (
            "def X():\n    raise RuntimeError('cannot build entries')\n",
            "tp_fake_broken:X",
            "cannot build entries",
        ),
        ("X = 'not an entry'\n", "tp_fake_broken:X", "not an entry"),
        ("def X():\n    return None\n", "tp_fake_broken:X", "None"),
    ],
    ids=["import-error", "missing-attribute", "factory-raises", "a-string", "returns-none"],
)
def test_a_broken_entry_point_fails_loudly_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, target: str, problem: str
) -> None:
    _install(tmp_path, monkeypatch, "tp_fake_broken", source, f"broken = {target}\n")
    with pytest.raises(PluginError) as err:
        PluginRegistry.discover()
    assert err.value.code == ErrorCode.PLUGIN_INITIALIZATION_FAILED
    assert f"[broken = {target}]" in str(err.value)
    assert problem in str(err.value)


def test_discovery_reads_the_given_group_only(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []

    def fake_entry_points(*, group: str):
        seen.append(group)
        return []

    monkeypatch.setattr("importlib.metadata.entry_points", fake_entry_points)
    assert PluginRegistry.discover().entries == []
    assert seen == [ENTRY_POINT_GROUP]


# -- load_plugin (LoadPlugin) ----------------------------------------------------------------------------


@pytest.mark.parametrize(("max_length", "ok"), [(None, True), (8, True), (50, True), (7, False), (0, False)])
async def test_load_plugin_checks_generated_name_max_length(max_length: int | None, ok: bool) -> None:
    plugin = FakePlugin("p", PluginProperties(generated_name_max_length=max_length))
    e = PluginEntry("p", ("t",), lambda setup: plugin)
    if ok:
        assert await load_plugin(e, SETUP) is plugin
    else:
        with pytest.raises(PluginError, match="GeneratedNameMaxLength needs to be greater then 8"):
            await load_plugin(e, SETUP)


async def test_load_plugin_awaits_an_async_loader_and_passes_the_setup_context() -> None:
    seen: list[SetupContext] = []

    async def loader(setup: SetupContext) -> FakePlugin:
        seen.append(setup)
        return FakePlugin("p")

    plugin = await load_plugin(PluginEntry("p", ("t",), loader), SETUP)
    assert plugin.id == "p"
    assert seen == [SETUP]


async def test_load_plugin_propagates_the_loaders_error() -> None:
    def loader(setup: SetupContext) -> FakePlugin:
        raise RuntimeError("no credentials")

    with pytest.raises(RuntimeError, match="no credentials"):
        await load_plugin(PluginEntry("p", ("t",), loader), SETUP)


# -- wrangling (WranglePluginsAndGenerateFinalList) ------------------------------------------------------


def _wrap(e: object) -> PluginEntry:
    # A wrapper that keeps the id as registered: wrangling itself lower-cases wrapped ids.
    return PluginEntry(
        e.id, tuple(e.registered_task_types), lambda setup: FakePlugin(e.id), e.is_default, PluginKind.CORE
    )  # type: ignore[attr-defined]


def _registry(*entries: PluginEntry) -> PluginRegistry:
    registry = PluginRegistry()
    for e in entries:
        registry.register(e)
    return registry


def test_wrangling_keeps_core_ids_and_lower_cases_wrapped_ids() -> None:
    registry = _registry(
        entry("MyCore", "a"),
        entry("Spark", "spark", kind=PluginKind.K8S),
        entry("BigQuery", "bq", kind=PluginKind.WEBAPI),
    )
    final, defaults = wrangle_plugins(cfg(), registry, {PluginKind.K8S: _wrap, PluginKind.WEBAPI: _wrap})
    assert [e.id for e in final] == ["MyCore", "spark", "bigquery"]
    assert [e.registered_task_types for e in final] == [("a",), ("spark",), ("bq",)]
    assert defaults == {}


def test_wrangling_drops_plugins_that_are_not_enabled() -> None:
    registry = _registry(
        entry("container", "python-task"),
        entry("Spark", "spark", kind=PluginKind.K8S),
        entry("ray", "ray", kind=PluginKind.K8S),
    )
    final, defaults = wrangle_plugins(
        cfg(["Container", "SPARK"], {"spark": "spark"}), registry, {PluginKind.K8S: _wrap}
    )
    assert [e.id for e in final] == ["container", "spark"]
    assert defaults == {"spark": ["spark"]}


def test_wrangling_a_kind_without_machinery_is_an_error() -> None:
    registry = _registry(entry("spark", "spark", kind=PluginKind.K8S))
    with pytest.raises(PluginError, match=r"no machinery to load k8s plugin \[spark\]"):
        wrangle_plugins(cfg(), registry, {})


def test_wrangling_validates_the_default_plugins() -> None:
    with pytest.raises(PluginError, match="cannot set default plugin"):
        wrangle_plugins(cfg(["container"], {"spark": "spark"}), _registry(entry("container", "c")), {})


# -- resolution ------------------------------------------------------------------------------------------


def test_a_task_type_with_a_single_plugin_resolves_to_it() -> None:
    resolver = PluginResolver(
        loaded(entry("container", "python-task", "container"), entry("spark", "spark")), {}
    )
    assert resolver.resolve("python-task").id == "container"
    assert resolver.resolve("spark").id == "spark"
    assert resolver.task_types == ["container", "python-task", "spark"]


def test_the_configured_default_wins_over_other_registrations() -> None:
    resolver = PluginResolver(
        loaded(entry("container", "python-task"), entry("pod", "python-task"), entry("other", "python-task")),
        {"pod": ["python-task"]},
    )
    assert resolver.resolve("python-task").id == "pod"
    assert resolver.plugin_ids_by_type["python-task"] == ["container", "pod", "other"]


def test_configured_defaults_match_plugin_ids_case_insensitively() -> None:
    resolver = PluginResolver(
        loaded(entry("Pod", "Python-Task"), entry("container", "Python-Task")), {"pod": ["python-task"]}
    )
    assert resolver.resolve("Python-Task").id == "Pod"


def test_several_plugins_for_a_type_without_a_default_is_an_error() -> None:
    with pytest.raises(PluginError) as err:
        PluginResolver(loaded(entry("container", "python-task"), entry("pod", "python-task")), {})
    assert err.value.message.startswith(
        "Multiple plugins registered to handle task type: python-task. ([container pod])"
    )
    assert err.value.message.endswith("Use default-for-task-type config option to choose the desired plugin.")


def test_two_configured_defaults_for_one_type_is_an_error() -> None:
    with pytest.raises(PluginError) as err:
        PluginResolver(
            loaded(entry("container", "python-task"), entry("pod", "python-task")),
            {"container": ["python-task"], "pod": ["python-task"]},
        )
    assert (
        err.value.message
        == "TaskType [python-task] has multiple default handlers specified: [container] and [pod]"
    )


def test_an_unknown_task_type_is_an_error_even_with_a_default_plugin() -> None:
    resolver = PluginResolver(loaded(entry("container", "python-task", is_default=True)), {})
    with pytest.raises(PluginError) as err:
        resolver.resolve("ray")
    assert err.value.code == ErrorCode.UNSUPPORTED_TASK_TYPE
    assert "no plugin defined for Handler type [ray] and no defaultPlugin configured" in err.value.message


def test_the_global_default_is_used_only_when_fallback_is_switched_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    resolver = PluginResolver(
        loaded(entry("container", "python-task", is_default=True), entry("late", "x", is_default=True)),
        {},
        fallback_to_default=True,
    )
    assert resolver.resolve("ray").id == "container"  # the first default plugin; later ones are ignored
    assert "plugin [late] is also marked default" in caplog.text


def test_fallback_without_a_default_plugin_is_still_an_error() -> None:
    resolver = PluginResolver(loaded(entry("container", "python-task")), {}, fallback_to_default=True)
    with pytest.raises(PluginError, match="no defaultPlugin configured"):
        resolver.resolve("ray")


def test_per_execution_overrides_come_first() -> None:
    resolver = PluginResolver(loaded(entry("container", "python-task"), entry("special", "special")), {})
    assert resolver.resolve("python-task", overrides=["missing", "special"]).id == "special"
    assert resolver.resolve("python-task", overrides=["missing"]).id == "container"


def test_dynamic_handlers_come_after_type_defaults_and_before_the_global_default() -> None:
    connector = FakePlugin("connector-service")
    resolver = PluginResolver(
        loaded(entry("container", "python-task", is_default=True)),
        {},
        fallback_to_default=True,
        dynamic=[(lambda t: t.startswith("bigquery"), connector)],
    )
    assert resolver.resolve("bigquery_query_job_task") is connector
    assert resolver.resolve("python-task").id == "container"
    assert resolver.resolve("ray").id == "container"


def test_discovering_the_installed_plugins_loads_no_operator_server_or_client_library() -> None:
    """Every command discovers the plugins: that must not load an operator for the embedded cluster, the
    cluster itself, a heavy client library, or what only a run or a status reads (the observed-object model,
    msgpack, the array plugin's machinery): they load when used."""
    import subprocess
    import sys

    probe = (
        "import sys; from taskplug.core import PluginRegistry; PluginRegistry.discover(); "
        "print('\\n'.join(sorted(sys.modules)))"
    )
    loaded = set(
        subprocess.run(
            [sys.executable, "-c", probe], check=True, capture_output=True, text=True
        ).stdout.split()
    )
    heavy = {m for m in loaded if m.endswith(("._local_operator", "._local_driver", "._reconcile"))}
    heavy |= loaded & {
        "taskplug.localcluster",
        "aiohttp",
        "lightkube",
        "grpc",
        "asyncio",
        "torch",
        "distributed",
        "msgpack",
        "taskplug.k8s._observed_model",
        "taskplug.plugins.array._plugin",
    }
    assert heavy == set(), heavy
    assert "taskplug.plugins.kubeflow" in loaded and "taskplug.plugins.dask" in loaded  # they were discovered
