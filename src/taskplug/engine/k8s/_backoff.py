"""Resource-aware back-off for object creation under namespace quotas.

Follows flytepropeller/pkg/controller/nodes/task/backoff/{controller,handler,safe_resourcelist}.go.

When a create is refused for quota, time-based back-off alone would block *every* later create for the
same key. Flyte also remembers, per resource, the smallest request that was refused (the *ceiling*): while
the back-off window is open, a request strictly below every ceiling is still tried, a larger one is refused
locally without calling the API. A success resets the window and the ceilings.

All arithmetic is synchronous and pure over the injected clock; only :meth:`handle` awaits (the operation).
In asyncio there are no concurrent writers inside one step, so the Go atomics become plain fields.
"""

from __future__ import annotations

import math
import re
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, timedelta
from typing import Final, TypeVar

from taskplug.core import Clock, ErrorCode, PluginError, Quantity, QuantityError
from taskplug.k8s import is_forbidden, is_server_timeout, is_too_many_requests

__all__ = [
    "LIMITED_LIMITS_RE",
    "LIMITED_REQUESTS_RE",
    "REQUESTED_LIMITS_RE",
    "REQUESTED_REQUESTS_RE",
    "BackOffController",
    "BackOffError",
    "ComputeResourceAwareBackOffHandler",
    "ComputeResourceCeilings",
    "SimpleBackOffBlocker",
    "get_compute_resource_and_quantity",
    "is_back_off_error",
    "is_etcd_error",
    "is_resource_quota_exceeded",
    "is_resource_requests_eligible",
]

T = TypeVar("T")

# Flyte's expressions, kept byte for byte: the "." after limits/requests is a wildcard, and neither values
# with a "." (1.5Gi) nor resource names with "." or "/" (nvidia.com/gpu) are captured in full.
LIMITED_LIMITS_RE: Final = re.compile(r"limited: (limits.[a-zA-Z]+=[a-zA-Z0-9]+[,]*)+")
LIMITED_REQUESTS_RE: Final = re.compile(r"limited: (requests.[a-zA-Z]+=[a-zA-Z0-9]+[,]*)+")
REQUESTED_LIMITS_RE: Final = re.compile(r"requested: (limits.[a-zA-Z]+=[a-zA-Z0-9]+[,]*)+")
REQUESTED_REQUESTS_RE: Final = re.compile(r"requested: (requests.[a-zA-Z]+=[a-zA-Z0-9]+[,]*)+")

_INFINITY: Final = Quantity("1Ei")  # Flyte's stand-in for "no ceiling"


class BackOffError(PluginError):
    """An operation was refused (or blocked) for quota or API overload; code ``BackOffError``."""

    def __init__(self, message: str, *, cause: BaseException | None = None) -> None:
        super().__init__(ErrorCode.BACK_OFF_ERROR, message, cause=cause)


def is_resource_quota_exceeded(err: BaseException) -> bool:
    """Forbidden, and the error's text (including what it wraps) says ``exceeded quota``."""
    return is_forbidden(err) and "exceeded quota" in str(err)


def is_etcd_error(err: BaseException) -> bool:
    return is_forbidden(err) and "etcdserver:" in str(err)


def is_back_off_error(err: BaseException) -> bool:
    """The errors back-off is for: quota exceeded, 429, server timeout, or an etcd error behind a 403."""
    return (
        is_resource_quota_exceeded(err)
        or is_too_many_requests(err)
        or is_server_timeout(err)
        or is_etcd_error(err)
    )


def get_compute_resource_and_quantity(
    err: BaseException | str, regex: re.Pattern[str]
) -> dict[str, Quantity]:
    """Parse a quota message's ``requested: limits.cpu=7,limits.memory=64Gi`` (or limited/requests) list.

    The first match only; a chunk without ``.`` or ``=`` is skipped.
    Deviation: Flyte panics (``MustParse``) on a chunk whose value is not a quantity; here it is skipped.
    """
    match = regex.search(str(err))
    out: dict[str, Quantity] = {}
    if match is None:
        return out
    _, _, described = match.group(0).partition(":")
    for chunk in described.split(","):
        _, dot, resource = chunk.partition(".")
        if not dot:
            continue
        name, eq, value = resource.partition("=")
        if not eq:
            continue
        try:
            out[name] = Quantity(value)
        except QuantityError:
            continue
    return out


def _fits(requested: Mapping[str, Quantity], quota: Mapping[str, Quantity]) -> bool:
    return all(name not in quota or q < quota[name] for name, q in requested.items())


def is_resource_requests_eligible(err: BaseException | str) -> bool:
    """Whether what was requested could ever fit under the quota's hard limits (strictly below)."""
    return _fits(
        get_compute_resource_and_quantity(err, REQUESTED_LIMITS_RE),
        get_compute_resource_and_quantity(err, LIMITED_LIMITS_RE),
    ) and _fits(
        get_compute_resource_and_quantity(err, REQUESTED_REQUESTS_RE),
        get_compute_resource_and_quantity(err, LIMITED_REQUESTS_RE),
    )


# -- the blocker, the ceilings, the handler ---------------------------------------------------------------


