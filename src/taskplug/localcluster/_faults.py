"""Scripted API faults, shared by the in-process client and the HTTP façade.

In the spirit of Flyte's ``extendedFakeClient`` (plugin_manager_test.go), which injects create/get/delete
errors, but at the API boundary so the same script works for every client: answer a verb (optionally for
one resource plural) with a ``Status`` error N times, or delay answers. The errors are those a real API
server sends under load: 500 ``InternalError``, 429 ``TooManyRequests`` with ``Retry-After``, 504
``Timeout``, 500 ``ServerTimeout``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal

from taskplug.core import Clock
from taskplug.k8s import KubeApiError, ResourceType
from taskplug.localcluster._errors import internal_error, server_timeout, timeout, too_many_requests

__all__ = ["VERBS", "Faults", "Verb"]

Verb = Literal["create", "get", "list", "watch", "patch", "replace", "delete"]
VERBS: Final = ("create", "get", "list", "watch", "patch", "replace", "delete")


@dataclass(slots=True)
class _Rule:
    verb: str
    plural: str | None
    times: int | None  # None: until cleared
    error: KubeApiError | None = None
    delay: float = 0.0
    hits: int = field(default=0)

    def applies(self, verb: str, plural: str) -> bool:
        return (
            self.verb == verb
            and self.plural in (None, plural)
            and (self.times is None or self.hits < self.times)
        )


class Faults:
    """The cluster's fault script. Rules apply in the order they were added; a delay and an error combine."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._rules: list[_Rule] = []
        self._down: KubeApiError | None = None

    def component_down(self, error: KubeApiError) -> None:
        """A controller of the cluster stopped for good: from now on every call answers ``error`` (not
        cleared by :meth:`clear`), so a client learns it and why instead of waiting for a pod that will never
        run."""
        self._down = error

    def fail(
        self,
        verb: Verb,
        status: int = 500,
        *,
        times: int | None = 1,
        plural: str | None = None,
        retry_after: int = 1,
        error: KubeApiError | None = None,
    ) -> None:
        """Answer ``verb`` with an error ``times`` times (None: until :meth:`clear`).

        ``status`` picks a realistic error: 500 InternalError, 429 TooManyRequests (``retry_after`` seconds),
        504 Timeout, or any other code as a bare Status; or pass ``error`` itself (e.g. ``"ServerTimeout"``
        via :meth:`server_timeout`).
        """
        if error is None:
            if status == 429:
                error = too_many_requests(retry_after)
            elif status == 504:
                error = timeout()
            elif status == 500:
                error = internal_error()
            else:
                error = KubeApiError(status, "", f"injected fault ({status})")
        self._check_verb(verb)
        self._rules.append(_Rule(verb, plural, times, error=error))

    def server_timeout(self, verb: Verb, rtype: ResourceType, *, times: int | None = 1) -> None:
        """Answer ``verb`` on ``rtype`` with 500 ``ServerTimeout``, as an overloaded API server does."""
        self._check_verb(verb)
        self._rules.append(_Rule(verb, rtype.plural, times, error=server_timeout(rtype, verb)))

    def delay(
        self, verb: Verb, seconds: float, *, times: int | None = None, plural: str | None = None
    ) -> None:
        """Hold answers to ``verb`` for ``seconds`` on the cluster's clock (to make clients time out)."""
        self._check_verb(verb)
        self._rules.append(_Rule(verb, plural, times, delay=seconds))

    def clear(self) -> None:
        self._rules.clear()

    async def check(self, verb: str, plural: str) -> None:
        """Called before every API call: sleep for a delay rule, raise for an error rule."""
        if self._down is not None:
            down = self._down
            raise KubeApiError(down.status, down.reason, down.message, details=down.details)
        error: KubeApiError | None = None
        delay = 0.0
        for rule in self._rules:
            if rule.applies(verb, plural):
                if rule.error is not None and error is None:
                    rule.hits += 1
                    error = rule.error
                elif rule.error is None:
                    rule.hits += 1
                    delay += rule.delay
        self._rules = [r for r in self._rules if r.times is None or r.hits < r.times]
        if delay > 0:
            await self._clock.sleep(delay)
        if error is not None:
            raise KubeApiError(error.status, error.reason, error.message, details=error.details)

    @staticmethod
    def _check_verb(verb: str) -> None:
        if verb not in VERBS:
            raise ValueError(f"unknown verb {verb!r}; expected one of {', '.join(VERBS)}")
