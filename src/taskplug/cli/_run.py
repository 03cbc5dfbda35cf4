"""``taskplug run``: execute a task to a terminal phase, on the embedded local cluster or a real one.

Shows live progress (phase, reason, elapsed); for an ArrayNode (a map task) also its elements' counts by
phase, a bar, and the reason the last failing element gave. Ctrl-C or SIGTERM aborts what was created and
finalizes; a second one stops waiting for that cleanup (what the cluster context can still delete is deleted)
and exits 1 too. ``-o json`` prints one document at the end (with each element's phase, attempts, error and
log links for a map). Exit codes: 0 success, 1 the task failed or was aborted, 2 bad input.

SPEC is an execution spec, or a flytekit module followed by a task in it and the task's inputs, as ``pyflyte
run`` takes them (``taskplug run workflows.py add --a 2 --b 3``; ``cli/_flytekit_module.py`` turns them into
a spec); either way the execution runs on the same path. What is printed comes from tasks, errors and the
cluster, so no console here reads Rich markup or emoji codes: ``[bold]`` or ``[SystemError]`` in a message
is printed as it is, and styles are set on :class:`~rich.text.Text`.

A task runs once. The run holds its execution through a :class:`~taskplug.executor.LocalCoordinator` (the
single-process side of the seams replicas share): a kernel lock on the state DB, then a lease in it that every
write is fenced with. A second ``run`` of the same execution while the first runs refuses (exit 2, naming the
holder) instead of launching it again; a run whose lease another process took over anyway (its lock file
removed) has its writes refused, and its creates and deletes (the coordinator's guard), stops driving it
without deleting anything, and exits 2 saying so. An execution the state DB records as finished is not run
again: ``run`` prints the stored outcome, says so on stderr (when, where the state is, how to run it again)
and exits with the stored outcome's code; ``--rerun`` starts it again under the same name, its attempts
numbered after the earlier ones so that nothing it creates collides with what they left. A resume whose spec differs from the one the execution started with
is refused (exit 2), as flyteadmin refuses to create an existing execution id with another spec.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import functools
import hashlib
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

import click
from flyteidl.core import literals_pb2
from google.protobuf.message import Message

from taskplug.cli._cluster_options import cluster_options, kube_client
from taskplug.cli._flyte2_module import flyte2_module_document, flyte2_module_spec, is_flyte2_module
from taskplug.cli._flytekit_module import (
    MODULE_ARGS,
    ModuleCommand,
    built,
    is_module,
    is_serialized,
    module_options,
    module_spec_builder,
    module_target_from_options,
    reject_module_options,
    serialized_spec,
)
from taskplug.cli._hints import unsupported_task_type_hint
from taskplug.cli._interrupts import Interrupts, for_run, release
from taskplug.cli._logs import RunFolder, cluster_folder, find_logs, local_log_links, log_tail
from taskplug.cli._output import EXIT_TASK_FAILED, dump, fail, handles_bad_input
from taskplug.cli._process import tune_collector_for_executor
from taskplug.cli._progress import EventLines, Progress, plain_console, same_file
from taskplug.cli._text import error_text, reason_line
from taskplug.cli._workflow_view import NodeOutline, failed_result_nodes, walk_result_nodes, workflow_outline
from taskplug.core import Phase, PluginError, ReadsPodLogs, SpecError, TaskplugError
from taskplug.executor import (
    EXECUTOR_SECTION,
    Event,
    ExecutionRecord,
    ExecutionResult,
    ExecutionSpec,
    Executor,
    GuardedKubeClient,
    LocalCoordinator,
    Platform,
    SQLiteCatalog,
    SQLiteStateStore,
    check_state_file,
    load_spec,
    open_executor,
)
from taskplug.k8s import KubeApiError

if TYPE_CHECKING:
    from rich.console import Console

    from taskplug.localcluster import Zygote

__all__ = ["run"]


class _Interrupted(Exception):
    """Signalled twice, or before anything was submitted, or the abort took too long: stopped without
    waiting for the abort to end."""


@dataclasses.dataclass(frozen=True, slots=True)
class _Finished:
    """The stored end of an execution that had finished before this run: reported, not run again."""

    when: str
    state_db: Path


async def _run(
    platform: Platform,
    spec: ExecutionSpec,
    *,
    kubeconfig: Path | None,
    state_db: Path | None,
    mode: str,
    as_json: bool,
    rerun: bool,
    rename: str,
    interrupts: Interrupts,
    zygote: Zygote | None = None,
) -> tuple[ExecutionResult, _Finished | None]:
    interrupts.attach()
    db_path = Path(state_db or platform.config.get(EXECUTOR_SECTION).state_db)
    check_state_file(db_path)  # before the store opens: a file that is not ours is left as it was
    store = SQLiteStateStore(db_path)
    coordinator = LocalCoordinator(store)
    # On the embedded cluster, the pods' folders (their logs) are kept beside the state DB: see cli/_logs.py.
    folder = RunFolder(db_path) if kubeconfig is None and mode == "process" else None
    outline = workflow_outline(spec)  # a workflow's nodes, named and nested as they run
    progress = Progress(
        None,  # its console is made when the live view draws: `-o json` and a pipe never load Rich
        spec.execution_key,
        output=folder.latest_output if folder is not None else None,
        outline=outline,
    )
    on_event = _event_sinks(progress, spec.execution_key, as_json=as_json, outline=outline)
    stored = store.load(spec.execution_key) if outline is not None else None
    if stored is not None and stored.workflow_state is not None:
        # A resumed run: its finished nodes send no events again; the view starts from their records.
        progress.seed(store.load_nodes(spec.execution_key), workflow_state=stored.workflow_state)
    if folder is not None:
        platform = local_log_links(platform, folder.path)
    try:
        with coordinator.hold(spec.execution_key), folder or contextlib.nullcontext() as workdir:
            async with (
                kube_client(platform, kubeconfig, mode, workdir=workdir, zygote=zygote) as client,
                open_executor(
                    platform,
                    kube_client=GuardedKubeClient(client, coordinator.guard),
                    store=store,
                    on_event=on_event,
                    catalog=SQLiteCatalog(store),  # shared by every run on this state file
                ) as ex,
                _committing(store),
            ):
                coordinator.drive(ex)
                finished = _prepare(
                    store,
                    spec,
                    rerun=rerun,
                    db_path=db_path,
                    rename=rename,
                    check=lambda: _check(ex, platform, spec),
                )
                key = await ex.submit(spec)
                interrupts.watch(lambda: ex.abort(key))
                if as_json or finished is not None or not sys.stderr.isatty():
                    # No live view but on a terminal: elsewhere it writes nothing until it ends (the events
                    # went line by line instead, see _event_sinks).
                    result = await ex.wait(key)
                else:
                    from rich.live import Live

                    console = progress.console
                    with Live(
                        progress.render(), console=console, refresh_per_second=8, transient=False
                    ) as live:
                        waiter = asyncio.ensure_future(ex.wait(key))
                        while not waiter.done():
                            live.update(progress.render())
                            await asyncio.wait({waiter}, timeout=0.125)
                        live.update(progress.render())
                    console.print()
                    result = waiter.result()
                coordinator.check(key)
                if kubeconfig is not None and finished is None and not result.succeeded:
                    await _print_pod_log_tail(client, spec, result, as_json=as_json)
                return result, finished
    except asyncio.CancelledError:
        if interrupts.cancelled:
            raise _Interrupted from None
        raise
    finally:
        store.close()
        interrupts.detach()
        if zygote is not None:
            # The cluster has stopped (its containers with it): the zygote ends while the event loop does.
            zygote.release()


def _event_sinks(
    progress: Progress, key: str, *, as_json: bool, outline: tuple[NodeOutline, ...] | None = None
) -> Callable[[str, Event], None]:
    """Where the events go besides the live view: when stdout is not a terminal (``> log``), one line each to
    stdout as they happen (``-o json`` keeps stdout for its document alone); when stderr is not a terminal
    and is not that same file, to stderr too."""
    sinks: list[Callable[[str, Event], None]] = [progress.on_event]
    if not as_json and not sys.stdout.isatty():
        sinks.append(EventLines(sys.stdout, key, outline=outline).on_event)
    if not sys.stderr.isatty() and (as_json or sys.stdout.isatty() or not same_file(sys.stdout, sys.stderr)):
        sinks.append(EventLines(sys.stderr, key, outline=outline).on_event)

    def on_event(execution: str, event: Event) -> None:
        for sink in sinks:
            sink(execution, event)

    return on_event


def _check(ex: Executor, platform: Platform, spec: ExecutionSpec) -> None:
    """The executor's check of a spec before anything is written, its refusals said with what to do."""
    try:
        ex.check(spec)
    except PluginError as e:
        hint = unsupported_task_type_hint(platform, spec.template.type, e)
        if hint is None:
            raise
        raise TaskplugError(hint) from e


