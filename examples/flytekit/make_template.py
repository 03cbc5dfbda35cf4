"""Serialize the example's flytekit tasks into binary TaskTemplates and write an execution spec for each.

    python examples/flytekit/make_template.py [--out DIR]
    python examples/flytekit/make_template.py --distributed [--out DIR]

writes ``add.pb`` + ``add.yaml`` and ``divide.pb`` + ``divide.yaml`` into DIR (default: this folder); with
``--distributed``, the PyTorch and Dask tasks instead: ``allreduce.pb`` + ``allreduce.yaml``
(``pytorch_allreduce.allreduce``) and ``squares.pb`` + ``squares.yaml`` (``dask_squares.sum_of_squares``).
Serializing those needs flytekitplugins-kfpytorch and flytekitplugins-dask; running them needs torch and
``dask[distributed]``, and ``--config config.yaml`` (Flyte enables neither plugin by default).
Serialization is offline (flytekit's ``get_serializable``, no Flyte backend). The container's
environment carries ``PYTHONPATH`` = this folder, so that ``pyflyte-execute``, run by the local cluster's
process kubelet from taskplug's virtualenv, can import ``arithmetic``; the image name is only a label
there.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections import OrderedDict
from pathlib import Path
from typing import Any

import yaml
from flytekit.configuration import Image, ImageConfig, SerializationSettings
from flytekit.tools.translator import get_serializable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import arithmetic  # noqa: E402  (importable as the containers will import it: from PYTHONPATH)

SPECS: dict[str, dict[str, Any]] = {
    "add": {"inputs": {"a": 2, "b": 3}, "maxAttempts": 1},
    "divide": {"inputs": {"a": 1, "b": 0}, "maxAttempts": 2},
}


# The distributed tasks, by spec name: the module and task they serialize, their inputs and attempts.
DISTRIBUTED_SPECS: dict[str, dict[str, Any]] = {
    "allreduce": {
        "module": "pytorch_allreduce",
        "task": "allreduce",
        "inputs": {"scale": 1.0},
        "maxAttempts": 1,
    },
    "squares": {"module": "dask_squares", "task": "sum_of_squares", "inputs": {"n": 20}, "maxAttempts": 1},
}


def settings() -> SerializationSettings:
    return SerializationSettings(
        image_config=ImageConfig(
            default_image=Image(name="default", fqn="localhost/taskplug-flytekit", tag="v1")
        ),
        project="flytesnacks",
        domain="development",
        version="v1",
        env={"PYTHONPATH": str(HERE)},
    )


def write(out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, spec in SPECS.items():
        entity = getattr(arithmetic, name)
        template = get_serializable(OrderedDict(), settings(), entity).template.to_flyte_idl()
        (out / f"{name}.pb").write_bytes(template.SerializeToString())
        document = {
            "templateFile": f"{name}.pb",
            "execution": {
                "id": {
                    "project": "flytesnacks",
                    "domain": "development",
                    "name": f"{name}-1",
                    "nodeId": "n0",
                },
                "maxAttempts": spec["maxAttempts"],
            },
            "inputs": spec["inputs"],
        }
        path = out / f"{name}.yaml"
        path.write_text(yaml.safe_dump(document, sort_keys=False))
        written += [out / f"{name}.pb", path]
    return written


def write_task(
    out: Path,
    name: str,
    entity: Any,
    *,
    inputs: dict[str, Any],
    max_attempts: int,
    serialization: SerializationSettings | None = None,
) -> list[Path]:
    """Serialize one flytekit task as ``{name}.pb`` and write ``{name}.yaml``, an execution spec pointing at it
    (execution ``{name}-1``, node ``n0``). ``serialization`` defaults to :func:`settings`; a task from
    another folder passes settings whose ``PYTHONPATH`` reaches its module."""
    out.mkdir(parents=True, exist_ok=True)
    chosen = serialization if serialization is not None else settings()
    template = get_serializable(OrderedDict(), chosen, entity).template.to_flyte_idl()
    (out / f"{name}.pb").write_bytes(template.SerializeToString())
    document = {
        "templateFile": f"{name}.pb",
        "execution": {
            "id": {"project": "flytesnacks", "domain": "development", "name": f"{name}-1", "nodeId": "n0"},
            "maxAttempts": max_attempts,
        },
        "inputs": inputs,
    }
    path = out / f"{name}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return [out / f"{name}.pb", path]


def write_distributed(out: Path) -> list[Path]:
    """The PyTorch and Dask tasks of :data:`DISTRIBUTED_SPECS` (their modules are imported only here: they
    need the flytekit plugin packages)."""
    written = []
    for name, spec in DISTRIBUTED_SPECS.items():
        entity = getattr(importlib.import_module(spec["module"]), spec["task"])
        written += write_task(out, name, entity, inputs=spec["inputs"], max_attempts=spec["maxAttempts"])
    return written


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=HERE, help="where to write the templates and specs")
    parser.add_argument(
        "--distributed",
        action="store_true",
        help="write the PyTorch and Dask tasks instead of add and divide",
    )
    arguments = parser.parse_args()
    for path in (write_distributed if arguments.distributed else write)(arguments.out):
        print(path)
