"""A flytekit task taking a dataclass, an enum and an Optional, given as plain YAML values, run by
``taskplug run`` on the embedded cluster (the process kubelet runs ``pyflyte-execute``): flytekit reads
the inputs taskplug wrote as the Python values it declares, and the dataclass it returns is shown as its
fields. An input of the wrong type is refused before anything is created, exit 2, naming the input."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.integration

TASKPLUG = str(Path(sys.executable).parent / "taskplug")
DEADLINE = 120.0

MODULE = textwrap.dedent(
    """
    import enum
    from dataclasses import dataclass

    from flytekit import task


    class Size(enum.Enum):
        SMALL = "small"
        LARGE = "large"


    @dataclass
    class Order:
        item: str
        quantity: int
        price: float


    @dataclass
    class Receipt:
        item: str
        total: float
        size: Size
        note: str | None


    @task
    def checkout(order: Order, size: Size, discount: float | None) -> Receipt:
        # Fails unless flytekit handed over the declared Python types.
        assert isinstance(order, Order) and isinstance(order.quantity, int) and isinstance(size, Size), (order, size)
        total = order.quantity * order.price * (1 - (discount or 0))
        note = None if discount is None else f"{discount:.0%} off"
        return Receipt(item=order.item, total=total, size=size, note=note)
    """
)

SERIALIZE = textwrap.dedent(
    """
    import sys
    from collections import OrderedDict
    from pathlib import Path

    from flytekit.configuration import Image, ImageConfig, SerializationSettings
    from flytekit.tools.translator import get_serializable

    out = Path(sys.argv[1])
    sys.path.insert(0, str(out))
    import shop

    settings = SerializationSettings(
        image_config=ImageConfig(default_image=Image(name="default", fqn="localhost/taskplug-flytekit", tag="v1")),
        project="flytesnacks",
        domain="development",
        version="v1",
        env={"PYTHONPATH": str(out)},
    )
    template = get_serializable(OrderedDict(), settings, shop.checkout).template.to_flyte_idl()
    (out / "checkout.pb").write_bytes(template.SerializeToString())
    """
)

GOOD_INPUTS = {"order": {"item": "tea", "quantity": 3, "price": 2.5}, "size": "large", "discount": 0.2}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("flytekit-literal-types")
    (out / "shop.py").write_text(MODULE)
    (out / "serialize.py").write_text(SERIALIZE)
    subprocess.run(
        [sys.executable, str(out / "serialize.py"), str(out)],
        check=True,
        capture_output=True,
        timeout=DEADLINE,
    )
    return out


def _spec(folder: Path, name: str, inputs: dict[str, Any]) -> Path:
    spec = {
        "templateFile": str(folder / "checkout.pb"),
        "execution": {"id": {"project": "flytesnacks", "domain": "development", "name": name}},
        "inputs": inputs,
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def _taskplug_run(spec: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            TASKPLUG,
            "run",
            str(spec),
            "-o",
            "json",
            "--state-db",
            str(cwd / "state.db"),
            "--cluster-mode",
            "process",
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )


def test_a_dataclass_an_enum_and_an_optional_given_as_plain_values_run_and_the_dataclass_output_shows_its_fields(
    folder: Path, tmp_path: Path
) -> None:
    done = _taskplug_run(_spec(folder, "checkout-1", GOOD_INPUTS), tmp_path)
    assert done.stdout, done.stderr
    document = json.loads(done.stdout)
    assert done.returncode == 0, document
    assert document["phase"] == "Success"
    assert document["outputs"] == {"o0": {"item": "tea", "total": 6.0, "size": "large", "note": "20% off"}}


@pytest.mark.parametrize(
    ("inputs", "named"),
    [
        (
            {**GOOD_INPUTS, "order": {"item": "tea", "quantity": "three", "price": 2.5}},
            "inputs.order.quantity: expected an integer, got 'three' (str)",
        ),
        (
            {**GOOD_INPUTS, "size": {"scalar": {"primitive": {"integer": 3}}}},
            "inputs.size: invalid size input wrong type. Expected enum[small, large], but got INTEGER",
        ),
    ],
    ids=["plain", "literal-json"],
)
def test_an_input_of_the_wrong_type_exits_2_naming_it_before_anything_is_created(
    folder: Path, tmp_path: Path, inputs: dict[str, Any], named: str
) -> None:
    done = _taskplug_run(_spec(folder, "checkout-bad", inputs), tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert named in done.stderr
    # Refused while the spec was read: no state DB was opened, so no execution was recorded or pod created.
    assert not (tmp_path / "state.db").exists()