@contextlib.asynccontextmanager
async def _committing(store: SQLiteStateStore, every: float = 0.25) -> AsyncIterator[None]:
    """Commit the store's batch every ``every`` seconds: the store commits only when it writes, and a batch
    left open while the task runs would hold SQLite's write lock from every other ``run`` on the file."""

    async def commit() -> None:
        while True:
            await asyncio.sleep(every)
            store.flush()

    task = asyncio.ensure_future(commit())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _prepare(
    store: SQLiteStateStore,
    spec: ExecutionSpec,
    *,
    rerun: bool,
    db_path: Path,
    rename: str,
    check: Callable[[], None],
) -> _Finished | None:
    """Decide, holding the execution, what this run does with what the state DB knows of it: start it,
    resume it (the same spec only), report its stored end, or (``--rerun``) start it again. A start is
    ``check``ed before anything is written, so a spec refused there (exit 2) leaves no record behind and
    runs once it is fixed."""
    key = spec.execution_key
    digest = _spec_digest(spec)
    record = store.load(key)
    events = store.events(key)  # read now so that a damaged row is an error here, not in the executor
    store.load_nodes(key)
    differs = _differences(record.spec_hash, spec) if record is not None and record.spec_hash else []
    if record is None:
        check()
        record = ExecutionRecord(key=key, attempt=spec.metadata.task_execution_id.id.retry_attempt)
    elif record.terminal and not rerun:
        when = next((e.occurred_at for e in reversed(events) if e.occurred_at), None) or "an unknown time"
        if differs:
            # Its stored outcome is another spec's: reported as this one's, a script would take a stale value.
            raise TaskplugError(
                f"execution {key!r} already finished ({record.outcome or Phase(record.task_phase)}, at {when}; state DB "
                f"{str(db_path)!r}) with another spec: {_listed(differs)} differ from what it ran with, so its "
                f"stored outcome is not this spec's. To run this spec, pass --rerun (under the same name, "
                f"replacing that outcome) or give {rename} a new value"
            )
        return _Finished(when=when, state_db=db_path)
    elif record.terminal:
        # A new attempt history under the same name; numbered after the old one, so the new attempts'
        # objects and outputs are never mistaken for those the old attempts left behind.
        attempt = record.attempt + 1
        check()
        store.forget(key)
        record = ExecutionRecord(key=key, attempt=attempt, first_attempt=attempt)
    elif rerun:
        raise TaskplugError(
            f"--rerun: execution {key!r} has not finished (state DB {str(db_path)!r}); "
            f"run it without --rerun to resume it"
        )
    elif differs:
        raise TaskplugError(
            f"execution {key!r} was started from another spec ({_listed(differs)} differ since; state DB "
            f"{str(db_path)!r}); a resume runs the spec it started with. Put the spec back to resume it, or "
            f"give {rename} a new value"
        )
    record.spec_hash = digest
    store.save(record)
    store.flush()
    return None


