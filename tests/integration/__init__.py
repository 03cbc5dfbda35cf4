"""End-to-end tests: spec → platform → executor → plugin manager → local cluster (in-process and HTTP)."""
