"""Label and field selectors, parsed once and matched against objects.

Follows k8s.io/apimachinery/pkg/labels/selector.go (equality- and set-based requirements:
``a=b``, ``a==b``, ``a!=b``, ``a in (x,y)``, ``a notin (x)``, ``a``, ``!a``; requirements AND-ed) and
fields/selector.go (``path=value``, ``path==value``, ``path!=value``).

Deviation: a real API server accepts only a few field paths per resource (``metadata.name``,
``metadata.namespace``, ``spec.nodeName``, ``status.phase``, ``regarding.kind``, …); here any dotted path
into the object is accepted, which is a superset.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from taskplug.localcluster._errors import bad_request

__all__ = ["FieldSelector", "LabelSelector", "field_value"]

_KEY_RE: Final = re.compile(
    r"^([a-z0-9A-Z]([-a-z0-9A-Z_.]*[a-z0-9A-Z])?/)?[a-z0-9A-Z]([-a-z0-9A-Z_.]*[a-z0-9A-Z])?$"
)
_VALUE_RE: Final = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_SET_RE: Final = re.compile(r"^(\S+)\s+(in|notin)\s*\((.*)\)$")


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside ``( … )``."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


@dataclass(frozen=True, slots=True)
class _Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!"
    values: frozenset[str]

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if self.op in ("=", "in"):
            return present and labels[self.key] in self.values
        # "!=" and "notin" match objects without the label too, as in Kubernetes.
        return not present or labels[self.key] not in self.values


def _check_key(key: str, text: str) -> str:
    if not _KEY_RE.match(key) or len(key.rpartition("/")[2]) > 63:
        raise bad_request(f"unable to parse requirement: invalid label key {key!r} in selector {text!r}")
    return key


def _check_value(value: str, text: str) -> str:
    if not _VALUE_RE.match(value) or len(value) > 63:
        raise bad_request(f"unable to parse requirement: invalid label value {value!r} in selector {text!r}")
    return value


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A parsed label selector; the empty selector matches everything."""

    requirements: tuple[_Requirement, ...]

    @classmethod
    def parse(cls, text: str | None) -> LabelSelector:
        if not text:
            return _EVERYTHING_LABELS
        reqs: list[_Requirement] = []
        for part in _split_top_level(text):
            set_match = _SET_RE.match(part)
            if set_match:
                key, op, listing = set_match.groups()
                values = frozenset(_check_value(v.strip(), text) for v in listing.split(",") if v.strip())
                reqs.append(_Requirement(_check_key(key, text), op, values))
            elif part.startswith("!"):
                reqs.append(_Requirement(_check_key(part[1:].strip(), text), "!", frozenset()))
            elif "!=" in part:
                key, _, value = part.partition("!=")
                reqs.append(
                    _Requirement(
                        _check_key(key.strip(), text), "!=", frozenset({_check_value(value.strip(), text)})
                    )
                )
            elif "=" in part:
                key, _, value = part.partition("==") if "==" in part else part.partition("=")
                reqs.append(
                    _Requirement(
                        _check_key(key.strip(), text), "=", frozenset({_check_value(value.strip(), text)})
                    )
                )
            else:
                reqs.append(_Requirement(_check_key(part, text), "exists", frozenset()))
        return cls(tuple(reqs))

    @property
    def empty(self) -> bool:
        return not self.requirements

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)


_EVERYTHING_LABELS: Final = LabelSelector(())


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """The value at a dotted path as the field selector compares it (missing → empty string)."""
    current: Any = obj
    for part in path.split("."):
        if not isinstance(current, Mapping):
            return ""
        current = current.get(part)
    if current is None:
        return ""
    if isinstance(current, bool):
        return "true" if current else "false"
    return str(current)


@dataclass(frozen=True, slots=True)
class FieldSelector:
    terms: tuple[tuple[str, bool, str], ...]  # (path, equal, value)

    @classmethod
    def parse(cls, text: str | None) -> FieldSelector:
        if not text:
            return _EVERYTHING_FIELDS
        terms: list[tuple[str, bool, str]] = []
        for part in _split_top_level(text):
            if "!=" in part:
                path, _, value = part.partition("!=")
                terms.append((path.strip(), False, value.strip()))
            elif "=" in part:
                path, _, value = part.partition("==") if "==" in part else part.partition("=")
                terms.append((path.strip(), True, value.strip()))
            else:
                raise bad_request(f"invalid selector: '{text}'; can't understand '{part}'")
        return cls(tuple(terms))

    @property
    def empty(self) -> bool:
        return not self.terms

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all((field_value(obj, path) == value) == equal for path, equal, value in self.terms)

    def pinned(self, path: str) -> str | None:
        """The value an equality term pins ``path`` to, if any (lets a lookup skip a scan)."""
        for term_path, equal, value in self.terms:
            if equal and term_path == path:
                return value
        return None


_EVERYTHING_FIELDS: Final = FieldSelector(())
