"""Serialize the example's flytekit tasks into binary TaskTemplates and write an execution spec for each.

    python examples/flytekit/make_template.py [--out DIR]

writes ``add.pb`` + ``add.yaml`` and ``divide.pb`` + ``divide.yaml`` into DIR (default: this folder).
Serialization is offline (flytekit's ``get_serializable``, no Flyte backend). The container's
environment carries ``PYTHONPATH`` = this folder, so that ``pyflyte-execute``, run by the local cluster's
process kubelet from taskplug's virtualenv, can import ``arithmetic``; the image name is only a label
there.
"""

from __future__ import annotations

import argparse
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


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=HERE, help="where to write the templates and specs")
    for path in write(parser.parse_args().out):
        print(path)
