"""A virtualenv with Flyte 2's SDK (``flyte``), made once and kept for the tests that need it.

taskplug does not depend on ``flyte`` (nor may its tests' environment: flytekit and ``flyte`` are different
SDKs), so the Flyte 2 tests (tasks run by ``a0``, connectors served by ``c0``) install it into an environment of their own, as a Flyte 2 user's would be:
``flyte`` at a pinned version with the plugins the tests use, from PyPI. It is kept under the user's cache
folder (``$TASKPLUG_FLYTE2_ENV_ROOT``, else ``$XDG_CACHE_HOME`` or ``~/.cache`` + ``taskplug-tests``;
``flyte2-<key>``), keyed by the requirements
and this Python's version, so a rerun reuses it at once; a changed pin makes a new one. Building it holds an
exclusive ``fcntl`` lock on a file beside it, so two test processes never build it at once (the second waits,
then reuses); a build that was interrupted (no ``.complete`` marker) is removed and made again.

``flyte2_python()`` returns its Python (its ``bin`` also holds ``a0``, the SDK's runtime entry point);
``flyte2_python_fixture`` is the session fixture ``flyte2_python`` over it (import it into the test module). ``python tests/support/flyte2_env.py`` builds it
ahead of a test run and prints its Python.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

__all__ = ["FLYTE2_REQUIREMENTS", "FLYTE2_VERSION", "flyte2_python", "flyte2_python_fixture"]

FLYTE2_VERSION = "2.12.1"
FLYTE2_REQUIREMENTS = (f"flyte[connector]=={FLYTE2_VERSION}", f"flyteplugins-dask=={FLYTE2_VERSION}")
"""The SDK with its connector server (``c0``, for the Flyte 2 connector tests), and its Dask plugin (which
brings ``dask[distributed]``) for the Dask task test."""

_BUILD_SECONDS = 900


def _cache_root() -> Path:
    given = os.environ.get("TASKPLUG_FLYTE2_ENV_ROOT")
    if given:
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "taskplug-tests"


def _key() -> str:
    text = "\n".join([*FLYTE2_REQUIREMENTS, f"python{sys.version_info.major}.{sys.version_info.minor}"])
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def flyte2_python() -> Path:
    """The Python of the Flyte 2 virtualenv, created on first use and reused after (see the module)."""
    root = _cache_root()
    root.mkdir(parents=True, exist_ok=True)
    folder = root / f"flyte2-{FLYTE2_VERSION}-{_key()}"
    python = folder / "bin" / "python"
    marker = folder / ".complete"
    with open(root / f"{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if marker.exists() and python.exists():
                return python
            shutil.rmtree(folder, ignore_errors=True)
            # The base interpreter's venv module (a venv made from inside a venv is based on its base Python).
            subprocess.run(
                [sys.executable, "-m", "venv", str(folder)], check=True, capture_output=True, timeout=300
            )
            done = subprocess.run(
                [
                    str(python),
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                    *FLYTE2_REQUIREMENTS,
                ],
                capture_output=True,
                text=True,
                timeout=_BUILD_SECONDS,
                check=False,
            )
            if done.returncode != 0:
                shutil.rmtree(folder, ignore_errors=True)
                raise RuntimeError(
                    f"cannot install {' '.join(FLYTE2_REQUIREMENTS)} into {folder} (exit {done.returncode}): "
                    f"{done.stderr.strip()[-2000:]}"
                )
            marker.write_text(" ".join(FLYTE2_REQUIREMENTS) + "\n")
            return python
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="session", name="flyte2_python")
def flyte2_python_fixture() -> Path:
    """The Flyte 2 virtualenv's Python (built on the session's first use); the fixture ``flyte2_python``."""
    try:
        return flyte2_python()
    except RuntimeError as e:
        pytest.fail(str(e))


if __name__ == "__main__":
    print(flyte2_python())
