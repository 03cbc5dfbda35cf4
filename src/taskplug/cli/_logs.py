"""Task logs where a user looks: what the containers of a ``taskplug run`` on the embedded cluster printed,
kept after the run, shown with a failed attempt's error, and printed (or followed) by ``taskplug logs``.

A run's embedded cluster keeps its pods' folders under ``cluster/`` beside the state DB (by default
``.taskplug/cluster/``), one folder per run, instead of a temporary folder removed at the end; the kubelet
writes each container's output there as it runs (``<namespace>_<pod>_<uid>/logs/<container>.log``, as the
kubelet's ``/var/log/pods/<namespace>_<pod>_<uid>/<container>/``). When the run ends, what else a pod left
there (its working folder, its volumes) is removed and the logs stay. ``taskplug logs EXECUTION`` finds the
pods of an execution by their names (``{name}-{node}-{attempt}``, a map's elements below it) and prints their
logs, attempt by attempt; ``--follow`` keeps printing what is appended while the run that writes them runs.

On a real cluster (``--kubeconfig``) the logs are read through the API's ``pods/log``, of the pods that carry
the execution's labels, for as long as the cluster keeps them (Flyte keeps a finished pod unless
``delete-resource-on-finalize``). With ``--server`` they are read from a ``taskplug serve``'s
``/api/v1/executions/{key}/logs`` (the copies its replicas kept, and its cluster's ``pods/log``).

A connector task has no pod: for an execution without pod logs whose attempt created a connector job, the
job's logs are asked of the connector (``GetTaskLogs``, page after page: ``_jobs.py``).
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import sys
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import click

from taskplug.cli._output import handles_bad_input
from taskplug.cli._workflow_view import WorkflowNodes
from taskplug.core import SpecError
from taskplug.executor import EXECUTOR_SECTION, Platform
from taskplug.k8s import (
    ATTEMPT_ANNOTATION,
    EXECUTION_ID_LABEL,
    LOGS_SECTION,
    POD,
    KubeClient,
    LogConfig,
    ReadsPodLogs,
    sanitize_label_value,
)

__all__ = [
    "LogFile",
    "RunFolder",
    "cluster_folder",
    "find_logs",
    "find_node_logs",
    "local_log_links",
    "log_tail",
    "logs",
]

_TAIL_BYTES = 16384
"""How much of the end of a log the live view reads each time it refreshes."""

_RUNNING = "running"
"""A file in a run's folder while the run is alive (its pid): ``--follow`` stops once it is gone."""


def cluster_folder(state_db: Path) -> Path:
    """Where the runs that keep their state in ``state_db`` keep their embedded cluster's pod folders: an
    absolute path (a container's volumes are made from it, and a container does not run in this directory)."""
    return state_db.absolute().parent / "cluster"


@dataclass(frozen=True, slots=True)
class LogFile:
    pod: str
    container: str
    path: Path
    attempt: int | None
    """The attempt the pod ran (the number after the node in its name), when it has one."""


class RunFolder:
    """One run's folder for its embedded cluster: made at the start, pruned to the logs at the end."""

    def __init__(self, state_db: Path) -> None:
        self.path = cluster_folder(state_db) / f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"

    def __enter__(self) -> Path:
        self.path.mkdir(parents=True, exist_ok=True)
        (self.path / _RUNNING).write_text(str(os.getpid()))
        return self.path

    def latest_output(self) -> str:
        """The end of the log this run's containers wrote last (the running attempt's, as the live view
        shows it); empty before any."""
        try:
            logs = [
                log for pod in self.path.iterdir() if pod.is_dir() for log in (pod / "logs").glob("*.log")
            ]
            newest = max(logs, key=lambda log: log.stat().st_mtime, default=None)
            if newest is None:
                return ""
            with newest.open("rb") as stream:
                stream.seek(max(0, newest.stat().st_size - _TAIL_BYTES))
                return stream.read().decode("utf-8", "replace")
        except OSError:  # a pod's folder pruned or removed meanwhile: nothing to show this time
            return ""

    def __exit__(self, *exc: object) -> None:
        for pod in self.path.iterdir():
            for part in pod.iterdir() if pod.is_dir() else ():
                if part.name == "logs":
                    continue
                if part.is_dir():
                    shutil.rmtree(part, ignore_errors=True)
                else:
                    part.unlink(missing_ok=True)
        (self.path / _RUNNING).unlink(missing_ok=True)
        if not any(self.path.iterdir()):
            self.path.rmdir()


