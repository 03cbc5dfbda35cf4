"""``taskplug run SPEC --server URL``: submit the execution to a ``taskplug serve`` and follow it to the end.

The spec is read and checked here as a local run reads it (exit 2 naming the field); a ``templateFile`` is
inlined, since the server reads no files — a workflow (a ``pyflyte serialize`` / ``package`` templateFile, or
a flytekit module's workflow or launch plan: ``taskplug run --server URL FILE.py WF --a 1``) is compiled here
and sent in the self-contained form (``workflowClosure``, ``launchPlans``, ``launchPlan``, the plain
``inputs`` given), which the server compiles again; an unnamed spec gets its fresh name here, so that the execution
key is known before it is sent. Then ``POST /api/v1/executions`` (the server checks it again: a 422 names the
field, exit 2) and the execution's events are followed (``/events?after_seq=``) until it is terminal, in the
live view a local run shows (its elements too, for a map task). What is
printed at the end is what a local run prints (the same outcome lines or ``-o json`` document), and the exit
code is the same: 0 success, 1 failed or aborted, 2 bad input (or a server that has not answered for
:data:`PATIENCE` seconds: until then it is asked again, as the execution goes on at the replicas). The first
Ctrl-C asks the server to abort the execution and keeps following it to its end; a second one stops
following (the execution goes on being aborted by its replica). A server that wants credentials gets the API
token of ``--token-file`` or of ``TASKPLUG_TOKEN`` as ``Authorization: Bearer``; refused (401, 403), the run
is exit 2 naming where the token came from.
"""

from __future__ import annotations

import copy
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from flyteidl.core import compiler_pb2
from google.protobuf import json_format
from rich.console import Console
from rich.live import Live
from rich.text import Text

from taskplug.cli._output import EXIT_TASK_FAILED, fail
from taskplug.cli._progress import Progress, plain_console
from taskplug.compiler import WorkflowBundle, id_key, read_bundle
from taskplug.core import SpecError, load_document
from taskplug.executor import Event, ExecutionResult, ExecutionSpec, load_spec, workflow_spec

if TYPE_CHECKING:
    from taskplug.cli._flytekit_module import ModuleTarget

__all__ = [
    "PATIENCE",
    "TOKEN_ENV",
    "module_document",
    "read_token",
    "remote_document",
    "run_remote",
    "workflow_document",
]

TOKEN_ENV: Final = "TASKPLUG_TOKEN"

_TIMEOUT: Final = 30.0
PATIENCE: Final = 300.0
"""Seconds a run keeps asking a server that does not answer (or answers 5xx) before it gives up (exit 2)."""


def remote_document(path: Path) -> tuple[dict[str, Any], str]:
    """The spec document to submit (named, template inline) and its execution key."""
    parsed = load_spec(path)
    document = load_document(path, what="execution spec")
    if not isinstance(document, dict):
        raise SpecError("", f"execution spec {str(path)!r} must be a mapping at the top level")
    document = copy.deepcopy(document)
    if parsed.workflow is not None and "templateFile" in document:
        # Read again here: the server compiles the templates read, as this machine did.
        bundle = read_bundle(
            path.parent / Path(str(document["templateFile"])).expanduser(),
            workflow=document.get("workflow"),
            launch_plan=document.get("launchPlan"),
            field="templateFile",
        )
        execution = document.get("execution")
        section = execution if isinstance(execution, dict) else None
        return workflow_document(
            bundle, parsed, document.get("inputs") or {}, execution=section
        ), parsed.execution_key
    if "templateFile" in document:
        if parsed.array is not None and "arrayNode" not in document:
            raise SpecError(
                "templateFile",
                "a workflow file cannot be sent to a server; give the mapped task inline as `template` "
                "with an `arrayNode` section",
            )
        del document["templateFile"]
        document["template"] = json_format.MessageToDict(parsed.template)
    execution = document.setdefault("execution", {})
    ids = execution.setdefault("id", {})
    ids["name"] = parsed.metadata.task_execution_id.id.node_execution_id.execution_id.name
    return document, parsed.execution_key


