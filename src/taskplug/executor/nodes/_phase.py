"""A node's phase and the record of an attempt's decided end (flytepropeller's ``v1alpha1.NodePhase``).

Every node kind — a single task, a map task's element, later a workflow's nodes — moves through these phases;
the task phase the plugin reports is a separate, inner phase (:class:`taskplug.core.Phase`).
"""

from __future__ import annotations

import enum
from typing import Final

__all__ = ["NodePhase"]


class NodePhase(enum.IntEnum):
    """``v1alpha1.NodePhase``: the values propeller stores in a node's status (and in ``SubNodePhases``)."""

    NOT_YET_STARTED = 0
    QUEUED = 1
    RUNNING = 2
    FAILING = 3
    SUCCEEDING = 4
    SUCCEEDED = 5
    FAILED = 6
    SKIPPED = 7
    RETRYABLE_FAILURE = 8
    TIMING_OUT = 9
    TIMED_OUT = 10
    DYNAMIC_RUNNING = 11
    RECOVERED = 12
    # Deviation: Flyte leaves an aborted element's phase as it was (Abort does not update SubNodePhases);
    # taskplug records that it was aborted, so `-o json` and the live view do not show it running forever.
    ABORTED = 13

    def __str__(self) -> str:
        return "".join(part.capitalize() for part in self.name.split("_"))

    @property
    def is_terminal(self) -> bool:
        """``isTerminalNodePhase`` (plus taskplug's Aborted)."""
        return self in _TERMINAL


_TERMINAL: Final = frozenset(
    {
        NodePhase.SUCCEEDED,
        NodePhase.FAILED,
        NodePhase.TIMED_OUT,
        NodePhase.SKIPPED,
        NodePhase.RECOVERED,
        NodePhase.ABORTED,
    }
)
