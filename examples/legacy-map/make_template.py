"""Serialize a legacy map task over ``squares.square`` into a binary TaskTemplate and write its execution spec.

    python examples/legacy-map/make_template.py [--out DIR]

writes ``squares.pb`` (task type ``container_array``: ``flytekit.core.legacy_map_task.map_task(square,
concurrency=2)``) and ``squares.yaml`` into DIR (default: this folder). Serialization is offline (flytekit's
``get_serializable``, no Flyte backend). The container's environment carries ``PYTHONPATH`` = this folder, so
that ``pyflyte-map-execute``, run in every sub-task pod by the local cluster's process kubelet from taskplug's
virtualenv, can import ``squares``; the image name is only a label there.
"""

from __future__ import annotations

import argparse
import sys
from collections import OrderedDict
from pathlib import Path

import yaml
from flytekit.configuration import Image, ImageConfig, SerializationSettings
from flytekit.core.legacy_map_task import map_task
from flytekit.tools.translator import get_serializable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import squares  # noqa: E402  (importable as the pods will import it: from PYTHONPATH)

SPEC = {
    "templateFile": "squares.pb",
    "execution": {
        "id": {"project": "flytesnacks", "domain": "development", "name": "squares-1", "nodeId": "n0"},
        "maxAttempts": 2,
    },
    "inputs": {"x": [3, 1, 4, 1, 5, 9, 2, 6]},
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
    entity = map_task(squares.square, concurrency=2)
    template = get_serializable(OrderedDict(), settings(), entity).template.to_flyte_idl()
    (out / "squares.pb").write_bytes(template.SerializeToString())
    (out / "squares.yaml").write_text(yaml.safe_dump(SPEC, sort_keys=False))
    return [out / "squares.pb", out / "squares.yaml"]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=HERE, help="where to write the template and the spec")
    for path in write(parser.parse_args().out):
        print(path)