_DIGEST_FORMAT = "v2"
"""The form of :func:`_spec_digest`: one short digest per part, so that a refusal can say which part changed
(a record written before holds one digest of the whole spec, and is compared whole)."""

_PARTS = {
    "template": "the task (its template: another task, or its code or module changed)",
    "metadata": "the execution's fields (its identity, overrides, env, labels, resources)",
    "array": "the ArrayNode's settings",
}


def _spec_digest(spec: ExecutionSpec) -> str:
    """A digest of what an execution runs, part by part: the task template, each input, the execution's fields
    (its metadata: identity, overrides, labels, resources...) and the ArrayNode section — not where the spec
    file is. ``v2 template=… metadata=… array=… input:a=…``."""
    parts = {
        "template": _canonical(spec.template),
        "metadata": _canonical(spec.metadata),
        "array": _canonical(spec.array),
    }
    for name, literal in sorted(spec.inputs.literals.items()):
        parts[f"input:{name}"] = _canonical(literal)
    digests = (
        f"{part}={hashlib.sha256(repr(value).encode()).hexdigest()[:20]}" for part, value in parts.items()
    )
    return " ".join((_DIGEST_FORMAT, *digests))


def _differences(stored: str, spec: ExecutionSpec) -> list[str]:
    """What differs between the spec a record was written for (its stored digest) and ``spec``, in words;
    [] when nothing does."""
    current = _spec_digest(spec)
    if stored == current:
        return []
    old, new = _digest_parts(stored), _digest_parts(current)
    if old is None or new is None:
        # A record written before the digest had parts: compared whole.
        return [] if stored == _whole_digest(spec) else ["its spec"]
    found = [words for part, words in _PARTS.items() if old.get(part) != new.get(part)]
    inputs = sorted(
        {k for k in (*old, *new) if k.startswith("input:") and old.get(k) != new.get(k)},
    )
    if inputs:
        found.append(f"input(s) {', '.join(k.removeprefix('input:') for k in inputs)}")
    return found or ["its spec"]


