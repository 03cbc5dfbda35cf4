"""Base pod templates: the store, loading PodTemplate manifests, and Flyte's merge rules.

Follows flyteplugins/go/tasks/pluginmachinery/flytek8s/{pod_template_store,pod_helper}.go. Flyte merges with
mergo (``WithOverride`` + ``WithAppendSlice``); on JSON dicts that is :func:`deep_merge`: a non-empty value
of the overlay replaces the base, mappings merge key by key, lists are appended (base items first).

Container templates are matched by name: ``default`` is the base of every container, ``primary`` of the
primary container (``default-init`` / ``primary-init`` for init containers), and any other template
container is merged into the task container of the same name. Containers come from the task only: template
containers that match nothing are dropped.

Flyte's templates come from the cluster through an informer, already decoded into ``v1.PodTemplate``; here they
come from files, so :meth:`PodTemplateStore.from_paths` reads each through the bounded document loader
(``taskplug.core.load_documents``: multi-document YAML with a size cap, strict UTF-8 and bounded aliases and
nesting) and checks each manifest against a
model of the fields the merge reads and the pod carries (:class:`PodTemplateManifest`): a container without
a name, ``containers`` that is not a list, or an ``env`` that is a string is an error naming the file and the
field, not a template silently ignored or a traceback.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from taskplug.core import ConfigError, load_documents
from taskplug.k8s._field_errors import first_error
from taskplug.k8s._field_errors import json_type as _json_type
from taskplug.k8s._pod_spec_model import TemplatePodSpecModel

__all__ = [
    "DEFAULT_CONTAINER_TEMPLATE",
    "DEFAULT_INIT_CONTAINER_TEMPLATE",
    "PRIMARY_CONTAINER_TEMPLATE",
    "PRIMARY_INIT_CONTAINER_TEMPLATE",
    "PodTemplateManifest",
    "PodTemplateStore",
    "check_pod_template",
    "deep_copy",
    "deep_merge",
    "load_pod_template_file",
    "merge_base_pod_spec_onto_template",
    "merge_overlay_pod_spec_onto_base",
]

DEFAULT_CONTAINER_TEMPLATE = "default"
DEFAULT_INIT_CONTAINER_TEMPLATE = "default-init"
PRIMARY_CONTAINER_TEMPLATE = "primary"
PRIMARY_INIT_CONTAINER_TEMPLATE = "primary-init"

KubeObject = dict[str, Any]


def deep_copy(value: Any) -> Any:
    """A fast deep copy of JSON data (an orjson round trip is several times faster than copy.deepcopy)."""
    return orjson.loads(orjson.dumps(value))


def deep_merge(base: dict[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    """mergo.Merge(base, overlay, WithOverride, WithAppendSlice) on JSON data, in place; returns ``base``.

    Empty overlay values (None, "", 0, false, [], {}) never override, as in mergo. The result may share
    nested values with ``overlay``: pass a copy when ``overlay`` is used again afterwards.
    """
    for key, value in overlay.items():
        if not value:
            continue
        current = base.get(key)
        if current is None:  # (the common case: a key the base does not have)
            base[key] = value
        elif isinstance(current, dict) and isinstance(value, (dict, Mapping)):
            deep_merge(current, value)
        elif isinstance(current, list) and isinstance(value, list):
            base[key] = current + value
        else:
            base[key] = value
    return base


def _merge_containers(
    containers: list[KubeObject],
    templates: list[KubeObject],
    primary: str,
    default_name: str,
    primary_name: str,
    consume: bool,
) -> list[KubeObject]:
    if not templates:
        return list(containers)
    by_name = {t.get("name"): t for t in templates}
    default_template = by_name.get(default_name)
    primary_template = by_name.get(primary_name)
    plan: list[tuple[KubeObject, list[KubeObject]]] = []
    uses: dict[int, int] = {}  # how many merges each template container is still to serve, by id
    for container in containers:
        name = container.get("name")
        layers = [default_template] if default_template is not None else []
        if name == primary and primary_template is not None:
            layers.append(primary_template)
        if name != primary and name != default_name and name in by_name:
            layers.append(by_name[name])
        for layer in layers:
            uses[id(layer)] = uses.get(id(layer), 0) + 1
        plan.append((container, layers))

    merged_list: list[KubeObject] = []
    for container, layers in plan:
        merged: KubeObject | None = None
        for layer in layers:
            # A merge changes (and shares) what it is given: each merge gets a copy, except that a consumed
            # template's container goes into its last merge as it is.
            left = uses[id(layer)] = uses[id(layer)] - 1
            part = layer if consume and left == 0 else deep_copy(layer)
            merged = part if merged is None else deep_merge(merged, part)
        merged_list.append(container if merged is None else deep_merge(merged, container))
    return merged_list


def merge_base_pod_spec_onto_template(
    template_spec: Mapping[str, Any] | None,
    base_spec: Mapping[str, Any] | None,
    primary: str,
    primary_init: str = "",
    *,
    consume_template_containers: bool = False,
) -> KubeObject:
    """Flyte's MergeBasePodSpecOntoTemplate: the task's pod spec (base) merged over a template's spec.

    Both arguments are consumed: the result shares their values (the pipeline passes fresh copies). The
    template's containers are copied into each merge, and stay as they were, unless
    ``consume_template_containers``: then each goes into the result itself at its last (often only) use.
    """
    if template_spec is None or base_spec is None:
        raise ValueError("neither the templatePodSpec or the basePodSpec can be nil")
    template_containers = list(template_spec.get("containers") or [])
    template_inits = list(template_spec.get("initContainers") or [])
    merged: KubeObject = dict(template_spec)
    merged.pop("containers", None)
    merged.pop("initContainers", None)
    base_fields = dict(base_spec)
    base_fields.pop("containers", None)
    base_fields.pop("initContainers", None)
    deep_merge(merged, base_fields)
    merged["containers"] = _merge_containers(
        list(base_spec.get("containers") or []),
        template_containers,
        primary,
        DEFAULT_CONTAINER_TEMPLATE,
        PRIMARY_CONTAINER_TEMPLATE,
        consume_template_containers,
    )
    inits = _merge_containers(
        list(base_spec.get("initContainers") or []),
        template_inits,
        primary_init,
        DEFAULT_INIT_CONTAINER_TEMPLATE,
        PRIMARY_INIT_CONTAINER_TEMPLATE,
        consume_template_containers,
    )
    if inits:
        merged["initContainers"] = inits
    else:
        merged.pop("initContainers", None)
    return merged


def merge_overlay_pod_spec_onto_base(base: Mapping[str, Any], overlay: Mapping[str, Any]) -> KubeObject:
    """Flyte's MergeOverlayPodSpecOntoBase (Spark driver/executor pods): the overlay wins, lists append,
    containers are the base's with same-named overlay containers merged in (unmatched overlay ones dropped)."""
    merged: KubeObject = deep_copy(
        {k: v for k, v in base.items() if k not in ("containers", "initContainers")}
    )
    deep_merge(
        merged, deep_copy({k: v for k, v in overlay.items() if k not in ("containers", "initContainers")})
    )
    for key in ("containers", "initContainers"):
        overlay_by_name = {c.get("name"): c for c in overlay.get(key) or []}
        out = []
        for container in base.get(key) or []:
            copy = deep_copy(container)
            if container.get("name") in overlay_by_name:
                deep_merge(copy, deep_copy(overlay_by_name[container.get("name")]))
            out.append(copy)
        if out:
            merged[key] = out
    return merged


