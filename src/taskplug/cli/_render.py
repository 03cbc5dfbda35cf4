"""``taskplug render``: the exact object the plugin manager would create, created nowhere.

SPEC is an execution spec, or a flytekit module, a task in it and the task's inputs as ``taskplug run`` takes
them (``cli/_flytekit_module.py``): one function from (file, task, arguments) to a spec serves both. Without
``--image`` a module's task is rendered as the embedded cluster runs it (on this machine); with ``--image``,
as a real cluster would get it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import click
from google.protobuf import json_format

from taskplug.cli._flyte2_module import flyte2_module_spec, is_flyte2_module
from taskplug.cli._flytekit_module import (
    MODULE_ARGS,
    ModuleCommand,
    is_module,
    is_serialized,
    module_options,
    module_spec,
    module_target_from_options,
    reject_module_options,
    serialized_spec,
)
from taskplug.cli._output import dump, handles_bad_input
from taskplug.executor import EXECUTOR_SECTION, Platform, load_spec, render_object

__all__ = ["render"]


@click.command(cls=ModuleCommand)
@click.argument("spec", type=click.Path(path_type=Path))
@click.option(
    "--config", "config_path", type=click.Path(dir_okay=False, path_type=Path), help="Platform config YAML."
)
@click.option(
    "--pod-templates",
    "pod_templates",
    multiple=True,
    type=click.Path(path_type=Path),
    help="PodTemplate manifests (a file or a folder); repeatable.",
)
@click.option("-o", "--output", "fmt", type=click.Choice(["json", "yaml"]), default="json", show_default=True)
@module_options
@handles_bad_input
def render(
    spec: Path,
    config_path: Path | None,
    pod_templates: tuple[Path, ...],
    fmt: str,
    images: tuple[str, ...],
    project: str | None,
    domain: str | None,
    execution_name: str | None,
    environment: tuple[str, ...],
) -> None:
    """Print the Kubernetes object a task execution would create, with every piece of platform config; for
    a workflow, the compiled workflow (the CompiledWorkflowClosure flyteadmin would store).

    SPEC is an execution spec, or a flytekit module, a task or workflow and its inputs as `taskplug run`
    takes them (`taskplug render workflows.py add --a 2`), or what pyflyte serialize / package wrote and a
    workflow in it (`taskplug render flyte-package.tgz wf --a 2`). A workflow's inputs may be left out:
    what it compiles to does not depend on them.
    """
    if is_module(spec) or is_serialized(spec):
        target = module_target_from_options(
            images=images,
            project=project,
            domain=domain,
            execution_name=execution_name,
            environment=environment,
            on_host=not images,
        )
        # What a workflow compiles to does not depend on its inputs: they may be left out here.
        target = replace(target, workflow_inputs_optional=True)
        arguments = click.get_current_context().meta.get(MODULE_ARGS, ())
        if is_serialized(spec):
            loaded = serialized_spec(spec, arguments, target, fresh_name=False)
        elif is_flyte2_module(spec):
            loaded = flyte2_module_spec(spec, arguments, target, fresh_name=False)
        else:
            loaded = module_spec(spec, arguments, target, fresh_name=False)
        platform = Platform.load(config_path, pod_template_paths=pod_templates)
    else:
        reject_module_options(
            image=images, project=project, domain=domain, name=execution_name, env=environment
        )
        platform = Platform.load(config_path, pod_template_paths=pod_templates)
        # The same spec renders the same objects: a spec without a name gets one drawn from its content.
        loaded = load_spec(spec, fresh_name=False)
    if loaded.workflow is not None:
        # A workflow: the CompiledWorkflowClosure flyteadmin would store for it (protobuf JSON).
        closure = json_format.MessageToDict(loaded.workflow.closure)
        click.echo(dump(closure, fmt), nl=False)
        return
    obj = render_object(platform, loaded, data_root=platform.config.get(EXECUTOR_SECTION).data_root)
    click.echo(dump(obj, fmt), nl=False)