def _whole_digest(spec: ExecutionSpec) -> str:
    """The digest records held before :data:`_DIGEST_FORMAT`: one of the whole spec."""
    document = {
        "template": _canonical(spec.template),
        "inputs": _canonical(spec.inputs),
        "metadata": _canonical(spec.metadata),
        "array": _canonical(spec.array),
    }
    return hashlib.sha256(repr(document).encode()).hexdigest()


def _digest_parts(digest: str) -> dict[str, str] | None:
    head, _, rest = digest.partition(" ")
    if head != _DIGEST_FORMAT:
        return None
    return dict(item.partition("=")[::2] for item in rest.split())


def _listed(differences: list[str]) -> str:
    return differences[0] if len(differences) == 1 else f"{', '.join(differences[:-1])} and {differences[-1]}"


def _canonical(value: object) -> object:
    """A plain, order-independent form of a parsed spec's values (protobuf messages as their deterministic
    bytes, dataclasses field by field, mappings sorted)."""
    if isinstance(value, Message):
        return value.SerializeToString(deterministic=True).hex()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [(f.name, _canonical(getattr(value, f.name))) for f in dataclasses.fields(value)]
    if isinstance(value, dict) or hasattr(value, "items"):
        items = value.items()
        return sorted((str(k), _canonical(v)) for k, v in items)
    if isinstance(value, list | tuple | set | frozenset):
        parts = [_canonical(v) for v in value]
        return sorted(parts, key=repr) if isinstance(value, set | frozenset) else parts
    if isinstance(value, enum.Enum):
        return value.value
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def _print_outcome(result: ExecutionResult, *, stored: bool = False) -> None:
    from rich.text import Text

    console = plain_console()
    style = "green" if result.succeeded else "red"
    earlier = " (finished earlier, not run again)" if stored else ""
    console.print(
        Text.assemble((result.phase, f"bold {style}"), f" after {result.attempts} attempt(s){earlier}")
    )
    if result.elements is not None:
        _print_elements(console, result.elements)
    if result.nodes is not None:
        _print_nodes(console, result.nodes)
    if result.error:
        code = f"[{result.error['code']}] " if result.error.get("code") else ""
        message = str(result.error["message"])
        console.print(Text(f"error {code}({result.error['kind']}): {reason_line(message)}"))
        if reason_line(message) != message:
            console.print(Text("(the whole error, with its traceback: -o json, error.message)", style="dim"))
    if result.outputs:
        console.print(Text("outputs:"))
        console.print_json(data=result.outputs)


