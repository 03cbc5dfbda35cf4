"""Building the SparkApplication (BuildResource of Flyte's plugins/k8s/spark/spark.go)."""

from __future__ import annotations

from typing import Any

import pytest
from flyteidl.plugins import spark_pb2
from spark_helpers import (
    GENERATED_NAME,
    IMAGE,
    NOW,
    NOW_MILLIS,
    build,
    platform,
    spark_config,
    spark_job,
    spark_template,
    tctx_for,
)

from taskplug.core import BadTaskSpecification, FakeClock
from taskplug.k8s import PluginTaskExecutionContext
from taskplug.plugins.spark import SparkPlugin, build_spark_application

# -- the SparkJob -----------------------------------------------------------------------------------------


def test_a_task_without_custom_is_a_bad_task_specification_naming_the_missing_main() -> None:
    with pytest.raises(BadTaskSpecification) as info:
        build(template=spark_template(None))
    assert info.value.message == "invalid TaskSpecification [<nil>]."
    assert "either MainApplicationFile or MainClass must be set" in str(info.value)


def test_a_job_with_neither_main_application_file_nor_main_class_is_rejected() -> None:
    with pytest.raises(BadTaskSpecification, match="either MainApplicationFile or MainClass must be set"):
        build(spark_job(main_application_file="", conf={"a": "b"}))


def test_a_custom_that_is_not_a_spark_job_fails_to_unmarshal() -> None:
    with pytest.raises(BadTaskSpecification) as info:
        build({"sparkConf": ["not", "a", "map"], "mainClass": "Main"})
    assert info.value.message.startswith("invalid TaskSpecification [")
    assert info.value.message.endswith("], failed to unmarshal")


def test_unknown_fields_in_the_custom_are_ignored_as_jsonpb_allows() -> None:
    app = build({**spark_job(), "someFutureField": 1})
    assert app["spec"]["mainApplicationFile"] == "local:///opt/venv/bin/entrypoint.py"


def test_main_class_and_main_application_file_are_set_when_given() -> None:
    spec = build(spark_job(main_application_file="", main_class="org.example.Main"))["spec"]
    assert spec["mainClass"] == "org.example.Main"
    assert "mainApplicationFile" not in spec
    spec = build(spark_job(main_application_file="s3://b/app.py", main_class="M"))["spec"]
    assert (spec["mainApplicationFile"], spec["mainClass"]) == ("s3://b/app.py", "M")


# -- spark conf (getSparkConfig) --------------------------------------------------------------------------


def conf_of(custom: dict[str, Any], **config: Any) -> dict[str, str]:
    conf: dict[str, str] = build(custom, config=spark_config(**config))["spec"]["sparkConf"]
    return conf


def test_job_conf_overrides_config_defaults() -> None:
    conf = conf_of(
        spark_job(conf={"spark.a": "job", "spark.c": "job"}),
        spark_config_default={"spark.a": "default", "spark.b": "default"},
    )
    assert conf["spark.a"] == "job"
    assert conf["spark.b"] == "default"
    assert conf["spark.c"] == "job"


def test_executor_path_sets_both_pyspark_pythons_and_job_conf_still_wins() -> None:
    conf = conf_of(spark_job(executor_path="/opt/venv/bin/python3"))
    assert conf["spark.pyspark.python"] == "/opt/venv/bin/python3"
    assert conf["spark.pyspark.driver.python"] == "/opt/venv/bin/python3"
    conf = conf_of(
        spark_job(executor_path="/opt/venv/bin/python3", conf={"spark.pyspark.python": "/usr/bin/python"}),
        spark_config_default={"spark.pyspark.driver.python": "/default/python"},
    )
    assert conf["spark.pyspark.python"] == "/usr/bin/python"
    assert conf["spark.pyspark.driver.python"] == "/opt/venv/bin/python3"


def test_no_executor_path_leaves_pyspark_python_alone() -> None:
    assert "spark.pyspark.python" not in conf_of(spark_job())


def test_executor_pod_name_prefix_and_start_time_come_from_the_execution_and_the_clock() -> None:
    conf = conf_of(
        spark_job(conf={"spark.kubernetes.executor.podNamePrefix": "mine"}),
    )
    assert conf["spark.kubernetes.executor.podNamePrefix"] == GENERATED_NAME
    assert conf["spark.kubernetes.driverEnv.FLYTE_START_TIME"] == NOW_MILLIS


