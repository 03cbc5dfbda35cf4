"""The ``plugins.kf-operator`` config section the three plugins share, named where its model is defined: the
registrations (``_entries``) declare it and the plugins read it, while the model loads only when a command
reads the section."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from taskplug.core import ConfigSection

if TYPE_CHECKING:
    from taskplug.plugins.kubeflow._config import KfOperatorConfig

__all__ = ["KF_OPERATOR_SECTION"]

KF_OPERATOR_SECTION: Final[ConfigSection[KfOperatorConfig]] = ConfigSection(
    "plugins.kf-operator", "taskplug.plugins.kubeflow._config:KfOperatorConfig"
)
"""The ``plugins.kf-operator`` config section (:class:`~taskplug.plugins.kubeflow.KfOperatorConfig`)."""
