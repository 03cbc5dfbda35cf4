"""The error tree and Flyte's error codes.

Follows flyteplugins/go/tasks/errors/errors.go and flytestdlib/errors. Flyte tells errors apart by *code*,
not by type, so there are few classes: one per thing somebody catches. A class with a package named on the
right is defined in that package (the one that raises it); the others live here. The CLI turns any of them
into exit code 2 with the message.

    TaskplugError                    every error taskplug raises carries a ``code``
     ├── ConfigError                 a config file or value is wrong; ``path`` names the key
     ├── SpecError                   an execution spec is malformed; ``path`` names the field
     │    └── ObservedObjectError    taskplug.k8s: an object the API returned has a field of the wrong type
     ├── QuantityError               a resource quantity does not parse (also a ValueError)
     ├── DocumentError               a file or body that cannot be read (not UTF-8, over a bound); a SpecError
     ├── StateStoreError             taskplug.executor: the state DB is not taskplug's, is corrupt, or the
     │                               execution is driven by another process
     ├── KubeApiError                taskplug.k8s: what the Kubernetes API answered (status, reason, message);
     │    │                          ``code`` is the reason; ``is_not_found`` & co. look for it in a chain
     │    └── PatchError             taskplug.localcluster (internal): a patch the embedded API cannot apply
     └── PluginError                 a plugin or the machinery could not decide; ``code``: Flyte's error code
          ├── BadTaskSpecification   the task template cannot be turned into a resource
          ├── BackOffError           taskplug.engine.k8s: a create refused or held back for quota or API
          │                          overload (code BackOffError)
          ├── CleanupError           taskplug.engine.k8s: finalize or abort gave up within its bound; names
          │                          what may be left behind (code SystemError)
          ├── ConfigValidationError  taskplug.engine.webapi: a web-API plugin's config is out of range
          │                          (code PluginInitializationFailed)
          └── ConnectorRpcError      taskplug.plugins.connector: a gRPC call to a connector failed
                                     (code DownstreamSystemError)

``KubeApiError`` is not a ``PluginError``: it is what a client adapter raises, and the plugin manager
classifies it (quota, conflict, not found, ...) or wraps it in a ``PluginError`` with ``cause``.

``ConfigValidationError`` is a ``PluginError``, not a ``ConfigError``, because of its code,
``PluginInitializationFailed``: in Flyte a web-API plugin whose config fails ``validateConfig`` fails to
load ("config validation failed. Error: ..."), exactly as a plugin whose loader errors does, so whoever
handles a plugin that cannot be loaded handles this one too. Its message is Flyte's text; it names the
ranges violated, not a key path.
"""

from __future__ import annotations

import enum

__all__ = [
    "BadTaskSpecification",
    "ConfigError",
    "ErrorCode",
    "PluginError",
    "QuantityError",
    "SpecError",
    "TaskplugError",
]


class ErrorCode(enum.StrEnum):
    """Flyte's plugin error codes (the values are the exact strings Flyte reports)."""

    TASK_FAILED_WITH_ERROR = "TaskFailedWithError"
    DOWNSTREAM_SYSTEM_ERROR = "DownstreamSystemError"
    TASK_FAILED_UNKNOWN_ERROR = "UnknownError"
    BAD_TASK_SPECIFICATION = "BadTaskSpecification"
    TASK_EVENT_RECORDING_FAILED = "TaskEventRecordingFailed"
    METADATA_ACCESS_FAILED = "MetadataAccessFailed"
    METADATA_TOO_LARGE = "MetadataTooLarge"
    PLUGIN_INITIALIZATION_FAILED = "PluginInitializationFailed"
    CACHE_FAILED = "AutoRefreshCacheFailed"
    RUNTIME_FAILURE = "RuntimeFailure"
    CORRUPTED_PLUGIN_STATE = "CorruptedPluginState"
    RESOURCE_MANAGER_FAILURE = "ResourceManagerFailure"
    BACK_OFF_ERROR = "BackOffError"
    SYSTEM_ERROR = "SystemError"
    TOO_MANY_PLUGIN_PHASE_VERSIONS = "TooManyPluginPhaseVersions"
    CONFIG_ERROR = "ConfigError"
    SPEC_ERROR = "SpecError"
    UNSUPPORTED_TASK_TYPE = "UnsupportedTaskType"


class TaskplugError(Exception):
    """Root of every error taskplug raises."""

    code: str = ErrorCode.SYSTEM_ERROR

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return self.message


class ConfigError(TaskplugError):
    """A configuration file or value is invalid. ``path`` is the dotted key path (``plugins.k8s.default-cpus``)."""

    code = ErrorCode.CONFIG_ERROR

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}" if path else reason)


class SpecError(TaskplugError):
    """An execution spec is malformed. ``path`` is the dotted field path (``template.container.image``)."""

    code = ErrorCode.SPEC_ERROR

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}" if path else reason)


class QuantityError(TaskplugError, ValueError):
    """A Kubernetes resource quantity could not be parsed."""

    code = ErrorCode.BAD_TASK_SPECIFICATION


class PluginError(TaskplugError):
    """The machinery or a plugin could not decide; ``code`` is one of :class:`ErrorCode` (or a plugin's own)."""

    def __init__(self, code: str, message: str, *, cause: BaseException | None = None) -> None:
        super().__init__(message, code=code)
        self.cause = cause

    def __str__(self) -> str:
        if self.cause is not None:
            return f"[{self.code}] {self.message}, caused by: {self.cause}"
        return f"[{self.code}] {self.message}"

    def has_code(self, code: str) -> bool:
        """Whether this error or any PluginError in its cause chain carries ``code`` (Flyte's IsCausedBy)."""
        err: BaseException | None = self
        while err is not None:
            if isinstance(err, PluginError) and err.code == code:
                return True
            err = err.cause if isinstance(err, PluginError) else err.__cause__
        return False


class BadTaskSpecification(PluginError):
    """The task template cannot be turned into the plugin's resource."""

    def __init__(self, message: str, *, cause: BaseException | None = None) -> None:
        super().__init__(ErrorCode.BAD_TASK_SPECIFICATION, message, cause=cause)