_DASHBOARD_LINK = LogConfig.model_fields["kubernetes_template_uri"].default
"""Flyte's default Kubernetes log link: a dashboard on localhost:30082, where nothing listens on a laptop."""


def local_log_links(platform: Platform, folder: Path) -> Platform:
    """``platform`` with its Kubernetes log link pointing at the log file the embedded cluster writes in
    ``folder`` (``file://…/<namespace>_<pod>/logs/<container>.log``: the kubelet links ``<namespace>_<pod>``
    to the pod's ``<namespace>_<pod>_<uid>`` folder, so that plugins that know no pod uid — a PyTorchJob's
    replicas — give working links too), when the link is Flyte's default dashboard one; a link the platform
    config sets is kept."""
    config = platform.config.get(LOGS_SECTION)
    if (
        not config.kubernetes_enabled
        or config.kubernetes_template_uri != _DASHBOARD_LINK
        or config.kubernetes_url
    ):
        return platform
    link = (
        f"{folder.absolute().as_uri()}/{{{{ .namespace }}}}_{{{{ .podName }}}}/logs/"
        "{{ .containerName }}.log"
    )
    local = config.model_copy(update={"kubernetes_template_uri": link})
    return replace(platform, config=platform.config.with_section(LOGS_SECTION, local))


def find_logs(
    root: Path, name: str, node: str = "n0", attempt: int | None = None, *, others: Collection[str] = ()
) -> list[LogFile]:
    """The log files of the pods of execution ``name`` (node ``node``) under a cluster folder, oldest
    first; ``attempt`` keeps one attempt's. ``others`` are the execution's other nodes (a workflow's unique
    ids): the pods of a node nested under ``node`` (``n4-0-n0`` under ``n4``), whose names begin as
    ``node``'s do, are theirs, not ``node``'s."""
    found: list[LogFile] = []
    # The attempt's own pod ({name}-{node}-{attempt}), a map element's ({…}-{index}[-{retry}]), and the pods an
    # operator starts for it (a Spark driver, a PyTorchJob's master and workers: {…}-driver, {…}-worker-0).
    pattern = re.compile(rf"^[^_]+_({re.escape(name)}-{re.escape(node)}-(\d+)(?:-[a-z0-9-]+)?)_[^_]+$")
    nested = [
        re.compile(rf"^{re.escape(name)}-{re.escape(other)}-\d+(?:-[a-z0-9-]+)?$")
        for other in others
        if other.startswith(f"{node}-")
    ]
    if not root.is_dir():
        return found
    for run in root.iterdir():
        if not run.is_dir():
            continue
        for pod in run.iterdir():
            match = pattern.match(pod.name)
            if match is None or not (pod / "logs").is_dir():
                continue
            if any(theirs.match(match.group(1)) for theirs in nested):
                continue
            number = int(match.group(2))
            if attempt is not None and number != attempt:
                continue
            for log in sorted((pod / "logs").glob("*.log")):
                found.append(LogFile(match.group(1), log.stem, log, number))
    found.sort(key=lambda f: (f.attempt or 0, f.path.stat().st_mtime, f.pod, f.container))
    return found


def find_node_logs(
    root: Path,
    name: str,
    nodes: Sequence[str],
    attempt: int | None,
    *,
    known: Collection[str] = (),
) -> list[tuple[str, LogFile]]:
    """The log files of each of ``nodes`` (a workflow's unique ids, or one node), node by node, each with
    its node. ``known`` are the workflow's other nodes: the pods of a node nested under another
    (``n4-0-n0`` under ``n4``) are only the nested node's."""
    others = {*nodes, *known}
    return [(node, f) for node in nodes for f in find_logs(root, name, node, attempt, others=others)]


