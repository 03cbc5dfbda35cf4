"""TFJob and MPIJob building."""

from __future__ import annotations

from typing import Any

import pytest
from kubeflow_helpers import ARGS, IMAGE, RENDERED_INPUTS, container_of, platform, replica, tctx_for, template

from taskplug.core import BadTaskSpecification
from taskplug.plugins.kubeflow import build_mpi_job, build_tf_job


def build_tf(custom: Any, *, version: int = 1, **kw: Any) -> dict[str, Any]:
    return build_tf_job(tctx_for(template("tensorflow", custom, version=version), **kw), platform=platform())


def build_mpi(
    custom: Any, *, version: int = 1, config: dict[str, str] | None = None, **kw: Any
) -> dict[str, Any]:
    task = template("mpi", custom, version=version, config=config, **kw)
    return build_mpi_job(tctx_for(task), platform=platform())


# -- TensorFlow -------------------------------------------------------------------------------------------


def test_a_v1_tf_task_has_a_replica_spec_per_role_with_replicas() -> None:
    # As flytekit 1.16 sends TfJob(worker=Worker(replicas=2), chief=Chief(replicas=1), ps=PS(replicas=1)).
    custom = {
        "chiefReplicas": {"replicas": 1.0, "resources": {}},
        "evaluatorReplicas": {"resources": {}},
        "psReplicas": {"replicas": 1.0, "resources": {}},
        "workerReplicas": {"replicas": 2.0, "resources": {}},
    }
    job = build_tf(custom)
    assert (job["apiVersion"], job["kind"]) == ("kubeflow.org/v1", "TFJob")
    specs = job["spec"]["tfReplicaSpecs"]
    assert {k: v["replicas"] for k, v in specs.items()} == {"Chief": 1, "PS": 1, "Worker": 2}
    assert job["spec"]["runPolicy"] == {}
    for spec in specs.values():
        assert spec["restartPolicy"] == "Never"
        main = container_of(spec, "tensorflow")
        assert main["args"][2] == RENDERED_INPUTS
        assert "_F_WN" not in str(main.get("env"))


def test_a_v1_tf_role_counts_from_common_when_present() -> None:
    custom = {
        "workerReplicas": {
            "replicas": 0,
            "common": {"replicas": 3, "restartPolicy": "RESTART_POLICY_ON_FAILURE"},
        },
        "psReplicas": {"replicas": 2, "common": {"replicas": 0}},
    }
    specs = build_tf(custom)["spec"]["tfReplicaSpecs"]
    assert sorted(specs) == ["Worker"]
    assert (specs["Worker"]["replicas"], specs["Worker"]["restartPolicy"]) == (3, "OnFailure")


def test_a_v0_tf_task_copies_one_pod_into_each_role_with_a_count() -> None:
    job = build_tf({"workers": 2, "psReplicas": 1, "chiefReplicas": 0, "evaluatorReplicas": 1}, version=0)
    specs = job["spec"]["tfReplicaSpecs"]
    assert {k: v["replicas"] for k, v in specs.items()} == {"Worker": 2, "PS": 1, "Evaluator": 1}
    assert specs["Worker"]["template"] == specs["PS"]["template"]
    assert all(s["restartPolicy"] == "Never" for s in specs.values())


@pytest.mark.parametrize(
    ("custom", "version"),
    [
        ({"chiefReplicas": {"replicas": 1}}, 1),
        ({"workerReplicas": {"replicas": -2}, "psReplicas": {"replicas": 1}}, 1),
        ({"psReplicas": 1}, 0),
    ],
)
def test_a_tf_job_needs_workers(custom: dict[str, Any], version: int) -> None:
    with pytest.raises(
        BadTaskSpecification, match=r"^\[BadTaskSpecification\] number of workers must be greater than 0$"
    ):
        build_tf(custom, version=version)


def test_a_tf_replica_image_and_run_policy_are_applied() -> None:
    custom = {
        "workerReplicas": {"replicas": 1, "image": "tf:2"},
        "runPolicy": {"cleanPodPolicy": "CLEANPOD_POLICY_RUNNING", "activeDeadlineSeconds": 30},
    }
    job = build_tf(custom)
    assert container_of(job["spec"]["tfReplicaSpecs"]["Worker"], "tensorflow")["image"] == "tf:2"
    assert job["spec"]["runPolicy"] == {"cleanPodPolicy": "Running", "activeDeadlineSeconds": 30}


def test_a_bad_tf_replica_is_reported_as_a_replica_spec_error() -> None:
    custom = {"workerReplicas": {"replicas": 1, "resources": {"limits": [{"name": "MEMORY", "value": "x"}]}}}
    with pytest.raises(
        BadTaskSpecification, match=r"^\[BadTaskSpecification\] Unable to create replica spec: \["
    ):
        build_tf(custom)


# -- MPI --------------------------------------------------------------------------------------------------


