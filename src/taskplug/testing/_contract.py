"""The Kubernetes plugin contract check: what the plugin manager relies on, checked in the author's tests.

The plugin manager (``taskplug.engine.k8s._plugin_manager``, Flyte's plugin_manager.go) calls a plugin in a few
ways and trusts a few things of the answers; a plugin that breaks one of them fails at run time, often far
from the cause (an object that cannot be sent, a task stuck because its phase version never moves, a
traceback where a failed task was expected). :func:`check_k8s_plugin` calls the plugin those ways on
representative tasks and observed objects and reports every check by name:

========================  ==============================================================================
check                     what it asks
========================  ==============================================================================
``entry``                 the entry validates; task types are a tuple of names; the watched type is a
                          ``ResourceType`` with apiVersion, kind and plural; loader and local operator
                          are callables
``load``                  the loader, given the parsed config, returns a ``K8sPlugin``
``properties``            ``get_properties()`` gives ``K8sPluginProperties``; a generated-name maximum
                          length, if set, is at least 8
``identity-resource``     ``build_identity_resource`` gives the watched apiVersion and kind (kind
                          compared case-insensitively, as the API server does) and nothing a GET or
                          DELETE would not need (no spec, no status), the same for every task
``build-resource[T]``     for task T, ``build_resource`` returns a JSON-serializable dict of the watched
                          kind to which the manager can add name, namespace, labels and annotations —
                          or, for the check's own odd tasks only, raises ``PluginError``
                          (``BadTaskSpecification``); any other exception fails
``deterministic[T]``      building T twice gives the same object and leaves the template unchanged
``builds-something``      at least one task was built (pass ``tasks=`` your plugin accepts)
``rejects-bad-task[T]``   a task the author says is bad raises ``PluginError``, not another exception
``task-phase[O]``         ``get_task_phase`` on observed object O (and on the built object with an empty
                          status, as first seen after create) returns a ``PhaseInfo`` without raising;
                          never Undefined; a failure carries an error code; an object with no status
                          yet is not reported finished
``phase-version[O]``      for a non-Running phase, the same report against the same stored reason
                          keeps its version, against another stored reason bumps it by one
                          (``maybe_update_phase_version``)
========================  ==============================================================================

Everything runs on a :class:`~taskplug.core.FakeClock`, so a plugin that reads the clock is deterministic.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from taskplug.core import (
    ConfigSection,
    FakeClock,
    Phase,
    PhaseInfo,
    PluginError,
    PluginKind,
    StaticTaskExecutionContext,
    TaskExecutionMetadata,
)
from taskplug.k8s import (
    K8S_SECTION,
    K8sPlugin,
    K8sPluginConfig,
    K8sPluginEntry,
    K8sPluginProperties,
    PluginState,
    PodTemplateStore,
    ResourceType,
    StaticPluginContext,
    build_object,
)
from taskplug.testing._context import TaskLike, fake_plugin_setup, fake_task_context

__all__ = ["CheckResult", "ContractReport", "check_k8s_plugin", "representative_tasks"]

KubeObject = dict[str, Any]

_IMAGE = "ghcr.io/taskplug/contract-check:v1"
_ARGS = ["run", "--inputs", "{{.input}}", "--output-prefix", "{{.outputPrefix}}"]
_RESOURCES = {"requests": [{"name": "CPU", "value": "500m"}, {"name": "MEMORY", "value": "256Mi"}]}
_ODD_CUSTOM = {
    "unexpected": [1, "two", {"three": None}],
    "parallelism": "many",
    "replicas": -1,
    "podSpec": "not a pod spec",
}


@dataclass(frozen=True, slots=True)
class CheckResult:
    """One check of the contract: its name (``build-resource[...]`` names the task), whether it passed,
    and what was found."""

    name: str
    passed: bool
    message: str = ""

    def __str__(self) -> str:
        return f"{'PASS' if self.passed else 'FAIL'} {self.name}: {self.message}"


@dataclass(frozen=True, slots=True)
class ContractReport:
    """Every check :func:`check_k8s_plugin` ran, in order. ``raise_if_failed()`` in a test fails it with
    the whole report."""

    plugin_id: str
    checks: tuple[CheckResult, ...] = ()

    @property
    def passed(self) -> bool:
        """True when every check passed."""
        return all(c.passed for c in self.checks)

    @property
    def failures(self) -> tuple[CheckResult, ...]:
        return tuple(c for c in self.checks if not c.passed)

    def check(self, name: str) -> CheckResult:
        """The check called ``name`` (KeyError if it did not run)."""
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(name)

    def names(self, *, failed: bool | None = None) -> list[str]:
        """The names of the checks (only the failed or passed ones when ``failed`` is given)."""
        return [c.name for c in self.checks if failed is None or c.passed != failed]

    def raise_if_failed(self) -> None:
        """Raise AssertionError with the report if any check failed."""
        if not self.passed:
            raise AssertionError(str(self))

    def __str__(self) -> str:
        head = f"k8s plugin [{self.plugin_id}]: {len(self.checks)} checks, {len(self.failures)} failed"
        return "\n".join([head, *(f"  {c}" for c in self.checks)])


@dataclass
class _Checker:
    entry: K8sPluginEntry
    checks: list[CheckResult] = field(default_factory=list)

    def add(self, name: str, passed: bool, message: str = "") -> bool:
        self.checks.append(CheckResult(name, passed, message))
        return passed

    def run(self, name: str, check: Callable[[], str]) -> bool:
        """Run ``check``: it returns a message when it passes and raises _Failed (or anything) when not."""
        try:
            message = check()
        except _Failed as e:
            return self.add(name, False, str(e))
        except Exception as e:
            return self.add(name, False, f"raised {_describe(e)}")
        return self.add(name, True, message)


class _Failed(Exception):
    """A check found a breach (the message says which)."""


def _describe(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise _Failed(message)


def representative_tasks(task_types: Sequence[str]) -> list[tuple[str, dict[str, Any], bool]]:
    """The check's own tasks for a plugin registered for ``task_types``: ``(label, spec document,
    must_build)``. A container task of every type, plus odd ones of the first type (interruptible with
    overrides, no target, an unexpected ``custom``, a K8sPod target) that the plugin may reject with a
    PluginError but must not crash on."""

    def template(task_type: str, **extra: Any) -> dict[str, Any]:
        return {
            "id": {
                "resourceType": "TASK",
                "project": "testproject",
                "domain": "development",
                "name": "contract_check",
                "version": "v1",
            },
            "type": task_type,
            **extra,
        }

    container = {"image": _IMAGE, "args": list(_ARGS), "resources": copy.deepcopy(_RESOURCES)}
    tasks: list[tuple[str, dict[str, Any], bool]] = []
    for task_type in task_types:
        tasks.append(
            (f"{task_type} container task", {"template": template(task_type, container=container)}, False)
        )
    first = task_types[0]
    tasks.append(
        (
            f"{first} interruptible task with overrides",
            {
                "template": template(first, container=container, metadata={"interruptible": True}),
                "execution": {
                    "interruptible": True,
                    "platformResources": {
                        "requests": {"cpu": "1", "memory": "1Gi"},
                        "limits": {"cpu": "4", "memory": "8Gi"},
                    },
                    "overrides": {"resources": {"limits": {"memory": "2Gi"}}},
                    "annotations": {"example.com/annotation": "yes"},
                },
            },
            False,
        )
    )
    tasks.append((f"{first} task without a target", {"template": template(first)}, False))
    tasks.append(
        (
            f"{first} task with an unexpected custom",
            {"template": template(first, container=container, custom=copy.deepcopy(_ODD_CUSTOM))},
            False,
        )
    )
    tasks.append(
        (
            f"{first} K8sPod task",
            {
                "template": template(
                    first,
                    k8sPod={"podSpec": {"containers": [{"name": "main", "image": _IMAGE, "args": ["run"]}]}},
                    config={"primary_container_name": "main"},
                )
            },
            False,
        )
    )
    return tasks


def check_k8s_plugin(
    entry: K8sPluginEntry,
    *,
    config: Mapping[str, Any] | None = None,
    tasks: Iterable[TaskLike] = (),
    bad_tasks: Iterable[TaskLike] = (),
    observations: Iterable[Mapping[str, Any]] = (),
    pod_templates: PodTemplateStore | None = None,
) -> ContractReport:
    """Check a Kubernetes plugin against what the plugin manager expects (see the module docstring).

    ``config`` is a config document (``{"plugins": {"myplugin": {...}}}``) the plugin is loaded with;
    ``tasks`` are tasks the plugin must build (spec documents, templates or TaskTemplate messages),
    ``bad_tasks`` tasks it must reject with a ``PluginError``; ``observations`` are objects as the cluster
    would report them (with a ``status``), given to ``get_task_phase`` with the first task that built.
    """
    checker = _Checker(entry)
    checker.run("entry", lambda: _check_entry(entry))
    if not isinstance(getattr(entry, "resource_to_watch", None), ResourceType) or not callable(
        getattr(entry, "load_plugin", None)
    ):
        # Nothing else can be checked without a watched type and a loader.
        return ContractReport(str(getattr(entry, "id", "")), tuple(checker.checks))
    clock = FakeClock()
    plugin: K8sPlugin | None = None
    setup_holder: list[Any] = []

    def load() -> str:
        nonlocal plugin
        setup = fake_plugin_setup(config, entries=[entry], pod_templates=pod_templates, clock=clock)
        setup_holder.append(setup)
        loaded = entry.load_plugin(setup)
        _require(
            isinstance(loaded, K8sPlugin),
            f"load_plugin returned {type(loaded).__name__}, which lacks the K8sPlugin methods "
            "(get_properties, build_identity_resource, build_resource, get_task_phase)",
        )
        plugin = loaded
        return f"loaded {type(loaded).__name__}"

    checker.run("load", load)
    if plugin is None:
        return ContractReport(str(getattr(entry, "id", "")), tuple(checker.checks))
    k8s_config = setup_holder[0].config.get(K8S_SECTION)
    p: K8sPlugin = plugin
    rtype: ResourceType = entry.resource_to_watch
    checker.run("properties", lambda: _check_properties(p))

    # The tasks: the check's own, then the author's (which must build), then the author's bad ones.
    declared: object = entry.registered_task_types
    task_types = (declared,) if isinstance(declared, str) else tuple(entry.registered_task_types)
    task_types = task_types or ("task",)
    cases: list[tuple[str, Callable[[], StaticTaskExecutionContext], bool]] = []
    for label, document, must_build in representative_tasks(task_types):
        cases.append((label, _context_factory(document), must_build))
    for i, task in enumerate(tasks):
        cases.append((f"task {i + 1}", _context_factory(task), True))

    metas: list[TaskExecutionMetadata] = []
    built: list[tuple[str, StaticTaskExecutionContext, KubeObject]] = []
    for label, make_context, must_build in cases:
        try:
            tctx = make_context()
        except Exception as e:
            checker.add(f"build-resource[{label}]", False, f"the task itself is malformed: {_describe(e)}")
            continue
        metas.append(tctx.metadata)
        obj = _check_build(checker, p, rtype, k8s_config, label, tctx, must_build)
        if obj is not None:
            built.append((label, tctx, obj))
            checker.run(
                f"deterministic[{label}]",
                functools.partial(_check_deterministic, p, rtype, k8s_config, make_context, obj),
            )

    checker.add(
        "builds-something",
        bool(built),
        f"built {len(built)} task(s)"
        if built
        else "no task was built: pass tasks=[...] with a task your plugin accepts",
    )
    checker.run("identity-resource", lambda: _check_identity(p, rtype, metas))

    for i, task in enumerate(bad_tasks):
        checker.run(f"rejects-bad-task[bad task {i + 1}]", functools.partial(_check_rejects, p, task))

    if not built:
        return ContractReport(entry.id, tuple(checker.checks))
    # Observations go with the first task the author gave that built, else the first that built.
    authored = [b for b in built if b[0].startswith("task ")]
    _, tctx, obj = authored[0] if authored else built[0]
    observed: list[tuple[str, Mapping[str, Any], bool]] = [("empty status", _as_first_seen(obj, clock), True)]
    observed += [(f"observation {i + 1}", o, False) for i, o in enumerate(observations)]
    for label, resource, fresh in observed:
        info = _check_phase(checker, p, tctx, resource, clock, label, fresh)
        if info is not None and info.phase is not Phase.RUNNING:
            checker.run(
                f"phase-version[{label}]",
                functools.partial(_check_phase_version, p, tctx, resource, info, clock),
            )
    return ContractReport(entry.id, tuple(checker.checks))


# -- the checks ---------------------------------------------------------------------------------------


def _check_entry(entry: K8sPluginEntry) -> str:
    _require(
        getattr(entry, "kind", None) == PluginKind.K8S,
        f"entry kind is {getattr(entry, 'kind', None)!r}, not k8s: use taskplug.k8s.K8sPluginEntry",
    )
    try:
        entry.validate()
    except PluginError as e:
        raise _Failed(f"entry does not validate: {e.message}") from e
    types: Any = entry.registered_task_types
    _require(
        not isinstance(types, str),
        f"registered_task_types is the string {types!r}; write a tuple: ({types!r},)",
    )
    _require(
        all(isinstance(t, str) and t.strip() == t and t for t in types),
        f"registered_task_types must be non-empty names without spaces, got {list(types)!r}",
    )
    rtype = entry.resource_to_watch
    _require(
        isinstance(rtype, ResourceType),
        f"resource_to_watch is {type(rtype).__name__}; use taskplug.k8s.ResourceType(apiVersion, kind, plural)",
    )
    _require(
        bool(rtype.api_version and rtype.kind and rtype.plural),
        f"resource_to_watch needs apiVersion, kind and plural, got {rtype}",
    )
    _require(
        rtype.plural == rtype.plural.lower(),
        f"resource_to_watch plural must be lower case, got {rtype.plural!r}",
    )
    _require(callable(entry.load_plugin), "load_plugin must be a callable taking a K8sPluginSetup")
    _require(
        all(isinstance(s, ConfigSection) for s in entry.config_sections),
        "config_sections must be taskplug.core.ConfigSection values",
    )
    message = f"[{entry.id}] handles {', '.join(types)}, watches {rtype.kind}.{rtype.api_version}"
    if entry.local_operator is not None:
        _require(callable(entry.local_operator), "local_operator must be a callable making an operator")
        operator = entry.local_operator()
        _require(
            callable(operator),
            f"local_operator() returned {type(operator).__name__}; an operator is called as "
            "operator(event, client)",
        )
        message += ", brings a local operator"
    return message


def _check_properties(plugin: K8sPlugin) -> str:
    properties = plugin.get_properties()
    _require(
        isinstance(properties, K8sPluginProperties),
        f"get_properties() returned {type(properties).__name__}, not K8sPluginProperties",
    )
    max_length = properties.generated_name_max_length
    if max_length is not None:
        _require(
            isinstance(max_length, int) and max_length >= 8,
            f"generated_name_max_length must be at least 8 (the plugin would fail to load), got {max_length!r}",
        )
    return "ok"


def _json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, allow_nan=False)


def _check_object(obj: Any, rtype: ResourceType, what: str) -> None:
    _require(isinstance(obj, dict), f"{what} returned {type(obj).__name__}, not a dict")
    try:
        _json(obj)
    except (TypeError, ValueError) as e:
        raise _Failed(f"{what} returned an object that is not plain JSON: {e}") from e
    _require(
        obj.get("apiVersion") == rtype.api_version,
        f"{what} gave apiVersion {obj.get('apiVersion')!r}, the entry watches {rtype.api_version!r}",
    )
    kind = obj.get("kind")
    _require(
        isinstance(kind, str) and kind.lower() == rtype.kind.lower(),
        f"{what} gave kind {kind!r}, the entry watches {rtype.kind!r}",
    )
    metadata = obj.get("metadata")
    _require(metadata is None or isinstance(metadata, dict), f"{what} gave metadata that is not a mapping")
    for key in ("labels", "annotations"):
        values = (metadata or {}).get(key)
        _require(
            values is None or (isinstance(values, dict) and all(isinstance(v, str) for v in values.values())),
            f"{what} gave metadata.{key} that is not a map of strings",
        )


def _check_build(
    checker: _Checker,
    plugin: K8sPlugin,
    rtype: ResourceType,
    k8s_config: K8sPluginConfig,
    label: str,
    tctx: StaticTaskExecutionContext,
    must_build: bool,
) -> KubeObject | None:
    """The object the plugin manager would create (``taskplug.k8s.build_object``), checked."""
    name = f"build-resource[{label}]"
    try:
        obj = build_object(plugin, tctx, k8s_config, watched=rtype)
    except PluginError as e:
        if must_build:
            checker.add(name, False, f"rejected a task it must build: {e}")
        else:
            checker.add(name, True, f"rejected with {type(e).__name__}: {e}")
        return None
    except Exception as e:
        checker.add(name, False, _why_unbuildable(plugin, rtype, tctx, e))
        return None
    try:
        _check_object(obj, rtype, "build_resource")
        _json(obj)
    except _Failed as e:
        checker.add(name, False, str(e))
        return None
    checker.add(name, True, f"built a {obj.get('kind')}")
    return obj


def _why_unbuildable(
    plugin: K8sPlugin, rtype: ResourceType, tctx: StaticTaskExecutionContext, error: Exception
) -> str:
    """Why ``build_object`` raised: the plugin's own ``build_resource``, or an object the manager cannot
    complete (no metadata mapping, labels that are not strings, ...)."""
    try:
        raw = plugin.build_resource(tctx)
    except Exception as e:
        return (
            f"raised {_describe(e)}; a task that cannot be built must raise "
            "taskplug.core.BadTaskSpecification (or another PluginError)"
        )
    try:
        _check_object(raw, rtype, "build_resource")
    except _Failed as e:
        return str(e)
    return f"the plugin manager cannot add name and metadata: {_describe(error)}"


def _context_factory(task: TaskLike) -> Callable[[], StaticTaskExecutionContext]:
    return lambda: fake_task_context(task)


def _check_deterministic(
    plugin: K8sPlugin,
    rtype: ResourceType,
    k8s_config: K8sPluginConfig,
    make_context: Callable[[], StaticTaskExecutionContext],
    first: KubeObject,
) -> str:
    tctx = make_context()
    template_before = tctx.task_reader.read().SerializeToString(deterministic=True)
    again = build_object(plugin, tctx, k8s_config, watched=rtype)
    _require(
        tctx.task_reader.read().SerializeToString(deterministic=True) == template_before,
        "build_resource changed the task template it was given",
    )
    _require(
        _json(again) == _json(first),
        "building the same task twice gave different objects (randomness, or the wall clock instead of "
        "the setup's clock?)",
    )
    return "same object twice"


def _check_identity(plugin: K8sPlugin, rtype: ResourceType, metas: Sequence[TaskExecutionMetadata]) -> str:
    _require(bool(metas), "no task context to build an identity resource for")
    identities = []
    for meta in metas:
        identity = plugin.build_identity_resource(meta)
        _check_object(identity, rtype, "build_identity_resource")
        extra = sorted(set(identity) - {"apiVersion", "kind", "metadata"})
        _require(
            not extra,
            f"build_identity_resource should give the type only (apiVersion, kind); it also gave {extra}",
        )
        identities.append(_json(identity))
    _require(len(set(identities)) == 1, "build_identity_resource gave different objects for different tasks")
    return f"{rtype.kind}.{rtype.api_version}"


def _check_rejects(plugin: K8sPlugin, task: TaskLike) -> str:
    try:
        tctx = fake_task_context(task)
    except Exception as e:
        raise _Failed(f"the bad task is not even a valid spec: {_describe(e)}") from e
    try:
        obj = plugin.build_resource(tctx)
    except PluginError as e:
        return f"rejected with {type(e).__name__}: {e}"
    except Exception as e:
        raise _Failed(
            f"raised {_describe(e)}; raise taskplug.core.BadTaskSpecification for a task that cannot be built"
        ) from e
    raise _Failed(f"built a {type(obj).__name__} for a task it should reject")


def _as_first_seen(obj: KubeObject, clock: FakeClock) -> KubeObject:
    """The created object as the API returns it right after create: uid and version set, no status yet."""
    seen = copy.deepcopy(obj)
    metadata = seen["metadata"]
    metadata.setdefault("uid", "00000000-0000-0000-0000-000000000001")
    metadata.setdefault("resourceVersion", "1")
    metadata.setdefault("creationTimestamp", clock.now().strftime("%Y-%m-%dT%H:%M:%SZ"))
    seen.pop("status", None)
    return seen


def _plugin_context(
    tctx: StaticTaskExecutionContext, state: PluginState, clock: FakeClock
) -> StaticPluginContext:
    return StaticPluginContext(
        tctx.metadata, tctx.task_reader, tctx.input_reader, tctx.output_writer, state, clock.now()
    )


def _check_phase(
    checker: _Checker,
    plugin: K8sPlugin,
    tctx: StaticTaskExecutionContext,
    resource: Mapping[str, Any],
    clock: FakeClock,
    label: str,
    fresh: bool,
) -> PhaseInfo | None:
    name = f"task-phase[{label}]"
    result: list[PhaseInfo] = []

    def check() -> str:
        info = plugin.get_task_phase(
            _plugin_context(tctx, PluginState(), clock), copy.deepcopy(dict(resource))
        )
        _require(isinstance(info, PhaseInfo), f"get_task_phase returned {type(info).__name__}, not PhaseInfo")
        _require(
            info.phase is not Phase.UNDEFINED,
            "get_task_phase returned Undefined; report Queued or Running for an object you do not "
            "understand yet",
        )
        if info.phase.is_failure:
            _require(
                info.err is not None and bool(info.err.code),
                f"a {info.phase} must carry an error with a code (use PhaseInfo.retryable_failure(code, "
                "message, ...) or another failure constructor)",
            )
        _require(isinstance(info.version, int) and info.version >= 0, f"bad phase version {info.version!r}")
        if fresh:
            _require(
                not info.phase.is_terminal,
                f"an object with no status yet was reported {info.phase}; it has not run yet",
            )
        result.append(info)
        detail = f" ({info.err.code})" if info.err is not None else f" ({info.reason})" if info.reason else ""
        return f"{info.phase} v{info.version}{detail}"

    checker.run(name, check)
    return result[0] if result else None


def _check_phase_version(
    plugin: K8sPlugin,
    tctx: StaticTaskExecutionContext,
    resource: Mapping[str, Any],
    info: PhaseInfo,
    clock: FakeClock,
) -> str:
    same = plugin.get_task_phase(
        _plugin_context(tctx, PluginState(info.phase, info.version, info.reason), clock),
        copy.deepcopy(dict(resource)),
    )
    _require(
        same.phase == info.phase and same.version == info.version,
        f"reported {same.phase} v{same.version} against its own last report ({info.phase} "
        f"v{info.version}, same reason); the version must only move when the reason changes",
    )
    stored_reason = f"{info.reason} (last round)"
    bumped = plugin.get_task_phase(
        _plugin_context(tctx, PluginState(info.phase, info.version, stored_reason), clock),
        copy.deepcopy(dict(resource)),
    )
    _require(
        bumped.phase == info.phase and bumped.version == info.version + 1,
        f"reported {bumped.phase} v{bumped.version} after {info.phase} v{info.version} with another "
        f"reason; expected v{info.version + 1}: pass the result through "
        "taskplug.k8s.maybe_update_phase_version(info, pctx.plugin_state)",
    )
    return f"{info.phase}: same reason keeps v{info.version}, new reason gives v{info.version + 1}"
