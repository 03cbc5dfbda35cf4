"""The settings node rounds follow: every node's (:class:`NodeSettings`), a root node's (:class:`RunSettings`) and
a map task's (:class:`ArrayNodeSettings`), read from the ``executor`` config section (``docs/config.md``).

Plain values, no rules: the step, the kinds and the scheduler all import them, so they know no node kind.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from taskplug.executor._catalog import Catalog

__all__ = ["ArrayNodeSettings", "CacheSettings", "NodeSettings", "ParallelismBehavior", "RunSettings"]


@dataclass(frozen=True, slots=True)
class NodeSettings:
    """The knobs every node's rounds follow (config ``executor`` and ``executor.array-node``; see
    ``docs/config.md``)."""

    resync_period: float = 10.0
    max_system_failures: int = 3  # node-config.max-node-retries-system-failures
    max_round_errors: int = 10  # rounds in a row a handler may fail to decide, or a cleanup fail
    default_max_attempts: int = 1  # node-config.default-max-attempts
    ignore_retry_cause: bool = False  # node-config.ignore-retry-cause


class ParallelismBehavior(enum.StrEnum):
    """``array-node-config.default-parallelism-behavior``."""

    UNLIMITED = "unlimited"
    WORKFLOW = "workflow"
    HYBRID = "hybrid"


@dataclass(frozen=True, slots=True)
class ArrayNodeSettings:
    """The executor's ArrayNode knobs (config ``executor.array-node``; Flyte's keys named there)."""

    parallelism_behavior: ParallelismBehavior = ParallelismBehavior.UNLIMITED
    max_parallelism: int = 25  # the workflow's (FlyteAdmin maxParallelism); 0 = no limit
    workers: int = 8  # node-execution-worker-count: element plugin calls at once within a round


@dataclass(frozen=True, slots=True)
class CacheSettings:
    """The catalog an executor keeps task results in (None: caching off) and the serialized-cache
    reservations' timing (config ``executor.cache``)."""

    catalog: Catalog | None = None
    heartbeat: float = 10.0  # seconds between a holder's extensions; a waiter re-checks this often
    grace_multiplier: int = 3  # a reservation expires this many heartbeats after its last extension

    @property
    def expiry(self) -> float:
        """Seconds a reservation lasts after its last extension."""
        return self.heartbeat * self.grace_multiplier


@dataclass(frozen=True, slots=True)
class RunSettings:
    """The executor settings a root node's rounds use beyond the node step's."""

    data_root: str
    resync_period: float
    max_plugin_phase_versions: int
    array: ArrayNodeSettings
    cache: CacheSettings = field(default_factory=CacheSettings)
