"""The three patch formats of a PATCH request, applied to plain dicts.

* JSON merge patch: RFC 7386 (``application/merge-patch+json``) — maps merge recursively, ``null``
  removes a key, anything else (lists included) replaces.
* JSON patch: RFC 6902 (``application/json-patch+json``) — add, remove, replace, move, copy, test.
* Strategic merge patch (``application/strategic-merge-patch+json``), following
  k8s.io/apimachinery/pkg/util/strategicpatch for the lists that matter to pods: lists of objects with a
  merge key (``containers`` by ``name``, ``tolerations`` replaced, ``conditions`` by ``type``, …) merge
  item by item, ``$patch: delete`` removes an item, ``$patch: replace`` replaces a whole map.

Deviation: in a real API server ``metadata.finalizers`` has patch strategy "merge" (the lists are united,
``$deleteFromPrimitiveList/finalizers`` removes entries). Here a strategic patch replaces the list, like a
merge patch, so ``{"metadata": {"finalizers": []}}`` clears finalizers with either patch type;
``$deleteFromPrimitiveList/<field>`` is still honoured.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

from taskplug.k8s import KubeApiError
from taskplug.localcluster._errors import bad_request

__all__ = ["PatchError", "apply_patch", "json_patch", "merge_patch", "strategic_merge_patch"]

# List fields merged by key in a strategic merge patch (from the Go struct tags `patchMergeKey`).
_MERGE_KEYS: Final = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "conditions": "type",
    "containerStatuses": "name",
    "initContainerStatuses": "name",
    "ephemeralContainerStatuses": "name",
    "ownerReferences": "uid",
    "topologySpreadConstraints": "topologyKey",
}


class PatchError(KubeApiError):
    """A patch that cannot be applied (bad path, failed ``test``): 422 like the API server."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386. Returns a new value; ``target`` is not modified."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result: dict[str, Any] = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if not k.startswith("$")}
    if patch.get("$patch") == "delete":
        return None
    result: dict[str, Any] = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.partition("/")[2]
            if not isinstance(value, list):
                raise bad_request(f"the body of the request was in an unknown format: {key} must be a list")
            current = result.get(field)
            result[field] = [v for v in current if v not in value] if isinstance(current, list) else []
            continue
        if key.startswith("$"):
            continue  # $setElementOrder, $retainKeys: ordering hints, not content
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list) and key in _MERGE_KEYS and isinstance(result.get(key), list):
            result[key] = _merge_keyed_list(result[key], value, _MERGE_KEYS[key])
        else:
            merged = strategic_merge_patch(result.get(key), value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
    return result


def _merge_key(item: Any, merge_key: str) -> Any:
    """The item's merge key when it has a usable one (a scalar), else None: such items are appended."""
    if not isinstance(item, Mapping):
        return None
    key = item.get(merge_key)
    return key if isinstance(key, str | int | float | bool) else None


def _merge_keyed_list(current: list[Any], patch: list[Any], merge_key: str) -> list[Any]:
    result = list(current)
    index = {key: i for i, item in enumerate(result) if (key := _merge_key(item, merge_key)) is not None}
    deleted: set[Any] = set()
    for item in patch:
        key = _merge_key(item, merge_key)
        if key is None:
            result.append(copy.deepcopy(item))
            continue
        if item.get("$patch") == "delete":
            deleted.add(key)
        elif key in index:
            result[index[key]] = strategic_merge_patch(result[index[key]], item)
        else:
            index[key] = len(result)
            result.append(strategic_merge_patch({}, item))
    return [item for item in result if _merge_key(item, merge_key) not in deleted]


def _invalid(message: str) -> PatchError:
    return PatchError(422, "Invalid", message)


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise _invalid(
            f'the server rejected our request due to an error in our request: invalid JSON pointer "{path}"'
        )
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str], path: str) -> Any:
    current = doc
    for part in parts[:-1]:
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            raise _invalid(
                f"the server rejected our request due to an error in our request: "
                f"jsonpatch path {path!r} does not exist"
            )
    return current


def _get(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        return doc
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent[int(last)]
    raise _invalid(
        f"the server rejected our request due to an error in our request: jsonpatch path {path!r} does not exist"
    )


def _remove(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent.pop(int(last))
    raise _invalid(
        f"the server rejected our request due to an error in our request: "
        f"jsonpatch remove operation does not apply: doc is missing path: {path}"
    )


def _add(doc: Any, path: str, value: Any, *, replace: bool = False) -> Any:
    parts = _pointer(path)
    if not parts:
        return value
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise _invalid(
                f"the server rejected our request due to an error in our request: "
                f"jsonpatch replace operation does not apply: doc is missing key: {path}"
            )
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-" and not replace:
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent) - (1 if replace else 0):
            if replace:
                parent[int(last)] = value
            else:
                parent.insert(int(last), value)
        else:
            raise _invalid(
                f"the server rejected our request due to an error in our request: "
                f"jsonpatch index out of range: {path}"
            )
    else:
        raise _invalid(
            f"the server rejected our request due to an error in our request: "
            f"jsonpatch path {path!r} does not exist"
        )
    return doc


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902. Returns a new document; ``target`` is not modified."""
    if not isinstance(operations, list):
        raise bad_request("the body of the request was in an unknown format: a JSON patch must be a list")
    doc = copy.deepcopy(target)
    for op in operations:
        if (
            not isinstance(op, Mapping)
            or not isinstance(op.get("op"), str)
            or not isinstance(op.get("path"), str)
        ):
            raise _invalid(
                f"the server rejected our request due to an error in our request: bad operation {op!r}"
            )
        if op["op"] in ("move", "copy") and not isinstance(op.get("from"), str):
            raise _invalid(
                f"the server rejected our request due to an error in our request: "
                f"{op['op']} operation missing from: {op!r}"
            )
        kind, path = op["op"], op["path"]
        if kind == "add":
            doc = _add(doc, path, copy.deepcopy(op.get("value")))
        elif kind == "remove":
            _remove(doc, path)
        elif kind == "replace":
            doc = _add(doc, path, copy.deepcopy(op.get("value")), replace=True)
        elif kind == "move":
            doc = _add(doc, path, _remove(doc, op["from"]))
        elif kind == "copy":
            doc = _add(doc, path, copy.deepcopy(_get(doc, op["from"])))
        elif kind == "test":
            if _get(doc, path) != op.get("value"):
                raise _invalid(
                    f"the server rejected our request due to an error in our request: "
                    f"testing value {path} failed"
                )
        else:
            raise _invalid(
                f"the server rejected our request due to an error in our request: Unexpected kind: {kind}"
            )
    return doc


def apply_patch(target: dict[str, Any], patch: Any, patch_type: str) -> Any:
    """``target`` patched by a ``"merge"``, ``"strategic"`` or ``"json"`` patch (a new value)."""
    if patch_type == "json":
        return json_patch(target, patch)
    if not isinstance(patch, Mapping):
        raise bad_request("the body of the request was in an unknown format: a merge patch must be an object")
    if patch_type == "strategic":
        return strategic_merge_patch(target, patch)
    if patch_type == "merge":
        return merge_patch(target, patch)
    raise bad_request(f"unknown patch type {patch_type!r}")