def test_the_plugin_takes_the_start_time_from_its_injected_clock() -> None:
    plugin = SparkPlugin(platform(), spark_config(), FakeClock(NOW))
    app = plugin.build_resource(tctx_for())
    assert app["spec"]["sparkConf"]["spark.kubernetes.driverEnv.FLYTE_START_TIME"] == NOW_MILLIS


FEATURES = [
    {"name": "feature1", "spark-config": [{"spark.hadoop.feature1": "true"}, {"spark.feature1.x": "1"}]},
    {"name": "feature2", "spark-config": {"spark.hadoop.feature2": "true", "spark.feature2.y": "2"}},
    {"name": "feature1", "spark-config": {"spark.hadoop.feature1": "second-definition"}},
]


@pytest.mark.parametrize(
    ("key", "value", "present", "absent"),
    [
        pytest.param(
            "spark.flyte.feature1.enabled",
            "true",
            {"spark.hadoop.feature1": "true", "spark.feature1.x": "1"},
            ["spark.flyte.feature1.enabled", "spark.hadoop.feature2"],
            id="enabled-copies-the-feature-conf-and-not-the-key",
        ),
        pytest.param(
            "spark.flyteorg.feature2.enabled",
            " TRUE ",
            {"spark.hadoop.feature2": "true", "spark.feature2.y": "2"},
            ["spark.flyteorg.feature2.enabled"],
            id="flyteorg-prefix-and-value-trimmed-and-lower-cased",
        ),
        pytest.param(
            "spark.flyte.feature1.enabled",
            "false",
            {"spark.flyte.feature1.enabled": "false"},
            ["spark.hadoop.feature1", "spark.feature1.x"],
            id="disabled-sets-the-key-as-is",
        ),
        pytest.param(
            "spark.flyte.feature1.enabled",
            "yes",
            {"spark.flyte.feature1.enabled": "yes"},
            ["spark.hadoop.feature1"],
            id="anything-but-true-sets-the-key-as-is",
        ),
        pytest.param(
            "spark.flyte.unknown.enabled",
            "true",
            {"spark.flyte.unknown.enabled": "true"},
            ["spark.hadoop.feature1"],
            id="unknown-feature-sets-the-key",
        ),
        pytest.param(
            "spark-flyte-feature1-enabled",
            "true",
            {"spark.hadoop.feature1": "true"},
            ["spark-flyte-feature1-enabled"],
            id="unescaped-dots-in-flytes-pattern-match-any-character",
        ),
        pytest.param(
            "spark.flyte.feature1.enabled.not",
            "true",
            {"spark.flyte.feature1.enabled.not": "true"},
            ["spark.hadoop.feature1"],
            id="not-a-feature-key-is-ordinary-conf",
        ),
    ],
)
def test_feature_flags(key: str, value: str, present: dict[str, str], absent: list[str]) -> None:
    conf = conf_of(spark_job(conf={key: value}), features=FEATURES)
    for k, v in present.items():
        assert conf[k] == v
    for k in absent:
        assert k not in conf


def test_the_first_feature_of_a_name_wins() -> None:
    conf = conf_of(spark_job(conf={"spark.flyte.feature1.enabled": "true"}), features=FEATURES)
    assert conf["spark.hadoop.feature1"] == "true"


def test_a_feature_conf_overrides_defaults_and_earlier_keys() -> None:
    conf = conf_of(
        spark_job(conf={"spark.flyte.feature1.enabled": "true"}),
        features=FEATURES,
        spark_config_default={"spark.feature1.x": "default"},
    )
    assert conf["spark.feature1.x"] == "1"


@pytest.mark.parametrize("role", ["driver", "executor"])
@pytest.mark.parametrize("source", ["job", "defaults"])
@pytest.mark.parametrize(
    ("given", "expected"),
    [
        pytest.param({"request": "2"}, "2", id="from-the-kubernetes-request"),
        pytest.param({"cores": "3"}, "3", id="from-spark-cores"),
        pytest.param({"request": "2", "cores": "3"}, "2", id="request-takes-precedence"),
        pytest.param({"limit": "5", "request": "2", "cores": "3"}, "5", id="an-explicit-limit-is-kept"),
        pytest.param({"limit": "", "cores": "3"}, "3", id="an-empty-limit-counts-as-unset"),
        pytest.param({}, None, id="nothing-to-copy"),
    ],
)
def test_limit_cores_are_copied_from_requests_or_cores(
    role: str, source: str, given: dict[str, str], expected: str | None
) -> None:
    keys = {
        "limit": f"spark.kubernetes.{role}.limit.cores",
        "request": f"spark.kubernetes.{role}.request.cores",
        "cores": f"spark.{role}.cores",
    }
    values = {keys[k]: v for k, v in given.items()}
    if source == "job":
        conf = conf_of(spark_job(conf=values))
    else:
        conf = conf_of(spark_job(), spark_config_default=values)
    assert conf.get(keys["limit"]) == expected
    other = "executor" if role == "driver" else "driver"
    assert f"spark.kubernetes.{other}.limit.cores" not in conf