def _print_elements(console: Console, elements: list[dict[str, object]]) -> None:
    from rich.text import Text

    by_phase: dict[str, int] = {}
    for element in elements:
        by_phase[str(element["phase"])] = by_phase.get(str(element["phase"]), 0) + 1
    summary = ", ".join(f"{count} {phase}" for phase, count in sorted(by_phase.items()))
    console.print(Text(f"{len(elements)} element(s): {summary}"))
    for element in elements:
        error = element.get("error")
        if isinstance(error, dict) and element["phase"] in ("Failed", "Failing", "TimedOut"):
            message = error_text(str(error.get("message", "")), 200)
            console.print(
                Text(f"  element {element['index']} ({element['attempts']} attempt(s)): {message}"),
                style="red",
            )


def _print_nodes(console: Console, nodes: list[dict[str, Any]]) -> None:
    from rich.text import Text

    """A workflow's nodes: how many ended in each phase (nested nodes counted), and each node that failed
    itself (not only because a node under it did) with its error."""
    flat = list(walk_result_nodes(nodes))
    by_phase: dict[str, int] = {}
    for node in flat:
        by_phase[str(node["phase"])] = by_phase.get(str(node["phase"]), 0) + 1
    summary = ", ".join(f"{count} {phase}" for phase, count in sorted(by_phase.items()))
    console.print(Text(f"{len(flat)} node(s): {summary}"))
    for node in failed_result_nodes(nodes):
        error = node.get("error")
        message = error_text(str(error.get("message", ""))) if isinstance(error, dict) else ""
        name = f" {node['name']}" if node.get("name") and node["name"] != node["id"] else ""
        phase = str(node["phase"]).lower()
        console.print(
            Text(f"  node {node['id']}{name} {phase} ({node['attempts']} attempt(s)): {message}"), style="red"
        )


def _check_remote(
    spec: Path, *, kubeconfig: Path | None, state_db: Path | None, rerun: bool, config_path: Path | None
) -> None:
    """``--server`` runs the execution on the server's replicas: the options of a local run do not apply."""
    given = [
        name
        for name, value in (
            ("--kubeconfig", kubeconfig),
            ("--state-db", state_db),
            ("--rerun", rerun),
            ("--config", config_path),
        )
        if value
    ]
    if given:
        raise SpecError("--server", f"not with {', '.join(given)}: the server's replicas run the execution")


