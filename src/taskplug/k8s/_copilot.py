"""Flyte co-pilot: the data-loading containers of raw-container tasks.

Follows flyteplugins/go/tasks/pluginmachinery/flytek8s/copilot.go. A task whose container (or K8sPod) has
an enabled ``DataLoadingConfig`` runs an image that knows nothing of Flyte: a ``downloader`` init container
writes the inputs into a shared volume before it starts, and an ``uploader`` sidecar (a native sidecar:
an init container with ``restartPolicy: Always``) turns the files it leaves in the output volume into
``outputs.pb``. flytekit's ``ContainerTask`` writes such tasks.

Deviation: Flyte's storage flags come from propeller's ``storage`` section, which taskplug does not have:
the store type is derived from ``executor.data-root`` (``s3://`` → s3, ``gs://`` → stow google, else local),
and credentials come from the pod's environment, as the copilot binary also reads them there.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any, Final

from flyteidl.core import interface_pb2, tasks_pb2

from taskplug.core import BadTaskSpecification, Quantity, QuantityError, format_go_duration
from taskplug.k8s._config import CoPilotConfig

_LOGGER_LEVEL: Final = 3
"""flytestdlib's default logger level (warnings), which Flyte passes on as ``--logger.level``."""

__all__ = [
    "DOWNLOADER_CONTAINER_NAME",
    "UPLOADER_CONTAINER_NAME",
    "add_copilot_to_container",
    "add_copilot_to_pod",
    "copilot_command",
]

UPLOADER_CONTAINER_NAME = "uploader"
DOWNLOADER_CONTAINER_NAME = "downloader"

KubeObject = dict[str, Any]


def copilot_command(data_root: str) -> list[str]:
    """``/bin/flyte-copilot`` with the storage flags for the data store at ``data_root``."""
    # Flyte passes propeller's own logger level (flytestdlib's default: 3, warnings); taskplug has no
    # such setting, so the default is what the co-pilot gets.
    command = ["/bin/flyte-copilot", "--storage.limits.maxDownloadMBs=0", f"--logger.level={_LOGGER_LEVEL}"]
    scheme = data_root.split("://", 1)[0] if "://" in data_root else "file"
    if scheme == "s3":
        command.append("--storage.type=s3")
    elif scheme in ("gs", "gcs"):
        command += ["--storage.type=stow", "--storage.stow.kind=google"]
    else:
        command.append("--storage.type=local")
    return command


def _copilot_container(
    name: str, cfg: CoPilotConfig, data_root: str, args: list[str], mount: KubeObject
) -> KubeObject:
    try:
        cpu, memory = Quantity(cfg.cpu), Quantity(cfg.memory)
    except QuantityError as e:
        raise BadTaskSpecification(f"plugins.k8s.co-pilot: {e}", cause=e) from e
    resources = {"cpu": str(cpu), "memory": str(memory)}
    return {
        "name": cfg.name + name,
        "image": cfg.image,
        "command": copilot_command(data_root),
        "args": args,
        "workingDir": "/",
        "resources": {"limits": dict(resources), "requests": dict(resources)},
        "volumeMounts": [mount],
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "imagePullPolicy": "IfNotPresent",
    }


def _storage_size(overrides: Mapping[str, Any] | None) -> str | None:
    """The ``storage`` limit (else request) of the execution's override resources: the data volumes' size."""
    if not overrides:
        return None
    for kind in ("limits", "requests"):
        value = (overrides.get(kind) or {}).get("storage")
        if value is not None:
            return str(value)
    return None


def _data_volume(name: str, size: str | None) -> KubeObject:
    empty_dir: KubeObject = {}
    if size is not None:
        empty_dir["sizeLimit"] = size
    return {"name": name, "emptyDir": empty_dir}


def add_copilot_to_container(
    cfg: CoPilotConfig,
    container: KubeObject,
    interface: interface_pb2.TypedInterface,
    data: tasks_pb2.DataLoadingConfig,
) -> None:
    """Mount the input and output volumes into the task's own container."""
    if not data.enabled:
        return
    security = container.setdefault("securityContext", {})
    security.setdefault("capabilities", {})
    mounts = list(container.get("volumeMounts") or [])
    if interface.inputs.variables:
        mounts.append({"name": cfg.input_vol_name, "mountPath": data.input_path or cfg.default_input_path})
    if interface.outputs.variables:
        mounts.append({"name": cfg.output_vol_name, "mountPath": data.output_path or cfg.default_output_path})
    if mounts:
        container["volumeMounts"] = mounts


def add_copilot_to_pod(
    cfg: CoPilotConfig,
    spec: KubeObject,
    interface: interface_pb2.TypedInterface,
    data: tasks_pb2.DataLoadingConfig,
    *,
    input_path: str,
    output_prefix: str,
    raw_output_prefix: str,
    data_root: str,
    override_resources: Mapping[str, Any] | None = None,
) -> str:
    """Add the downloader and uploader to the pod; returns the downloader's name (the primary init container)."""
    if not data.enabled:
        return ""
    primary_init = ""
    size = _storage_size(override_resources)
    volumes = list(spec.get("volumes") or [])
    inits = list(spec.get("initContainers") or [])
    if interface.inputs.variables:
        in_path = data.input_path or cfg.default_input_path
        volumes.append(_data_volume(cfg.input_vol_name, size))
        args = [
            "download",
            "--from-remote",
            input_path,
            "--to-output-prefix",
            output_prefix,
            "--to-local-dir",
            in_path,
            "--format",
            tasks_pb2.DataLoadingConfig.LiteralMapFormat.Name(data.format),
            "--input-interface",
            base64.b64encode(interface.inputs.SerializeToString()).decode(),
        ]
        downloader = _copilot_container(
            DOWNLOADER_CONTAINER_NAME,
            cfg,
            data_root,
            args,
            {"name": cfg.input_vol_name, "mountPath": in_path},
        )
        inits.append(downloader)
        primary_init = downloader["name"]
    if interface.outputs.variables:
        out_path = data.output_path or cfg.default_output_path
        volumes.append(_data_volume(cfg.output_vol_name, size))
        args = [
            "sidecar",
            "--timeout",
            format_go_duration(cfg.timeout),
            "--to-raw-output",
            raw_output_prefix,
            "--to-output-prefix",
            output_prefix,
            "--from-local-dir",
            out_path,
            "--interface",
            base64.b64encode(interface.SerializeToString()).decode(),
        ]
        uploader = _copilot_container(
            UPLOADER_CONTAINER_NAME,
            cfg,
            data_root,
            args,
            {"name": cfg.output_vol_name, "mountPath": out_path},
        )
        # A native sidecar, started before the downloader so it watches the main container from the start.
        uploader["restartPolicy"] = "Always"
        inits.insert(0, uploader)
        spec["terminationGracePeriodSeconds"] = int(cfg.timeout.total_seconds())
    if volumes:
        spec["volumes"] = volumes
    if inits:
        spec["initContainers"] = inits
    return primary_init
