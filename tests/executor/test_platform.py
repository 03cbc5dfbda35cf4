"""Platform.load: the config over the platform defaults, plugin sections, and resolution by task type."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import Field

from taskplug.core import (
    TASKS_SECTION,
    ConfigError,
    ConfigSection,
    FakeClock,
    PluginEntry,
    PluginError,
    PluginKind,
    PluginRegistry,
    Quantity,
    StrictModel,
)
from taskplug.executor._platform import (
    EXECUTOR_SECTION,
    KUBE_CLIENT_SECTION,
    PLATFORM_DEFAULTS,
    Platform,
)
from taskplug.k8s import K8S_SECTION, POD, K8sPluginEntry


def _k8s(plugin_id: str, *task_types: str, is_default: bool = False, sections: tuple = ()) -> K8sPluginEntry:
    return K8sPluginEntry(
        id=plugin_id,
        registered_task_types=task_types,
        resource_to_watch=POD,
        load_plugin=lambda setup: None,  # type: ignore[arg-type,return-value]
        is_default=is_default,
        config_sections=sections,
    )


def _core(plugin_id: str, *task_types: str) -> PluginEntry:
    return PluginEntry(plugin_id, task_types, lambda setup: None)  # type: ignore[arg-type,return-value]


class _SparkConfig(StrictModel):
    spark_config_default: dict[str, str] = Field(default_factory=dict)


SPARK_SECTION = ConfigSection("plugins.spark", _SparkConfig)


def pod_like_registry() -> PluginRegistry:
    """What the built-in pod plugin registers (one plugin, three ids), plus a spark plugin with its section."""
    registry = PluginRegistry()
    for entry in (
        _k8s("container", "container", "python-task", "raw-container", is_default=True),
        _k8s("sidecar", "sidecar"),
        _k8s("pod", "container", "python-task", "raw-container", "sidecar", is_default=True),
        _k8s("Spark", "spark", sections=(SPARK_SECTION,)),
    ):
        registry.register(entry)
    return registry


def load(document: dict[str, Any] | None = None, **kwargs: Any) -> Platform:
    return Platform.load(registry=kwargs.pop("registry", pod_like_registry()), document=document, **kwargs)


# -- defaults --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("task_type", "plugin_id"),
    [
        ("container", "container"),
        ("python-task", "container"),
        ("raw-container", "container"),
        ("sidecar", "sidecar"),
        ("spark", "spark"),
    ],
)
def test_platform_defaults_pick_a_plugin_for_each_built_in_task_type(task_type: str, plugin_id: str) -> None:
    assert load().entry_for(task_type).id.lower() == plugin_id


def test_the_platform_defaults_enable_the_built_in_plugins_only() -> None:
    platform = load()
    assert [e.id for e in platform.enabled_entries()] == ["container", "sidecar", "Spark"]
    assert PLATFORM_DEFAULTS["tasks"]["task-plugins"]["enabled-plugins"] == [
        "container",
        "sidecar",
        "spark",
        "connector-service",
        "echo",
        "k8s-array",
    ]


def test_an_unknown_task_type_is_refused_by_default() -> None:
    with pytest.raises(PluginError, match=r"no plugin defined for Handler type \[ray\]"):
        load().entry_for("ray")


def test_fallback_to_the_default_plugin_when_switched_on() -> None:
    platform = load({"tasks": {"task-plugins": {"fallback-to-default-plugin": True}}})
    assert platform.entry_for("ray").id == "container"


# -- the config over the defaults -----------------------------------------------------------------------


def test_a_config_that_sets_only_plugins_k8s_keeps_the_task_plugin_defaults(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"plugins": {"k8s": {"default-cpus": "2", "inject-finalizer": True}}}))
    platform = Platform.load(path, registry=pod_like_registry())
    k8s = platform.config.get(K8S_SECTION)
    assert k8s.default_cpus == Quantity("2")
    assert k8s.inject_finalizer is True
    assert k8s.default_memory == Quantity("1024Mi")
    assert platform.entry_for("python-task").id == "container"


def test_the_config_file_is_merged_over_the_document(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"plugins": {"k8s": {"scheduler-name": "from-file"}}}))
    platform = Platform.load(
        path,
        registry=pod_like_registry(),
        document={"plugins": {"k8s": {"scheduler-name": "from-document", "default-memory": "2Gi"}}},
    )
    k8s = platform.config.get(K8S_SECTION)
    assert k8s.scheduler_name == "from-file"
    assert k8s.default_memory == Quantity("2Gi")


def test_the_config_chooses_a_different_default_plugin_for_a_task_type() -> None:
    platform = load(
        {
            "tasks": {
                "task-plugins": {
                    "enabled-plugins": ["container", "sidecar", "pod"],
                    "default-for-task-types": {"python-task": "pod"},
                }
            }
        }
    )
    assert platform.entry_for("python-task").id == "pod"
    assert platform.entry_for("container").id == "container"  # other defaults stay


def test_enabling_only_some_plugins_drops_the_defaults_of_the_others() -> None:
    platform = load({"tasks": {"task-plugins": {"enabled-plugins": ["container"]}}})
    assert [e.id for e in platform.enabled_entries()] == ["container"]
    assert platform.entry_for("python-task").id == "container"
    with pytest.raises(PluginError, match=r"\[sidecar\]"):
        platform.entry_for("sidecar")


def test_the_users_own_default_for_a_plugin_that_is_not_enabled_is_flytes_error_at_load() -> None:
    with pytest.raises(
        ConfigError, match=r"cannot set default plugin \[sidecar\] for task types \[sidecar\]"
    ) as err:
        load(
            {
                "tasks": {
                    "task-plugins": {
                        "enabled-plugins": ["container"],
                        "default-for-task-types": {"sidecar": "sidecar"},
                    }
                }
            }
        )
    assert err.value.path == "tasks.task-plugins.default-for-task-types"


def test_enabled_plugin_names_are_matched_case_insensitively() -> None:
    platform = load(
        {
            "tasks": {
                "task-plugins": {
                    "enabled-plugins": [" CONTAINER ", "spark"],
                    "default-for-task-types": {"spark": "SPARK"},
                }
            }
        }
    )
    assert [e.id for e in platform.enabled_entries()] == ["container", "Spark"]
    assert platform.entry_for("spark").id == "Spark"


def test_two_enabled_plugins_for_a_type_without_a_default_is_flytes_error_at_load() -> None:
    registry = PluginRegistry()
    registry.register(_k8s("a", "t"))
    registry.register(_k8s("b", "t"))
    with pytest.raises(ConfigError, match="Multiple plugins registered to handle task type: t") as err:
        load({"tasks": {"task-plugins": {"enabled-plugins": ["a", "b"]}}}, registry=registry)
    assert err.value.path == "tasks.task-plugins"


def test_a_default_for_the_type_settles_two_enabled_plugins() -> None:
    registry = PluginRegistry()
    registry.register(_k8s("a", "t"))
    registry.register(_k8s("b", "t"))
    platform = load(
        {"tasks": {"task-plugins": {"enabled-plugins": ["a", "b"], "default-for-task-types": {"t": "b"}}}},
        registry=registry,
    )
    assert platform.entry_for("t").id == "b"


# -- what a run would trip over later is refused at load ------------------------------------------------


@pytest.mark.parametrize(
    ("document", "path", "said"),
    [
        pytest.param(
            {"tasks": {"task-plugins": {"enabled-plugins": ["container", "no-such-plugin"]}}},
            "tasks.task-plugins.enabled-plugins[1]",
            "no plugin [no-such-plugin] is registered (registered: container, pod, sidecar, spark)",
            id="unknown-enabled-id",
        ),
        pytest.param(
            {"tasks": {"task-plugins": {"default-for-task-types": {"python-task": "nope"}}}},
            "tasks.task-plugins.default-for-task-types.python-task",
            "no plugin [nope] is registered",
            id="unknown-default-id",
        ),
        pytest.param(
            {"executor": {"workers": 10_001}},
            "executor.workers",
            "less than or equal to 10000",
            id="workers-over-flytes-pool-bound",
        ),
        pytest.param(
            {"executor": {"array-node": {"node-execution-worker-count": 10_001}}},
            "executor.array-node.node-execution-worker-count",
            "less than or equal to 10000",
            id="node-workers-over-bound",
        ),
        pytest.param(
            {"executor": {"array-node": {"max-parallelism": 2**31}}},
            "executor.array-node.max-parallelism",
            "less than or equal to 2147483647",
            id="parallelism-over-int32",
        ),
        pytest.param(
            {"executor": {"resync-period": "0s"}},
            "executor.resync-period",
            "must be longer than 0s",
            id="zero-resync",
        ),
        pytest.param(
            {"executor": {"data-root": "nosuchproto://x"}},
            "executor.data-root",
            "fsspec knows no protocol 'nosuchproto'",
            id="unknown-protocol",
        ),
        pytest.param(
            {"propeller": {"kube-client-config": {"timeout": "-1s"}}},
            "propeller.kube-client-config.timeout",
            "must not be negative",
            id="negative-api-timeout",
        ),
        pytest.param(
            {"propeller": {"kube-client-config": {"qps": 5}}},
            "propeller.kube-client-config.qps",
            "unknown key",
            id="unsupported-qps",
        ),
        pytest.param(
            {"propeller": {"resourcemanager": {"type": "redis"}}},
            "propeller.resourcemanager.redis.hostPaths",
            "type redis needs at least one host",
            id="redis-without-host",
        ),
        pytest.param(
            {"propeller": {"resourcemanager": {"type": "redis", "redis": {"hostPaths": ["redis"]}}}},
            "propeller.resourcemanager.redis.hostPaths",
            "expected host:port, got 'redis'",
            id="redis-host-without-port",
        ),
        pytest.param(
            {"propeller": {"resourcemanager": {"redis": {"hostPath": "redis:70000"}}}},
            "propeller.resourcemanager.redis.hostPath",
            "port 70000 of 'redis:70000' is not between 1 and 65535",
            id="redis-port-out-of-range",
        ),
        pytest.param(
            {"propeller": {"resourcemanager": {"resourceMaxQuota": 0}}},
            "propeller.resourcemanager.resourceMaxQuota",
            "greater than or equal to 1",
            id="no-quota-possible",
        ),
        pytest.param(
            {"propeller": {"resourcemanager": {"redis": {"maxRetries": -1}}}},
            "propeller.resourcemanager.redis.maxRetries",
            "greater than or equal to 0",
            id="negative-redis-retries",
        ),
    ],
)
def test_a_config_a_run_would_trip_over_is_refused_at_load_naming_the_key(
    document: dict[str, Any], path: str, said: str
) -> None:
    with pytest.raises(ConfigError) as err:
        load(document)
    assert err.value.path == path
    assert said in err.value.reason


def test_the_default_plugin_ids_a_registry_lacks_are_not_the_users_mistake() -> None:
    registry = PluginRegistry()
    registry.register(_k8s("container", "python-task"))
    # The platform defaults also enable sidecar, spark, echo ... and pick sidecar for its task type: this
    # registry has none of them, which is no mistake of a config file that does not name them.
    assert load(registry=registry).entry_for("python-task").id == "container"


def test_a_data_root_under_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="is a file") as err:
        load({"executor": {"data-root": str(tmp_path / "file" / "data")}})
    assert err.value.path == "executor.data-root"


@pytest.mark.parametrize("root", ["memory://bucket/prefix", "file:///tmp/data", "relative/data"])
def test_data_roots_fsspec_can_write_are_accepted(root: str) -> None:
    assert load({"executor": {"data-root": root}}).config.get(EXECUTOR_SECTION).data_root == root


def test_the_api_timeout_is_flytes_kube_client_config_with_its_default() -> None:
    assert load().config.get(KUBE_CLIENT_SECTION).timeout == timedelta(seconds=30)
    assert load({"propeller": {"kube-client-config": {"timeout": "2s"}}}).config.get(
        KUBE_CLIENT_SECTION
    ).timeout == timedelta(seconds=2)


def test_k8s_entry_for_refuses_a_plugin_that_creates_no_kubernetes_object() -> None:
    registry = pod_like_registry()
    registry.register(_core("local", "local-task"))
    platform = load(
        {"tasks": {"task-plugins": {"enabled-plugins": ["container", "local"]}}}, registry=registry
    )
    assert platform.k8s_entry_for("python-task").id == "container"
    with pytest.raises(PluginError, match="creates no Kubernetes object"):
        platform.k8s_entry_for("local-task")


# -- sections --------------------------------------------------------------------------------------------


def test_a_registered_plugins_config_section_is_loaded() -> None:
    platform = load({"plugins": {"spark": {"spark-config-default": {"spark.blacklist.enabled": "true"}}}})
    assert platform.config.get(SPARK_SECTION).spark_config_default == {"spark.blacklist.enabled": "true"}


def test_a_section_nobody_registered_is_an_unknown_key() -> None:
    registry = PluginRegistry()
    registry.register(_k8s("container", "python-task"))
    with pytest.raises(ConfigError) as err:
        load({"plugins": {"spark": {}}}, registry=registry)
    assert err.value.path == "plugins.spark"


def test_extra_sections_are_loaded_too() -> None:
    class _Mine(StrictModel):
        level: int = 1

    mine = ConfigSection("mine", _Mine)
    platform = load({"mine": {"level": 3}}, extra_sections=[mine])
    assert platform.config.get(mine).level == 3
    assert mine in Platform.sections_for(platform.registry, [mine])


@pytest.mark.parametrize(
    ("document", "path"),
    [
        ({"plugins": {"k8s": {"no-such-key": 1}}}, "plugins.k8s.no-such-key"),
        ({"plugins": {"k8s": {"default-cpus": "1K"}}}, "plugins.k8s.default-cpus"),
        ({"tasks": {"task-plugins": {"enabled-plugins": "container"}}}, "tasks.task-plugins.enabled-plugins"),
        ({"tasks": {"backoff": {"max-duration": "soon"}}}, "tasks.backoff.max-duration"),
        ({"executor": {"workers": 0}}, "executor.workers"),
        ({"nope": {}}, "nope"),
    ],
)
def test_a_bad_config_is_an_error_naming_the_key(document: dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigError) as err:
        load(document)
    assert err.value.path == path


def test_a_missing_config_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        Platform.load(tmp_path / "missing.yaml", registry=pod_like_registry())


def test_executor_defaults_and_the_injected_clock() -> None:
    clock = FakeClock()
    platform = load(clock=clock)
    executor = platform.config.get(EXECUTOR_SECTION)
    assert executor.workers == 64
    assert executor.resync_period == timedelta(seconds=10)
    assert executor.pod_template_namespace == "flyte"
    assert platform.clock is clock
    assert platform.config.get(TASKS_SECTION).backoff.max_duration == timedelta(seconds=20)


def test_pod_templates_are_loaded_into_the_executors_namespace(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "PodTemplate",
                "metadata": {"name": "flyte-default"},
                "template": {"spec": {"containers": [{"name": "default", "image": "x"}]}},
            }
        )
    )
    platform = load(
        {"executor": {"pod-template-namespace": "platform"}}, pod_template_paths=[tmp_path / "base.yaml"]
    )
    assert platform.pod_templates.default_namespace == "platform"
    assert len(platform.pod_templates) == 1


def test_the_real_plugins_are_discovered_and_resolved() -> None:
    platform = Platform.load()
    assert platform.entry_for("python-task").id == "container"
    assert platform.entry_for("sidecar").id == "sidecar"
    assert platform.k8s_entry_for("container").kind == PluginKind.K8S
