"""What a web-API plugin author uses (Flyte's ``pluginmachinery/webapi``): the plugin contracts, the contexts
they are given, and the plugin's config (quotas, rate limits, caching, timeouts).

Implement :class:`AsyncPlugin` (create / get / delete / status) or :class:`SyncPlugin` (do) and register a
:class:`WebApiPluginEntry`. What runs them (the adapter, the status cache, rate limits and allocation tokens)
is ``taskplug.engine``.
"""

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
