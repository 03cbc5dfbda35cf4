"""The driver-pod spark-operator (``SparkDriverOperator``) without Spark: the driver pod it builds from a
SparkApplication the plugin built, the status it derives from the driver pod (pure), and whole applications
on the simulated kubelet, where the driver pod goes through its phases without running anything."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import NOW, build, execution, spark_job, spark_template

from support.waiting import wait_until
from taskplug.core import PluginRegistry
from taskplug.executor import Platform, parse_spec
from taskplug.executor._executor import ExecutorSettings
from taskplug.executor._runtime import open_executor
from taskplug.executor._store import MemoryStateStore
from taskplug.k8s import POD
from taskplug.localcluster import NAMESPACE, LocalCluster
from taskplug.plugins.pod import plugin_entries as pod_entries
from taskplug.plugins.spark import (
    ANNOTATION_SIMULATE_FAILURE,
    ANNOTATION_SIMULATE_SUBMISSION_FAILURE,
    SPARK_APPLICATION,
    plugin_entries,
)
from taskplug.plugins.spark._local_driver import (
    HostSpark,
    SparkDriverOperator,
    Submission,
    SubmissionError,
    application_state,
    build_driver_pod,
    driver_pod_name,
    driver_state,
    follow_driver,
    host_application_file,
    submitted_status,
)

HOST = HostSpark(python="/host/venv/bin/python", bin_dir=Path("/host/venv/bin"), java_home=None)
AT = "2026-03-01T12:00:00Z"


def submission(**kw: Any) -> Submission:
    values: dict[str, Any] = {
        "app_id": "spark-0123456789abcdef0123456789abcdef",
        "submission_id": "9d6f0c1e-0000-4000-8000-000000000001",
        "ui_port": 40401,
        "host": HOST,
        "application_file": "/host/venv/bin/entrypoint.py",
    }
    values.update(kw)
    return Submission(**values)


def application(conf: dict[str, str] | None = None, **job: Any) -> dict[str, Any]:
    """A SparkApplication as the plugin builds it, with the metadata the plugin manager adds."""
    app = build(spark_job(conf=conf, **job))
    app["metadata"] = {
        "name": "exec1-n0-0",
        "namespace": "p-d",
        "uid": "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
        "labels": {"execution-id": "exec1", "kueue.x-k8s.io/queue-name": "q"},
    }
    return app


def conf_args(args: list[str]) -> dict[str, str]:
    pairs = [args[i + 1] for i, a in enumerate(args) if a == "--conf"]
    return dict(p.split("=", 1) for p in pairs)


def env_of(pod: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0]["env"]}


# -- the driver pod -----------------------------------------------------------------------------------------


def test_the_driver_pod_runs_spark_submit_in_local_mode_with_the_applications_conf_and_arguments() -> None:
    app = application(
        {"spark.executor.instances": "3", "spark.executor.cores": "2", "spark.master": "k8s://x"}
    )
    pod = build_driver_pod(app, submission())
    [container] = pod["spec"]["containers"]
    assert container["name"] == "spark-kubernetes-driver"
    assert container["image"] == "ghcr.io/org/spark:v1"
    assert container["command"] == ["spark-submit"]
    args = container["args"]
    # What the executors would have had (3 × 2 cores) becomes the local driver's threads.
    assert args[:6] == ["--master", "local[6]", "--deploy-mode", "client", "--name", "exec1-n0-0"]
    conf = conf_args(args)
    assert "spark.master" not in conf
    assert conf["spark.executor.instances"] == "3"
    assert conf["spark.kubernetes.driverEnv.FLYTE_START_TIME"] == "1772366400123"
    assert (conf["spark.driver.bindAddress"], conf["spark.driver.host"]) == ("127.0.0.1", "127.0.0.1")
    assert conf["spark.ui.port"] == "40401"
    assert conf["spark.pyspark.python"] == conf["spark.pyspark.driver.python"] == "/host/venv/bin/python"
    # The application file, then the task's arguments as the plugin wrote them (templates filled in).
    tail = args[args.index("/host/venv/bin/entrypoint.py") :]
    assert tail[1:3] == ["pyflyte-execute", "--inputs"]
    assert tail[3].endswith("inputs.pb")
    assert pod["spec"]["restartPolicy"] == "Never"
    assert container["ports"] == [{"name": "spark-ui", "containerPort": 40401, "protocol": "TCP"}]


def test_the_driver_pod_is_named_labelled_and_owned_as_the_operator_and_spark_make_it() -> None:
    app = application()
    pod = build_driver_pod(app, submission())
    meta = pod["metadata"]
    assert (meta["name"], meta["namespace"]) == ("exec1-n0-0-driver", "p-d")
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "sparkoperator.k8s.io/v1beta2",
            "kind": "SparkApplication",
            "name": "exec1-n0-0",
            "uid": "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    labels = meta["labels"]
    assert labels["execution-id"] == "exec1"  # the application's labels are propagated ...
    assert "kueue.x-k8s.io/queue-name" not in labels  # ... but Kueue's
    assert labels["spark-role"] == "driver"
    assert labels["spark-app-selector"] == "spark-0123456789abcdef0123456789abcdef"
    assert labels["sparkoperator.k8s.io/app-name"] == "exec1-n0-0"
    assert labels["sparkoperator.k8s.io/submission-id"] == "9d6f0c1e-0000-4000-8000-000000000001"
    assert labels["sparkoperator.k8s.io/launched-by-spark-operator"] == "true"
    assert meta["annotations"] == app["spec"]["driver"]["annotations"]
    assert pod["spec"]["serviceAccountName"] == app["spec"]["driver"]["serviceAccount"]


def test_the_driver_gets_spark_env_then_the_drivers_env_then_the_local_bindings() -> None:
    app = application()
    env = env_of(build_driver_pod(app, submission()))
    assert env["SPARK_APPLICATION_ID"] == "spark-0123456789abcdef0123456789abcdef"
    assert env["FLYTE_START_TIME"] == "1772366400123"  # spark.kubernetes.driverEnv.*
    assert env["FOO"] == "bar"  # the task's env, through spec.driver.env
    assert env["FLYTE_MAX_ATTEMPTS"] == "3"
    assert env["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert env["SPARK_LOCAL_DIRS"] == "spark-local-dir"
    assert env["PYSPARK_PYTHON"] == "/host/venv/bin/python"
    assert "JAVA_HOME" not in env
    with_java = build_driver_pod(app, submission(host=HostSpark("/p", Path("/b"), "/usr/lib/jvm/java-17")))
    assert env_of(with_java)["JAVA_HOME"] == "/usr/lib/jvm/java-17"


@pytest.mark.parametrize(
    ("conf", "app_type", "requests", "limits"),
    [
        # A Python application: 1000 MiB + max(0.4 × 1000, 384) overhead.
        ({"spark.driver.memory": "1000M"}, None, {"cpu": "1", "memory": "1400Mi"}, {"memory": "1400Mi"}),
        # Defaults: 1g, cores 1; the minimum overhead of 384 MiB for a JVM application (factor 0.1).
        ({}, "JAVA", {"cpu": "1", "memory": "1408Mi"}, {"memory": "1408Mi"}),
        (
            {"spark.driver.memory": "2g", "spark.driver.memoryOverhead": "100", "spark.driver.cores": "2"},
            None,
            {"cpu": "2", "memory": "2148Mi"},
            # The plugin copies spark.driver.cores into the driver's core limit.
            {"memory": "2148Mi", "cpu": "2"},
        ),
        (
            {"spark.kubernetes.driver.request.cores": "500m", "spark.kubernetes.driver.limit.cores": "3"},
            None,
            {"cpu": "500m", "memory": "1433Mi"},
            {"memory": "1433Mi", "cpu": "3"},
        ),
        (
            {"spark.driver.memoryOverheadFactor": "0.5"},
            None,
            {"cpu": "1", "memory": "1536Mi"},
            {"memory": "1536Mi"},
        ),
    ],
)
def test_the_driver_resources_are_sized_as_spark_sizes_the_driver_pod(
    conf: dict[str, str], app_type: str | None, requests: dict[str, str], limits: dict[str, str]
) -> None:
    app = application(conf, application_type=app_type)
    resources = build_driver_pod(app, submission())["spec"]["containers"][0]["resources"]
    assert resources == {"requests": requests, "limits": limits}


def test_a_dollar_in_the_conf_or_arguments_is_not_expanded_by_the_kubelet() -> None:
    app = application({"spark.app.tag": "$(HOME)"})
    app["spec"]["arguments"] = ["cost: $5"]
    args = build_driver_pod(app, submission())["spec"]["containers"][0]["args"]
    assert "spark.app.tag=$$(HOME)" in args
    assert args[-1] == "cost: $$5"


def test_a_disabled_ui_gets_no_port() -> None:
    app = application({"spark.ui.enabled": "false"})
    pod = build_driver_pod(app, submission(ui_port=None))
    container = pod["spec"]["containers"][0]
    assert "ports" not in container
    assert "spark.ui.port" not in conf_args(container["args"])


def test_a_java_application_is_submitted_with_its_main_class() -> None:
    app = application(main_class="org.example.Main", main_application_file="local:///opt/app.jar")
    args = build_driver_pod(app, submission(application_file="/opt/app.jar"))["spec"]["containers"][0]["args"]
    assert args[args.index("--class") + 1] == "org.example.Main"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"mainApplicationFile": None}, "Must specify a primary resource"),
        ({"image": None, "driver": {}}, "Must specify the driver container image"),
        ({"sparkConf": {"spark.driver.memory": "1.5g"}}, "spark.driver.memory='1.5g'"),
        ({"sparkConf": {"spark.executor.instances": "two"}}, "spark.executor.instances='two'"),
    ],
)
def test_what_spark_submit_would_refuse_is_a_submission_error(change: dict[str, Any], message: str) -> None:
    app = application()
    for key, value in change.items():
        if value is None:
            app["spec"].pop(key)
        else:
            app["spec"][key] = value
    with pytest.raises(SubmissionError, match=message):
        build_driver_pod(app, submission())


@pytest.mark.parametrize(
    ("spec", "name"),
    [
        ({}, "app-driver"),
        ({"sparkConf": {"spark.kubernetes.driver.pod.name": "from-conf"}}, "from-conf"),
        (
            {"sparkConf": {"spark.kubernetes.driver.pod.name": "from-conf"}, "driver": {"podName": "own"}},
            "own",
        ),
    ],
)
def test_the_driver_pod_name_follows_get_driver_pod_name(spec: dict[str, Any], name: str) -> None:
    assert driver_pod_name({"metadata": {"name": "app"}, "spec": spec}) == name


def test_the_image_paths_of_the_application_are_mapped_to_this_host(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "entrypoint.py").write_text("")
    app_file = tmp_path / "app.py"
    app_file.write_text("")
    host = HostSpark(python="/p", bin_dir=bin_dir, java_home=None)
    # flytekit's entrypoint, wherever the image has it, is the one installed beside this Python.
    assert host_application_file("local:///usr/local/bin/entrypoint.py", host) == str(
        bin_dir / "entrypoint.py"
    )
    assert host_application_file("local:///opt/venv/bin/entrypoint.py", host) == str(
        bin_dir / "entrypoint.py"
    )
    assert host_application_file(f"local://{app_file}", host) == str(app_file)
    assert host_application_file(str(app_file), host) == str(app_file)
    assert host_application_file("local:///opt/missing.py", host) == "/opt/missing.py"
    assert host_application_file("s3://bucket/app.py", host) == "s3://bucket/app.py"


# -- the status from the driver pod (pure) ------------------------------------------------------------------


def pod(phase: str, exit_code: int | None = None, reason: str = "", message: str = "") -> dict[str, Any]:
    statuses = []
    if exit_code is not None:
        terminated = {"exitCode": exit_code, "reason": reason}
        if message:
            terminated["message"] = message
        statuses = [{"name": "spark-kubernetes-driver", "state": {"terminated": terminated}}]
    return {
        "metadata": {"name": "app-driver", "labels": {"spark-app-selector": "spark-abc"}},
        "status": {"phase": phase, "containerStatuses": statuses},
    }


@pytest.mark.parametrize(
    ("driver", "state", "app_state"),
    [
        (pod("Pending"), "PENDING", "SUBMITTED"),
        (pod("Running"), "RUNNING", "RUNNING"),
        (pod("Running", 0, "Completed"), "COMPLETED", "SUCCEEDING"),
        (pod("Running", 2, "Error"), "FAILED", "FAILING"),
        (pod("Succeeded"), "COMPLETED", "SUCCEEDING"),
        (pod("Failed", 0, "Completed"), "COMPLETED", "SUCCEEDING"),
        (pod("Failed", 137, "OOMKilled"), "FAILED", "FAILING"),
        (pod("Failed"), "FAILED", "FAILING"),
        (pod("Unknown"), "UNKNOWN", "UNKNOWN"),
    ],
)
def test_the_driver_state_and_the_application_state_follow_the_operators_tables(
    driver: dict[str, Any], state: str, app_state: str
) -> None:
    assert driver_state(driver) == state
    assert application_state(state) == app_state


def app_in(state: str, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "app", "namespace": "ns", "annotations": status.pop("annotations", {})},
        "status": {"applicationState": {"state": state}, **status},
    }


def test_a_running_driver_moves_the_application_to_running_with_its_id() -> None:
    assert follow_driver(app_in("SUBMITTED"), pod("Running"), NOW) == {
        "sparkApplicationId": "spark-abc",
        "applicationState": {"state": "RUNNING"},
    }
    assert follow_driver(app_in("RUNNING", sparkApplicationId="spark-abc"), pod("Running"), NOW) is None


def test_a_driver_that_succeeded_completes_the_application_through_succeeding() -> None:
    patch = follow_driver(
        app_in("RUNNING", sparkApplicationId="spark-abc"), pod("Succeeded", 0, "Completed"), NOW
    )
    assert patch == {"terminationTime": AT, "applicationState": {"state": "SUCCEEDING"}}
    assert follow_driver(app_in("SUCCEEDING"), None, NOW) == {"applicationState": {"state": "COMPLETED"}}
    assert follow_driver(app_in("COMPLETED"), pod("Succeeded"), NOW) is None


def test_a_driver_that_failed_fails_the_application_with_the_operators_message() -> None:
    patch = follow_driver(app_in("RUNNING", sparkApplicationId="spark-abc"), pod("Failed", 1, "Error"), NOW)
    assert patch == {
        "terminationTime": AT,
        "applicationState": {
            "errorMessage": "driver container failed with ExitCode: 1, Reason: Error",
            "state": "FAILING",
        },
    }
    assert follow_driver(app_in("FAILING"), None, NOW) == {"applicationState": {"state": "FAILED"}}


def test_the_driver_containers_termination_message_ends_the_error_message() -> None:
    failed = pod("Failed", 128, "StartError", 'exec: "spark-submit": executable file not found in $PATH\n')
    patch = follow_driver(app_in("SUBMITTED"), failed, NOW)
    assert patch is not None
    assert patch["applicationState"]["errorMessage"] == (
        "driver container failed with ExitCode: 128, Reason: StartError, "
        'Message: exec: "spark-submit": executable file not found in $PATH'
    )


def test_a_driver_pod_that_is_gone_fails_the_application() -> None:
    assert follow_driver(app_in("RUNNING"), None, NOW) == {
        "applicationState": {"state": "FAILING", "errorMessage": "driver pod not found"},
        "terminationTime": AT,
    }


def test_the_failure_annotation_fails_the_application_once_the_driver_ended() -> None:
    annotated = app_in(
        "RUNNING", sparkApplicationId="spark-abc", annotations={ANNOTATION_SIMULATE_FAILURE: "boom"}
    )
    assert follow_driver(annotated, pod("Running"), NOW) is None
    assert follow_driver(annotated, pod("Succeeded", 0, "Completed"), NOW) == {
        "terminationTime": AT,
        "applicationState": {"errorMessage": "boom", "state": "FAILING"},
    }


def test_the_submitted_status_names_the_driver_its_ui_and_counts_the_attempt() -> None:
    app = application()
    created = build_driver_pod(app, submission())
    assert submitted_status(app, created, NOW) == {
        "submissionID": "9d6f0c1e-0000-4000-8000-000000000001",
        "lastSubmissionAttemptTime": AT,
        "submissionAttempts": 1,
        "executionAttempts": 1,
        "driverInfo": {"podName": "exec1-n0-0-driver", "webUIAddress": "127.0.0.1:40401", "webUIPort": 40401},
        "applicationState": {"state": "SUBMITTED"},
    }


# -- on the simulated kubelet ---------------------------------------------------------------------------------


def state_is(*states: str) -> Any:
    return lambda obj: ((obj.get("status") or {}).get("applicationState") or {}).get("state") in states


class StatesSeen:
    """Every applicationState.state the API server stored for SparkApplications, in order."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.states: list[str] = []
        cluster.store.observers.append(self._observe)

    def _observe(self, rtype: Any, event: Any) -> None:
        if rtype.plural == SPARK_APPLICATION.plural:
            state = ((event.obj.get("status") or {}).get("applicationState") or {}).get("state") or ""
            if not self.states or self.states[-1] != state:
                self.states.append(state)


