"""A task from a flytekit module as an execution spec: ``taskplug run workflows.py add --a 2 --b 3``.

Follows ``pyflyte run`` (flytekit's ``clis/sdk_in_container/run.py``): the argument after the ``.py`` file
names a task in it, the arguments after the task are that task's inputs as ``--name value`` options (listed,
with their types and defaults, by ``--help`` after the task name), and the options of ``taskplug run`` go
before the file. The module is imported as pyflyte imports it, with the flytekit installed here: its
project root (the first folder above it without an ``__init__.py``) on ``sys.path``, the module by its
dotted name from there. The task is serialized as ``pyflyte register`` serializes it (flytekit's
``get_serializable``, offline), and the execution spec is an ordinary spec document given to
:func:`~taskplug.executor.parse_spec`, so a module's task runs on the same path as a YAML spec.

Where it runs decides two things about the serialized task:

- **on this machine** (the embedded cluster, which ignores images and runs a container's command on the
  host with this virtualenv's ``pyflyte-execute`` first on ``PATH``): the container's env carries
  ``PYTHONPATH`` = the project root, so that ``pyflyte-execute`` imports the module from where it is, and
  flytekit's interpreter is this Python (what a Spark task runs its executors with). The image, unless
  ``--image`` names one, is :func:`host_image`: a label saying what really runs.
- **on a real cluster** (``--kubeconfig``, or ``render --image``): the image named by ``--image`` must hold
  flytekit and the module importable by its dotted name from its working directory (as ``pyflyte run
  --remote --copy none`` expects), and nothing of this machine goes into the template.

Inputs are converted by the interface's declared types: text for strings, times, durations, enums, files and
datasets; the other types are read as YAML (so JSON too: ``--xs '[1, 2]'``, ``--p '{"x": 1}'``). An input
left out takes the task's default (the launch plan's default literal, as flytekit computes it); a required
one left out is a usage error naming it. ``@eager`` workflows and reference entities are refused (they need
Flyte's Admin API or registry).

A workflow or launch plan of the module is serialized the same way, with everything it reaches and its
default launch plan, into a :class:`~taskplug.compiler.WorkflowBundle` (:func:`serialize_workflow`, following
flytekit's ``tools/serialize_helpers.py`` and ``LaunchPlan.get_default_launch_plan``); :func:`module_workflow`
also reads its inputs from the options after its name, which ``--help`` lists (the launch plan's expected
inputs, with their defaults). A ``@dynamic`` task runs as flyteadmin launches a single task: a one-node
workflow around it, whose node is then a dynamic node.

Deviation: pyflyte's default for a remote run is fast registration (the code uploaded beside a stock image);
taskplug uploads nothing, so a real cluster needs an image with the code (``--image``), and the embedded
cluster reads the module where it is.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import inspect
import os
import re
import sys
import typing
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import click
from flyteidl.core import interface_pb2, literals_pb2, tasks_pb2, types_pb2
from google.protobuf import json_format

from taskplug.cli._text import did_you_mean
from taskplug.core import SpecError, TaskplugError, literal_to_plain, load_document
from taskplug.executor import ExecutionSpec, parse_spec, workflow_spec

if typing.TYPE_CHECKING:
    from taskplug.compiler import WorkflowBundle

__all__ = [
    "MODULE_ARGS",
    "ModuleCommand",
    "ModuleInput",
    "ModuleTarget",
    "built",
    "environment_of",
    "host_image",
    "input_option",
    "input_value",
    "is_module",
    "module_options",
    "module_spec",
    "module_spec_builder",
    "module_target_from_options",
    "module_version",
    "module_workflow",
    "parse_task_arguments",
    "project_root",
    "reject_module_options",
    "serialize_workflow",
]

MODULE_ARGS = "taskplug.module_args"
"""``ctx.meta`` key: the arguments after a ``.py`` SPEC (the task's name, then its inputs)."""

DEFAULT_PROJECT = "flytesnacks"
DEFAULT_DOMAIN = "development"
"""pyflyte's defaults for ``--project`` and ``--domain``."""

_Simple = types_pb2.SimpleType
_TEXT_SIMPLE = {_Simple.STRING, _Simple.DATETIME, _Simple.DURATION}


def is_module(spec: Path) -> bool:
    return spec.suffix == ".py"


def host_image() -> str:
    """The image name a module's task gets on the embedded cluster unless ``--image`` names one: that
    cluster ignores images, and what runs is this machine's Python."""
    return f"localhost/taskplug-host-python:{sys.version_info.major}.{sys.version_info.minor}"


# -- the command line: SPEC.py TASK [--INPUT VALUE]... ----------------------------------------------------


class ModuleCommand(click.Command):
    """A command whose SPEC may be a flytekit module. Then everything after the file is the task's: its
    name and its inputs (``ctx.meta[MODULE_ARGS]``), parsed later by the task's own command; the command's
    own options go before the file, as with ``pyflyte run``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        at = self._spec_position(ctx, args)
        if at is not None and (is_module(Path(args[at])) or is_serialized(Path(args[at]))):
            ctx.meta[MODULE_ARGS] = tuple(args[at + 1 :])
            args = args[: at + 1]
        return super().parse_args(ctx, args)

    def collect_usage_pieces(self, ctx: click.Context) -> list[str]:
        return [*super().collect_usage_pieces(ctx), "[TASK [--INPUT VALUE]...]"]

    def _spec_position(self, ctx: click.Context, args: Sequence[str]) -> int | None:
        """Where the first positional argument (SPEC) is, skipping this command's options and their values."""
        takes_value: dict[str, bool] = {}
        for param in self.get_params(ctx):
            if isinstance(param, click.Option):
                for opt in (*param.opts, *param.secondary_opts):
                    takes_value[opt] = not (param.is_flag or param.count)
        index = 0
        while index < len(args):
            token = args[index]
            if token == "--":
                return index + 1 if index + 1 < len(args) else None
            if token.startswith("-") and token != "-":
                # ``--opt value`` is two tokens; ``--opt=value``, ``-ojson`` and a flag are one.
                if takes_value.get(token, False):
                    index += 1
                index += 1
                continue
            return index
        return None


@dataclass(frozen=True, slots=True)
class ModuleTarget:
    """How a module's task becomes a spec: the images (``--image``, pyflyte's form), the execution's
    project, domain and name (``None``: a fresh name per run), env, whether it runs on this machine, and
    whether a workflow's inputs may be left out (``taskplug render``: the compiled workflow does not depend
    on them; a task's rendered object does, through its command's input templates)."""

    images: tuple[str, ...] = ()
    project: str = DEFAULT_PROJECT
    domain: str = DEFAULT_DOMAIN
    name: str | None = None
    environment: tuple[str, ...] = ()
    on_host: bool = True
    workflow_inputs_optional: bool = False


F = typing.TypeVar("F", bound=Callable[..., Any])


def module_options(command: F) -> F:
    """The options of a module's task run (pyflyte's names): images, project, domain, execution name, env."""
    decorators = [
        click.option(
            "-i",
            "--image",
            "images",
            multiple=True,
            help="For a flytekit module: the task's image (`NAME=IMAGE` for a named one; repeatable), as "
            "pyflyte's --image. Default: a label of this machine's Python (the embedded cluster ignores "
            "images); a real cluster needs an image holding flytekit and the module.",
        ),
        click.option(
            "--project",
            default=None,
            help=f"For a flytekit module: the execution's project [default: {DEFAULT_PROJECT}].",
        ),
        click.option(
            "--domain",
            default=None,
            help=f"For a flytekit module: the execution's domain [default: {DEFAULT_DOMAIN}].",
        ),
        click.option(
            "--name",
            "execution_name",
            default=None,
            help="For a flytekit module: the execution's name [default: a fresh one per run].",
        ),
        click.option(
            "-e",
            "--env",
            "environment",
            multiple=True,
            help="For a flytekit module: an environment variable for the task's containers, NAME=VALUE "
            "(repeatable).",
        ),
    ]
    for decorator in reversed(decorators):
        command = decorator(command)
    return command


def reject_module_options(**given: object) -> None:
    """A YAML spec says these itself: a module option given with one is a mistake, not ignored."""
    for option, value in given.items():
        if value:
            raise SpecError(
                f"--{option.replace('_', '-')}",
                "is for a flytekit module (SPEC ending in .py); a YAML execution spec sets it itself",
            )


# -- loading the module -------------------------------------------------------------------------------------


def _require_flytekit(path: Path) -> None:
    try:
        import flytekit  # type: ignore[import-untyped]  # noqa: F401
    except ModuleNotFoundError as e:
        if e.name != "flytekit":
            raise
        raise TaskplugError(
            f"{str(path)!r} is a flytekit module, and running a task from it needs flytekit, which is not "
            f"installed for {sys.executable}: install it with `pip install flytekit` (and the "
            f"flytekitplugins-* packages its tasks use), or give a YAML execution spec"
        ) from None


def _project_root(path: Path) -> Path:
    """The first folder above the file without an ``__init__.py`` (flytekit's ``_find_project_root``)."""
    root = path.parent
    while (root / "__init__.py").exists():
        root = root.parent
    return root


@contextlib.contextmanager
def _on_sys_path(folder: Path) -> Iterator[None]:
    sys.path.insert(0, str(folder))
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(str(folder))


_IMPORTED: dict[str, Path] = {}
"""Module name → the file this process imported it from here (see :func:`_import`)."""


def _stdout_to_stderr() -> contextlib.AbstractContextManager[object]:
    """What the module and flytekit print while the module is imported and serialized goes to stderr:
    stdout is the run's own (``-o json`` prints one document there). flytekit logs warnings to stdout, e.g.
    ``with_overrides(requests=...)`` without limits while it serializes the node."""
    return contextlib.redirect_stdout(sys.stderr)


def _import(path: Path, root: Path) -> Any:
    from flytekit import FlyteContextManager

    module_name = ".".join(path.relative_to(root).with_suffix("").parts)
    loaded = sys.modules.get(module_name)
    if loaded is not None and Path(getattr(loaded, "__file__", None) or "").resolve() != path:
        if _IMPORTED.get(module_name) is None:
            # Not a module of ours: the standard library's, taskplug's, an installed package's. Importing the
            # file under its name would shadow it for the rest of the process (pyflyte would silently get
            # the other module instead).
            raise TaskplugError(
                f"cannot import {str(path)!r} as module {module_name!r}: a module of that name is already "
                f"imported from {getattr(loaded, '__file__', None) or 'a built-in'}; rename the file"
            )
        # One of ours from another file (a second run in the same process): this file replaces it.
        del sys.modules[module_name]
    importlib.invalidate_caches()
    builder = FlyteContextManager.current_context().new_builder()
    try:
        with FlyteContextManager.with_context(builder), _on_sys_path(root), _stdout_to_stderr():
            module = importlib.import_module(module_name)
    except Exception as e:
        raise TaskplugError(
            f"cannot import {str(path)!r} as module {module_name!r} (from {str(root)!r}): "
            f"{type(e).__name__}: {e}"
        ) from e
    _IMPORTED[module_name] = path
    return module


@dataclass(frozen=True, slots=True)
class _Entities:
    """What a module holds, by attribute name (as pyflyte lists them)."""

    tasks: dict[str, Any]
    refused: dict[str, str]
    """name → what it is (a workflow, a launch plan, a dynamic workflow, an eager workflow, a reference)."""
    workflows: dict[str, Any]
    """The workflows and launch plans (also in ``refused``: a task run refuses them), which
    :func:`serialize_workflow` serializes."""


_REFERENCE = "a reference {} (it lives in a Flyte cluster's registry, which taskplug does not have)"
_EAGER = (
    "an eager workflow (@eager): it launches its tasks through Flyte's Admin API while it runs, which taskplug "
    "does not have"
)


def _entities(module: Any) -> _Entities:
    from flytekit.core.base_task import PythonTask  # type: ignore[import-untyped]
    from flytekit.core.launch_plan import LaunchPlan  # type: ignore[import-untyped]
    from flytekit.core.python_function_task import PythonFunctionTask  # type: ignore[import-untyped]
    from flytekit.core.reference_entity import ReferenceEntity  # type: ignore[import-untyped]
    from flytekit.core.workflow import WorkflowBase  # type: ignore[import-untyped]

    tasks: dict[str, Any] = {}
    refused: dict[str, str] = {}
    workflows: dict[str, Any] = {}
    for name, value in sorted(vars(module).items()):
        if isinstance(value, ReferenceEntity):
            kind = "workflow" if isinstance(value, WorkflowBase) else "launch plan"
            refused[name] = _REFERENCE.format("task" if isinstance(value, PythonTask) else kind)
        elif isinstance(value, WorkflowBase):
            refused[name] = "a workflow"
            workflows[name] = value
        elif isinstance(value, LaunchPlan):
            refused[name] = "a launch plan"
            workflows[name] = value
        elif isinstance(value, PythonTask):
            mode = getattr(value, "execution_mode", None)
            if mode == PythonFunctionTask.ExecutionBehavior.DYNAMIC:
                workflows[name] = _single_task_workflow(value)
            elif mode == PythonFunctionTask.ExecutionBehavior.EAGER:
                refused[name] = "an eager workflow (@eager)"
            else:
                tasks[name] = value
    return _Entities(tasks, refused, workflows)


def _single_task_workflow(task: Any) -> Any:
    """A one-node workflow around ``task``, its inputs the task's and its outputs the node's: how flyteadmin
    launches a single task, and how a ``@dynamic`` task runs here (its node is then a dynamic node)."""
    from flytekit.core.workflow import ImperativeWorkflow

    wrapper = ImperativeWorkflow(name=task.name)
    inputs = {k: wrapper.add_workflow_input(k, v) for k, v in task.python_interface.inputs.items()}
    node = wrapper.add_entity(task, **inputs)
    for name in task.python_interface.outputs:
        wrapper.add_workflow_output(name, node.outputs[name])
    return wrapper


def _listing(path: Path, entities: _Entities) -> str:
    tasks = ", ".join(entities.tasks) or "none"
    text = f"the tasks in {str(path)!r}: {tasks}"
    runnable = [name for name in entities.workflows if name not in entities.tasks]
    if runnable:
        text += f"; workflows, launch plans and @dynamic tasks: {', '.join(runnable)}"
    if entities.refused:
        others = ", ".join(
            f"{name} ({what})" for name, what in entities.refused.items() if name not in entities.workflows
        )
        if others:
            text += f"; which taskplug cannot run: {others}"
    return text


def _choose(path: Path, entities: _Entities, task_name: str) -> Any:
    if task_name in entities.tasks:
        return entities.tasks[task_name]
    if task_name in entities.refused:
        raise SpecError(
            "TASK",
            f"{task_name!r} is {entities.refused[task_name]}: taskplug cannot run it ({_listing(path, entities)})",
        )
    names = [*entities.tasks, *entities.workflows]
    raise SpecError(
        "TASK",
        f"{str(path)!r} has no task {task_name!r}{did_you_mean(task_name, names)}: {_listing(path, entities)}",
    )


# -- the task's inputs as options -----------------------------------------------------------------------------


def _type_name(python_type: Any) -> str:
    """``int``, ``list[int]``, ``Point``, ``Optional[FlyteFile]``: the annotation without module paths."""
    if isinstance(python_type, type) and not typing.get_args(python_type):
        return python_type.__name__
    return re.sub(r"\b(?:\w+\.)+(\w+)", r"\1", repr(python_type))


@dataclass(frozen=True, slots=True)
class _Input:
    name: str
    literal_type: types_pb2.LiteralType
    python_type: Any
    required: bool
    default: literals_pb2.Literal | None
    description: str
    default_text: str
    type_text: str = ""
    """The annotation as text, when the type is not an object of this process (a Flyte 2 module's)."""


def _inputs(entity: Any) -> list[_Input]:
    from flytekit import FlyteContextManager
    from flytekit.core.interface import transform_inputs_to_parameters  # type: ignore[import-untyped]

    interface = entity.python_interface
    parameters = transform_inputs_to_parameters(FlyteContextManager.current_context(), interface)
    with_defaults = interface.inputs_with_defaults
    found = []
    for name, parameter in parameters.parameters.items():
        python_type, default_value = with_defaults[name]
        variable = parameter.var.to_flyte_idl()
        default = parameter.default.to_flyte_idl() if parameter.default is not None else None
        description = variable.description if variable.description != name else ""
        found.append(
            _Input(
                name=name,
                literal_type=variable.type,
                python_type=python_type,
                required=default is None,
                default=default,
                description=description,
                default_text=repr(default_value),
            )
        )
    return found


def _is_flag(item: _Input) -> bool:
    kind = item.literal_type.WhichOneof("type")
    return bool(kind == "simple" and item.literal_type.simple == _Simple.BOOLEAN)


def _option(item: _Input) -> click.Option:
    dashed = item.name.replace("_", "-")
    names = [f"--{item.name}"] + ([f"--{dashed}"] if dashed != item.name else [])
    help_text = item.description or ""
    if _is_flag(item):
        # pyflyte's boolean inputs are flags, False unless the task's default says otherwise.
        flags = [f"--{item.name}/--no-{dashed}"] + (
            [f"--{dashed}/--no_{item.name}"] if dashed != item.name else []
        )
        default = item.default is not None and item.default.scalar.primitive.boolean
        return click.Option(
            [item.name, *flags], is_flag=True, default=default, show_default=True, help=help_text
        )
    if not item.required and item.default is not None:
        help_text = f"{help_text}  [default: {item.default_text}]".strip()
    # No ``default=``: click then reports a required input left out (a None default would count as given).
    return click.Option(
        [item.name, *names],
        type=click.STRING,
        metavar=item.type_text or _type_name(item.python_type),
        required=item.required,
        help=help_text,
    )


def _task_command(path: Path, task_name: str, entity: Any, inputs: Sequence[_Input]) -> click.Command:
    function = getattr(entity, "task_function", None)
    doc = _help_text(inspect.cleandoc(function.__doc__)) if function is not None and function.__doc__ else ""
    summary = f"{type(entity).__name__} {entity.name} from {path.name}: its inputs as options."
    return click.Command(
        task_name,
        params=[_option(item) for item in inputs],
        help=f"{summary}\n\n{doc}" if doc else summary,
        context_settings={"help_option_names": ["-h", "--help"]},
    )


def _help_text(doc: str) -> str:
    """A docstring as ``--help`` shows it: prose rewrapped, but a paragraph of reST fields (``:param a: …``,
    ``:return: …``) kept one field per line (click's ``\\b`` marker), as they would otherwise run together."""
    paragraphs = doc.split("\n\n")
    kept = [
        f"\b\n{p}" if any(line.lstrip().startswith(":") for line in p.splitlines()) else p for p in paragraphs
    ]
    return "\n\n".join(kept)


def _parse_task_arguments(
    parent: click.Context, path: Path, task_name: str, command: click.Command, arguments: Sequence[str]
) -> dict[str, Any]:
    # Not a child context: click would put the parent's usage pieces (SPEC) in the command path.
    info = f"{parent.command_path} {path} {task_name}"
    try:
        with command.make_context(info, list(arguments)) as sub:
            return dict(sub.params)
    except click.NoSuchOption as e:
        outer = {opt for p in parent.command.params if isinstance(p, click.Option) for opt in p.opts}
        if e.option_name in outer:
            raise click.UsageError(
                f"{e.option_name} is an option of `{parent.command_path}`: put it before the file "
                f"({parent.command_path} {e.option_name} … {path} {task_name} …), as with pyflyte run; "
                f"what follows the task name is the task's inputs",
                ctx=e.ctx,
            ) from None
        raise


def _plain(raw: str, literal_type: types_pb2.LiteralType, option: str, *, on_host: bool) -> Any:
    """The plain value (as a spec's ``inputs`` takes it) of an option's text, by the input's declared type."""
    kind = literal_type.WhichOneof("type")
    if kind == "simple":
        simple = literal_type.simple
        if simple == _Simple.DURATION:
            # A bare number is seconds, as pyflyte's duration option reads it; else Go's or ISO 8601's text.
            try:
                return float(raw) if "." in raw or "e" in raw.lower() else int(raw)
            except ValueError:
                return raw
        if simple in _TEXT_SIMPLE:
            return raw
        if simple == _Simple.INTEGER:
            try:
                return int(raw)
            except ValueError:
                raise SpecError(option, f"expected an integer, got {raw!r}") from None
        if simple == _Simple.FLOAT:
            try:
                return float(raw)
            except ValueError:
                raise SpecError(option, f"expected a number, got {raw!r}") from None
        return _yaml(raw, option)
    if kind in ("blob", "structured_dataset_type", "schema"):
        return _location(raw, option, on_host=on_host)
    if kind == "enum_type":
        return raw
    if kind == "union_type":
        variants = list(literal_type.union_type.variants)
        text = next((v for v in variants if _takes_text(v)), None)
        try:
            value = _yaml(raw, option)
        except SpecError:
            if text is None:
                raise
            return _plain(raw, text, option, on_host=on_host)
        # A value another variant takes (``7`` for Union[int, str], ``null`` for an Optional) is that value;
        # anything else is the text as typed, for the variant that takes text (``--name 5`` for an
        # Optional[str] is "5", a path for an Optional[FlyteFile] is made absolute).
        if not isinstance(value, str) and any(_accepts(v, value) for v in variants if v is not text):
            return value
        return _plain(raw, text, option, on_host=on_host) if text is not None else value
    return _yaml(raw, option)


def _yaml(raw: str, option: str) -> Any:
    return load_document(raw.encode(), option)


def _location(raw: str, option: str, *, on_host: bool) -> str:
    """A file, folder or dataset input: a URI as given; on this machine, a local path made absolute (the
    task's process runs in a folder of its own). On this machine a local path or ``file://`` URI that does
    not exist or cannot be read is a usage error now, naming the input, instead of a pod that fails in
    flytekit's download (pyflyte's run checks the same before it uploads)."""
    if not on_host:
        return raw
    if "://" in raw and not raw.startswith("file://"):
        return raw
    local = Path(unquote(urlparse(raw).path)) if raw.startswith("file://") else Path(raw).expanduser()
    if not local.exists():
        raise SpecError(option, f"no such file or folder: {raw!r} (looked for {str(local.absolute())!r})")
    if not os.access(local, os.R_OK) or (local.is_dir() and not os.access(local, os.X_OK)):
        raise SpecError(option, f"cannot be read: {raw!r}")
    return raw if raw.startswith("file://") else str(local.resolve())


def _takes_text(literal_type: types_pb2.LiteralType) -> bool:
    kind = literal_type.WhichOneof("type")
    if kind == "simple":
        return literal_type.simple in _TEXT_SIMPLE
    return kind in ("blob", "structured_dataset_type", "schema", "enum_type")


def _accepts(literal_type: types_pb2.LiteralType, value: Any) -> bool:
    """Whether a value read as YAML has the shape of a union variant (the conversion checks the rest)."""
    kind = literal_type.WhichOneof("type")
    if kind == "union_type":
        return any(_accepts(v, value) for v in literal_type.union_type.variants)
    if kind == "collection_type":
        return isinstance(value, list)
    if kind == "map_value_type":
        return isinstance(value, Mapping)
    if kind != "simple":
        return isinstance(value, str) and _takes_text(literal_type)
    simple = literal_type.simple
    number = isinstance(value, int | float) and not isinstance(value, bool)
    return {
        _Simple.NONE: value is None,
        _Simple.INTEGER: isinstance(value, int) and not isinstance(value, bool),
        _Simple.FLOAT: number,
        _Simple.BOOLEAN: isinstance(value, bool),
        _Simple.STRUCT: isinstance(value, Mapping),
    }.get(simple, isinstance(value, str))


def _input_value(item: _Input, raw: Any, *, on_host: bool) -> Any:
    if raw is None:
        if item.default is None:
            # Only a default that flytekit resolves through an artifact service comes here.
            raise SpecError(
                f"--{item.name}", "required: its default is an artifact query, which taskplug cannot resolve"
            )
        if item.literal_type.WhichOneof("type") == "map_value_type":
            # A mapping in ``inputs`` of a map-typed input is its value, never Literal JSON.
            return literal_to_plain(item.default)
        return json_format.MessageToDict(item.default)
    if isinstance(raw, bool):
        return raw
    return _plain(str(raw), item.literal_type, f"--{item.name}", on_host=on_host)


# -- the spec -------------------------------------------------------------------------------------------------


def _settings(root: Path, target: ModuleTarget, version: str) -> Any:
    from flytekit.configuration import ImageConfig, SerializationSettings  # type: ignore[import-untyped]

    images = target.images or (host_image(),)
    try:
        image_config = ImageConfig.validate_image(None, "image", images)
    except (ValueError, AssertionError) as e:
        raise SpecError("--image", str(e)) from e
    if not target.on_host:
        return SerializationSettings(
            image_config=image_config, project=target.project, domain=target.domain, version=version
        )
    return SerializationSettings(
        image_config=image_config,
        project=target.project,
        domain=target.domain,
        version=version,
        env={"PYTHONPATH": str(root)},
        python_interpreter=sys.executable,
    )


def _template(entity: Any, settings: Any) -> tasks_pb2.TaskTemplate:
    from collections import OrderedDict

    from flytekit.tools.translator import get_serializable  # type: ignore[import-untyped]

    try:
        with _stdout_to_stderr():
            serialized = get_serializable(OrderedDict(), settings, entity)
    except Exception as e:
        raise TaskplugError(f"flytekit cannot serialize task {entity.name!r}: {type(e).__name__}: {e}") from e
    template: tasks_pb2.TaskTemplate = serialized.template.to_flyte_idl()
    return template


def _array_node(entity: Any) -> dict[str, Any] | None:
    """A ``map_task``'s node settings, as the spec's ``arrayNode`` section takes them."""
    from flytekit.core.array_node_map_task import ArrayNodeMapTask  # type: ignore[import-untyped]

    if not isinstance(entity, ArrayNodeMapTask):
        return None
    section: dict[str, Any] = {"boundInputs": sorted(entity.bound_inputs)}
    if entity.concurrency is not None:
        section["parallelism"] = entity.concurrency
    if entity.min_successes is not None:
        section["minSuccesses"] = entity.min_successes
    elif entity.min_success_ratio is not None and entity.min_success_ratio != 1.0:
        section["minSuccessRatio"] = entity.min_success_ratio
    return section


def environment_of(pairs: Sequence[str]) -> dict[str, str]:
    """``--env NAME=VALUE`` options as the execution's environment (a usage error names a malformed one)."""
    return _environment(pairs)


def _environment(pairs: Sequence[str]) -> dict[str, str]:
    environment = {}
    for pair in pairs:
        name, equals, value = pair.partition("=")
        if not equals or not name:
            raise SpecError("--env", f"must be NAME=VALUE, got {pair!r}")
        environment[name] = value
    return environment


def _version(path: Path) -> str:
    """The task's version: a digest of the module's file, as pyflyte versions what it registers by a digest
    of the code (a changed file is a new version, and a resume of the old execution is refused)."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()[:20]
    except OSError as e:
        raise SpecError("SPEC", f"cannot read {str(path)!r}: {e.strerror}") from e


def module_spec(
    path: Path, arguments: Sequence[str], target: ModuleTarget, *, fresh_name: bool = True
) -> ExecutionSpec:
    """The execution spec of ``SPEC.py TASK [--INPUT VALUE]...``: the task serialized by the installed
    flytekit, its inputs from the options (``--help`` prints them and exits). Without ``--name`` the
    execution is named as :func:`~taskplug.executor.parse_spec` names a spec without one (``fresh_name``: a
    new name each time, as pyflyte run; else one drawn from the spec, for ``render``)."""
    return module_spec_builder(path, arguments, target, fresh_name=fresh_name)()


def built(spec: ExecutionSpec) -> Callable[[], ExecutionSpec]:
    """A spec built already, as a builder that pickles."""
    return functools.partial(_same, spec)


def _same(spec: ExecutionSpec) -> ExecutionSpec:
    return spec


def module_spec_builder(
    path: Path, arguments: Sequence[str], target: ModuleTarget, *, fresh_name: bool = True
) -> Callable[[], ExecutionSpec]:
    """:func:`module_spec` in two steps: what needs flytekit (the module imported, the task or workflow
    serialized, the inputs read) done now, and a builder that pickles and makes the spec without flytekit (a
    workflow is compiled when it is called, since its compiled spec holds functions that do not pickle)."""
    parent = click.get_current_context()
    resolved = path.resolve()
    if not resolved.is_file():
        raise SpecError("SPEC", f"no such file: {str(path)!r}")
    _require_flytekit(path)
    root = _project_root(resolved)
    module = _import(resolved, root)
    entities = _entities(module)
    task_name = arguments[0] if arguments and not arguments[0].startswith("-") else None
    rest = list(arguments[1:] if task_name is not None else arguments)
    if task_name is None:
        listing = _listing(path, entities)
        if not any(a in ("-h", "--help") for a in rest):
            raise SpecError("TASK", f"name the task to run after the file: {listing}")
        click.echo(f"Usage: {parent.command_path} [OPTIONS] {path} TASK [--INPUT VALUE]...\n")
        click.echo(f"{listing[0].upper()}{listing[1:]}.")
        parent.exit(0)
    execution_id: dict[str, Any] = {"project": target.project, "domain": target.domain, "nodeId": "n0"}
    if target.name is not None:
        execution_id["name"] = target.name
    execution: dict[str, Any] = {"id": execution_id}
    environment = _environment(target.environment)
    if environment:
        execution["environment"] = environment
    if task_name in entities.workflows:
        # A workflow (or a launch plan): run as flyteadmin launches it, every node's pod with the same
        # execution settings.
        bundle, values = _workflow_command_line(path, resolved, root, entities, task_name, rest, target)
        del execution_id["nodeId"]
        return functools.partial(
            _workflow_spec_of_options,
            bundle,
            values,
            target,
            execution,
            source=str(path),
            fresh_name=fresh_name,
        )
    entity = _choose(path, entities, task_name)
    inputs = _inputs(entity)
    command = _task_command(path, task_name, entity, inputs)
    given = _parse_task_arguments(parent, path, task_name, command, rest)

    plain: dict[str, Any] = {}
    for item in inputs:
        plain[item.name] = _input_value(item, given.get(item.name), on_host=target.on_host)
    template = _template(entity, _settings(root, target, _version(resolved)))
    document: dict[str, Any] = {
        "template": json_format.MessageToDict(template),
        "execution": execution,
        "inputs": plain,
    }
    array = _array_node(entity)
    if array is not None:
        document["arrayNode"] = array
    try:
        return built(parse_spec(document, base_dir=resolved.parent, source=str(path), fresh_name=fresh_name))
    except SpecError as e:
        _raise_as_option(e)
        raise


def _raise_as_option(e: SpecError) -> None:
    """Raise an error about a spec's input as one about the option the user wrote (``inputs.a.b`` →
    ``--a.b``): the user wrote options, not a spec. Any other error is left to the caller."""
    if e.path.startswith("inputs."):
        name, _, rest_path = e.path.removeprefix("inputs.").partition(".")
        raise SpecError(f"--{name}{'.' + rest_path if rest_path else ''}", e.reason) from e


def _workflow_spec_of_options(
    bundle: WorkflowBundle,
    values: Mapping[str, Any],
    target: ModuleTarget,
    execution: Mapping[str, Any],
    *,
    source: str,
    fresh_name: bool,
) -> ExecutionSpec:
    """:func:`~taskplug.executor.workflow_spec` of inputs the user gave as options for ``target``: an input's
    error names its option, and a required one may be missing where the target allows it (render)."""
    try:
        return workflow_spec(
            bundle,
            values,
            execution=execution,
            source=source,
            fresh_name=fresh_name,
            partial_inputs=target.workflow_inputs_optional,
        )
    except SpecError as e:
        _raise_as_option(e)
        raise


def module_target_from_options(
    *,
    images: tuple[str, ...],
    project: str | None,
    domain: str | None,
    execution_name: str | None,
    environment: tuple[str, ...],
    on_host: bool,
) -> ModuleTarget:
    return ModuleTarget(
        images=images,
        project=project or DEFAULT_PROJECT,
        domain=domain or DEFAULT_DOMAIN,
        name=execution_name,
        environment=environment,
        on_host=on_host,
    )


# -- workflows and launch plans ----------------------------------------------------------------------------------


def serialize_workflow(module_file: Path, name: str, *, target: ModuleTarget | None = None) -> WorkflowBundle:
    """The workflow (or launch plan) ``name`` of a flytekit module, serialized in this process as ``pyflyte
    register`` serializes it (flytekit's ``get_serializable`` over one ordered map, which collects every task,
    sub-workflow and launch plan it reaches) with its default launch plan, as a bundle. ``name`` is the
    module's attribute (``wf``) or the entity's flytekit name (``module.wf``). A launch plan runs as itself.
    An ``@eager`` workflow, a reference entity, or a workflow reaching one, is refused with the reason."""
    resolved = module_file.resolve()
    if not resolved.is_file():
        raise SpecError("SPEC", f"no such file: {str(module_file)!r}")
    _require_flytekit(module_file)
    root = _project_root(resolved)
    entities = _entities(_import(resolved, root))
    return _serialize_workflow(module_file, resolved, root, entities, name, target or ModuleTarget())


def module_workflow(
    path: Path, arguments: Sequence[str], target: ModuleTarget
) -> tuple[WorkflowBundle, dict[str, Any]]:
    """``SPEC.py WORKFLOW [--INPUT VALUE]...`` (the arguments after the file, ``ctx.meta[MODULE_ARGS]``):
    the workflow or launch plan serialized (:func:`serialize_workflow`) and the plain values of the inputs
    given as options, typed by the workflow's interface as a task's are (``--help`` prints the options, the
    launch plan's expected inputs with their defaults, and exits). An input left out is absent from the
    values: the launch plan's default fills it (``taskplug.compiler.launch_inputs``)."""
    resolved = path.resolve()
    if not resolved.is_file():
        raise SpecError("SPEC", f"no such file: {str(path)!r}")
    _require_flytekit(path)
    root = _project_root(resolved)
    entities = _entities(_import(resolved, root))
    name = arguments[0] if arguments and not arguments[0].startswith("-") else None
    if name is None:
        listing = _listing(path, entities)
        raise SpecError("WORKFLOW", f"name the workflow to run after the file: {listing}")
    return _workflow_command_line(path, resolved, root, entities, name, list(arguments[1:]), target)


def _workflow_command_line(
    path: Path,
    resolved: Path,
    root: Path,
    entities: _Entities,
    name: str,
    rest: Sequence[str],
    target: ModuleTarget,
) -> tuple[WorkflowBundle, dict[str, Any]]:
    from taskplug.compiler import expected_inputs

    bundle = _serialize_workflow(path, resolved, root, entities, name, target)
    entity = _workflow_entity(path, entities, name)
    expected = expected_inputs(bundle.launch_plan, bundle.workflow.interface)
    inputs = _optional_if(_workflow_inputs(entity, expected), target.workflow_inputs_optional)
    command = _task_command(path, name, entity, inputs)
    given = _parse_task_arguments(click.get_current_context(), path, name, command, rest)
    return bundle, _workflow_values(inputs, given, on_host=target.on_host)


def _optional_if(inputs: list[_Input], optional: bool) -> list[_Input]:
    return [replace(item, required=False) for item in inputs] if optional else inputs


def _workflow_values(inputs: Sequence[_Input], given: Mapping[str, Any], *, on_host: bool) -> dict[str, Any]:
    """The plain values of the workflow inputs given as options; one left out is absent, for the launch plan's
    default to fill (``taskplug.compiler.launch_inputs``)."""
    plain: dict[str, Any] = {}
    for item in inputs:
        raw = given.get(item.name)
        if raw is not None:
            plain[item.name] = _input_value(item, raw, on_host=on_host)
    return plain


# -- what pyflyte wrote: PATH [WORKFLOW] [--INPUT VALUE]... -------------------------------------------------


def is_serialized(spec: Path) -> bool:
    """Whether SPEC is what ``pyflyte serialize`` or ``pyflyte package`` wrote: an entity's ``.pb`` file, a
    folder of them, or an archive."""
    return spec.suffix == ".pb" or spec.is_dir() or spec.name.lower().endswith((".tgz", ".tar.gz", ".tar"))


def serialized_workflow(
    path: Path, arguments: Sequence[str], target: ModuleTarget
) -> tuple[WorkflowBundle, dict[str, Any], dict[str, Any]]:
    """``PATH [WORKFLOW] [--INPUT VALUE]...`` where PATH is what pyflyte wrote (:func:`is_serialized`): the
    workflow or launch plan WORKFLOW names (flytekit's name, ``module.wf`` or ``wf``; a ``_2.pb`` / ``_3.pb``
    file names its own), the plain values of the inputs given as options (typed by the launch plan's expected
    inputs, which ``--help`` lists with their defaults), and the execution section from ``target`` — on this
    machine with ``PYTHONPATH`` set to the working folder unless ``--env`` sets it, since the templates'
    ``pyflyte-execute`` imports the module by its dotted name, from where ``pyflyte serialize`` ran."""
    from taskplug.compiler import choose_bundle, expected_inputs, read_entities
    from taskplug.core import describe_type

    if target.images:
        raise SpecError(
            "--image", "is for a flytekit module: a serialized workflow's tasks name their images"
        )
    if not path.exists():
        raise SpecError("SPEC", f"no such file or folder: {str(path)!r}")
    name = arguments[0] if arguments and not arguments[0].startswith("-") else None
    rest = list(arguments[1:] if name is not None else arguments)
    entities = read_entities(path, field="SPEC")
    if not entities.workflows:
        raise SpecError(
            "SPEC", f"{str(path)!r} holds no workflow pyflyte serialized (a .pb file, a folder, an archive)"
        )
    try:
        try:
            bundle = choose_bundle(path, entities, workflow=name, launch_plan=None)
        except SpecError as e:
            if name is None or e.path != "workflow":
                raise
            try:  # not a workflow's name: a launch plan's?
                bundle = choose_bundle(path, entities, workflow=None, launch_plan=name)
            except SpecError:
                raise e from None
    except SpecError as e:
        if e.path in ("workflow", "launchPlan"):
            raise SpecError("WORKFLOW", e.reason) from None  # what the user typed after PATH
        raise
    expected = expected_inputs(bundle.launch_plan, bundle.workflow.interface)
    inputs = []
    for input_name, parameter in expected.parameters.items():
        default = parameter.default if parameter.HasField("default") else None
        description = parameter.var.description
        inputs.append(
            _Input(
                name=input_name,
                literal_type=parameter.var.type,
                python_type=None,
                required=default is None,
                default=default,
                description=description if description != input_name else "",
                default_text=_default_text(default),
                type_text=describe_type(parameter.var.type),
            )
        )
    inputs = _optional_if(inputs, target.workflow_inputs_optional)
    shown = name or bundle.workflow.id.name
    command = click.Command(
        shown,
        params=[_option(item) for item in inputs],
        help=f"Workflow {bundle.workflow.id.name} from {path.name}: its inputs as options.",
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    given = _parse_task_arguments(click.get_current_context(), path, shown, command, rest)
    plain = _workflow_values(inputs, given, on_host=target.on_host)
    ids: dict[str, Any] = {"project": target.project, "domain": target.domain}
    if target.name is not None:
        ids["name"] = target.name
    execution: dict[str, Any] = {"id": ids}
    environment = _environment(target.environment)
    if target.on_host:
        environment.setdefault("PYTHONPATH", str(Path.cwd()))
    if environment:
        execution["environment"] = environment
    return bundle, plain, execution


def serialized_spec(
    path: Path, arguments: Sequence[str], target: ModuleTarget, *, fresh_name: bool = True
) -> ExecutionSpec:
    """The workflow execution of ``PATH [WORKFLOW] [--INPUT VALUE]...`` (:func:`serialized_workflow`), as a
    spec whose ``templateFile`` is PATH would give it."""
    bundle, values, execution = serialized_workflow(path, arguments, target)
    return _workflow_spec_of_options(
        bundle, values, target, execution, source=str(path), fresh_name=fresh_name
    )


def _default_text(default: literals_pb2.Literal | None) -> str:
    if default is None:
        return ""
    try:
        return repr(literal_to_plain(default))
    except (TypeError, ValueError, TaskplugError):
        return str(json_format.MessageToJson(default, indent=None))


def _workflow_entity(path: Path, entities: _Entities, name: str) -> Any:
    if name in entities.workflows:
        return entities.workflows[name]
    for entity in entities.workflows.values():
        if entity.name == name:
            return entity
    what = entities.refused.get(name)
    if what is not None and name not in entities.workflows:
        reason = _EAGER if what.startswith("an eager") else what
        raise SpecError("WORKFLOW", f"{name!r} is {reason}: taskplug cannot run it")
    listing = ", ".join(entities.workflows) or "none"
    raise SpecError("WORKFLOW", f"{str(path)!r} has no workflow or launch plan {name!r}: it has {listing}")


def _serialize_workflow(
    path: Path, resolved: Path, root: Path, entities: _Entities, name: str, target: ModuleTarget
) -> WorkflowBundle:
    from collections import OrderedDict

    from flytekit import FlyteContextManager
    from flytekit.core.launch_plan import LaunchPlan
    from flytekit.models.admin.workflow import WorkflowSpec  # type: ignore[import-untyped]
    from flytekit.models.launch_plan import LaunchPlan as LaunchPlanModel  # type: ignore[import-untyped]
    from flytekit.models.task import TaskSpec  # type: ignore[import-untyped]
    from flytekit.tools.translator import get_serializable

    from taskplug.compiler import SerializedEntities, make_bundle

    entity = _workflow_entity(path, entities, name)
    settings = _settings(root, target, _version(resolved))
    mapping: OrderedDict[Any, Any] = OrderedDict()
    what = "launch plan" if isinstance(entity, LaunchPlan) else "workflow"
    try:
        with _stdout_to_stderr():
            get_serializable(mapping, settings, entity)
        if not isinstance(entity, LaunchPlan):
            default = LaunchPlan.get_default_launch_plan(FlyteContextManager.current_context(), entity)
            with _stdout_to_stderr():
                get_serializable(mapping, settings, default)
    except Exception as e:
        raise TaskplugError(
            f"flytekit cannot serialize {what} {entity.name!r}: {type(e).__name__}: {e}"
        ) from e
    # The module's other launch plans, as `pyflyte register` registers them: a @dynamic task may launch any
    # of them, and propeller would find it in Admin. One flytekit cannot serialize is left out (the run did
    # not ask for it); a dynamic workflow launching it then fails naming it.
    for other in entities.workflows.values():
        if isinstance(other, LaunchPlan) and other is not entity:
            try:
                with _stdout_to_stderr():
                    get_serializable(mapping, settings, other)
            except Exception:  # see above
                continue
    workflows, tasks, plans = [], [], []
    for model in mapping.values():
        if isinstance(model, TaskSpec):
            tasks.append(model.template.to_flyte_idl())
        elif isinstance(model, WorkflowSpec):
            workflows.append(model.to_flyte_idl())
        elif isinstance(model, LaunchPlanModel):
            plans.append(model.to_flyte_idl())
    entities_read = SerializedEntities(tuple(workflows), tuple(tasks), tuple(plans), str(path))
    if isinstance(entity, LaunchPlan):
        return make_bundle(entities_read, workflow=None, launch_plan=entity.name)
    return make_bundle(entities_read, workflow=entity.name, launch_plan=None)


def _workflow_inputs(entity: Any, expected: interface_pb2.ParameterMap) -> list[_Input]:
    """The options of a workflow or launch plan: its expected inputs (fixed ones are not inputs), in the
    order of the Python signature, each typed by its annotation, with the launch plan's default."""
    interface = entity.python_interface
    saved = dict(getattr(entity, "saved_inputs", None) or {})
    with_defaults = interface.inputs_with_defaults
    order = [n for n in interface.inputs if n in expected.parameters]
    order += sorted(n for n in expected.parameters if n not in order)
    found = []
    for name in order:
        parameter = expected.parameters[name]
        default = parameter.default if parameter.HasField("default") else None
        python_type, python_default = with_defaults.get(name, (None, None))
        shown = saved.get(name, python_default)
        if shown is None and default is not None:
            shown = literal_to_plain(default)
        description = parameter.var.description if parameter.var.description != name else ""
        found.append(
            _Input(
                name=name,
                literal_type=parameter.var.type,
                python_type=python_type if python_type is not None else Any,
                required=parameter.required or default is None,
                default=default,
                description=description,
                default_text=repr(shown),
            )
        )
    return found


# -- shared with a Flyte 2 module's task (taskplug.cli._flyte2_module), which parses its options the same way --

ModuleInput = _Input
project_root = _project_root
module_version = _version
input_option = _option
input_value = _input_value
parse_task_arguments = _parse_task_arguments
