"""Log links for a task's pod, built from ``plugins.logs`` templates.

Follows flyteplugins/go/tasks/logs/logging_utils.go (``InitializeLogPlugins``, ``GetLogsForContainerInPod``)
and flyteplugins/go/tasks/pluginmachinery/tasklog/template.go (the template variables and their
substitution). Everything here is pure: the caller passes the pod, the time and the task identity.

Template variables are written ``{{ .name }}`` (or ``{{ $name }}``), case-insensitive, spaces inside the
braces optional. A variable whose value is empty is left in the link as written, as in Flyte.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache, lru_cache
from typing import Any

# The core package's computed __all__ hides its names from mypy; import from the defining modules.
from taskplug.core import TaskExecutionID, TaskLog
from taskplug.k8s._config import LogConfig, TemplateLogPluginConfig

__all__ = [
    "LogInput",
    "LogTemplate",
    "log_templates",
    "logs_for_container_in_pod",
    "parse_k8s_time",
    "task_logs",
]

KUBERNETES_DISPLAY_NAME = "Kubernetes Logs"
CLOUDWATCH_DISPLAY_NAME = "Cloudwatch Logs"
STACKDRIVER_DISPLAY_NAME = "Stackdriver Logs"

_MESSAGE_FORMATS = {0: "UNKNOWN", 1: "CSV", 2: "JSON"}

# Go's zero time, which is what Flyte renders for a pod without a creationTimestamp.
_GO_ZERO_UNIX = -62135596800
_GO_ZERO_RFC3339 = "0001-01-01T00:00:00Z"


@dataclass(frozen=True, slots=True)
class LogTemplate:
    """One configured source of log links (Flyte's ``tasklog.TemplateLogPlugin``).

    ``name`` and ``dynamic_template_uris`` are only set for ``dynamic-log-links`` entries; those links are
    rendered only for tasks whose template config ``link_type`` names them.
    """

    display_name: str
    template_uris: tuple[str, ...] = ()
    message_format: str = "JSON"
    show_while_pending: bool = False
    hide_once_finished: bool = False
    name: str = ""
    dynamic_template_uris: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class LogInput:
    """What a log link can be built from (Flyte's ``tasklog.Input``)."""

    pod_name: str = ""
    pod_uid: str = ""
    namespace: str = ""
    container_name: str = ""
    container_id: str = ""
    log_name: str = ""
    hostname: str = ""
    node_name: str = ""
    pod_rfc3339_start_time: str = ""
    pod_rfc3339_finish_time: str = ""
    pod_unix_start_time: int = 0
    pod_unix_finish_time: int = 0
    task_execution_id: TaskExecutionID | None = None
    extra_vars: Mapping[str, str] | None = None
    """Plugin-specific variables (``{{ .name }}`` → value), substituted before the built-in ones."""
    task_template_config: Mapping[str, str] | None = None
    """The task template's ``config``: ``link_type`` picks dynamic links, ``{{ .taskConfig.x }}`` reads it."""


def _message_format(value: str | int) -> str:
    if isinstance(value, int):
        return _MESSAGE_FORMATS[value]
    return value


def _from_config(template: TemplateLogPluginConfig) -> LogTemplate:
    return LogTemplate(
        display_name=template.display_name,
        template_uris=tuple(template.template_uris),
        message_format=_message_format(template.message_format),
        show_while_pending=template.show_while_pending,
        hide_once_finished=template.hide_once_finished,
    )


# The log sources of each config read so far. A config is frozen, so its sources never change; the config is
# kept with them, so that its id cannot be reused while the entry stands. A process reads one or two configs.
_TEMPLATES: dict[int, tuple[LogConfig, tuple[LogTemplate, ...]]] = {}


def log_templates(config: LogConfig) -> tuple[LogTemplate, ...]:
    """The configured log sources in Flyte's order: kubernetes, cloudwatch, stackdriver, ``templates``,
    then ``dynamic-log-links`` (Flyte's ``InitializeLogPlugins``)."""
    known = _TEMPLATES.get(id(config))
    if known is not None and known[0] is config:
        return known[1]
    templates = _log_templates(config)
    if len(_TEMPLATES) >= 16:
        _TEMPLATES.clear()
    _TEMPLATES[id(config)] = (config, templates)
    return templates


def _log_templates(config: LogConfig) -> tuple[LogTemplate, ...]:
    out: list[LogTemplate] = []
    if config.kubernetes_enabled:
        # Deviation: Flyte uses the legacy ``kubernetes-url`` form only when the template URI is empty, and
        # the template URI has a localhost default, so a config that sets only ``kubernetes-url`` silently
        # gets localhost links. Here a ``kubernetes-url`` given without an explicit template URI is honoured.
        uri = config.kubernetes_template_uri
        url_only = "kubernetes_url" in config.model_fields_set and (
            "kubernetes_template_uri" not in config.model_fields_set
        )
        if not uri or url_only:
            uri = (
                f"{config.kubernetes_url}/#!/log/{{{{ .namespace }}}}/{{{{ .podName }}}}/pod"
                "?namespace={{ .namespace }}"
            )
        out.append(LogTemplate(KUBERNETES_DISPLAY_NAME, (uri,)))
    if config.cloudwatch_enabled:
        uri = config.cloudwatch_template_uri or (
            f"https://console.aws.amazon.com/cloudwatch/home?region={config.cloudwatch_region}"
            f"#logEventViewer:group={config.cloudwatch_log_group};stream=var.log.containers."
            "{{ .podName }}_{{ .namespace }}_{{ .containerName }}-{{ .containerId }}.log"
        )
        out.append(LogTemplate(CLOUDWATCH_DISPLAY_NAME, (uri,)))
    if config.stackdriver_enabled:
        project = config.gcp_project
        uri = config.stackdriver_template_uri or (
            f"https://console.cloud.google.com/logs/viewer?project={project}"
            f"&angularJsUrl=%2Flogs%2Fviewer%3Fproject%3D{project}"
            f"&resource={config.stackdriver_logresourcename}"
            "&advancedFilter=resource.labels.pod_name%3D{{ .podName }}"
        )
        out.append(LogTemplate(STACKDRIVER_DISPLAY_NAME, (uri,)))
    out.extend(_from_config(t) for t in config.templates)
    # Go iterates a map here (random order); the config's order is the stable choice.
    for link_type, dynamic in config.dynamic_log_links.items():
        out.append(
            LogTemplate(
                display_name=dynamic.display_name,
                name=link_type,
                dynamic_template_uris=tuple(dynamic.template_uris),
                show_while_pending=dynamic.show_while_pending,
                hide_once_finished=dynamic.hide_once_finished,
            )
        )
    return tuple(out)


@cache
def _var_regex(name: str) -> re.Pattern[str]:
    return re.compile(r"\{\{\s*[.$]" + re.escape(name) + r"\s*\}\}", re.IGNORECASE)


@cache
def _task_config_regex(name: str) -> re.Pattern[str]:
    # Flyte's pattern has an unescaped "." before taskConfig (any character); kept so the same links render.
    return re.compile(r"\{\{\s*.taskConfig[.$]" + re.escape(name) + r"\s*\}\}", re.IGNORECASE)


_TASK_CONFIG_VAR = re.compile(r"\{\{\s*.taskConfig[.$]([a-zA-Z_]+)\s*\}\}", re.IGNORECASE)

_Var = tuple[re.Pattern[str], str]


class _Vars:
    """A link's template variables in substitution order, made as far as the renderings read them.

    Most links have nothing left to substitute after their first few variables (a rendering stops at the
    first text without ``{{``), while some 25 were made for every link of every round of every task."""

    __slots__ = ("_made", "_rest")

    def __init__(self, variables: Iterator[_Var]) -> None:
        self._made: list[_Var] = []
        self._rest = variables

    def __iter__(self) -> Iterator[_Var]:
        made = self._made
        index = 0
        while True:
            if index < len(made):
                yield made[index]
                index += 1
                continue
            variable = next(self._rest, None)
            if variable is None:
                return
            made.append(variable)

    def append(self, variable: _Var) -> None:
        """Add ``variable`` after all the others."""
        self._made.extend(self._rest)
        self._made.append(variable)


def _template_vars(inp: LogInput) -> _Vars:
    return _Vars(_variables_in_order(inp))


def _variables_in_order(inp: LogInput) -> Iterator[_Var]:
    # The order matters: substitution is sequential, so a value that itself contains a later variable
    # (e.g. a log name with "{{ .podName }}") is expanded, as in Flyte.
    yield (_var_regex("logName"), inp.log_name)
    if inp.extra_vars:
        yield from ((_var_regex(k), v) for k, v in inp.extra_vars.items())
    # Runtimes report "containerd://<id>"; fluentd strips the scheme before naming the log stream.
    parts = inp.container_id.split("://")
    container_id = parts[1] if len(parts) > 1 else inp.container_id
    yield (_var_regex("podName"), inp.pod_name)
    yield (_var_regex("podUID"), inp.pod_uid)
    yield (_var_regex("namespace"), inp.namespace)
    yield (_var_regex("containerName"), inp.container_name)
    yield (_var_regex("containerID"), container_id)
    yield (_var_regex("hostname"), inp.hostname)
    yield (_var_regex("nodeName"), inp.node_name)
    tid = inp.task_execution_id
    if tid is not None:
        ident = tid.id
        yield (_var_regex("nodeID"), tid.unique_node_id)
        yield (_var_regex("generatedName"), tid.generated_name)
        yield (_var_regex("taskRetryAttempt"), str(ident.retry_attempt))
        if ident.HasField("task_id"):
            yield (_var_regex("taskID"), ident.task_id.name)
            yield (_var_regex("taskVersion"), ident.task_id.version)
            yield (_var_regex("taskProject"), ident.task_id.project)
            yield (_var_regex("taskDomain"), ident.task_id.domain)
        if ident.HasField("node_execution_id") and ident.node_execution_id.HasField("execution_id"):
            execution = ident.node_execution_id.execution_id
            yield (_var_regex("executionName"), execution.name)
            yield (_var_regex("executionProject"), execution.project)
            yield (_var_regex("executionDomain"), execution.domain)
    yield (_var_regex("podRFC3339StartTime"), inp.pod_rfc3339_start_time)
    yield (_var_regex("podRFC3339FinishTime"), inp.pod_rfc3339_finish_time)
    yield (_var_regex("podUnixStartTime"), str(inp.pod_unix_start_time))
    yield (_var_regex("podUnixFinishTime"), str(inp.pod_unix_finish_time))


def _render(template: str, variables: _Vars) -> str:
    # Every variable is written between "{{" and "}}": a text without "{{" (left) has nothing to substitute,
    # so the remaining substitutions would change nothing.
    if "{{" not in template:
        return template
    for regex, value in variables:
        if value:
            # Escaped so the value is inserted literally (Go's ReplaceAllLiteralString).
            template = regex.sub(value.replace("\\", "\\\\"), template)
            if "{{" not in template:
                break
    return template


def _dynamic_link_types(config: Mapping[str, str] | None) -> list[str]:
    if not config:
        return []
    link_type = config.get("link_type", "")
    return link_type.split(",") if link_type else []


def _logs_from(template: LogTemplate, inp: LogInput) -> list[TaskLog]:
    variables = _template_vars(inp)
    logs = [
        TaskLog(
            uri=_render(uri, variables),
            name=_render(template.display_name, variables) + _render(inp.log_name, variables),
            message_format=template.message_format,
            show_while_pending=template.show_while_pending,
            hide_once_finished=template.hide_once_finished,
        )
        for uri in template.template_uris
    ]
    task_config = inp.task_template_config or {}
    for link_type in _dynamic_link_types(inp.task_template_config):
        if template.name != link_type:
            continue
        for uri in template.dynamic_template_uris:
            for key in _TASK_CONFIG_VAR.findall(uri):
                if key in task_config:
                    variables.append((_task_config_regex(key), task_config[key]))
            logs.append(
                TaskLog(
                    uri=_render(uri, variables),
                    # Flyte does not template the name of a dynamic link.
                    name=template.display_name + inp.log_name,
                    message_format=template.message_format,
                    show_while_pending=template.show_while_pending,
                    hide_once_finished=template.hide_once_finished,
                )
            )
    return logs


def task_logs(source: LogConfig | Sequence[LogTemplate], inp: LogInput) -> tuple[TaskLog, ...]:
    """Every log link the configured sources produce for ``inp`` (Flyte's ``GetTaskLogs``)."""
    templates = log_templates(source) if isinstance(source, LogConfig) else source
    out: list[TaskLog] = []
    for template in templates:
        out.extend(_logs_from(template, inp))
    return tuple(out)


_FRACTION = re.compile(r"(\.\d{6})\d+")


def parse_k8s_time(value: Any) -> datetime | None:
    """A Kubernetes timestamp (RFC3339, ``Z`` or offset, optional fraction) as an aware datetime.

    Missing or empty gives None. A malformed string raises ValueError: the object could not have come from
    the API server, and an error means "could not decide this round".
    """
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    if not isinstance(value, str):
        raise ValueError(f"expected an RFC3339 timestamp, got {value!r}")
    return _parse_time_text(value)


@lru_cache(maxsize=4096)
def _parse_time_text(value: str) -> datetime:
    # Remembered by text: a pod's few times are read again at every round of its task (status, log links,
    # the observed-object check), by every task in flight. A datetime is immutable, so sharing it is safe;
    # a malformed text raises every time (lru_cache keeps no exceptions).
    # Python keeps microseconds; Kubernetes may send nanoseconds (the API's own times have no fraction).
    text = value.strip()
    if "." in text:
        text = _FRACTION.sub(r"\1", text)
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError as e:
        raise ValueError(f"expected an RFC3339 timestamp, got {value!r}") from e
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _unix_and_rfc3339(t: datetime | None) -> tuple[int, str]:
    if t is None:
        return _GO_ZERO_UNIX, _GO_ZERO_RFC3339
    seconds = int(t.timestamp() // 1)
    return seconds, _rfc3339_of(seconds)


@lru_cache(maxsize=1024)
def _rfc3339_of(seconds: int) -> str:
    # Remembered by the second: every task in flight renders its links with the same few seconds.
    # Deviation: Go formats in propeller's local zone; UTC is what a propeller in a container shows anyway.
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def logs_for_container_in_pod(
    log_config: LogConfig | Sequence[LogTemplate],
    pod: Mapping[str, Any] | None,
    index: int,
    suffix: str,
    *,
    extra_vars: Mapping[str, str] | None = None,
    now: datetime | None = None,
    task_execution_id: TaskExecutionID | None = None,
    task_template_config: Mapping[str, str] | None = None,
) -> tuple[TaskLog, ...]:
    """Log links for the pod's ``index``-th container (Flyte's ``GetLogsForContainerInPod``).

    No pod, or fewer containers than ``index + 1``, gives no links. The start time is the pod's
    creationTimestamp and the finish time is ``now`` (Flyte uses the wall clock there), both at second
    resolution.
    """
    if pod is None or index < 0:
        return ()
    spec = pod.get("spec") or {}
    containers = spec.get("containers") or []
    if len(containers) <= index:
        return ()
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    # A pending pod may have no container statuses yet; its links are built without a container id.
    container_id = str(statuses[index].get("containerID") or "") if len(statuses) > index else ""
    meta = pod.get("metadata") or {}
    start_unix, start_rfc = _unix_and_rfc3339(parse_k8s_time(meta.get("creationTimestamp")))
    finish_unix, finish_rfc = _unix_and_rfc3339(now if now is not None else datetime.now(UTC))
    inp = LogInput(
        pod_name=str(meta.get("name") or ""),
        pod_uid=str(meta.get("uid") or ""),
        namespace=str(meta.get("namespace") or ""),
        container_name=str(containers[index].get("name") or ""),
        container_id=container_id,
        log_name=suffix,
        hostname=str(spec.get("hostname") or ""),
        node_name=str(spec.get("nodeName") or ""),
        pod_rfc3339_start_time=start_rfc,
        pod_rfc3339_finish_time=finish_rfc,
        pod_unix_start_time=start_unix,
        pod_unix_finish_time=finish_unix,
        task_execution_id=task_execution_id,
        extra_vars=extra_vars,
        task_template_config=task_template_config,
    )
    return task_logs(log_config, inp)
