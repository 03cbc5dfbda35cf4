"""Runs a Flyte 2 task with ``flyte.run``'s local mode and prints its outputs as plain JSON; run by the Python
of the Flyte 2 virtualenv (``tests/support/flyte2_env.py``), never imported by the tests themselves.

``python flyte2_local_run.py MODULE.py TASK INPUTS_JSON``: the inputs as plain values (a dataclass input as a
mapping, a file input as a local path), the outputs as ``{"o0": …}`` with a dataclass as its fields and a
file as ``{"contents": …}`` (its path is the run's own), the way the test compares them with taskplug's.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import pathlib
import sys
import typing
from typing import Any

import flyte
from flyte.io import File


def _native(value: Any, python_type: Any) -> Any:
    if dataclasses.is_dataclass(python_type) and isinstance(value, dict):
        return python_type(**value)
    if python_type is float and isinstance(value, int):
        return float(value)  # JSON's 3 for a float input, which flyte's type engine refuses as an int
    if python_type is File:
        return File.from_local_sync(value)
    return value


def _plain(value: Any) -> Any:
    if isinstance(value, File):
        with value.open_sync("rb") as f:
            return {"contents": bytes(f.read()).decode()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def main() -> None:
    module_file, task_name, inputs_json = sys.argv[1:]
    source = pathlib.Path(module_file).resolve()
    sys.path.insert(0, str(source.parent))
    task = getattr(importlib.import_module(source.stem), task_name)
    hints = {name: python_type for name, (python_type, _) in task.interface.inputs.items()}
    flyte.init()
    inputs = {k: _native(v, hints[k]) for k, v in json.loads(inputs_json).items()}
    outputs = flyte.with_runcontext(mode="local").run(task, **inputs).outputs()
    named = typing.cast(dict[str, Any], outputs.named_outputs)
    print(json.dumps({name: _plain(value) for name, value in named.items()}))


if __name__ == "__main__":
    main()
