"""The taskplug.core names this plugin uses, imported where core defines them.

Why this module exists: ``taskplug.core.__all__`` is computed with ``sorted([...])``, which mypy cannot read,
so under ``--strict`` (no implicit re-export) every ``from taskplug.core import X`` is an error. Drop this
module when core lists ``__all__`` literally.
"""

from taskplug.core._clock import Clock as Clock
from taskplug.core._clock import SystemClock as SystemClock
from taskplug.core._config import ConfigSection as ConfigSection
from taskplug.core._config import GoDuration as GoDuration
from taskplug.core._config import PlatformConfig as PlatformConfig
from taskplug.core._config import StrictModel as StrictModel
from taskplug.core._config import list_of_maps_to_map as list_of_maps_to_map
from taskplug.core._context import ResourceConstraintsSpec as ResourceConstraintsSpec
from taskplug.core._context import SetupContext as SetupContext
from taskplug.core._context import TaskExecutionContext as TaskExecutionContext
from taskplug.core._context import TaskExecutionMetadata as TaskExecutionMetadata
from taskplug.core._errors import ErrorCode as ErrorCode
from taskplug.core._errors import PluginError as PluginError
from taskplug.core._phase import Phase as Phase
from taskplug.core._phase import PhaseInfo as PhaseInfo
from taskplug.core._phase import TaskInfo as TaskInfo
from taskplug.core._phase import TaskLog as TaskLog
from taskplug.core._templating import TemplateParameters as TemplateParameters
from taskplug.core._templating import render_command as render_command