def log_tail(text: str, lines: int) -> str:
    return "".join(text.splitlines(keepends=True)[-lines:]) if lines > 0 else ""


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def _alive(folder: Path) -> bool:
    """Whether the run that writes ``folder`` is still running."""
    try:
        pid = int((folder / _RUNNING).read_text())
    except (OSError, ValueError):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _follow(
    offsets: dict[Path, int],
    root: Path,
    name: str,
    nodes: Callable[[], tuple[Sequence[str], Collection[str]]],
    attempt: int | None,
) -> Iterator[str]:
    """What is appended to the logs of the ``nodes`` (asked each time: the nodes to follow, and every node
    known) after ``offsets`` (bytes already shown), and the logs of pods that appear, while the run that
    writes them is alive; then what they hold at its end."""
    while True:
        following, known = nodes()
        files = find_node_logs(root, name, following, attempt, known=known)
        alive = any(_alive(f.path.parents[2]) for _, f in files)
        for _, f in find_node_logs(root, name, following, attempt, known=known):
            start = offsets.get(f.path, 0)
            with f.path.open("rb") as stream:
                stream.seek(start)
                chunk = stream.read()
            if chunk:
                offsets[f.path] = start + len(chunk)
                yield chunk.decode("utf-8", "replace")
        if not alive:
            return
        time.sleep(0.2)


@click.command()
@click.argument("execution")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--state-db",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The state DB the run used (its logs are in cluster/ beside it) [default: the config's "
    "executor.state-db, .taskplug/state.db].",
)
@click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Read the logs of a run on this cluster, through its API, instead of the embedded cluster's files.",
)
@click.option(
    "--namespace",
    help="With --kubeconfig: the pods' namespace [default: PROJECT-DOMAIN of an EXECUTION key].",
)
@click.option(
    "--node",
    default=None,
    help="The node of the execution [default: n0; for a workflow, every node]: a workflow node's unique id "
    "(n1; n4-0-n0 for node n0 under sub-workflow or branch node n4, whose logs are those of the nodes under it).",
)
@click.option(
    "--server",
    metavar="URL",
    help="Read the logs of an execution on this `taskplug serve` (EXECUTION is its key), through its API.",
)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="With --server: a file holding the API token to send (else $TASKPLUG_TOKEN, if set).",
)
@click.option("--attempt", type=int, default=None, help="Only this attempt's logs [default: every attempt].")
@click.option("--tail", type=int, default=None, help="Only the last N lines of each log.")
@click.option("-f", "--follow", is_flag=True, help="Keep printing what the task prints while its run runs.")
@handles_bad_input
def logs(
    execution: str,
    config_path: Path | None,
    state_db: Path | None,
    kubeconfig: Path | None,
    namespace: str | None,
    node: str | None,
    server: str | None,
    token_file: Path | None,
    attempt: int | None,
    tail: int | None,
    follow: bool,
) -> None:
    """Print what an execution's containers printed, attempt by attempt (a `taskplug run` on the embedded
    cluster keeps them).

    EXECUTION is the execution's name (`--name`, or the fresh one a run printed), or its key
    PROJECT/DOMAIN/NAME/NODE as `-o json` and the state DB name it. For a workflow, the logs of each of its
    nodes, or of the node --node names.

    A connector task has no pod: its job's logs are asked of its connector (GetTaskLogs, page after page),
    at the deployment the config (--config, as the run used) routes its task type to.
    """
    if token_file is not None and server is None:
        raise SpecError("--token-file", "only with --server")
    if server is not None:
        if kubeconfig is not None or state_db is not None:
            raise SpecError("--server", "not with --kubeconfig or --state-db: the server reads its own logs")
        if execution.count("/") != 3:
            raise SpecError(
                "EXECUTION", f"with --server, the execution's key PROJECT/DOMAIN/NAME/NODE, got {execution!r}"
            )
        _from_server(server, token_file, execution, node, attempt, tail, follow)
        return
    parts = execution.split("/")
    if len(parts) == 4:
        name = parts[2]
        # A workflow's key names its root (wf): --node picks one of its nodes; a task's key names its node.
        node = node if parts[3] == _WORKFLOW_ROOT else parts[3]
        namespace = namespace or f"{parts[0]}-{parts[1]}"
    elif len(parts) == 1 and parts[0]:
        name = parts[0]
    else:
        raise SpecError("EXECUTION", f"a name or PROJECT/DOMAIN/NAME/NODE, got {execution!r}")
    if kubeconfig is not None:
        if namespace is None:
            raise SpecError("--namespace", "required with --kubeconfig and an execution name alone")
        if node is None and len(parts) != 4:
            node = "n0"
        platform = Platform.load(config_path)
        asyncio.run(_from_cluster(platform, kubeconfig, namespace, name, node, attempt, tail, follow))
        return
    if state_db is None:
        state_db = Path(Platform.load(config_path).config.get(EXECUTOR_SECTION).state_db)
    root = cluster_folder(state_db)
    workflow = _workflow_of(state_db, execution)
    nodes = [node or "n0"] if workflow is None else _selected(workflow, node, execution)
    known = () if workflow is None else tuple(workflow.nodes)
    files = find_node_logs(root, name, nodes, attempt, known=known)
    if not files:
        from taskplug.cli._jobs import print_job_logs, web_api_jobs

        jobs = [j for j in web_api_jobs(state_db, execution, node) if attempt is None or j.attempt == attempt]
        if jobs:
            if follow:
                raise SpecError("--follow", "a connector task's logs are read once, not followed")
            print_job_logs(Platform.load(config_path), jobs, tail)
            return
        what = (
            f"node {node} of {execution!r}" if node is not None and workflow is not None else repr(execution)
        )
        raise SpecError(
            "EXECUTION",
            f"no logs of {what} under {str(root)!r} (a run on the embedded cluster with --state-db "
            f"{str(state_db)!r} keeps them there; on a real cluster use kubectl logs)",
        )
    several = len(files) > 1
    shown: dict[Path, int] = {}
    for at, f in files:
        if several:
            where = f"node {at}, attempt {f.attempt}" if workflow is not None else f"attempt {f.attempt}"
            click.echo(f"==> {where}: pod {f.pod}, container {f.container} <==")
        data = _read(f.path)
        shown[f.path] = len(data)
        text = data.decode("utf-8", "replace")
        click.echo(log_tail(text, tail) if tail is not None else text, nl=False)
    if follow:

        def selected() -> tuple[Sequence[str], Collection[str]]:
            # A running workflow's nodes that start later are followed too.
            now = _workflow_of(state_db, execution) if workflow is not None else None
            return (nodes, known) if now is None else (_selected(now, node, execution), tuple(now.nodes))

        for chunk in _follow(shown, root, name, selected, attempt):
            sys.stdout.write(chunk)
            sys.stdout.flush()


