"""Load-time validation of a web-API plugin's config (Flyte's ``validateConfig``).

Follows flyteplugins/go/tasks/pluginmachinery/internal/webapi/core.go (``validateConfig``,
``validateRangeInt``, ``validateRangeFloat64``) on Flyte 1 ``master``: every violation is collected, in
Flyte's order, and the collection is joined with a newline before each message, as flytestdlib's
ErrorCollection does.
"""

from __future__ import annotations

from decimal import Decimal

from taskplug.core import ErrorCode, PluginError
from taskplug.webapi import PluginConfig

__all__ = ["ConfigValidationError", "format_go_float", "plugin_config_violations", "validate_plugin_config"]

MIN_CACHE_SIZE, MAX_CACHE_SIZE = 10, 500_000
MIN_WORKERS, MAX_WORKERS = 1, 10_000
MIN_SYNC_SECONDS, MAX_SYNC_SECONDS = 5.0, 3600.0
MIN_BURST, MAX_BURST = 5, 10_000
MIN_QPS, MAX_QPS = 1.0, 100_000.0


class ConfigValidationError(PluginError):
    """A web-API plugin's config is out of range; the plugin does not load."""

    def __init__(self, violations: list[str]) -> None:
        self.violations = tuple(violations)
        collection = "".join("\n" + v for v in violations)
        super().__init__(
            ErrorCode.PLUGIN_INITIALIZATION_FAILED, f"config validation failed. Error: {collection}"
        )

    def __str__(self) -> str:
        # The message is Flyte's text exactly; the code is still on ``.code``.
        return self.message


def format_go_float(value: float) -> str:
    """Go's ``%v`` for a float64: shortest digits, exponent form when the exponent is < -4 or >= 6.

    ``fmt`` uses ``strconv.FormatFloat(v, 'g', -1, 64)`` whose exponent threshold for the shortest form is 6
    (so ``1e+06``, ``3.6e+07``, ``100000``), with at least two exponent digits.
    """
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if str(value).startswith("-") else "0"
    sign, digits, exponent = Decimal(repr(float(value))).normalize().as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits))
    exp = len(digits) + exponent - 1
    prefix = "-" if sign else ""
    if exp < -4 or exp >= 6:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        return f"{prefix}{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    point = exp + 1
    if point <= 0:
        return f"{prefix}0.{'0' * -point}{text}"
    if point >= len(text):
        return prefix + text + "0" * (point - len(text))
    return f"{prefix}{text[:point]}.{text[point:]}"


def _range(field: str, low: float, high: float, value: float, *, is_float: bool) -> str | None:
    if low <= value <= high:
        return None
    show = format_go_float if is_float else (lambda x: str(int(x)))
    return f"{field} is expected to be between {show(low)} and {show(high)}. Provided value is {show(value)}"


def plugin_config_violations(cfg: PluginConfig) -> list[str]:
    """Every range violation, in Flyte's order: size, workers, resync, read burst/qps, write burst/qps."""
    checks = [
        _range("cache size", MIN_CACHE_SIZE, MAX_CACHE_SIZE, cfg.caching.size, is_float=False),
        _range("workers count", MIN_WORKERS, MAX_WORKERS, cfg.caching.workers, is_float=False),
        _range(
            "resync interval",
            MIN_SYNC_SECONDS,
            MAX_SYNC_SECONDS,
            cfg.caching.resync_interval.total_seconds(),
            is_float=True,
        ),
        _range("read burst", MIN_BURST, MAX_BURST, cfg.read_rate_limiter.burst, is_float=False),
        _range("read qps", MIN_QPS, MAX_QPS, cfg.read_rate_limiter.qps, is_float=True),
        _range("write burst", MIN_BURST, MAX_BURST, cfg.write_rate_limiter.burst, is_float=False),
        _range("write qps", MIN_QPS, MAX_QPS, cfg.write_rate_limiter.qps, is_float=True),
    ]
    return [c for c in checks if c is not None]


def validate_plugin_config(cfg: PluginConfig) -> None:
    """Raise :class:`ConfigValidationError` (``config validation failed. Error: \\n...``) on any violation."""
    violations = plugin_config_violations(cfg)
    if violations:
        raise ConfigValidationError(violations)