def workflow_document(
    bundle: WorkflowBundle,
    spec: ExecutionSpec,
    inputs: Mapping[str, Any],
    *,
    execution: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The self-contained document of workflow execution ``spec``, compiled here from ``bundle`` (a file's or a
    module's) as the server will compile it: the workflow's templates as the bundle holds them (in a
    ``CompiledWorkflowClosure``'s shape: the primary workflow, every other workflow read — sub-workflows and
    the workflows its launch plans run — and every task), every launch plan read (``admin.LaunchPlan``
    JSON), the one that runs it (by name), the plain ``inputs`` given (the server merges that launch plan's
    defaults and fixed inputs again) and the ``execution`` section, naming the execution as ``spec`` does.
    Source templates, not compiled ones: compiling renames a branch's cases (``<branch>-<case>``), so a
    compiled template compiled again would be renamed twice."""
    closure = compiler_pb2.CompiledWorkflowClosure()
    closure.primary.template.CopyFrom(bundle.workflow)
    primary = id_key(bundle.workflow.id)
    for key, template in bundle.sub_workflows.items():
        if key != primary:
            closure.sub_workflows.add().template.CopyFrom(template)
    for task in bundle.tasks.values():
        closure.tasks.add().template.CopyFrom(task)
    section = copy.deepcopy(dict(execution or {}))
    ids = section.setdefault("id", {})
    ids["name"] = spec.metadata.task_execution_id.id.node_execution_id.execution_id.name
    return {
        "workflowClosure": json_format.MessageToDict(closure),
        "launchPlans": [json_format.MessageToDict(plan) for plan in bundle.launch_plans.values()],
        "launchPlan": bundle.launch_plan.id.name,
        "inputs": dict(inputs),
        "execution": section,
    }


def module_document(path: Path, arguments: Sequence[str], target: ModuleTarget) -> tuple[dict[str, Any], str]:
    """``FILE.py WORKFLOW [--INPUT VALUE]...`` as the document to submit and its execution key: the workflow
    (or launch plan) serialized and compiled here by the installed flytekit, as a local run does."""
    from taskplug.cli._flytekit_module import environment_of, module_workflow

    bundle, values = module_workflow(path, arguments, target)
    ids: dict[str, Any] = {"project": target.project, "domain": target.domain}
    if target.name is not None:
        ids["name"] = target.name
    execution: dict[str, Any] = {"id": ids}
    environment = environment_of(target.environment)
    if environment:
        execution["environment"] = environment
    spec = workflow_spec(bundle, values, execution=execution, source=str(path), fresh_name=True)
    return workflow_document(bundle, spec, values, execution=execution), spec.execution_key


def serialized_document(
    path: Path, arguments: Sequence[str], target: ModuleTarget
) -> tuple[dict[str, Any], str]:
    """``PATH [WORKFLOW] [--INPUT VALUE]...`` where PATH is what pyflyte wrote, as the document to submit and
    its execution key: read and compiled here, sent self-contained (the server reads no files)."""
    from taskplug.cli._flytekit_module import serialized_workflow

    bundle, values, execution = serialized_workflow(path, arguments, target)
    spec = workflow_spec(bundle, values, execution=execution, source=str(path), fresh_name=True)
    return workflow_document(bundle, spec, values, execution=execution), spec.execution_key


def read_token(token_file: Path | None) -> tuple[str | None, str]:
    """The API token to send (from ``token_file``, else ``$TASKPLUG_TOKEN``, else none) and where it came from,
    as an error names it."""
    if token_file is not None:
        try:
            token = token_file.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as e:
            raise SpecError("--token-file", f"cannot read {str(token_file)!r}: {e}") from None
        if not token or any(c.isspace() for c in token):
            raise SpecError("--token-file", f"{str(token_file)!r} does not hold one token")
        return token, "--token-file"
    token = os.environ.get(TOKEN_ENV, "").strip()
    return (token or None), (TOKEN_ENV if token else "--token-file")


class _Unavailable(SpecError):
    """The server did not answer, or answered 5xx / 429: worth asking again (the execution goes on)."""


class _Server:
    """The few calls made to the API, with its errors turned into the CLI's.

    Once it has answered, a server that cannot be reached or answers 5xx or 429 (its database restarting, a
    proxy between deployments) is asked again, with back-off, for up to :data:`PATIENCE` seconds before the run
    gives up: every call is safe to repeat (the submit is idempotent by the execution's key, the rest are
    reads and the abort, itself idempotent), and the execution goes on at the replicas meanwhile. A server
    never reached (a wrong URL) fails at once."""

    def __init__(
        self,
        url: str,
        *,
        on_retry: Callable[[str], None] | None = None,
        token: str | None = None,
        token_source: str = "--token-file",
    ) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise SpecError("--server", f"{url!r} is not an http(s) URL of a `taskplug serve`")
        self.base = url.rstrip("/") + "/api/v1"
        self.on_retry = on_retry
        """Told the reason each time a call is asked again."""
        self.answered = False
        self.headers = {"content-type": "application/json"}
        if token is not None:
            self.headers["authorization"] = f"Bearer {token}"
        self.token_source = token_source

    def call(self, method: str, path: str, body: object = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base + path, data=data, method=method, headers=self.headers)
        try:
            with urllib.request.urlopen(request, timeout=_TIMEOUT) as response:
                self.answered = True
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as e:
            self.answered = True
            try:
                payload = json.loads(e.read() or b"null")
            except ValueError:
                payload = None
            return e.code, payload
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise _Unavailable("--server", f"cannot reach {self.base}: {reason}") from None

    def expect(self, method: str, path: str, body: object = None, *, ok: tuple[int, ...] = (200,)) -> Any:
        deadline = time.monotonic() + PATIENCE
        backoff = 0.5
        while True:
            try:
                return self._expect_once(method, path, body, ok)
            except _Unavailable as e:
                if not self.answered:
                    raise
                if time.monotonic() + backoff > deadline:
                    raise SpecError(e.path, f"{e.reason} (still, after {PATIENCE:.0f} s)") from None
                if self.on_retry is not None:
                    self.on_retry(e.reason)
                time.sleep(backoff)
                backoff = min(backoff * 2, 5.0)

    def _expect_once(self, method: str, path: str, body: object, ok: tuple[int, ...]) -> Any:
        status, payload = self.call(method, path, body)
        if status in ok:
            return payload
        error = payload.get("error", {}) if isinstance(payload, dict) else {}
        message = error.get("message") or f"HTTP {status}"
        field = error.get("field") or ""
        if status in (401, 403):
            given = "authorization" in self.headers
            hint = "" if given else f" (give an API token with --token-file or {TOKEN_ENV})"
            raise SpecError(self.token_source, f"the server refused the credentials: {message}{hint}")
        if status >= 500 or status == 429:
            raise _Unavailable("--server", f"the server answered {status}: {message}")
        if 400 <= status < 500:
            raise SpecError(field, f"the server refused it: {message}")
        raise SpecError("--server", f"the server answered {status}: {message}")


def _quote(key: str) -> str:
    return "/executions/" + urllib.parse.quote(key, safe="/")


def run_remote(
    spec: Path,
    server_url: str,
    *,
    as_json: bool,
    poll: float = 0.5,
    token_file: Path | None = None,
    overwrite_cache: bool = False,
    document: dict[str, Any] | None = None,
) -> ExecutionResult:
    """Submit ``spec`` (or the ``document`` already made of it: a module's workflow) to the server and
    follow it to a terminal phase; how it ended. Unless ``as_json``, the live view of a local run
    (``cli/_progress.py``) shows the events and, for a map task, its elements. The API token is
    ``token_file``'s, else ``$TASKPLUG_TOKEN``'s (none: the server may not want one)."""
    if document is None:
        document, _ = remote_document(spec)
    if overwrite_cache:  # Flyte's overwrite_cache execution flag, as the spec's execution section says it
        document["execution"] = {**(document.get("execution") or {}), "overwriteCache": True}
    token, token_source = read_token(token_file)
    console = plain_console(stderr=True)
    noted: set[str] = set()

    def note_once(reason: str) -> None:
        # Said once per reason, not at every retry: the live view stays readable.
        if reason not in noted:
            noted.add(reason)
            console.print(Text(f"{reason}; asking again until it answers", style="yellow"))

    server = _Server(server_url, on_retry=note_once, token=token, token_source=token_source)
    created = server.expect("POST", "/executions", {"spec": document}, ok=(200, 201))
    key = created["key"]
    if as_json:
        events, execution = _follow(server, key, console, quiet=True, poll=poll)
        return _result(server, execution, events)
    console.print(Text(f"submitted {key} to {server_url}"))
    progress = Progress(console, key)
    with Live(progress, console=console, refresh_per_second=8, transient=False):
        events, execution = _follow(
            server,
            key,
            console,
            quiet=True,
            poll=poll,
            on_event=lambda event: progress.on_event(key, _event(event)),
        )
    console.print()
    return _result(server, execution, events)


def _event(document: dict[str, Any]) -> Event:
    """An event as the API lists it, as the executor reported it."""
    return Event(
        attempt=int(document["attempt"]),
        phase=str(document["phase"]),
        version=int(document.get("version") or 0),
        reason=str(document.get("reason") or ""),
        occurred_at=document.get("occurred_at"),
        error=document.get("error"),
        logs=document.get("logs"),
        external_resources=document.get("external_resources"),
        # A workflow's node and workflow events: the server lists them with their kind and node.
        kind=str(document.get("kind") or "task"),
        node=document.get("node"),
    )


def _follow(
    server: _Server,
    key: str,
    console: Console,
    *,
    quiet: bool,
    poll: float,
    sleep: Callable[[float], None] = time.sleep,
    on_event: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    events: list[dict[str, Any]] = []
    after = 0
    interrupts = 0
    while True:
        try:
            execution = server.expect("GET", _quote(key))
            for event in server.expect("GET", f"{_quote(key)}/events?after_seq={after}"):
                events.append(event)
                after = event["seq"]
                if on_event is not None:
                    on_event(event)
                if not quiet:
                    console.print(
                        Text(
                            f"attempt {event['attempt']}  {event['phase']:<18} v{event['version']}  {event['reason'][:160]}"
                        )
                    )
            if execution["terminal"]:
                return events, execution
            sleep(poll)
        except KeyboardInterrupt:
            interrupts += 1
            if interrupts > 1:
                fail(
                    "interrupted again: stopped following (the execution is being aborted)", EXIT_TASK_FAILED
                )
            console.print(Text("interrupted: asking the server to abort the execution…", style="yellow"))
            try:
                server.call("POST", f"{_quote(key)}/abort")
            except _Unavailable as e:
                console.print(Text(f"could not ask for the abort: {e.reason}", style="red"))


def _result(server: _Server, execution: dict[str, Any], events: list[dict[str, Any]]) -> ExecutionResult:
    outputs = None
    if execution["phase"] == "Success":
        outputs = server.expect("GET", f"{_quote(execution['key'])}/outputs")["outputs"]
    attempts = server.expect("GET", f"{_quote(execution['key'])}/attempts")
    nodes = None
    if execution.get("task_type") == "workflow":
        nodes = _nested(server.expect("GET", f"{_quote(execution['key'])}/nodes"))
    return ExecutionResult(
        key=execution["key"],
        phase=execution["phase"],
        attempts=max(len(attempts), execution["attempt"] + 1 if execution["started_at"] else 0),
        error=execution["error"],
        outputs=outputs,
        events=[
            {
                "phase": e["phase"],
                "version": e["version"],
                "reason": e["reason"],
                "occurredAt": e["occurred_at"],
                "attempt": e["attempt"],
                **({"error": e["error"]} if e["error"] is not None else {}),
                **({"logs": e["logs"]} if e["logs"] else {}),
                **({"kind": e["kind"]} if e.get("kind", "task") != "task" else {}),
                **({"node": e["node"]} if e.get("node") is not None else {}),
                **({"cacheStatus": e["cache"].get("status")} if e.get("cache") else {}),
            }
            for e in events
        ],
        nodes=nodes,
        node=execution["key"].rpartition("/")[2],
        cache_status=execution.get("cache_status"),
    )


def _nested(flat: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The API's flat node list (each naming its ``parent``) as a local run's result nests it: id, name,
    phase, attempts, error, and the nodes below a sub-workflow or branch node under ``nodes``."""
    entries: dict[str, dict[str, Any]] = {}
    top: list[dict[str, Any]] = []
    for node in flat:
        entry = {k: node.get(k) for k in ("id", "name", "phase", "attempts", "error")}
        entries[node["id"]] = entry
        parent = entries.get(node.get("parent") or "")
        if parent is None:
            top.append(entry)
        else:
            parent.setdefault("nodes", []).append(entry)
    return top