_WORKFLOW_ROOT = "wf"
"""The node a workflow execution's key names (the executor's ``WORKFLOW_NODE_ID``)."""


def _workflow_of(state_db: Path, execution: str) -> WorkflowNodes | None:
    """The nodes of workflow execution ``execution`` (its key, or its name alone) as the state DB records
    them; None when the state DB holds no such workflow (a task's execution, or no state DB)."""
    if not state_db.is_file() or state_db.stat().st_size == 0:
        return None
    from taskplug.executor import SQLiteStateStore, check_state_file

    check_state_file(state_db)
    store = SQLiteStateStore(state_db)
    try:
        keys = [execution] if execution.count("/") == 3 else store.keys_named(execution)
        record = store.load(keys[0]) if len(keys) == 1 else None
        if record is None or record.workflow_state is None:
            return None
        return WorkflowNodes.from_records(store.load_nodes(keys[0]), workflow_state=record.workflow_state)
    finally:
        store.close()


def _selected(workflow: WorkflowNodes, node: str | None, execution: str) -> list[str]:
    """The nodes whose logs to print: every node of the workflow; or ``node`` (a unique id such as
    ``n4-0-n0``) and, for a sub-workflow or branch node, the nodes under it."""
    every = [view.id for _, view in workflow.walk()]
    if node is None:
        return every
    if node not in workflow.nodes:
        raise SpecError(
            "--node", f"no node {node!r} in workflow execution {execution!r}; its nodes: {', '.join(every)}"
        )
    below: list[str] = [node]
    for unique in below:
        below.extend(workflow.nodes[unique].children)
    return below