@click.command(cls=ModuleCommand)
@click.argument("spec", type=click.Path(path_type=Path))
@cluster_options(
    kubeconfig_help="Run on this cluster instead of the embedded one.",
    cluster_mode_help="The embedded cluster: run containers as local processes, or simulate them.",
)
@click.option(
    "--state-db",
    type=click.Path(dir_okay=False, path_type=Path),
    help="SQLite file for execution state (resume).",
)
@click.option(
    "--rerun",
    is_flag=True,
    help="Run an execution the state DB records as finished again, under the same name.",
)
@click.option("-o", "--output", "fmt", type=click.Choice(["live", "json"]), default="live", show_default=True)
@click.option(
    "--overwrite-cache",
    is_flag=True,
    help="Run cacheable tasks without looking them up, and replace their cached results (Flyte's "
    "overwrite_cache).",
)
@click.option(
    "--server",
    metavar="URL",
    help="Submit to a `taskplug serve` at URL and follow the execution there, instead of running it here.",
)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="With --server: a file holding the API token to send (else $TASKPLUG_TOKEN, if set).",
)
@module_options
@handles_bad_input
def run(
    spec: Path,
    config_path: Path | None,
    kubeconfig: Path | None,
    state_db: Path | None,
    pod_templates: tuple[Path, ...],
    cluster_mode: str,
    rerun: bool,
    fmt: str,
    overwrite_cache: bool,
    server: str | None,
    token_file: Path | None,
    images: tuple[str, ...],
    project: str | None,
    domain: str | None,
    execution_name: str | None,
    environment: tuple[str, ...],
) -> None:
    """Run a task execution to a terminal phase and print its timeline and outputs.

    SPEC is an execution spec (YAML or JSON), or a flytekit module followed by a task in it and the task's
    inputs, as with pyflyte run: `taskplug run workflows.py add --a 2 --b 3` (`taskplug run workflows.py
    add --help` lists the inputs). Options go before SPEC then. What `pyflyte serialize` or `pyflyte
    package` wrote (a folder, an archive, a `_2.pb` file) runs the same way: `taskplug run
    flyte-package.tgz wf --a 2`, from the folder pyflyte ran in.
    """
    if server is not None:
        _check_remote(spec, kubeconfig=kubeconfig, state_db=state_db, rerun=rerun, config_path=config_path)
        document = None
        if is_module(spec) or is_serialized(spec):
            # The workflow or task is read and compiled here (a module's with flytekit, as for a local run),
            # then sent in the self-contained form: the server reads no files.
            from taskplug.cli._remote_run import module_document, serialized_document

            target = module_target_from_options(
                images=images,
                project=project,
                domain=domain,
                execution_name=execution_name,
                environment=environment,
                # A module without --image: the server's cluster runs this machine's Python. What pyflyte
                # wrote names its own images and environment.
                on_host=is_module(spec) and not images,
            )
            arguments = click.get_current_context().meta.get(MODULE_ARGS, ())
            if is_serialized(spec):
                document, _ = serialized_document(spec, arguments, target)
            elif is_flyte2_module(spec):
                # A Flyte 2 module's task: serialized here by the SDK, sent as a spec with its template inline.
                document, _ = flyte2_module_document(spec, arguments, target)
            else:
                document, _ = module_document(spec, arguments, target)
        else:
            reject_module_options(
                image=images, project=project, domain=domain, name=execution_name, env=environment
            )
        release()
        from taskplug.cli._remote_run import run_remote

        result = run_remote(
            spec,
            server,
            as_json=fmt == "json",
            token_file=token_file,
            document=document,
            overwrite_cache=overwrite_cache,
        )
        _print_result(result, fmt)
        return
    if token_file is not None:
        raise SpecError("--token-file", "only with --server: a local run talks to no server")
    interrupts, own = for_run()
    if own:
        click.get_current_context().call_on_close(interrupts.uninstall)
    # Only as the `taskplug` command (main() installed the handler): a program invoking `run` is not forked.
    warm = not own and is_module(spec) and kubeconfig is None and cluster_mode == "process"
    try:
        with contextlib.ExitStack() as forked:
            zygote: Zygote | None = None
            if warm:
                zygote, loaded, platform = _load_in_zygote(
                    forked,
                    interrupts,
                    load_spec=functools.partial(
                        _module_builder,
                        spec,
                        kubeconfig=kubeconfig,
                        images=images,
                        project=project,
                        domain=domain,
                        execution_name=execution_name,
                        environment=environment,
                    ),
                    load_platform=lambda: Platform.load(config_path, pod_template_paths=pod_templates),
                )
                rename = "--name"
            else:
                # flytekit, the user's module and the plugins are imported here: see cli/_interrupts.py.
                with interrupts.deferred():
                    loaded, platform, rename = _load(
                        spec,
                        config_path=config_path,
                        pod_templates=pod_templates,
                        kubeconfig=kubeconfig,
                        images=images,
                        project=project,
                        domain=domain,
                        execution_name=execution_name,
                        environment=environment,
                    )
            if overwrite_cache:
                loaded = dataclasses.replace(loaded, overwrite_cache=True)
            tune_collector_for_executor()
            result, finished = asyncio.run(
                _run(
                    platform,
                    loaded,
                    kubeconfig=kubeconfig,
                    state_db=state_db,
                    mode=cluster_mode,
                    as_json=fmt == "json",
                    rerun=rerun,
                    rename=rename,
                    interrupts=interrupts,
                    zygote=zygote,
                )
            )
    except _Interrupted:
        if not interrupts.submitted:
            fail("interrupted: stopped before anything was started", EXIT_TASK_FAILED)
        fail("interrupted: stopped before the execution's abort finished", EXIT_TASK_FAILED)
    if finished is not None:
        click.echo(
            f"execution {result.key} already finished: {result.phase}, at {finished.when} (state DB "
            f"{str(finished.state_db)!r}); it was not run again. To run it again, "
            f"pass --rerun (or give {rename} a new value).",
            err=True,
        )
    if not result.succeeded and finished is None and kubeconfig is None:
        _print_log_tail(result, loaded, state_db or Path(platform.config.get(EXECUTOR_SECTION).state_db), fmt)
    _print_result(result, fmt, stored=finished is not None)