class SimpleBackOffBlocker:
    """Exponential back-off window: ``base^exponent`` seconds, capped at ``max_duration``."""

    __slots__ = ("base_second", "clock", "exponent", "max_duration", "next_eligible_time")

    def __init__(
        self,
        clock: Clock,
        base_second: int,
        max_duration: timedelta,
        *,
        exponent: int = 0,
        next_eligible_time: datetime | None = None,
    ) -> None:
        self.clock = clock
        self.base_second = base_second
        self.max_duration = max_duration
        self.exponent = exponent
        self.next_eligible_time = next_eligible_time if next_eligible_time is not None else clock.now()

    def is_blocking(self, t: datetime) -> bool:
        # Flyte: !NextEligibleTime.Before(t), so a request exactly at the expiry time is still blocked.
        return not self.next_eligible_time < t

    def back_off(self) -> timedelta:
        """Open (or extend) the window; the exponent grows only while the duration is below the cap."""
        seconds = int(math.pow(self.base_second, self.exponent))  # Go: int64(math.Pow(...)) truncates
        duration = timedelta(seconds=seconds)
        if duration > self.max_duration:
            duration = self.max_duration
        else:
            self.exponent += 1
        self.next_eligible_time = self.clock.now() + duration
        return duration

    def reset(self) -> None:
        self.exponent = 0
        self.next_eligible_time = self.clock.now()


class ComputeResourceCeilings:
    """Per-resource ceilings: the smallest quantity refused for quota since the last success."""

    __slots__ = ("ceilings",)

    def __init__(self, ceilings: Mapping[str, Quantity | str] | None = None) -> None:
        self.ceilings: dict[str, Quantity] = {k: Quantity(v) for k, v in (ceilings or {}).items()}

    def is_eligible(self, requested: Mapping[str, Quantity]) -> bool:
        """Strictly below every ceiling that exists; resources without a ceiling do not matter."""
        return _fits(requested, self.ceilings)

    def update(self, resource: str, quantity: Quantity) -> None:
        # Flyte compares Value() (whole units, rounded up): 1 cpu → 500m does not lower the ceiling.
        current = self.ceilings.get(resource)
        if current is None or quantity.value() < current.value():
            self.ceilings[resource] = quantity

    def update_all(self, resources: Mapping[str, Quantity]) -> None:
        for resource, quantity in resources.items():
            self.update(resource, quantity)

    def reset(self, resource: str) -> None:
        self.ceilings[resource] = _INFINITY

    def reset_all(self) -> None:
        for resource in self.ceilings:
            self.ceilings[resource] = _INFINITY

    @staticmethod
    def inf() -> Quantity:
        return _INFINITY

    def __str__(self) -> str:
        # Flyte's SyncResourceList.String(): "key:value, " per key in order, trailing separator included.
        return "".join(f"{k}:{self.ceilings[k]}, " for k in sorted(self.ceilings))


class ComputeResourceAwareBackOffHandler:
    """Back-off window + resource ceilings for one key (``"{GVK},{namespace}"``)."""

    __slots__ = ("blocker", "ceilings")

    def __init__(
        self, blocker: SimpleBackOffBlocker, ceilings: ComputeResourceCeilings | None = None
    ) -> None:
        self.blocker = blocker
        self.ceilings = ceilings if ceilings is not None else ComputeResourceCeilings()

    @property
    def is_active(self) -> bool:
        return self.blocker.base_second != 0

    def reset(self) -> None:
        self.blocker.reset()
        self.ceilings.reset_all()

    async def handle(self, op: Callable[[], Awaitable[T]], requested: Mapping[str, Quantity]) -> T:
        """Run ``op`` unless the window is open and ``requested`` reaches a ceiling.

        Raises :class:`BackOffError` when blocked, or wrapping a back-off-class failure of ``op``; other
        failures of ``op`` propagate unchanged.
        """
        if not self.is_active:
            return await op()
        now = self.blocker.clock.now()
        blocking = self.blocker.is_blocking(now)
        if blocking and not self.ceilings.is_eligible(requested):
            raise BackOffError(
                f"The operation attempt was blocked by back-off [attempted at: {now.isoformat()}]"
                f"[the block expires at: {self.blocker.next_eligible_time.isoformat()}] and the requested "
                "resource(s) exceeds resource ceiling(s)"
            )
        try:
            result = await op()
        except Exception as err:
            if not is_back_off_error(err):
                raise
            if not blocking:
                self.blocker.back_off()
            # Lower only the ceilings the quota message names: a memory refusal says nothing about cpu.
            if is_resource_quota_exceeded(err):
                self.ceilings.update_all(get_compute_resource_and_quantity(err, REQUESTED_LIMITS_RE))
            raise BackOffError("The operation was attempted but failed", cause=err) from err
        self.reset()
        return result


class BackOffController:
    """The handlers by key, shared by every Kubernetes plugin (one per process)."""

    __slots__ = ("_handlers", "clock")

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._handlers: dict[str, ComputeResourceAwareBackOffHandler] = {}

    def get_or_create_handler(
        self, key: str, base_second: int, max_duration: timedelta
    ) -> ComputeResourceAwareBackOffHandler:
        """The handler for ``key``; an existing handler keeps its parameters (as in Flyte)."""
        handler = self._handlers.get(key)
        if handler is None:
            handler = ComputeResourceAwareBackOffHandler(
                SimpleBackOffBlocker(self.clock, base_second, max_duration)
            )
            self._handlers[key] = handler
        return handler

    def get_handler(self, key: str) -> ComputeResourceAwareBackOffHandler | None:
        return self._handlers.get(key)

    def __len__(self) -> int:
        return len(self._handlers)