async def _from_cluster(
    platform: Platform,
    kubeconfig: Path,
    namespace: str,
    name: str,
    node: str | None,
    attempt: int | None,
    tail: int | None,
    follow: bool,
) -> None:
    """The logs of an execution's pods on a cluster, found by the labels every task object carries
    (``execution-id``, ``node-id``; every node's for a workflow's key without ``node``) and ordered by the
    attempt their annotation names; followed by reading each again until its pod has ended."""
    client = platform.connect(kubeconfig)
    try:
        if not isinstance(client, ReadsPodLogs):
            raise SpecError("--kubeconfig", "this client cannot read pod logs")
        selector = f"{EXECUTION_ID_LABEL}={sanitize_label_value(name)}"
        if node is not None:
            selector += f",node-id={sanitize_label_value(node)}"
        pods, _ = await client.list(POD, namespace, label_selector=selector)
        found = sorted(
            ((_attempt_of(pod), pod) for pod in pods if attempt is None or _attempt_of(pod) == attempt),
            key=lambda item: (item[0], item[1]["metadata"]["name"]),
        )
        if not found:
            raise SpecError(
                "EXECUTION",
                f"no pods of {name!r} (node {node or 'any'}) in namespace {namespace!r}: gone (deleted on finalize), "
                "or another namespace (--namespace)",
            )
        for number, pod in found:
            pod_name = pod["metadata"]["name"]
            for container in [c["name"] for c in (pod.get("spec") or {}).get("containers") or []]:
                if len(found) > 1 or len(pod["spec"]["containers"]) > 1:
                    at = "" if node is not None else f"node {_label(pod, 'node-id')}, "
                    click.echo(f"==> {at}attempt {number}: pod {pod_name}, container {container} <==")
                text = await client.pod_log(namespace, pod_name, container, tail_lines=tail)
                click.echo(text, nl=False)
                if follow:
                    await _follow_pod(
                        client, namespace, pod_name, container, len(text) if tail is None else None
                    )
    finally:
        await client.close()


class _LogCluster(KubeClient, ReadsPodLogs, Protocol):
    """A client that reads objects and pod logs."""


async def _follow_pod(
    client: _LogCluster, namespace: str, pod: str, container: str, shown: int | None
) -> None:
    """What a container appends to its log until its pod has ended (read again every second)."""
    while True:
        current = await client.get(POD, namespace, pod)
        ended = (current.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        text = await client.pod_log(namespace, pod, container)
        if shown is None:
            shown = len(text)
        elif len(text) > shown:
            click.echo(text[shown:], nl=False)
            shown = len(text)
        if ended:
            return
        await asyncio.sleep(1.0)


def _label(pod: dict[str, Any], name: str) -> str:
    return str(((pod.get("metadata") or {}).get("labels") or {}).get(name, "?"))


def _attempt_of(pod: dict[str, Any]) -> int:
    annotation = ((pod.get("metadata") or {}).get("annotations") or {}).get(ATTEMPT_ANNOTATION, "")
    last = str(annotation).rpartition("/")[2]
    return int(last) if last.isdigit() else 0


def _from_server(
    url: str,
    token_file: Path | None,
    key: str,
    node: str | None,
    attempt: int | None,
    tail: int | None,
    follow: bool,
) -> None:
    """The logs as a server's ``/api/v1/executions/{key}/logs`` answers them, printed as they arrive (with
    ``follow``, until the server ends the answer: the attempt, or the execution, has ended)."""
    import json
    import urllib.error
    import urllib.parse
    import urllib.request

    from taskplug.cli._remote_run import read_token

    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise SpecError("--server", f"{url!r} is not an http(s) URL of a `taskplug serve`")
    token, token_source = read_token(token_file)
    query = {
        name: str(value).lower() if isinstance(value, bool) else str(value)
        for name, value in (("node", node), ("attempt", attempt), ("tail", tail), ("follow", follow))
        if value is not None and value is not False
    }
    address = (
        f"{url.rstrip('/')}/api/v1/executions/{urllib.parse.quote(key, safe='/')}/logs"
        f"{'?' + urllib.parse.urlencode(query) if query else ''}"
    )
    headers = {"authorization": f"Bearer {token}"} if token is not None else {}
    request = urllib.request.Request(address, headers=headers)
    try:
        # No read timeout while following: the answer stays open, quiet, while the task prints nothing.
        response = urllib.request.urlopen(request, timeout=None if follow else 60)
    except urllib.error.HTTPError as e:
        try:
            error = (json.loads(e.read() or b"null") or {}).get("error") or {}
        except (ValueError, AttributeError):
            error = {}
        message = error.get("message") or f"HTTP {e.code}"
        if e.code in (401, 403):
            raise SpecError(token_source, f"the server refused the credentials: {message}") from None
        names = {"key": "EXECUTION", "node": "--node", "attempt": "--attempt", "tail": "--tail"}
        field = str(error.get("field") or "").removeprefix("query.")
        raise SpecError(names.get(field, "--server"), f"the server refused it: {message}") from None
    except (urllib.error.URLError, OSError) as e:
        raise SpecError("--server", f"cannot reach {url}: {getattr(e, 'reason', e)}") from None
    with response:
        out = sys.stdout.buffer
        while chunk := response.read1(65536):
            out.write(chunk)
            out.flush()
