"""The ``plugins.batchjob`` config section: the plugin's own keys, validated strictly like every section.

.. code-block:: yaml

    plugins:
      batchjob:
        default-parallelism: 2   # pods per BatchJob when the task does not say
        max-parallelism: 50      # a task asking for more is rejected (BadTaskSpecification)
"""

from __future__ import annotations

from pydantic import Field, model_validator

from taskplug.core import ConfigSection, StrictModel

__all__ = ["BATCHJOB_SECTION", "BatchJobConfig"]


class BatchJobConfig(StrictModel):
    """``plugins.batchjob``: the example BatchJob plugin's limits on pods per job."""

    default_parallelism: int = Field(default=1, ge=1)
    """Pods per BatchJob (a count) for a task whose ``custom`` has no ``parallelism``."""
    max_parallelism: int = Field(default=100, ge=1)
    """The most pods (a count) one task may ask for; more is a BadTaskSpecification."""

    @model_validator(mode="after")
    def _default_within_max(self) -> BatchJobConfig:
        if self.default_parallelism > self.max_parallelism:
            raise ValueError(
                f"default-parallelism ({self.default_parallelism}) exceeds "
                f"max-parallelism ({self.max_parallelism})"
            )
        return self


BATCHJOB_SECTION = ConfigSection("plugins.batchjob", BatchJobConfig)
