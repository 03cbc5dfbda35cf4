"""A task from a Flyte 2 module as an execution spec: ``taskplug run hello.py add --a 2``.

The same command line as a flytekit module's (:mod:`._flytekit_module`: taskplug's options before the file,
the task's name and its inputs as ``--name value`` options after it, ``--help`` after the name listing them),
for a module written with Flyte 2's SDK (``flyte``, github.com/flyteorg/flyte-sdk): a ``.py`` file that
imports ``flyte`` and not ``flytekit``. taskplug does not depend on ``flyte``; the SDK is found in
taskplug's own Python, else as the Python of the ``a0`` on ``PATH`` (the SDK's runtime entry point, which
its pods run), and runs :mod:`._flyte2_serializer` there: the module imported by its dotted name from its
project root (the first folder above it without an ``__init__.py``), the task serialized by
``flyte.extras.serialize`` (what ``flyte deploy`` sends, its default inputs with it). Without such a Python
the run stops with exit 2, naming the package to install.

The template is Flyte 2's ``TaskTemplate``, read as flyteidl's (the wire forms agree, see
:mod:`taskplug.executor._flyte2`), and the spec is an ordinary one given to
:func:`~taskplug.executor.parse_spec`: type ``python`` runs on the pod plugin, ``dask``, ``spark``, ``ray``,
``pytorch`` … on theirs. On this machine (the embedded cluster, which ignores images) the container's env
carries ``PYTHONPATH`` = the project root (so ``a0`` imports the module where it is) and ``PATH`` with the
SDK's ``bin`` first (so the pod finds that ``a0``, and a Dask task's scheduler and workers that Python's
``dask``), and its image is a label of what really runs unless ``--image`` names one. On a real cluster
(``--kubeconfig``, or ``render --image``) the image named by ``--image`` must hold ``flyte`` and the module
importable by its dotted name from its working directory.

Inputs are converted by the interface's declared types as a flytekit task's are; one left out takes the
task's default (the literal the SDK computed, ``default_inputs``). Only what a single task does is served:
a task that calls other tasks needs Flyte 2's backend services (its controller submits them as actions),
which taskplug does not have.

Deviation: ``flyte run`` uploads the code as a bundle beside a stock image; taskplug uploads nothing, as with
flytekit modules.

Deviation: Flyte 2 names a run's first action ``a0``; a module's task here is node ``n0``, as every single
task execution of taskplug is (``taskplug logs`` and ``status`` find it by the execution's name alone), so its
``ACTION_NAME`` is ``n0``. A spec may name its node ``a0`` (``execution.id.nodeId``).
"""

from __future__ import annotations

import ast
import base64
import binascii
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from flyteidl.core import literals_pb2, tasks_pb2
from google.protobuf import json_format
from google.protobuf.message import DecodeError

from taskplug.cli import _flytekit_module as fk
from taskplug.cli._flytekit_module import ModuleTarget
from taskplug.cli._text import did_you_mean
from taskplug.core import SpecError, TaskplugError
from taskplug.executor import ExecutionSpec, parse_spec

__all__ = [
    "FLYTE2_PACKAGE",
    "Flyte2Python",
    "find_flyte2_python",
    "flyte2_module_document",
    "flyte2_module_spec",
    "is_flyte2_module",
]

FLYTE2_PACKAGE = "flyte"
"""The Flyte 2 SDK's distribution on PyPI."""

SERIALIZER = Path(__file__).with_name("_flyte2_serializer.py")
_SERIALIZE_SECONDS = 300.0
"""How long importing and serializing a module may take (a module may import heavy libraries)."""


def is_flyte2_module(path: Path) -> bool:
    """Whether the file imports Flyte 2's SDK (``import flyte``, ``from flyte… import``) and not flytekit:
    read, not imported. A file that cannot be read or parsed is left to the flytekit path, which says why."""
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return False
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".", 1)[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".", 1)[0])
    return "flyte" in roots and "flytekit" not in roots


@dataclass(frozen=True, slots=True)
class Flyte2Python:
    """A Python that has the Flyte 2 SDK, and the folder of its ``a0``."""

    python: Path
    bin_dir: Path


def _has_flyte() -> bool:
    """Whether this Python has Flyte 2's SDK (its runtime entry point; not flytekit, nor another ``flyte``)."""
    import importlib.util

    spec = importlib.util.find_spec("flyte")
    folders = spec.submodule_search_locations if spec is not None else None
    return any((Path(folder) / "_bin" / "runtime.py").is_file() for folder in folders or ())