def _load_in_zygote(
    stack: contextlib.ExitStack,
    interrupts: Interrupts,
    *,
    load_spec: Callable[[], Callable[[], ExecutionSpec]],
    load_platform: Callable[[], Platform],
) -> tuple[Zygote, ExecutionSpec, Platform]:
    """The spec loaded in the zygote while this process loads the platform. The zygote is forked now, before
    flytekit is imported; it imports flytekit and the user's module and serializes the task or workflow
    (``load_spec``), hands back a builder of the spec, and the embedded cluster's kubelet then forks the task's
    ``pyflyte-execute`` from it instead of starting a new interpreter that imports them again
    (localcluster/_zygote.py). This process never imports flytekit. A module or task that cannot be loaded is
    reported by the zygote's copy of this process, which goes on from the fork with the error as this process
    would have; this one ends with its exit code. Either error comes before a refusal of the platform's
    config, as without the fork."""
    from taskplug.localcluster import FLYTEKIT_PRELOAD, PrepareFailed, Zygote

    zygote = stack.enter_context(Zygote.fork(preload=FLYTEKIT_PRELOAD, prepare=load_spec))
    refused: BaseException | None = None
    try:
        # The plugins are imported here: see cli/_interrupts.py.
        with interrupts.deferred():
            platform = load_platform()
    except BaseException as e:
        refused = e
    try:
        build = zygote.prepared()
    except PrepareFailed as failed:
        sys.exit(failed.exit_code if failed.exit_code >= 0 else 128 - failed.exit_code)
    try:
        loaded = build()
        if refused is not None:
            raise refused
    except BaseException:
        zygote.close(timeout=0)  # nothing forked from it yet: its imports are not waited for
        raise
    return zygote, loaded, platform


_LOG_LINES = 20
"""How many of a failed attempt's last log lines ``run`` shows with its error."""


def _last_attempt(result: ExecutionResult) -> int | None:
    attempts = [int(e["attempt"]) for e in result.events if "attempt" in e]
    return attempts[-1] if attempts else None


def _show_log(header: str, text: str, *, as_json: bool) -> None:
    """A log's last lines under a header, before the outcome (on stderr with ``-o json``)."""
    text = log_tail(text, _LOG_LINES)
    if text.strip():
        click.echo(header, err=as_json)
        click.echo("".join(f"  | {line}" for line in text.splitlines(keepends=True)), err=as_json)


def _print_log_tail(result: ExecutionResult, spec: ExecutionSpec, state_db: Path, fmt: str) -> None:
    """The last lines the failed attempt's containers printed on the embedded cluster (their kept logs)."""
    execution = spec.metadata.task_execution_id.id.node_execution_id
    name = execution.execution_id.name
    files = find_logs(cluster_folder(state_db), name, execution.node_id, _last_attempt(result))
    for f in files[-3:]:
        _show_log(
            f"the last lines of attempt {f.attempt}'s log (pod {f.pod}, container {f.container}; all of it: "
            f"taskplug logs {name} --state-db {str(state_db)!r}):",
            f.path.read_bytes().decode("utf-8", "replace"),
            as_json=fmt == "json",
        )


async def _print_pod_log_tail(
    client: object, spec: ExecutionSpec, result: ExecutionResult, *, as_json: bool
) -> None:
    """On a real cluster: the failed attempt's pod log, through the API, while its pod is there (Flyte keeps
    a finished pod unless ``delete-resource-on-finalize``); nothing when it is gone or cannot be read."""
    if not isinstance(client, ReadsPodLogs):
        return
    execution = spec.metadata.task_execution_id.id.node_execution_id
    attempt = _last_attempt(result)
    pod = f"{execution.execution_id.name}-{execution.node_id}-{attempt or 0}"
    namespace = spec.metadata.namespace
    text = None
    for container in (pod, None):  # the task's container is named as its pod; else the pod's only one
        try:
            text = await client.pod_log(namespace, pod, container, tail_lines=_LOG_LINES)
            break
        except (KubeApiError, ConnectionError, TimeoutError):
            continue
    if text:
        _show_log(
            f"the last lines of attempt {attempt}'s log (pod {namespace}/{pod}; all of it: kubectl logs -n "
            f"{namespace} {pod}):",
            text,
            as_json=as_json,
        )


