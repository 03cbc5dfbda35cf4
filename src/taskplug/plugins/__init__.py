"""The built-in plugins, each a package registered through the ``taskplug.plugins`` entry points: pod,
spark, kubeflow (pytorch, tensorflow, mpi), ray, dask, echo, core-sleep, and the connector service."""

__all__: list[str] = []
