"""The custom resource the plugin creates and the operator drives (a module of its own, so that neither
imports the other)."""

from taskplug.k8s import ResourceType

__all__ = ["BATCH_JOB"]

BATCH_JOB = ResourceType("batch.example.com/v1alpha1", "BatchJob", "batchjobs")