def _load(
    spec: Path,
    *,
    config_path: Path | None,
    pod_templates: tuple[Path, ...],
    kubeconfig: Path | None,
    images: tuple[str, ...],
    project: str | None,
    domain: str | None,
    execution_name: str | None,
    environment: tuple[str, ...],
) -> tuple[ExecutionSpec, Platform, str]:
    """The spec (a YAML one, a flytekit module's task or workflow, or what pyflyte wrote), the platform, and how the user renames the
    execution (for the messages that tell them to)."""
    if is_module(spec) or is_serialized(spec):
        build = _module_builder(
            spec,
            kubeconfig=kubeconfig,
            images=images,
            project=project,
            domain=domain,
            execution_name=execution_name,
            environment=environment,
        )
        return build(), Platform.load(config_path, pod_template_paths=pod_templates), "--name"
    reject_module_options(image=images, project=project, domain=domain, name=execution_name, env=environment)
    platform = Platform.load(config_path, pod_template_paths=pod_templates)
    loaded = load_spec(spec)
    if kubeconfig is None:
        _check_local_files(loaded.inputs.literals, "inputs")
    return loaded, platform, f"execution.id.name in {str(spec)!r}"


def _module_builder(
    spec: Path,
    *,
    kubeconfig: Path | None,
    images: tuple[str, ...],
    project: str | None,
    domain: str | None,
    execution_name: str | None,
    environment: tuple[str, ...],
) -> Callable[[], ExecutionSpec]:
    """A flytekit or Flyte 2 module's task or workflow, or what pyflyte wrote, read (the SDK's part done) into
    a builder of its spec that pickles (cli/_flytekit_module.py's ``module_spec_builder``)."""
    if is_module(spec) and kubeconfig is not None and not images:
        raise SpecError(
            "--image",
            "required with --kubeconfig for a module: a real cluster runs the task in an image that holds "
            "flytekit and the module (flyte and the module, for a Flyte 2 module; taskplug uploads no code)",
        )
    target = module_target_from_options(
        images=images,
        project=project,
        domain=domain,
        execution_name=execution_name,
        environment=environment,
        on_host=kubeconfig is None,
    )
    arguments = click.get_current_context().meta.get(MODULE_ARGS, ())
    if is_serialized(spec):
        return built(serialized_spec(spec, arguments, target))
    if is_flyte2_module(spec):
        return built(flyte2_module_spec(spec, arguments, target))
    return module_spec_builder(spec, arguments, target)


def _check_local_files(literals: Mapping[str, literals_pb2.Literal], path: str) -> None:
    """On this machine, a file, folder or dataset input at a ``file://`` URI or an absolute path must exist:
    refused now (exit 2, the input named) rather than as a pod failing in flytekit's download."""
    for name, literal in literals.items():
        where = f"{path}.{name}"
        kind = literal.WhichOneof("value")
        if kind == "collection":
            _check_local_files({str(i): v for i, v in enumerate(literal.collection.literals)}, where)
        elif kind == "map":
            _check_local_files(literal.map.literals, where)
        elif kind == "scalar" and literal.scalar.WhichOneof("value") in ("blob", "structured_dataset"):
            scalar = literal.scalar
            uri = scalar.blob.uri if scalar.WhichOneof("value") == "blob" else scalar.structured_dataset.uri
            local = unquote(urlparse(uri).path) if uri.startswith("file://") else uri
            if (uri.startswith("file://") or uri.startswith("/")) and not Path(local).exists():
                raise SpecError(where, f"no such file or folder: {uri!r}")


def _print_result(result: ExecutionResult, fmt: str, *, stored: bool = False) -> None:
    """The end of a run, local or on a server: the outcome (or ``-o json``), and exit 1 unless it succeeded."""
    if fmt == "json":
        # The execution named first: a script that started it without --name learns the name it was given.
        click.echo(dump({"execution": result.key, **result.to_json()}), nl=False)
    else:
        _print_outcome(result, stored=stored)
    if not result.succeeded:
        sys.exit(EXIT_TASK_FAILED)