def simulated_app(annotations: dict[str, str] | None = None) -> dict[str, Any]:
    app = build(spark_job(), annotations=annotations or {})
    app["metadata"] = {"name": "app", "namespace": "default", "annotations": dict(annotations or {})}
    return app


async def test_on_the_simulated_kubelet_the_application_follows_its_driver_pod_to_completed() -> None:
    async with LocalCluster(mode="simulated", bookmark_interval=0) as cluster:
        seen = StatesSeen(cluster)
        cluster.register_operator(SPARK_APPLICATION, SparkDriverOperator())
        created = await cluster.client().create(SPARK_APPLICATION, simulated_app())
        done = await cluster.wait_for(SPARK_APPLICATION, "default", "app", state_is("COMPLETED"), within=10)
        driver = await cluster.client().get(POD, "default", "app-driver")
    # The simulated driver may finish before its Running phase is looked at: RUNNING may be skipped.
    assert seen.states in (
        ["", "SUBMITTED", "RUNNING", "SUCCEEDING", "COMPLETED"],
        ["", "SUBMITTED", "SUCCEEDING", "COMPLETED"],
    )
    assert driver["status"]["phase"] == "Succeeded"
    assert driver["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]
    status = done["status"]
    assert status["driverInfo"]["podName"] == "app-driver"
    assert status["sparkApplicationId"] == driver["metadata"]["labels"]["spark-app-selector"]
    assert status["submissionID"] == driver["metadata"]["labels"]["sparkoperator.k8s.io/submission-id"]
    assert status["terminationTime"]


async def test_on_the_simulated_kubelet_a_driver_exiting_non_zero_fails_the_application() -> None:
    async with LocalCluster(mode="simulated", bookmark_interval=0) as cluster:
        cluster.register_operator(SPARK_APPLICATION, SparkDriverOperator())
        # The execution's annotations reach the driver pod (spec.driver.annotations), which the kubelet reads.
        await cluster.client().create(
            SPARK_APPLICATION, simulated_app({"taskplug.io/simulate-exit-code": "3"})
        )
        done = await cluster.wait_for(SPARK_APPLICATION, "default", "app", state_is("FAILED"), within=10)
    assert done["status"]["applicationState"] == {
        "state": "FAILED",
        "errorMessage": "driver container failed with ExitCode: 3, Reason: Error",
    }


async def test_the_submission_failure_annotation_fails_the_submission_and_creates_no_driver() -> None:
    async with LocalCluster(mode="simulated", bookmark_interval=0) as cluster:
        cluster.register_operator(SPARK_APPLICATION, SparkDriverOperator())
        app = simulated_app({ANNOTATION_SIMULATE_SUBMISSION_FAILURE: "no quota"})
        await cluster.client().create(SPARK_APPLICATION, app)
        done = await cluster.wait_for(
            SPARK_APPLICATION, "default", "app", state_is("SUBMISSION_FAILED"), within=10
        )
        pods, _ = await cluster.client().list(POD, "default")
    assert done["status"]["applicationState"] == {"state": "SUBMISSION_FAILED", "errorMessage": "no quota"}
    assert done["status"]["submissionAttempts"] == 1
    assert pods == []


async def test_a_driver_pod_the_api_refuses_is_a_failed_submission() -> None:
    async with LocalCluster(mode="simulated", bookmark_interval=0) as cluster:
        cluster.register_operator(SPARK_APPLICATION, SparkDriverOperator())
        app = simulated_app()
        app["spec"]["driver"]["podName"] = "Not_A_Valid_Name"
        await cluster.client().create(SPARK_APPLICATION, app)
        done = await cluster.wait_for(
            SPARK_APPLICATION, "default", "app", state_is("SUBMISSION_FAILED"), within=10
        )
    message = done["status"]["applicationState"]["errorMessage"]
    assert message.startswith("failed to submit spark application: failed to run spark-submit: ")
    assert "Not_A_Valid_Name" in message


async def test_deleting_the_application_deletes_its_driver_pod() -> None:
    async with LocalCluster(mode="simulated", bookmark_interval=0) as cluster:
        cluster.register_operator(SPARK_APPLICATION, SparkDriverOperator())
        # A driver that runs for an hour: the application is deleted while it runs.
        await cluster.client().create(
            SPARK_APPLICATION, simulated_app({"taskplug.io/simulate-duration": "3600"})
        )
        await cluster.wait_for(SPARK_APPLICATION, "default", "app", state_is("RUNNING"), within=10)
        await cluster.client().delete(SPARK_APPLICATION, "default", "app")
        await wait_until(lambda: cluster.store.try_get(POD, "default", "app-driver") is None, within=10)


# -- a spark task through the executor -----------------------------------------------------------------------


async def run_task(tmp_path: Path, annotations: dict[str, str] | None = None) -> Any:
    registry = PluginRegistry()
    for entry in [*pod_entries(), *plugin_entries()]:
        registry.register(entry)
    platform = Platform.load(registry=registry)
    settings = ExecutorSettings(data_root=str(tmp_path / "data"), resync_period=0.05)
    spec = parse_spec(
        {
            "template": spark_template(spark_job(conf={"spark.executor.instances": "2"})),
            "execution": execution(maxAttempts=2, annotations=annotations or {}),
        }
    )
    async with LocalCluster(mode="simulated", bookmark_interval=0) as cluster:
        cluster.register_operator(SPARK_APPLICATION, SparkDriverOperator())
        await cluster.client().create(NAMESPACE, {"metadata": {"name": "p-d"}})
        async with open_executor(
            platform, kube_client=cluster.client(), store=MemoryStateStore(), settings=settings
        ) as executor:
            return await executor.run(spec)


async def test_a_spark_task_runs_to_success_through_its_simulated_driver(tmp_path: Path) -> None:
    result = await run_task(tmp_path)
    assert result.phase == "Success", result.error
    assert result.attempts == 1


async def test_the_failure_annotation_fails_each_attempt_of_a_spark_task(tmp_path: Path) -> None:
    result = await run_task(tmp_path, {ANNOTATION_SIMULATE_FAILURE: "driver OOM"})
    assert (result.phase, result.attempts) == ("PermanentFailure", 2)
    assert result.error["code"] == "RetriesExhausted|DownstreamSystemError"
    assert result.error["message"].split("::", 1)[1] == "Spark Job Failed with Error: driver OOM"


def test_the_clock_time_of_a_status_is_rfc3339() -> None:
    # The operator writes times as the API does (seconds, Z), whatever the clock's precision.
    app = application()
    created = build_driver_pod(app, submission())
    when = datetime(2026, 3, 1, 12, 0, 0, 999999, tzinfo=UTC)
    assert submitted_status(app, created, when)["lastSubmissionAttemptTime"] == AT
