"""Kubernetes events about the objects plugins created, turned into a task's additional reasons.

Follows flytepropeller/pkg/controller/nodes/task/k8s/event_watcher.go: an informer on
``events.k8s.io/v1`` Events, indexed by the object the event is *regarding*; the plugin manager asks for
the events created after the last one it reported.

Deviation: Flyte runs one watcher per kind, with the field selector ``regarding.kind={Kind}``. The
:class:`~taskplug.k8s.KubeClient` contract has no field selectors, so one watcher (one Event informer)
serves every kind and indexes by ``(kind, namespace, name)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from taskplug.core import Clock
from taskplug.engine.k8s._informer import Informer, InformerFactory, object_key
from taskplug.k8s import EVENT

__all__ = ["EventInfo", "EventWatcher"]

KubeObject = dict[str, Any]
_Regarding = tuple[str, str, str]  # kind, namespace, name


@dataclass(frozen=True, slots=True)
class EventInfo:
    """One Kubernetes event about an object a plugin created (Flyte's ``EventInfo`` in event_watcher.go): its
    reason and note, when the API created it, and when the watcher saw it (the tie-break for ordering). The
    plugin manager reports the notes as the task's additional reasons."""

    reason: str
    note: str
    created_at: datetime
    recorded_at: datetime


def _parse_time(text: Any) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


class EventWatcher:
    """Events by the object they regard; fed by an Event informer."""

    _EXTENSION_KEY = "taskplug.k8s.event-watcher"

    def __init__(self, informer: Informer, *, clock: Clock) -> None:
        self.clock = clock
        self.informer = informer
        self._by_object: dict[_Regarding, dict[tuple[str, str], EventInfo]] = {}
        informer.add_callbacks(on_add=self._on_add, on_delete=self._on_delete)

    @classmethod
    def attach(cls, informers: InformerFactory) -> EventWatcher:
        """The one watcher of ``informers`` (created on first use)."""
        watcher = informers.extensions.get(cls._EXTENSION_KEY)
        if watcher is None:
            watcher = cls(informers.informer(EVENT), clock=informers.clock)
            informers.extensions[cls._EXTENSION_KEY] = watcher
        assert isinstance(watcher, EventWatcher)
        return watcher

    @staticmethod
    def _regarding(event: KubeObject) -> _Regarding | None:
        regarding = event.get("regarding")
        if not isinstance(regarding, dict):
            return None
        return (
            str(regarding.get("kind") or ""),
            str(regarding.get("namespace") or ""),
            str(regarding.get("name") or ""),
        )

    def _on_add(self, event: KubeObject) -> None:
        regarding = self._regarding(event)
        created = _parse_time((event.get("metadata") or {}).get("creationTimestamp"))
        if regarding is None or created is None:
            return
        info = EventInfo(
            reason=str(event.get("reason") or ""),
            note=str(event.get("note") or ""),
            created_at=created,
            recorded_at=self.clock.now(),
        )
        self._by_object.setdefault(regarding, {})[object_key(event)] = info

    def _on_delete(self, event: KubeObject) -> None:
        regarding = self._regarding(event)
        if regarding is None:
            return
        events = self._by_object.get(regarding)
        if events is None:
            return
        events.pop(object_key(event), None)
        if not events:
            del self._by_object[regarding]

    def list(self, kind: str, namespace: str, name: str, after: datetime | None = None) -> list[EventInfo]:
        """Events regarding the object created strictly after ``after``, oldest first."""
        events = self._by_object.get((kind, namespace, name))
        if not events:
            return []
        selected = [e for e in events.values() if after is None or e.created_at > after]
        selected.sort(key=lambda e: (e.created_at, e.recorded_at))
        return selected