# -- driver and executor (createDriverSpec, createExecutorSpec) -------------------------------------------

INTERRUPTIBLE_PLATFORM = {
    "interruptible-tolerations": [
        {"key": "x/flyte", "value": "interruptible", "operator": "Equal", "effect": "NoSchedule"}
    ],
    "interruptible-node-selector": {"x/interruptible": "true"},
    "interruptible-node-selector-requirement": {
        "key": "x/interruptible",
        "operator": "In",
        "values": ["true"],
    },
    "non-interruptible-node-selector-requirement": {"key": "x/interruptible", "operator": "DoesNotExist"},
    "default-tolerations": [{"key": "default", "operator": "Exists"}],
    "default-node-selector": {"user": "default"},
}


def test_the_driver_is_always_non_interruptible_while_the_executor_keeps_the_tasks_interruptibility() -> None:
    spec = build(pod=platform(**INTERRUPTIBLE_PLATFORM), interruptible=True)["spec"]
    driver, executor = spec["driver"], spec["executor"]
    interruptible_toleration = {
        "key": "x/flyte",
        "value": "interruptible",
        "operator": "Equal",
        "effect": "NoSchedule",
    }
    assert interruptible_toleration not in driver["tolerations"]
    assert {"key": "default", "operator": "Exists"} in driver["tolerations"]
    assert interruptible_toleration in executor["tolerations"]
    assert driver["nodeSelector"] == {"user": "default"}
    assert executor["nodeSelector"] == {"user": "default", "x/interruptible": "true"}
    driver_terms = driver["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    executor_terms = executor["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert driver_terms["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": "x/interruptible", "operator": "DoesNotExist"}]}
    ]
    assert executor_terms["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": "x/interruptible", "operator": "In", "values": ["true"]}]}
    ]


def test_a_non_interruptible_task_gets_non_interruptible_executors_too() -> None:
    executor = build(pod=platform(**INTERRUPTIBLE_PLATFORM), interruptible=False)["spec"]["executor"]
    assert all(t.get("key") != "x/flyte" for t in executor["tolerations"])


def test_the_context_wrapper_overrides_only_what_it_is_given() -> None:
    tctx = tctx_for(interruptible=True)
    wrapped = PluginTaskExecutionContext(tctx, interruptible=False)
    assert wrapped.metadata.interruptible is False
    assert tctx.metadata.interruptible is True
    assert wrapped.metadata.task_execution_id == tctx.metadata.task_execution_id
    assert wrapped.task_reader is tctx.task_reader
    assert PluginTaskExecutionContext(tctx).metadata is tctx.metadata


def test_spark_pod_spec_fields_come_from_the_pod_and_its_primary_container() -> None:
    pod = platform(
        **{
            "scheduler-name": "flyte-scheduler",
            "enable-host-networking-pod": True,
            "default-pod-security-context": {"runAsUser": 1000, "fsGroup": 2000},
            "default-security-context": {"allowPrivilegeEscalation": False},
            "default-pod-dns-config": {
                "nameservers": ["8.8.8.8"],
                "options": [{"name": "ndots", "value": "1"}],
            },
            "default-affinity": {"podAffinity": {}},
            "default-annotations": {"cfg": "annotation"},
            "default-labels": {"cfg": "label"},
        }
    )
    spec = build(pod=pod)["spec"]
    for role in ("driver", "executor"):
        role_spec = spec[role]
        assert role_spec["image"] == IMAGE
        assert role_spec["schedulerName"] == "flyte-scheduler"
        assert role_spec["hostNetwork"] is True
        assert role_spec["podSecurityContext"] == {"runAsUser": 1000, "fsGroup": 2000}
        assert role_spec["securityContext"] == {"allowPrivilegeEscalation": False}
        assert role_spec["dnsConfig"] == {
            "nameservers": ["8.8.8.8"],
            "options": [{"name": "ndots", "value": "1"}],
        }
        assert role_spec["affinity"] == {"podAffinity": {}}
        assert role_spec["annotations"]["cfg"] == "annotation"
        assert role_spec["labels"]["cfg"] == "label"
        assert role_spec["env"][0] == {"name": "FOO", "value": "bar"}
        assert role_spec["env"][-1] == {"name": "FLYTE_MAX_ATTEMPTS", "value": "3"}


