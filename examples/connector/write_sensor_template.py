"""Write flytekit's FileSensor as a binary TaskTemplate (``sensor.pb``) for ``sensor.yaml``.

flytekit serializes the task offline (no Flyte backend needed): task type ``sensor``, input ``path``, no
container; the connector server's built-in Sensor connector runs it.
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

from flytekit.configuration import Image, ImageConfig, SerializationSettings
from flytekit.sensor.file_sensor import FileSensor
from flytekit.tools.translator import get_serializable

settings = SerializationSettings(
    image_config=ImageConfig(default_image=Image(name="default", fqn="ghcr.io/org/img", tag="v1")),
    project="p",
    domain="d",
    version="v1",
)
template = get_serializable(OrderedDict(), settings, FileSensor(name="fs")).template.to_flyte_idl()
out = Path(__file__).resolve().parent / "sensor.pb"
out.write_bytes(template.SerializeToString())
print(f"wrote {out}")