# -- the manifest ----------------------------------------------------------------------------------------


class _Strict(BaseModel):
    # Unknown fields pass through untouched (the pod carries them); the fields below must have their type.
    # defer_build: the validators are built on first use, not when a command imports the module.
    model_config = ConfigDict(extra="ignore", strict=True, frozen=True, defer_build=True)


class _TemplateMeta(_Strict):
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class _Template(_Strict):
    metadata: _TemplateMeta | None = None
    spec: TemplatePodSpecModel | None = None


class _Meta(_Strict):
    name: str = Field(min_length=1)
    namespace: str | None = None


class PodTemplateManifest(_Strict):
    """What a PodTemplate manifest must hold: a name, and a template whose fields the merge reads (and the
    pod then carries) of the right types; any other field is kept as written."""

    metadata: _Meta
    template: _Template


def check_pod_template(manifest: Any, *, from_file: bool = False) -> None:
    """Raise ConfigError naming the field (``template.spec.containers[1].name``) of a malformed manifest.

    A manifest read from a file must say ``kind: PodTemplate``; one handed to the store in code may leave
    it out (as a typed ``v1.PodTemplate`` from Flyte's informer does).
    """
    if not isinstance(manifest, Mapping):
        raise ConfigError("", f"expected a PodTemplate manifest, got {_json_type(manifest)}")
    kind = manifest.get("kind")
    if from_file and kind != "PodTemplate":
        raise ConfigError("kind", f"expected a PodTemplate manifest, got kind {kind!r}")
    try:
        PodTemplateManifest.model_validate(dict(manifest))
    except ValidationError as e:
        raise ConfigError(*first_error(e)) from None