def _shebang_python(script: Path) -> Path | None:
    """The interpreter a console script (``a0``) runs with: its ``#!`` line."""
    try:
        with script.open("rb") as f:
            first = f.readline(4096)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode(errors="replace").split()
    if not words:
        return None
    if Path(words[0]).name == "env" and len(words) > 1:
        found = shutil.which(words[1])
        return Path(found) if found else None
    candidate = Path(words[0])
    return candidate if candidate.is_file() and os.access(candidate, os.X_OK) else None


def find_flyte2_python(path: str | None = None) -> Flyte2Python | None:
    """taskplug's own Python when it has ``flyte`` (its ``a0`` beside it), else the Python of the ``a0`` found
    on ``path`` (``PATH`` by default); None when neither."""
    here = Path(sys.executable)
    if _has_flyte() and (here.parent / "a0").exists():
        return Flyte2Python(here, here.parent)
    found = shutil.which("a0", path=path)
    if found is None:
        return None
    script = Path(found)
    python = _shebang_python(script)
    if python is None:
        return None
    return Flyte2Python(python, script.parent)


def _require_flyte2(path: Path) -> Flyte2Python:
    found = find_flyte2_python()
    if found is None:
        raise TaskplugError(
            f"{str(path)!r} is a Flyte 2 module (it imports flyte), and running a task from it needs the Flyte 2 "
            f"SDK, found neither for {sys.executable} nor as an `a0` on PATH: install it with "
            f"`pip install {FLYTE2_PACKAGE}` (here, or in a virtualenv whose bin folder is on PATH), or give a "
            "YAML execution spec"
        )
    return found


def _serialize(
    flyte2: Flyte2Python, path: Path, root: Path, *, version: str, project: str, domain: str, task: str | None
) -> dict[str, Any]:
    """The serializer's document (see :mod:`._flyte2_serializer`), run in the Python that has ``flyte``."""
    command = [str(flyte2.python), str(SERIALIZER), str(path), str(root), version, project, domain]
    if task is not None:
        command.append(task)
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=_SERIALIZE_SECONDS,
            check=False,
            cwd=root,
            # Nothing of taskplug's path; the serializer puts the project root on its path itself, after its own
            # imports (a module of the user's named like one of the standard library's must not replace it).
            env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise TaskplugError(f"cannot serialize {str(path)!r} with {flyte2.python}: {e}") from e
    sys.stderr.write(done.stderr)
    lines = done.stdout.strip().splitlines()
    try:
        document: dict[str, Any] = json.loads(lines[-1]) if lines else {}
    except json.JSONDecodeError:
        document = {}
    if "error" in document:
        raise TaskplugError(str(document["error"]))
    if done.returncode != 0 or "tasks" not in document:
        raise TaskplugError(
            f"cannot serialize {str(path)!r} with {flyte2.python} (exit {done.returncode}); its last words: "
            f"{(done.stderr.strip().splitlines() or ['none'])[-1]}"
        )
    return document


def _decode(text: str, message: Any, what: str) -> Any:
    try:
        message.ParseFromString(base64.b64decode(text))
    except (binascii.Error, DecodeError) as e:
        raise TaskplugError(f"the Flyte 2 serializer wrote a {what} taskplug cannot read: {e}") from e
    return message


def _on_host(template: tasks_pb2.TaskTemplate, root: Path, flyte2: Flyte2Python, image: str) -> None:
    """What the embedded cluster's process kubelet needs to run the task here (see the module's docstring)."""
    path = f"{flyte2.bin_dir}:/usr/local/bin:/usr/bin:/bin"
    if template.WhichOneof("target") == "container":
        container = template.container
        kept = [kv for kv in container.env if kv.key not in ("PYTHONPATH", "PATH")]
        del container.env[:]
        container.env.extend(kept)
        container.env.add(key="PYTHONPATH", value=str(root))
        container.env.add(key="PATH", value=path)
        container.image = image
    elif template.WhichOneof("target") == "k8s_pod":
        spec = json_format.MessageToDict(template.k8s_pod.pod_spec)
        primary = template.config.get("primary_container_name", "")
        for container in spec.get("containers") or []:
            if container.get("name") != primary:
                continue
            env = [e for e in container.get("env") or [] if e.get("name") not in ("PYTHONPATH", "PATH")]
            container["env"] = [
                *env,
                {"name": "PYTHONPATH", "value": str(root)},
                {"name": "PATH", "value": path},
            ]
            container["image"] = image
        template.k8s_pod.pod_spec.Clear()
        template.k8s_pod.pod_spec.update(spec)


def _with_image(template: tasks_pb2.TaskTemplate, image: str) -> None:
    if template.WhichOneof("target") == "container":
        template.container.image = image


