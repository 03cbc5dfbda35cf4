"""Base pod templates: the store, loading PodTemplate manifests, and Flyte's merge rules.

Follows flyteplugins/go/tasks/pluginmachinery/flytek8s/{pod_template_store,pod_helper}.go. Flyte merges with
mergo (``WithOverride`` + ``WithAppendSlice``); on JSON dicts that is :func:`deep_merge`: a non-empty value
of the overlay replaces the base, mappings merge key by key, lists are appended (base items first).

Container templates are matched by name: ``default`` is the base of every container, ``primary`` of the
primary container (``default-init`` / ``primary-init`` for init containers), and any other template
container is merged into the task container of the same name. Containers come from the task only: template
containers that match nothing are dropped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson
import yaml

from taskplug.core import ConfigError

__all__ = [
    "DEFAULT_CONTAINER_TEMPLATE",
    "DEFAULT_INIT_CONTAINER_TEMPLATE",
    "PRIMARY_CONTAINER_TEMPLATE",
    "PRIMARY_INIT_CONTAINER_TEMPLATE",
    "PodTemplateStore",
    "deep_copy",
    "deep_merge",
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
        if isinstance(current, dict) and isinstance(value, Mapping):
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
) -> list[KubeObject]:
    by_name = {t.get("name"): t for t in templates}
    default_template = by_name.get(default_name)
    primary_template = by_name.get(primary_name)
    merged_list: list[KubeObject] = []
    for container in containers:
        name = container.get("name")
        layers = [default_template] if default_template is not None else []
        if name == primary and primary_template is not None:
            layers.append(primary_template)
        if name != primary and name != default_name and name in by_name:
            layers.append(by_name[name])
        if not layers:
            merged_list.append(container)
            continue
        # Each template container may serve several task containers, so every merge starts from a copy.
        merged: KubeObject = deep_copy(layers[0])
        for layer in layers[1:]:
            deep_merge(merged, deep_copy(layer))
        merged_list.append(deep_merge(merged, container))
    return merged_list


def merge_base_pod_spec_onto_template(
    template_spec: Mapping[str, Any] | None,
    base_spec: Mapping[str, Any] | None,
    primary: str,
    primary_init: str = "",
) -> KubeObject:
    """Flyte's MergeBasePodSpecOntoTemplate: the task's pod spec (base) merged over a template's spec.

    Both arguments are consumed: the result shares their values (the pipeline passes fresh copies).
    """
    if template_spec is None or base_spec is None:
        raise ValueError("neither the templatePodSpec or the basePodSpec can be nil")
    template_containers = list(template_spec.get("containers") or [])
    template_inits = list(template_spec.get("initContainers") or [])
    merged: KubeObject = {k: v for k, v in template_spec.items() if k not in ("containers", "initContainers")}
    deep_merge(merged, {k: v for k, v in base_spec.items() if k not in ("containers", "initContainers")})
    merged["containers"] = _merge_containers(
        list(base_spec.get("containers") or []),
        template_containers,
        primary,
        DEFAULT_CONTAINER_TEMPLATE,
        PRIMARY_CONTAINER_TEMPLATE,
    )
    inits = _merge_containers(
        list(base_spec.get("initContainers") or []),
        template_inits,
        primary_init,
        DEFAULT_INIT_CONTAINER_TEMPLATE,
        PRIMARY_INIT_CONTAINER_TEMPLATE,
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


class PodTemplateStore:
    """PodTemplates by name and namespace; a lookup falls back to the store's default namespace.

    ``load_or_default`` returns a deep copy, so callers may change what they get.
    """

    def __init__(self, default_namespace: str = "flyte") -> None:
        self.default_namespace = default_namespace
        self._templates: dict[str, dict[str, KubeObject]] = {}
        self._frozen: dict[tuple[str, str], bytes] = {}

    def store(self, template: Mapping[str, Any]) -> None:
        meta = template.get("metadata") or {}
        name = meta.get("name")
        if not name:
            raise ConfigError("metadata.name", "a PodTemplate needs a name")
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
        """Load PodTemplate manifests (YAML or JSON, multi-document, ``List`` kinds) from files or folders."""
        store = cls(default_namespace)
        for path in paths:
            p = Path(path)
            files = (
                sorted(f for f in p.rglob("*") if f.suffix in (".yaml", ".yml", ".json"))
                if p.is_dir()
                else [p]
            )
            if p.is_dir() and not files:
                raise ConfigError(str(p), "no .yaml, .yml or .json PodTemplate manifests in this folder")
            for file in files:
                store._load_file(file)
        return store

    def _load_file(self, file: Path) -> None:
        try:
            documents = list(yaml.safe_load_all(file.read_text()))
        except OSError as e:
            raise ConfigError(str(file), f"cannot read pod templates: {e.strerror}") from e
        except yaml.YAMLError as e:
            raise ConfigError(str(file), f"not valid YAML: {e}") from e
        for index, document in enumerate(documents):
            if document is None:
                continue
            items = (
                document.get("items", [])
                if isinstance(document, dict) and document.get("kind") == "List"
                else [document]
            )
            for item in items:
                where = f"{file}[{index}]"
                if not isinstance(item, dict) or item.get("kind") != "PodTemplate":
                    kind = item.get("kind") if isinstance(item, dict) else type(item).__name__
                    raise ConfigError(where, f"expected a PodTemplate manifest, got kind {kind!r}")
                template = item.get("template")
                if not isinstance(template, dict) or not isinstance(template.get("spec", {}), dict):
                    raise ConfigError(
                        f"{where}.template", "a PodTemplate needs a template with a spec mapping"
                    )
                self.store(item)
