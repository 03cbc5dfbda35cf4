"""The kubeconfig that points kubectl and lightkube at the embedded cluster served over HTTP."""

from __future__ import annotations

from pathlib import Path
from typing import Final

import yaml

__all__ = ["CONTEXT_NAME", "write_kubeconfig"]

CONTEXT_NAME: Final = "taskplug-local"


def write_kubeconfig(path: Path, url: str, *, namespace: str = "default") -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT_NAME, "cluster": {"server": url}}],
        "users": [{"name": CONTEXT_NAME, "user": {}}],
        "contexts": [
            {
                "name": CONTEXT_NAME,
                "context": {"cluster": CONTEXT_NAME, "user": CONTEXT_NAME, "namespace": namespace},
            }
        ],
        "current-context": CONTEXT_NAME,
        "preferences": {},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path