def test_execution_annotations_and_labels_override_config_defaults() -> None:
    pod = platform(**{"default-annotations": {"a": "cfg", "b": "cfg"}, "default-labels": {"l": "cfg"}})
    driver = build(pod=pod, annotations={"a": "exec"}, labels={"l": "exec"})["spec"]["driver"]
    assert driver["annotations"]["a"] == "exec"
    assert driver["annotations"]["b"] == "cfg"
    assert driver["labels"]["l"] == "exec"


@pytest.mark.parametrize(
    ("exec_kw", "expected"),
    [
        pytest.param(
            {"serviceAccount": "exec-sa", "securityContext": {"runAs": {"k8sServiceAccount": "sc-sa"}}},
            "sc-sa",
            id="security-context-first",
        ),
        pytest.param({"serviceAccount": "exec-sa"}, "exec-sa", id="then-the-executions"),
        pytest.param({}, "spark", id="else-spark"),
    ],
)
def test_service_account_chain(exec_kw: dict[str, Any], expected: str) -> None:
    spec = build(**exec_kw)["spec"]
    assert spec["driver"]["serviceAccount"] == expected
    assert spec["executor"]["serviceAccount"] == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2", 2),
        ("+3", 3),
        ("-1", -1),
        ("0", None),
        ("1.5", None),
        ("2 ", None),
        ("abc", None),
        ("", None),
        ("2147483648", None),
        ("1_0", None),
    ],
)
def test_cores_and_instances_parse_as_go_int32_and_zero_or_unparseable_is_unset(
    value: str, expected: int | None
) -> None:
    spec = build(
        spark_job(
            conf={
                "spark.driver.cores": value,
                "spark.executor.cores": value,
                "spark.executor.instances": value,
            }
        )
    )["spec"]
    assert spec["driver"].get("cores") == expected
    assert spec["executor"].get("cores") == expected
    assert spec["executor"].get("instances") == expected
    assert "instances" not in spec["driver"]


def test_memory_comes_from_conf_and_is_unset_when_empty() -> None:
    spec = build(spark_job(conf={"spark.driver.memory": "1g", "spark.executor.memory": "2g"}))["spec"]
    assert (spec["driver"]["memory"], spec["executor"]["memory"]) == ("1g", "2g")
    spec = build(spark_job(conf={"spark.driver.memory": ""}))["spec"]
    assert "memory" not in spec["driver"]
    assert "memory" not in spec["executor"]


# -- overlays ---------------------------------------------------------------------------------------------


def test_driver_pod_overlay_appends_args_and_env_with_duplicates_and_drops_unmatched_containers() -> None:
    overlay = {
        "podSpec": {
            "containers": [
                {
                    "name": GENERATED_NAME,
                    "args": ["--extra"],
                    "env": [{"name": "FOO", "value": "overlay"}],
                },
                {"name": "not-in-the-base", "image": "busybox"},
            ],
            "nodeSelector": {"disk": "ssd"},
            "priorityClassName": "high",
        }
    }
    tctx = tctx_for(custom=spark_job(driver_pod=overlay))
    app = build_spark_application(tctx, platform=platform(), config=spark_config(), now=NOW)
    driver, executor = app["spec"]["driver"], app["spec"]["executor"]
    foo = [e["value"] for e in driver["env"] if e["name"] == "FOO"]
    assert foo == ["bar", "overlay"]
    assert driver["nodeSelector"] == {"disk": "ssd"}
    assert driver["priorityClassName"] == "high"
    assert "priorityClassName" not in executor
    assert "nodeSelector" not in executor
    # The application's arguments come from the executor's primary container, not the driver's.
    assert app["spec"]["arguments"][-1] != "--extra"


def test_executor_pod_overlay_args_become_the_application_arguments() -> None:
    overlay = {"podSpec": {"containers": [{"name": GENERATED_NAME, "args": ["--extra"], "image": "other:2"}]}}
    spec = build(spark_job(executor_pod=overlay))["spec"]
    assert spec["arguments"][-1] == "--extra"
    assert spec["arguments"][0] == "pyflyte-execute"
    assert spec["image"] == "other:2"
    assert spec["executor"]["image"] == "other:2"
    assert spec["driver"]["image"] == IMAGE


