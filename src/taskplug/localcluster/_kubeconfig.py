"""The kubeconfig that points kubectl and lightkube at the embedded cluster served over HTTP.

It holds the cluster's bearer token, so it is written readable by its owner only (0600), as kubeadm writes
``admin.conf``: another user on the machine must not be able to lift the token and run commands here.
"""

from __future__ import annotations

import base64
import os
import tempfile
from pathlib import Path
from typing import Final

import yaml

__all__ = ["CONTEXT_NAME", "write_kubeconfig"]

CONTEXT_NAME: Final = "taskplug-local"


def write_kubeconfig(
    path: Path,
    url: str,
    *,
    token: str | None = None,
    ca_pem: bytes | None = None,
    namespace: str = "default",
) -> Path:
    user: dict[str, str] = {"token": token} if token else {}
    cluster: dict[str, str] = {"server": url}
    if ca_pem is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT_NAME, "cluster": cluster}],
        "users": [{"name": CONTEXT_NAME, "user": user}],
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
    # Written whole to a private (0600) file beside it, then renamed over it: a reader polling for the file
    # never sees half of it, and the token is never in a file others may read.
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(yaml.safe_dump(config, sort_keys=False))
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path