def test_a_v1_mpi_task_has_one_launcher_and_the_workers() -> None:
    custom = {
        "launcherReplicas": {"replicas": 1.0, "resources": {}},
        "slots": 2.0,
        "workerReplicas": {"replicas": 2.0, "resources": {}},
    }
    job = build_mpi(custom)
    assert (job["apiVersion"], job["kind"]) == ("kubeflow.org/v1", "MPIJob")
    specs = job["spec"]["mpiReplicaSpecs"]
    assert {k: v["replicas"] for k, v in specs.items()} == {"Launcher": 1, "Worker": 2}
    assert job["spec"]["runPolicy"] == {}
    for spec in specs.values():
        assert container_of(spec, "mpi")["image"] == IMAGE


def test_v1_mpi_slots_become_the_slots_per_worker() -> None:
    # Deviation (Q3): Flyte leaves slotsPerWorker at 1 whatever the task says.
    custom = {"launcherReplicas": {"replicas": 1}, "workerReplicas": {"replicas": 2}, "slots": 4}
    assert build_mpi(custom)["spec"]["slotsPerWorker"] == 4
    assert build_mpi({"workerReplicas": {"replicas": 2}})["spec"]["slotsPerWorker"] == 1


def test_a_v1_mpi_replica_command_becomes_its_containers_args() -> None:
    custom = {
        "launcherReplicas": {"replicas": 3, "command": ["mpirun", "-np", "2", "python", "train.py"]},
        "workerReplicas": {"replicas": 2, "command": ["python", "worker.py"]},
    }
    job = build_mpi(custom, command=["/bin/entry"])
    specs = job["spec"]["mpiReplicaSpecs"]
    assert specs["Launcher"]["replicas"] == 1  # the launcher is the master: always one
    launcher = container_of(specs["Launcher"], "mpi")
    worker = container_of(specs["Worker"], "mpi")
    assert (launcher["command"], launcher["args"]) == (
        ["/bin/entry"],
        ["mpirun", "-np", "2", "python", "train.py"],
    )
    assert (worker["command"], worker["args"]) == (["/bin/entry"], ["python", "worker.py"])


def test_a_v1_mpi_replica_without_a_command_keeps_the_task_args() -> None:
    job = build_mpi({"workerReplicas": {"replicas": 1}})
    assert container_of(job["spec"]["mpiReplicaSpecs"]["Worker"], "mpi")["args"][0] == ARGS[0]


def test_a_v0_mpi_task_takes_the_worker_command_from_the_template_config() -> None:
    custom = {"numWorkers": 2, "numLauncherReplicas": 0, "slots": 3}
    job = build_mpi(
        custom, version=0, config={"worker_spec_command": "python  worker.py --x"}, command=["bash"]
    )
    specs = job["spec"]["mpiReplicaSpecs"]
    assert {k: v["replicas"] for k, v in specs.items()} == {"Launcher": 1, "Worker": 2}
    assert job["spec"]["slotsPerWorker"] == 3
    worker = container_of(specs["Worker"], "mpi")
    assert "command" not in worker
    assert worker["args"] == ["python", "", "worker.py", "--x"]  # split on single spaces, as Go does
    launcher = container_of(specs["Launcher"], "mpi")
    assert launcher["command"] == ["bash"]
    assert launcher["args"][0] == ARGS[0]


def test_a_v0_mpi_worker_without_a_command_config_has_neither_command_nor_args() -> None:
    job = build_mpi({"numWorkers": 1, "numLauncherReplicas": 2}, version=0, command=["bash"])
    specs = job["spec"]["mpiReplicaSpecs"]
    assert specs["Launcher"]["replicas"] == 2
    worker = container_of(specs["Worker"], "mpi")
    assert "command" not in worker and "args" not in worker


@pytest.mark.parametrize(
    ("custom", "version"), [({"workerReplicas": {"replicas": 0}}, 1), ({"numWorkers": 0}, 0)]
)
def test_an_mpi_job_needs_workers(custom: dict[str, Any], version: int) -> None:
    with pytest.raises(BadTaskSpecification, match="number of workers must be greater than 0"):
        build_mpi(custom, version=version)


def test_a_bad_mpi_launcher_is_named_in_the_error() -> None:
    custom = {
        "launcherReplicas": {"resources": {"requests": [{"name": "CPU", "value": "?"}]}},
        "workerReplicas": {"replicas": 1},
    }
    with pytest.raises(BadTaskSpecification, match=r"Unable to create launcher replica spec: \["):
        build_mpi(custom)


def test_replica_spec_template_metadata_is_not_the_jobs() -> None:
    job = build_mpi(
        {"workerReplicas": {"replicas": 1}},
    )
    worker = replica(job["spec"]["mpiReplicaSpecs"], "Worker")
    assert set(worker["template"]) == {"metadata", "spec"}
    assert "name" not in worker["template"]["metadata"]
