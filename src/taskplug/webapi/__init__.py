"""Web-API plugin machinery: contracts, the core adapter, the status cache, rate limits and tokens."""

from taskplug.webapi._contracts import (
    AsyncPlugin,
    CachingConfig,
    DeleteContext,
    GetContext,
    PluginConfig,
    RateLimiterConfig,
    StatusContext,
    SyncPlugin,
    WebApiPluginEntry,
)

__all__ = [
    "AsyncPlugin",
    "CachingConfig",
    "DeleteContext",
    "GetContext",
    "PluginConfig",
    "RateLimiterConfig",
    "StatusContext",
    "SyncPlugin",
    "WebApiPluginEntry",
]
