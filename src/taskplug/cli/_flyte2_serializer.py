"""Serializes a task of a Flyte 2 module; run as a script by the Python that has the ``flyte`` SDK.

taskplug does not depend on ``flyte``: ``taskplug run module.py task`` finds a Python that has it (its own,
or the one whose ``a0`` is on ``PATH``) and runs this file there (``python _flyte2_serializer.py MODULE_FILE
ROOT VERSION PROJECT DOMAIN [TASK]``). It imports only the standard library and ``flyte``, never taskplug
(that Python need not have taskplug). It imports the module by its dotted name from ROOT, as ``a0``'s default
resolver will import it, and serializes TASK with the SDK's offline serializer ``flyte.extras.serialize``
(``flyte/extras/_serialize.py``: ``translate_task_to_wire`` with the task's default inputs, what ``flyte
deploy`` sends, without a code bundle). What it prints on stdout is one JSON document:

- ``tasks``: the module's tasks, attribute name → the task's Flyte name;
- ``task`` (with TASK): ``template`` (the binary ``flyteidl2.core.TaskTemplate``, base64), ``inputs`` (each
  input's name, Python type as text, default as text, the default as a binary ``Literal`` in base64 or
  null, its description), ``doc`` (the function's docstring) and ``type``;
- ``error`` instead, saying what failed (the module's import, the serialization), with exit code 1.

What the module prints while it is imported goes to stderr: stdout is the document's.
"""

from __future__ import annotations

import base64
import contextlib
import importlib
import inspect
import json
import pathlib
import re
import sys
import typing
from typing import Any


def _type_text(python_type: Any) -> str:
    if isinstance(python_type, type) and not typing.get_args(python_type):
        return python_type.__name__
    return re.sub(r"\b(?:\w+\.)+(\w+)", r"\1", repr(python_type))


def _describe(task: Any, spec: Any) -> dict[str, Any]:
    defaults = {p.name: p.parameter for p in spec.default_inputs}
    descriptions = {}
    for entry in spec.task_template.interface.inputs.variables:
        descriptions[entry.key] = entry.value.description
    inputs = []
    for name, (python_type, default) in task.interface.inputs.items():
        parameter = defaults.get(name)
        literal = parameter.default if parameter is not None and parameter.HasField("default") else None
        has_default = default is not inspect.Parameter.empty
        inputs.append(
            {
                "name": name,
                "type": _type_text(python_type),
                "default": repr(default) if has_default else None,
                "literal": base64.b64encode(literal.SerializeToString()).decode()
                if literal is not None
                else None,
                "description": descriptions.get(name, "") if descriptions.get(name, "") != name else "",
            }
        )
    function = getattr(task, "func", None)
    return {
        "template": base64.b64encode(spec.task_template.SerializeToString()).decode(),
        "type": spec.task_template.type,
        "inputs": inputs,
        "doc": inspect.getdoc(function) or "" if function is not None else "",
    }


def main(argv: list[str]) -> int:
    module_file, root, version, project, domain, *rest = argv
    task_name = rest[0] if rest else None
    source = pathlib.Path(module_file).resolve()
    root_dir = pathlib.Path(root).resolve()
    name = ".".join(source.relative_to(root_dir).with_suffix("").parts)
    document: dict[str, Any] = {}
    module: Any = None
    stdout = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):
        sys.path.insert(0, str(root_dir))
        try:
            import flyte  # noqa: F401
            from flyte._task import TaskTemplate
            from flyte.extras import serialize
            from flyte.models import SerializationContext

            module = importlib.import_module(name)
        except Exception as e:
            document["error"] = f"cannot import {str(source)!r} as module {name!r}: {type(e).__name__}: {e}"
        else:
            loaded = pathlib.Path(getattr(module, "__file__", None) or "").resolve()
            if loaded != source:
                # Another module of that name (the standard library's, an installed package's) came first: a0's
                # import would find that one too.
                document["error"] = (
                    f"cannot import {str(source)!r} as module {name!r}: a module of that name is imported from "
                    f"{getattr(module, '__file__', None) or 'a built-in'} instead; rename the file"
                )
                module = None
        if module is not None and "error" not in document:
            tasks = {k: v for k, v in sorted(vars(module).items()) if isinstance(v, TaskTemplate)}
            document["tasks"] = {k: v.name for k, v in tasks.items()}
            task = tasks.get(task_name) if task_name is not None else None
            if task is not None:
                context = SerializationContext(
                    version=version, project=project, domain=domain, root_dir=root_dir
                )
                try:
                    document["task"] = _describe(task, serialize(task, context))
                except Exception as e:
                    document["error"] = f"flyte cannot serialize task {task.name!r}: {type(e).__name__}: {e}"
    stdout.write(json.dumps(document) + "\n")
    stdout.flush()
    return 1 if "error" in document else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