def flyte2_module_spec(
    path: Path,
    arguments: Sequence[str],
    target: ModuleTarget,
    *,
    fresh_name: bool = True,
) -> ExecutionSpec:
    """The execution spec of ``SPEC.py TASK [--INPUT VALUE]...`` for a Flyte 2 module (its images, project,
    domain, name and env from ``target``, as a flytekit module's); ``--help`` after the task prints its inputs."""
    return _spec_and_document(path, arguments, target, fresh_name=fresh_name)[0]


def flyte2_module_document(
    path: Path, arguments: Sequence[str], target: ModuleTarget
) -> tuple[dict[str, Any], str]:
    """The same task as the self-contained spec document ``taskplug run --server`` submits (the template
    inline, the execution named) and its execution key."""
    spec, document = _spec_and_document(path, arguments, target, fresh_name=True)
    document["execution"]["id"]["name"] = (
        spec.metadata.task_execution_id.id.node_execution_id.execution_id.name
    )
    return document, spec.execution_key


def _spec_and_document(
    path: Path, arguments: Sequence[str], target: ModuleTarget, *, fresh_name: bool
) -> tuple[ExecutionSpec, dict[str, Any]]:
    parent = click.get_current_context()
    resolved = path.resolve()
    flyte2 = _require_flyte2(path)
    root = fk.project_root(resolved)
    task_name = arguments[0] if arguments and not arguments[0].startswith("-") else None
    rest = list(arguments[1:] if task_name is not None else arguments)
    document = _serialize(
        flyte2,
        resolved,
        root,
        version=fk.module_version(resolved),
        project=target.project,
        domain=target.domain,
        task=task_name,
    )
    tasks: dict[str, str] = document["tasks"]
    listing = f"the tasks in {str(path)!r}: {', '.join(tasks) or 'none'}"
    if task_name is None:
        if not any(a in ("-h", "--help") for a in rest):
            raise SpecError("TASK", f"name the task to run after the file: {listing}")
        click.echo(f"Usage: {parent.command_path} [OPTIONS] {path} TASK [--INPUT VALUE]...\n")
        click.echo(f"{listing[0].upper()}{listing[1:]}.")
        parent.exit(0)
    if task_name not in tasks or "task" not in document:
        raise SpecError(
            "TASK", f"{str(path)!r} has no task {task_name!r}{did_you_mean(task_name, tasks)}: {listing}"
        )
    described = document["task"]
    template = _decode(described["template"], tasks_pb2.TaskTemplate(), "task template")
    inputs = []
    for item in described["inputs"]:
        default = _decode(item["literal"], literals_pb2.Literal(), "default") if item["literal"] else None
        variable = template.interface.inputs.variables.get(item["name"])
        if variable is None:
            raise TaskplugError(
                f"the task's interface has no input {item['name']!r}, which its function takes"
            )
        inputs.append(
            fk.ModuleInput(
                name=item["name"],
                literal_type=variable.type,
                python_type=Any,
                required=default is None,
                default=default,
                description=item["description"],
                default_text=item["default"] or "",
                type_text=item["type"],
            )
        )
    summary = (
        f"Flyte 2 task {tasks[task_name]} ({described['type']}) from {path.name}: its inputs as options."
    )
    doc = described["doc"]
    command = click.Command(
        task_name,
        params=[fk.input_option(item) for item in inputs],
        help=f"{summary}\n\n{doc}" if doc else summary,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    given = fk.parse_task_arguments(parent, path, task_name, command, rest)
    plain = {item.name: fk.input_value(item, given.get(item.name), on_host=target.on_host) for item in inputs}
    if target.on_host:
        image = target.images[0].rpartition("=")[2] if target.images else fk.host_image()
        _on_host(template, root, flyte2, image)
    elif target.images:
        _with_image(template, target.images[0].rpartition("=")[2])  # pyflyte's NAME=IMAGE form: the image
    # The node is n0 as for every single-task execution here (Flyte 2 names a run's first action a0; a spec
    # may too): ACTION_NAME is the node's id.
    execution_id: dict[str, Any] = {"project": target.project, "domain": target.domain, "nodeId": "n0"}
    if target.name is not None:
        execution_id["name"] = target.name
    execution: dict[str, Any] = {"id": execution_id}
    environment = fk.environment_of(target.environment)
    if environment:
        execution["environment"] = environment
    spec_document: dict[str, Any] = {
        "template": json_format.MessageToDict(template),
        "execution": execution,
        "inputs": plain,
    }
    try:
        spec = parse_spec(spec_document, base_dir=resolved.parent, source=str(path), fresh_name=fresh_name)
    except SpecError as e:
        if e.path.startswith("inputs."):
            name, _, rest_path = e.path.removeprefix("inputs.").partition(".")
            raise SpecError(f"--{name}{'.' + rest_path if rest_path else ''}", e.reason) from e
        raise
    return spec, spec_document