def test_an_overlay_primary_container_name_picks_the_primary() -> None:
    override = {
        "primaryContainerName": "main",
        "podSpec": {
            "containers": [
                {"name": "main", "image": "main:1", "args": ["run"]},
                {"name": "helper", "image": "helper:1", "env": [{"name": "H", "value": "1"}]},
            ]
        },
    }
    spec = build(
        spark_job(driver_pod={"primaryContainerName": "helper"}),
        overrides={"podTemplate": override},
    )["spec"]
    assert spec["driver"]["image"] == "helper:1"
    assert {"name": "H", "value": "1"} in spec["driver"]["env"]
    assert spec["executor"]["image"] == "main:1"
    assert spec["arguments"] == ["run"]


def test_overlay_containers_that_match_no_base_container_are_dropped() -> None:
    overlay = {
        "primaryContainerName": "sidecar",
        "podSpec": {"containers": [{"name": "sidecar", "image": "busybox"}]},
    }
    with pytest.raises(BadTaskSpecification, match=r"container \[sidecar\] not defined"):
        build(spark_job(driver_pod=overlay))


def test_an_overlay_primary_container_that_does_not_exist_is_a_bad_task_specification() -> None:
    with pytest.raises(BadTaskSpecification, match=r"container \[nope\] not defined"):
        build(spark_job(executor_pod={"primaryContainerName": "nope"}))


def test_k8s_pod_metadata_wins_over_execution_and_config_metadata() -> None:
    pod = platform(**{"default-annotations": {"a": "cfg"}, "default-labels": {"l": "cfg"}})
    overlay = {"metadata": {"annotations": {"a": "pod", "only": "pod"}, "labels": {"l": "pod"}}}
    spec = build(spark_job(driver_pod=overlay), pod=pod, annotations={"a": "exec"}, labels={"l": "exec"})[
        "spec"
    ]
    assert spec["driver"]["annotations"]["a"] == "pod"
    assert spec["driver"]["annotations"]["only"] == "pod"
    assert spec["driver"]["labels"]["l"] == "pod"
    assert spec["executor"]["annotations"]["a"] == "exec"
    assert "only" not in spec["executor"]["annotations"]


def test_an_overlay_pod_spec_that_is_not_a_pod_spec_is_a_bad_task_specification() -> None:
    with pytest.raises(BadTaskSpecification, match="Unable to unmarshal driver pod spec"):
        build(spark_job(driver_pod={"podSpec": {"containers": "not-a-list"}}))


# -- the application (createSparkApplication) -------------------------------------------------------------


@pytest.mark.parametrize(
    ("application_type", "expected"),
    [(None, "Python"), ("PYTHON", "Python"), ("JAVA", "Java"), ("SCALA", "Scala"), ("R", "R")],
)
def test_application_types(application_type: str | None, expected: str) -> None:
    assert build(spark_job(application_type=application_type))["spec"]["type"] == expected


def test_an_unknown_application_type_is_python() -> None:
    assert spark_pb2.SparkApplication.Type.Name(0) == "PYTHON"
    assert build(spark_job(application_type=7))["spec"]["type"] == "Python"  # type: ignore[arg-type]


def test_batch_scheduler_is_set_when_the_conf_has_the_key_even_if_empty() -> None:
    assert build(spark_job(conf={"spark.batchScheduler": "volcano"}))["spec"]["batchScheduler"] == "volcano"
    assert build(spark_job(conf={"spark.batchScheduler": ""}))["spec"]["batchScheduler"] == ""
    assert "batchScheduler" not in build(spark_job())["spec"]
    config = spark_config(spark_config_default={"spark.batchScheduler": "yunikorn"})
    assert build(spark_job(), config=config)["spec"]["batchScheduler"] == "yunikorn"


def test_the_application_shape() -> None:
    app = build(spark_job(hadoop={"fs.x": "1"}))
    assert app["apiVersion"] == "sparkoperator.k8s.io/v1beta2"
    assert app["kind"] == "SparkApplication"
    assert "metadata" not in app
    spec = app["spec"]
    assert spec["mode"] == "cluster"
    assert spec["image"] == IMAGE
    assert spec["hadoopConf"] == {"fs.x": "1"}
    assert spec["restartPolicy"] == {"type": "OnFailure", "onSubmissionFailureRetries": 14}
    assert spec["arguments"] == [
        "pyflyte-execute",
        "--inputs",
        "s3://bucket/data/metadata/p/d/exec1/n0/inputs.pb",
        "--output-prefix",
        "s3://bucket/data/metadata/p/d/exec1/n0/0",
    ]
    assert "hadoopConf" not in build(spark_job())["spec"]


def test_a_container_image_override_reaches_both_roles_and_the_application() -> None:
    spec = build(overrides={"containerImage": "override:9"})["spec"]
    assert spec["image"] == spec["driver"]["image"] == spec["executor"]["image"] == "override:9"
