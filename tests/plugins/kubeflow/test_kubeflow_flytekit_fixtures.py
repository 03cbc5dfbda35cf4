"""Tasks written with flytekit 1.16 and flytekitplugins-kf{pytorch,tensorflow,mpi}, serialized by flytekit
(fixtures/make_kubeflow_fixtures.py), rendered through ``templateFile:`` into the jobs the plugins build."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from flyteidl.core import tasks_pb2
from kubeflow_helpers import DATA_ROOT, FIXTURES, container_of, env_of

from taskplug.executor import Platform, parse_spec, render_object
from taskplug.plugins.kubeflow import MPI, reconcile_job

PLATFORM = Platform.load(
    document={
        "tasks": {
            "task-plugins": {
                "enabled-plugins": ["container", "sidecar", "pytorch", "tensorflow", "mpi"],
                "default-for-task-types": {"container": "container", "sidecar": "sidecar"},
            }
        }
    }
)
INPUTS = f"{DATA_ROOT}/metadata/p/d/exec1/n0/inputs.pb"


def render(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    spec = parse_spec(
        {
            "templateFile": f"{name}.pb",
            "execution": {
                "id": {"project": "p", "domain": "d", "name": "exec1", "nodeId": "n0", "retryAttempt": 0},
                "namespace": "p-d",
                "maxAttempts": 1,
            },
            "inputs": inputs,
        },
        base_dir=FIXTURES,
    )
    return render_object(PLATFORM, spec, data_root=DATA_ROOT)


def test_pytorch_with_workers_and_the_shared_memory_pod_template() -> None:
    job = render("pytorch_default", {"epochs": 3})
    assert (job["kind"], job["metadata"]["name"], job["metadata"]["namespace"]) == (
        "PyTorchJob",
        "exec1-n0-0",
        "p-d",
    )
    specs = job["spec"]["pytorchReplicaSpecs"]
    assert {k: v["replicas"] for k, v in specs.items()} == {"Master": 1, "Worker": 2}
    for name, spec in specs.items():
        pod = spec["template"]["spec"]
        main = container_of(spec, "pytorch")  # flytekit's "primary" container, renamed
        assert main["args"][:3] == ["pyflyte-execute", "--inputs", INPUTS]
        assert main["args"][-4:] == ["task-module", "make_kubeflow_fixtures", "task-name", "pytorch_default"]
        assert main["resources"]["requests"] == {"cpu": "1", "memory": "1Gi"}
        assert {"mountPath": "/dev/shm", "name": "shm"} in main["volumeMounts"]
        assert any(v["name"] == "shm" and v["emptyDir"]["medium"] == "Memory" for v in pod["volumes"])
        assert env_of(main)["FOO"] == "bar"
        assert ("_F_WN" in env_of(main)) is (name == "Worker")
        assert spec["restartPolicy"] == "Never"


def test_pytorch_with_per_replica_resources_image_restart_and_run_policy() -> None:
    job = render("pytorch_replicas", {"epochs": 3})
    specs = job["spec"]["pytorchReplicaSpecs"]
    master, worker = container_of(specs["Master"], "pytorch"), container_of(specs["Worker"], "pytorch")
    assert master["resources"] == {
        "limits": {"cpu": "1", "memory": "1Gi"},
        "requests": {"cpu": "1", "memory": "1Gi"},
    }
    assert worker["resources"]["requests"]["cpu"] == "2"
    assert worker["resources"]["requests"]["nvidia.com/gpu"] == "1"
    assert worker["image"] == "ghcr.io/org/worker:v2"
    assert master["image"] == "ghcr.io/org/train:v1"
    assert (specs["Worker"]["replicas"], specs["Worker"]["restartPolicy"]) == (4, "OnFailure")
    assert job["spec"]["runPolicy"] == {"backoffLimit": 3, "cleanPodPolicy": "All"}


def test_pytorch_elastic_has_workers_and_a_rendezvous_policy_only() -> None:
    job = render("pytorch_elastic", {"epochs": 3})
    assert list(job["spec"]["pytorchReplicaSpecs"]) == ["Worker"]
    assert job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 2
    assert job["spec"]["elasticPolicy"] == {
        "minReplicas": 2,
        "maxReplicas": 2,
        "rdzvBackend": "c10d",
        "nProcPerNode": 4,
        "maxRestarts": 0,
    }


def test_tensorflow_with_chief_workers_and_a_parameter_server() -> None:
    job = render("tensorflow_task", {"steps": 10})
    specs = job["spec"]["tfReplicaSpecs"]
    assert job["kind"] == "TFJob"
    assert {k: v["replicas"] for k, v in specs.items()} == {"Chief": 1, "Worker": 2, "PS": 1}
    assert all(container_of(s, "tensorflow")["args"][2] == INPUTS for s in specs.values())


def test_mpi_runs_mpirun_in_the_launcher_and_advertises_the_tasks_slots() -> None:
    job = render("mpi_task", {"steps": 10})
    specs = job["spec"]["mpiReplicaSpecs"]
    assert job["kind"] == "MPIJob"
    assert {k: v["replicas"] for k, v in specs.items()} == {"Launcher": 1, "Worker": 2}
    launcher = container_of(specs["Launcher"], "mpi")
    assert launcher["args"][:2] == ["mpirun", "--allow-run-as-root"]
    assert launcher["args"][launcher["args"].index("-np") + 1] == "4"  # workers * slots
    # Deviation (Q3): the hostfile advertises the task's 2 slots, so mpirun finds its 4.
    assert job["spec"]["slotsPerWorker"] == 2


def test_the_flytekit_mpi_worker_ends_up_waiting_for_the_launcher() -> None:
    # Q2: flytekit gives the container args but no command, so the operator replaces the worker's with
    # `sleep 365d` and the launcher's mpirun does the work.
    job = render("mpi_task", {"steps": 10})
    job["metadata"]["uid"] = "u"
    plan = reconcile_job(MPI, job, [], {}, datetime(2026, 3, 1, tzinfo=UTC))
    worker = next(p for p in plan.create_pods if p["metadata"]["name"] == "exec1-n0-0-worker-0")
    assert (worker["spec"]["containers"][0]["command"], worker["spec"]["containers"][0]["args"]) == (
        ["sleep"],
        ["365d"],
    )


@pytest.mark.parametrize(
    ("name", "task_type", "target"),
    [
        ("pytorch_default", "pytorch", "k8s_pod"),
        ("pytorch_replicas", "pytorch", "container"),
        ("pytorch_elastic", "pytorch", "k8s_pod"),
        ("tensorflow_task", "tensorflow", "container"),
        ("mpi_task", "mpi", "container"),
    ],
)
def test_every_fixture_is_a_v1_task_as_flytekit_1_16_sends_them(
    name: str, task_type: str, target: str
) -> None:
    template = tasks_pb2.TaskTemplate.FromString((FIXTURES / f"{name}.pb").read_bytes())
    assert (template.type, template.task_type_version, template.WhichOneof("target")) == (
        task_type,
        1,
        target,
    )