# -- reading files ---------------------------------------------------------------------------------------


def load_pod_template_file(file: Path) -> list[KubeObject]:
    """The PodTemplate manifests of one file (YAML or JSON, multi-document, ``List`` kinds), each checked;
    an error names the file, the document and the field."""
    manifests: list[KubeObject] = []
    for index, document in enumerate(load_documents(file, what="pod templates")):
        if document is None:
            continue
        where = f"{file}[{index}]"
        is_list = isinstance(document, dict) and document.get("kind") == "List"
        items: Any = document.get("items") if is_list else [document]
        if not isinstance(items, list):
            raise ConfigError(f"{where}.items", "a List needs a list of items")
        for position, item in enumerate(items):
            at = f"{where}.items[{position}]" if is_list else where
            try:
                check_pod_template(item, from_file=True)
            except ConfigError as e:
                raise ConfigError(f"{at}.{e.path}" if e.path else at, e.reason) from None
            manifests.append(item)
    return manifests


class PodTemplateStore:
    """PodTemplates by name and namespace; a lookup falls back to the store's default namespace.

    ``load_or_default`` returns a deep copy, so callers may change what they get.
    """

    def __init__(self, default_namespace: str = "flyte") -> None:
        self.default_namespace = default_namespace
        self._templates: dict[str, dict[str, KubeObject]] = {}
        self._frozen: dict[tuple[str, str], bytes] = {}

    def store(self, template: Mapping[str, Any]) -> None:
        """Add or replace a PodTemplate; raise ConfigError naming the field of a malformed one."""
        check_pod_template(template)
        meta = template["metadata"]
        name = meta["name"]
        namespace = meta.get("namespace") or self.default_namespace
        self._templates.setdefault(name, {})[namespace] = dict(template)
        self._frozen[(name, namespace)] = orjson.dumps(template)

    def delete(self, name: str, namespace: str) -> None:
        self._templates.get(name, {}).pop(namespace, None)
        self._frozen.pop((name, namespace), None)

    def load_or_default(self, namespace: str, name: str) -> KubeObject | None:
        if not name:
            return None
        frozen = self._frozen.get((name, namespace)) or self._frozen.get((name, self.default_namespace))
        return orjson.loads(frozen) if frozen is not None else None

    def __len__(self) -> int:
        return len(self._frozen)

    def names(self) -> list[tuple[str, str]]:
        return sorted(self._frozen)

    @classmethod
    def from_paths(cls, paths: Iterable[str | Path], default_namespace: str = "flyte") -> PodTemplateStore:
        """Load PodTemplate manifests (YAML or JSON, multi-document, ``List`` kinds) from files or folders.

        A folder without manifests adds none, as a cluster without PodTemplates has none: a task naming one
        then fails as Flyte's does (``PodTemplate 'x' does not exist``). A path that does not exist is an
        error.
        """
        store = cls(default_namespace)
        for path in paths:
            p = Path(path)
            if p.is_dir():
                files = sorted(
                    f for f in p.rglob("*") if f.suffix in (".yaml", ".yml", ".json") and f.is_file()
                )
            else:
                files = [p]
            for file in files:
                for manifest in load_pod_template_file(file):
                    store.store(manifest)
        return store
