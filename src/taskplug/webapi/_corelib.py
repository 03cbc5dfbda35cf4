"""The taskplug.core names the web-API machinery uses, imported where core defines them.

Why this module exists: ``taskplug.core.__all__`` is computed with ``sorted([...])``, which mypy cannot read,
so under ``--strict`` (no implicit re-export) every ``from taskplug.core import X`` is an error. Importing
from core's defining modules here, once, keeps the rest of webapi on plain names. Drop this module when core
lists ``__all__`` literally.
"""

from taskplug.core._clock import Clock as Clock
from taskplug.core._clock import FakeClock as FakeClock
from taskplug.core._clock import SystemClock as SystemClock
from taskplug.core._config import ConfigSection as ConfigSection
from taskplug.core._config import GoDuration as GoDuration
from taskplug.core._config import StrictModel as StrictModel
from taskplug.core._config import list_of_maps_to_map as list_of_maps_to_map
from taskplug.core._context import AllocationStatus as AllocationStatus
from taskplug.core._context import ResourceConstraintsSpec as ResourceConstraintsSpec
from taskplug.core._context import ResourceManager as ResourceManager
from taskplug.core._context import ResourceRegistrar as ResourceRegistrar
from taskplug.core._context import SetupContext as SetupContext
from taskplug.core._context import TaskExecutionContext as TaskExecutionContext
from taskplug.core._errors import ConfigError as ConfigError
from taskplug.core._errors import ErrorCode as ErrorCode
from taskplug.core._errors import PluginError as PluginError
from taskplug.core._phase import ErrorKind as ErrorKind
from taskplug.core._phase import ExecutionError as ExecutionError
from taskplug.core._phase import Phase as Phase
from taskplug.core._phase import PhaseInfo as PhaseInfo
from taskplug.core._phase import TaskInfo as TaskInfo
from taskplug.core._phase import Transition as Transition
from taskplug.core._plugin import Plugin as Plugin
from taskplug.core._plugin import PluginEntry as PluginEntry
from taskplug.core._plugin import PluginKind as PluginKind
from taskplug.core._plugin import PluginProperties as PluginProperties
