"""Raw-container pods on the process kubelet: co-pilot's downloader and uploader run flyte-copilot's contract
(``taskplug.localcluster._copilot``), emptyDir volumes are shared folders, native sidecars are stopped with
SIGTERM once the regular containers are done. Processes take real time: waits are bounded, never sleeps.

The pods are built by taskplug's own builder (``build_object`` of the pod plugin) from a raw-container
template with a ``dataConfig``, as the executor builds them."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from flyteidl.core import errors_pb2, interface_pb2, literals_pb2, types_pb2
from google.protobuf import json_format

from taskplug.executor import ExecutionPaths, parse_spec, task_context_for
from taskplug.k8s import K8S_SECTION, POD, PlatformPodConfig, PodTemplateStore, build_object
from taskplug.localcluster import LocalCluster
from taskplug.localcluster._copilot import (
    CopilotError,
    go_duration_string,
    go_json,
    literal_for_simple_type,
    main,
    parse_go_duration_ns,
)
from taskplug.localcluster._kubelet import copilot_argv, mount_path_mapper
from taskplug.plugins.pod import PodPlugin

from .conftest import phase_in, pod_manifest

DONE = phase_in("Succeeded", "Failed")
UPLOADER, DOWNLOADER = "flyte-copilot-uploader", "flyte-copilot-downloader"


# -- building and running a raw-container pod ----------------------------------------------------------------


def _variables(types: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {"variables": {name: {"type": t} for name, t in types.items()}}


def _raw_container_pod(
    tmp_path: Path,
    script: str,
    *,
    inputs: dict[str, Any],
    input_types: dict[str, dict[str, Any]],
    output_types: dict[str, dict[str, Any]],
    fmt: str = "JSON",
) -> tuple[dict[str, Any], ExecutionPaths]:
    """The pod the pod plugin builds for a raw container ``sh -c script`` with co-pilot, and its data paths;
    ``inputs.pb`` is written where the downloader reads it (as the executor writes it)."""
    spec = parse_spec(
        {
            "template": {
                "id": {"resourceType": "TASK", "project": "p", "domain": "d", "name": "raw", "version": "v1"},
                "type": "raw-container",
                "interface": {"inputs": _variables(input_types), "outputs": _variables(output_types)},
                "container": {
                    "image": "alpine:3.20",
                    "command": ["sh", "-c", script],
                    "dataConfig": {
                        "enabled": True,
                        "inputPath": "/var/inputs",
                        "outputPath": "/var/outputs",
                        "format": fmt,
                    },
                },
            },
            "execution": {"id": {"project": "p", "domain": "d", "name": "raw1"}},
            "inputs": inputs,
        }
    )
    data_root = str(tmp_path / "data")
    tctx = task_context_for(spec, data_root)
    k8s = K8S_SECTION.model.model_validate({})
    pod = build_object(
        PodPlugin(PlatformPodConfig(k8s, PodTemplateStore(), environ={})), tctx, k8s, watched=POD
    )
    paths = ExecutionPaths.for_attempt(data_root, spec.metadata)
    Path(paths.input_path).parent.mkdir(parents=True, exist_ok=True)
    Path(paths.input_path).write_bytes(spec.inputs.SerializeToString())
    return pod, paths


async def _run_pod(tmp_path: Path, pod: dict[str, Any]) -> dict[str, Any]:
    async with LocalCluster(mode="process", workdir=tmp_path / "cluster") as cluster:
        await cluster.client().create(POD, pod)
        meta = pod["metadata"]
        return await cluster.wait_for(POD, meta["namespace"], meta["name"], DONE, within=60)


def _outputs(paths: ExecutionPaths) -> dict[str, Any]:
    literal_map = literals_pb2.LiteralMap.FromString(Path(paths.outputs_path).read_bytes())
    return json_format.MessageToDict(literal_map)["literals"]  # type: ignore[no-any-return]


def _terminated(pod: dict[str, Any], name: str) -> dict[str, Any]:
    statuses = pod["status"].get("initContainerStatuses", []) + pod["status"]["containerStatuses"]
    state: dict[str, Any] = next(s for s in statuses if s["name"] == name)["state"]["terminated"]
    return state


INT = {"simple": "INTEGER"}
STRING = {"simple": "STRING"}
FLOAT = {"simple": "FLOAT"}
FILE = {"blob": {"dimensionality": "SINGLE"}}


async def test_a_raw_container_reads_its_inputs_as_files_and_its_outputs_become_outputs_pb(
    tmp_path: Path,
) -> None:
    (tmp_path / "notes.txt").write_text("one\ntwo\nthree\n")
    script = (
        "echo $(( $(cat /var/inputs/a) + $(cat /var/inputs/b) )) > /var/outputs/sum\n"
        'echo "hello, $(cat /var/inputs/name)" > /var/outputs/greeting\n'
        "echo 0.25 > /var/outputs/quarter.txt\n"  # the one <name>.* file is read too
        "cat /var/inputs/inputs.json > /var/outputs/doc\n"
        "wc -l < /var/inputs/notes > /var/outputs/lines\n"
        "cp /var/inputs/notes /var/outputs/copy\n"
    )
    pod, paths = _raw_container_pod(
        tmp_path,
        script,
        inputs={"a": 2, "b": 40, "name": "<world>", "notes": str(tmp_path / "notes.txt")},
        input_types={"a": INT, "b": INT, "name": STRING, "notes": FILE},
        output_types={
            "sum": INT,
            "greeting": STRING,
            "quarter": FLOAT,
            "doc": STRING,
            "lines": INT,
            "copy": FILE,
        },
    )
    [uploader, downloader] = pod["spec"]["initContainers"]
    assert uploader["command"][0] == downloader["command"][0] == "/bin/flyte-copilot"

    done = await _run_pod(tmp_path, pod)

    assert done["status"]["phase"] == "Succeeded", done["status"]
    for name in (UPLOADER, DOWNLOADER, pod["spec"]["containers"][0]["name"]):
        assert _terminated(done, name)["exitCode"] == 0
    outputs = _outputs(paths)
    assert outputs["sum"] == {"scalar": {"primitive": {"integer": "42"}}}
    assert outputs["greeting"] == {"scalar": {"primitive": {"stringValue": "hello, <world>"}}}
    assert outputs["quarter"] == {"scalar": {"primitive": {"floatValue": 0.25}}}
    assert outputs["lines"] == {"scalar": {"primitive": {"integer": "3"}}}
    # The blob is uploaded under the raw output prefix, named by its variable.
    copy_uri = f"{paths.raw_output_prefix}/copy"
    assert outputs["copy"] == {"scalar": {"blob": {"metadata": {"type": {}}, "uri": copy_uri}}}
    assert Path(copy_uri).read_text() == "one\ntwo\nthree\n"
    # inputs.json as Go's encoding/json writes it: sorted keys, <>& escaped, the blob at its local path.
    document = outputs["doc"]["scalar"]["primitive"]["stringValue"]
    local_notes = json.loads(document)["notes"]
    assert document == ('{"a":2,"b":40,"name":"\\u003cworld\\u003e","notes":' + json.dumps(local_notes) + "}")
    assert local_notes.endswith("/volumes/flyte-inputs/notes")


async def test_a_missing_output_leaves_copilots_error_document_and_no_outputs(tmp_path: Path) -> None:
    pod, paths = _raw_container_pod(
        tmp_path,
        "echo 1 > /var/outputs/other",
        inputs={"a": 1},
        input_types={"a": INT},
        output_types={"sum": INT},
    )

    done = await _run_pod(tmp_path, pod)

    # As in Flyte: the uploader reports the failure in errors.pb and exits 0; the pod succeeds.
    assert done["status"]["phase"] == "Succeeded"
    assert _terminated(done, UPLOADER)["exitCode"] == 0
    assert not Path(paths.outputs_path).exists()
    document = errors_pb2.ErrorDocument.FromString((Path(paths.output_prefix) / "errors.pb").read_bytes())
    assert document.error.code == "OutputUploadFailed"
    assert document.error.kind == errors_pb2.ContainerError.Kind.RECOVERABLE
    assert document.error.message.startswith("file not found at path [")
    assert "/volumes/flyte-outputs/sum]" in document.error.message


async def test_a_failing_raw_container_fails_the_pod_with_its_exit_code_and_log(tmp_path: Path) -> None:
    pod, paths = _raw_container_pod(
        tmp_path,
        "echo 'no good' >&2; exit 3",
        inputs={"a": 1},
        input_types={"a": INT},
        output_types={"sum": INT},
    )

    done = await _run_pod(tmp_path, pod)

    assert done["status"]["phase"] == "Failed"
    main_state = _terminated(done, pod["spec"]["containers"][0]["name"])
    assert (main_state["exitCode"], main_state["reason"], main_state["message"]) == (3, "Error", "no good\n")
    # The uploader was stopped all the same (and found no output).
    assert _terminated(done, UPLOADER)["exitCode"] == 0
    assert not Path(paths.outputs_path).exists()


# -- the kubelet's volumes and native sidecars ---------------------------------------------------------------


async def test_an_empty_dir_is_one_folder_for_every_container_that_mounts_it(tmp_path: Path) -> None:
    manifest = pod_manifest(
        "shared",
        command=["sh", "-c", "cat /in/note /sub/deep > /in/seen; echo $NOTE_DIR > /in/env"],
        volumeMounts=[
            {"name": "scratch", "mountPath": "/in"},
            {"name": "scratch", "mountPath": "/sub", "subPath": "x/y"},
        ],
        env=[{"name": "NOTE_DIR", "value": "/in/notes"}],
        spec={
            "volumes": [{"name": "scratch", "emptyDir": {}}],
            "initContainers": [
                {
                    "name": "writer",
                    "image": "alpine",
                    "command": [
                        "sh",
                        "-c",
                        "mkdir -p /data/x/y; echo first > /data/note; echo second > /data/x/y/deep",
                    ],
                    "volumeMounts": [{"name": "scratch", "mountPath": "/data/"}],
                }
            ],
        },
    )
    async with LocalCluster(mode="process", workdir=tmp_path / "cluster") as cluster:
        await cluster.client().create(POD, manifest)
        done = await cluster.wait_for(POD, "default", "shared", DONE, within=30)
    assert done["status"]["phase"] == "Succeeded", done["status"]
    [folder] = (tmp_path / "cluster").glob("default_shared_*/volumes/scratch")
    assert (folder / "seen").read_text() == "first\nsecond\n"
    # A mount path in an env value is the volume's folder too.
    assert (folder / "env").read_text() == f"{folder}/notes\n"


SIDECAR = """
import signal, sys, time
def stop(*_):
    print("got SIGTERM", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
open("/shared/watching", "w").close()
while True:
    time.sleep(0.05)
"""


async def test_a_native_sidecar_runs_beside_the_containers_and_is_stopped_with_sigterm_after_them(
    tmp_path: Path,
) -> None:
    mount = [{"name": "shared", "mountPath": "/shared"}]
    manifest = pod_manifest(
        "sidecar",
        # main ends once the sidecar watches: it ran beside it.
        command=["sh", "-c", "while [ ! -e /shared/watching ]; do sleep 0.05; done"],
        volumeMounts=mount,
        spec={
            "terminationGracePeriodSeconds": 20,
            "volumes": [{"name": "shared", "emptyDir": {}}],
            "initContainers": [
                {
                    "name": "watcher",
                    "image": "python",
                    "command": ["python", "-c", SIDECAR],
                    "restartPolicy": "Always",
                    "volumeMounts": mount,
                },
                {"name": "setup", "image": "python", "command": ["python", "-c", "print('setup')"]},
            ],
        },
    )
    async with LocalCluster(mode="process", workdir=tmp_path / "cluster") as cluster:
        await cluster.client().create(POD, manifest)
        done = await cluster.wait_for(POD, "default", "sidecar", DONE, within=60)
        watcher_log = cluster.logs("default", "sidecar", "watcher")
    assert done["status"]["phase"] == "Succeeded", done["status"]
    # The sidecar did not block the next init container, and ended on the kubelet's SIGTERM after main.
    assert _terminated(done, "setup")["exitCode"] == 0
    assert _terminated(done, "watcher")["exitCode"] == 0
    assert watcher_log == "got SIGTERM\n"
    assert _terminated(done, "watcher")["finishedAt"] >= _terminated(done, "main")["finishedAt"]


async def test_a_sidecar_that_ignores_sigterm_is_killed_after_the_grace_period(tmp_path: Path) -> None:
    stubborn = (
        "import signal, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "open('/shared/ready', 'w').close()\n"
        "while True: time.sleep(0.05)"
    )
    mount = [{"name": "shared", "mountPath": "/shared"}]
    manifest = pod_manifest(
        "stubborn",
        command=["sh", "-c", "while [ ! -e /shared/ready ]; do sleep 0.05; done"],
        volumeMounts=mount,
        spec={
            "terminationGracePeriodSeconds": 1,
            "volumes": [{"name": "shared", "emptyDir": {}}],
            "initContainers": [
                {
                    "name": "stubborn",
                    "image": "python",
                    "command": ["python", "-c", stubborn],
                    "restartPolicy": "Always",
                    "volumeMounts": mount,
                }
            ],
        },
    )
    async with LocalCluster(mode="process", workdir=tmp_path / "cluster") as cluster:
        await cluster.client().create(POD, manifest)
        done = await cluster.wait_for(POD, "default", "stubborn", DONE, within=60)
    assert _terminated(done, "main")["exitCode"] == 0
    assert _terminated(done, "stubborn")["exitCode"] == 137


@pytest.mark.parametrize(
    ("text", "mapped"),
    [
        ("/var/inputs", "/pod/in"),
        ("cat /var/inputs/a > /var/outputs/sum", "cat /pod/in/a > /pod/out/sum"),
        ("--to-local-dir=/var/inputs/", "--to-local-dir=/pod/in/"),
        ("$(cat '/var/inputs/a')", "$(cat '/pod/in/a')"),
        ("/var/inputs/deep/x", "/pod/deep/x"),  # the longest mount path wins
        ("/x/var/inputs /var/inputs2 /var/inputs.bak", "/x/var/inputs /var/inputs2 /var/inputs.bak"),
    ],
)
def test_mount_paths_in_a_containers_text_become_the_volumes_folders(text: str, mapped: str) -> None:
    mounts = [("/var/inputs", "/pod/in"), ("/var/outputs/", "/pod/out"), ("/var/inputs/deep", "/pod/deep")]
    assert mount_path_mapper(mounts)(text) == mapped


def test_a_command_is_flyte_copilot_by_its_executables_name() -> None:
    assert copilot_argv(["/bin/flyte-copilot", "--storage.type=local", "download"]) == [
        sys.executable,
        "-m",
        "taskplug.localcluster._copilot",
        "--storage.type=local",
        "download",
    ]
    assert copilot_argv(["flyte-copilot"]) is not None
    assert copilot_argv(["/bin/flyte-copilot-old"]) is None
    assert copilot_argv(["sh", "-c", "/bin/flyte-copilot"]) is None


# -- flyte-copilot's contract, in process ------------------------------------------------------------------


def _interface_b64(message: Any) -> str:
    return base64.b64encode(message.SerializeToString()).decode()


def _literal(**kw: Any) -> literals_pb2.Literal:
    return json_format.ParseDict(kw, literals_pb2.Literal())


def test_download_lays_out_every_literal_kind_as_flyte_copilot_does(tmp_path: Path) -> None:
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01")
    (tmp_path / "parts" / "nested").mkdir(parents=True)
    (tmp_path / "parts" / "a.csv").write_text("a")
    (tmp_path / "parts" / "nested" / "b.csv").write_text("b")
    inputs = literals_pb2.LiteralMap()
    inputs.literals["i"].CopyFrom(_literal(scalar={"primitive": {"integer": "-7"}}))
    inputs.literals["f"].CopyFrom(_literal(scalar={"primitive": {"floatValue": 3.0}}))
    inputs.literals["tiny"].CopyFrom(_literal(scalar={"primitive": {"floatValue": 1.5e-7}}))
    inputs.literals["flag"].CopyFrom(_literal(scalar={"primitive": {"boolean": True}}))
    inputs.literals["when"].CopyFrom(_literal(scalar={"primitive": {"datetime": "2024-02-03T04:05:06.500Z"}}))
    inputs.literals["wait"].CopyFrom(_literal(scalar={"primitive": {"duration": "3723.5s"}}))
    inputs.literals["none"].CopyFrom(_literal(scalar={"noneType": {}}))
    inputs.literals["raw"].CopyFrom(
        _literal(scalar={"binary": {"value": base64.b64encode(b"\x81\xa1x").decode()}})
    )
    inputs.literals["xs"].CopyFrom(
        _literal(collection={"literals": [{"scalar": {"primitive": {"stringValue": "a&b"}}}]})
    )
    inputs.literals["m"].CopyFrom(
        _literal(map={"literals": {"k": {"scalar": {"primitive": {"integer": "1"}}}}})
    )
    inputs.literals["file"].CopyFrom(
        _literal(scalar={"blob": {"uri": str(tmp_path / "blob.bin"), "metadata": {"type": {}}}})
    )
    inputs.literals["dir"].CopyFrom(
        _literal(
            scalar={
                "blob": {
                    "uri": str(tmp_path / "parts"),
                    "metadata": {"type": {"dimensionality": "MULTIPART"}},
                }
            }
        )
    )
    (tmp_path / "inputs.pb").write_bytes(inputs.SerializeToString())
    out = tmp_path / "in"

    code = main(
        [
            "--storage.type=local",
            "--logger.level=3",
            "download",
            "--from-remote",
            str(tmp_path / "inputs.pb"),
            "--to-output-prefix",
            str(tmp_path / "meta"),
            "--to-local-dir",
            str(out),
            "--format",
            "JSON",
            "--input-interface",
            _interface_b64(interface_pb2.VariableMap()),
        ]
    )

    assert code == 0
    assert not (tmp_path / "meta").exists()  # no error document
    files = {
        name: (out / name).read_bytes() for name in ("i", "f", "tiny", "flag", "when", "wait", "none", "raw")
    }
    assert files == {
        "i": b"-7",
        "f": b"3",
        "tiny": b"0.00000015",
        "flag": b"true",
        "when": b"2024-02-03T04:05:06.5Z",
        "wait": b"1h2m3.5s",
        "none": b"null",
        "raw": b"\x81\xa1x",
    }
    assert (out / "xs" / "0").read_text() == "a&b"
    assert (out / "m" / "k").read_text() == "1"
    assert (out / "file").read_bytes() == b"\x00\x01"
    assert (out / "dir" / "a.csv").read_text() == "a" and (
        out / "dir" / "nested" / "b.csv"
    ).read_text() == "b"
    assert (out / "inputs.json").read_text() == (
        '{"dir":"' + str(out / "dir") + '","f":3,"file":"' + str(out / "file") + '","flag":true,"i":-7,'
        '"m":{"k":1},"none":null,"raw":"gaF4","tiny":1.5e-7,"wait":null,'
        '"when":"2024-02-03T04:05:06.5Z","xs":["a\\u0026b"]}'
    )
    # inputs.pb: the same literals, blobs pointing at their local copies.
    written = literals_pb2.LiteralMap.FromString((out / "inputs.pb").read_bytes())
    assert written.literals["file"].scalar.blob.uri == str(out / "file")
    assert written.literals["i"] == inputs.literals["i"]


@pytest.mark.parametrize(
    ("fmt", "present", "absent"),
    [("YAML", "inputs.yaml", "inputs.json"), ("PROTO", "inputs.pb", "inputs.json")],
)
def test_the_format_flag_picks_the_metadata_file(tmp_path: Path, fmt: str, present: str, absent: str) -> None:
    inputs = literals_pb2.LiteralMap()
    inputs.literals["n"].CopyFrom(_literal(scalar={"primitive": {"integer": "5"}}))
    (tmp_path / "inputs.pb").write_bytes(inputs.SerializeToString())
    args = ["download", "-f", str(tmp_path / "inputs.pb"), "--to-output-prefix", str(tmp_path / "meta")]
    assert main([*args, "-o", str(tmp_path / "in"), "--format", fmt]) == 0
    assert (tmp_path / "in" / present).exists() and not (tmp_path / "in" / absent).exists()
    if fmt == "YAML":
        assert (tmp_path / "in" / "inputs.yaml").read_text() == "n: 5\n"


def test_a_download_failure_is_an_input_download_failed_document_and_exit_0(tmp_path: Path) -> None:
    args = [
        "download",
        "--from-remote",
        str(tmp_path / "missing.pb"),
        "--to-output-prefix",
        str(tmp_path / "meta"),
    ]

    assert main([*args, "--to-local-dir", str(tmp_path / "in")]) == 0

    document = errors_pb2.ErrorDocument.FromString((tmp_path / "meta" / "errors.pb").read_bytes())
    assert document.error.code == "InputDownloadFailed"
    assert document.error.message.startswith("failed to download input metadata message from remote store")
    # Without an output prefix there is nowhere to report: the command fails.
    assert main(["download", "--from-remote", "x", "--to-local-dir", str(tmp_path / "in")]) == 1


def _sidecar_args(tmp_path: Path, outputs: dict[str, types_pb2.LiteralType]) -> list[str]:
    iface = interface_pb2.TypedInterface()
    for name, literal_type in outputs.items():
        iface.outputs.variables[name].type.CopyFrom(literal_type)
    return [
        "sidecar",
        "--start-watcher-type",
        "noop",
        "--to-raw-output",
        str(tmp_path / "raw"),
        "--to-output-prefix",
        str(tmp_path / "meta"),
        "--from-local-dir",
        str(tmp_path / "out"),
        "--interface",
        _interface_b64(iface),
    ]


def _simple(simple: int) -> types_pb2.LiteralType:
    return types_pb2.LiteralType(simple=simple)  # type: ignore[arg-type]


def test_the_uploader_reports_the_users_error_file_and_unsupported_types(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "_ERROR").write_text("it broke")
    assert main(_sidecar_args(tmp_path, {"n": _simple(types_pb2.INTEGER)})) == 0
    error = errors_pb2.ErrorDocument.FromString((tmp_path / "meta" / "errors.pb").read_bytes()).error
    assert (error.code, error.message) == ("OutputUploadFailed", "User Error: it broke")

    (tmp_path / "out" / "_ERROR").unlink()
    listing = types_pb2.LiteralType(collection_type=_simple(types_pb2.INTEGER))
    assert main(_sidecar_args(tmp_path, {"xs": listing})) == 0
    error = errors_pb2.ErrorDocument.FromString((tmp_path / "meta" / "errors.pb").read_bytes()).error
    assert error.message.startswith("currently CoPilot uploader does not support [collection_type")


def test_a_folder_output_is_a_multipart_blob_with_its_files_flattened(tmp_path: Path) -> None:
    (tmp_path / "out" / "d" / "inner").mkdir(parents=True)
    (tmp_path / "out" / "d" / "a.txt").write_text("a")
    (tmp_path / "out" / "d" / "inner" / "b.txt").write_text("b")
    folder = types_pb2.LiteralType(blob=types_pb2.BlobType(dimensionality=types_pb2.BlobType.MULTIPART))

    assert main(_sidecar_args(tmp_path, {"d": folder})) == 0

    outputs = literals_pb2.LiteralMap.FromString((tmp_path / "meta" / "outputs.pb").read_bytes())
    blob = outputs.literals["d"].scalar.blob
    assert (blob.uri, blob.metadata.type.dimensionality) == (
        str(tmp_path / "raw" / "d"),
        types_pb2.BlobType.MULTIPART,
    )
    assert sorted(p.name for p in (tmp_path / "raw" / "d").iterdir()) == ["a.txt", "b.txt"]


def test_a_termination_sent_before_the_uploader_watches_is_not_lost(tmp_path: Path) -> None:
    # The kubelet starts flyte-copilot with SIGTERM blocked: a SIGTERM sent at once (the primary was quick)
    # waits for the signal watcher instead of killing the interpreter while it starts.
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "n").write_text("7\n")
    args = _sidecar_args(tmp_path, {"n": _simple(types_pb2.INTEGER)})
    args[1:3] = ["--start-watcher-type", "signal"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "taskplug.localcluster._copilot", *args],
        preexec_fn=lambda: signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM}),
    )
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    outputs = literals_pb2.LiteralMap.FromString((tmp_path / "meta" / "outputs.pb").read_bytes())
    assert outputs.literals["n"].scalar.primitive.integer == 7


# -- Go's text forms --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("simple", "text", "expected"),
    [
        (types_pb2.INTEGER, b" 42\n", {"primitive": {"integer": "42"}}),
        (types_pb2.INTEGER, b"+7", {"primitive": {"integer": "7"}}),
        (types_pb2.FLOAT, b"1e3\n", {"primitive": {"floatValue": 1000.0}}),
        (types_pb2.FLOAT, b"0x1p-2", {"primitive": {"floatValue": 0.25}}),
        (types_pb2.BOOLEAN, b"T\t", {"primitive": {"boolean": True}}),
        (types_pb2.BOOLEAN, b"0", {"primitive": {"boolean": False}}),
        (types_pb2.STRING, b"  text with spaces \n", {"primitive": {"stringValue": "text with spaces"}}),
        (types_pb2.DURATION, b"1h2m3.5s", {"primitive": {"duration": "3723.500s"}}),
        (types_pb2.DURATION, b"-1.5h", {"primitive": {"duration": "-5400s"}}),
        (
            types_pb2.DATETIME,
            b"2024-01-02T03:04:05.25+02:00",
            {"primitive": {"datetime": "2024-01-02T01:04:05.250Z"}},
        ),
        (types_pb2.STRUCT, b'{"a": [1, "x"]}', {"generic": {"a": [1.0, "x"]}}),
        (types_pb2.NONE, b"", {"noneType": {}}),
        (types_pb2.ERROR, b"bad\n", {"error": {"message": "bad"}}),
        (
            types_pb2.BINARY,
            b"\x81\xa1\n",
            {"binary": {"value": base64.b64encode(b"\x81\xa1").decode(), "tag": "msgpack"}},
        ),
    ],
)
def test_an_output_file_becomes_the_literal_go_parses(
    simple: int, text: bytes, expected: dict[str, Any]
) -> None:
    literal = literal_for_simple_type(simple, text)
    assert json_format.MessageToDict(literal)["scalar"] == expected


@pytest.mark.parametrize(
    ("simple", "text", "message"),
    [
        (
            types_pb2.INTEGER,
            b"4.0",
            'failed to parse integer value: strconv.ParseInt: parsing "4.0": invalid syntax',
        ),
        (types_pb2.INTEGER, b"9223372036854775808", "value out of range"),
        (types_pb2.FLOAT, b"1e400", "value out of range"),
        (types_pb2.FLOAT, b"1_0", "invalid syntax"),
        (types_pb2.BOOLEAN, b"yes", 'strconv.ParseBool: parsing "yes": invalid syntax'),
        (types_pb2.DURATION, b"5", 'time: missing unit in duration "5"'),
        (types_pb2.DATETIME, b"2024-01-02 03:04:05Z", "failed to parse Datetime in RFC3339 format"),
        (types_pb2.STRUCT, b"[1]", "failed to load generic type as json."),
    ],
)
def test_an_output_go_cannot_parse_is_refused_with_gos_words(simple: int, text: bytes, message: str) -> None:
    with pytest.raises(CopilotError) as caught:
        literal_for_simple_type(simple, text)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.0, "1"),
        (-0.0, "-0"),
        (0.1, "0.1"),
        (1e20, "100000000000000000000"),
        (1e21, "1e+21"),
        (1.5e-7, "1.5e-7"),
        (1e-10, "1e-10"),
        (123456.789, "123456.789"),
    ],
)
def test_floats_are_written_as_gos_encoding_json_writes_them(value: float, text: str) -> None:
    assert go_json(value) == text


@pytest.mark.parametrize(
    ("nanoseconds", "text"),
    [
        (0, "0s"),
        (1, "1ns"),
        (1500, "1.5µs"),
        (300_000_000, "300ms"),
        (3_600_000_000_000, "1h0m0s"),
        (-61_500_000_000, "-1m1.5s"),
    ],
)
def test_durations_round_trip_through_gos_text(nanoseconds: int, text: str) -> None:
    assert go_duration_string(nanoseconds) == text
    assert parse_go_duration_ns(text) == nanoseconds
