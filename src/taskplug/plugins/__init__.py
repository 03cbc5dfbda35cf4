"""The built-in plugins: pod (container, sidecar, k8s_pod), spark, and the connector service."""
