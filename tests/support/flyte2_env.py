"""A virtual environment with Flyte 2's SDK (``flyte``), built once per machine and shared by the tests.

``flyte`` is not one of taskplug's dependencies (it pins ``flyteidl2`` and ``protobuf`` versions of its own): the
tests that need it — a Flyte 2 connector served by the SDK's ``c0``, Flyte 2 task specs run by ``a0`` — run it
from this environment, in a subprocess. :func:`flyte2_python` creates the environment on first use (``pip
install 'flyte[connector]==<version>'`` from the package index, as a fresh CI machine does) under a stable
folder keyed by the version, and reuses it afterwards. An ``fcntl`` lock beside it makes sure two processes
(two test sessions, two helpers' fixtures) never build it at once; a build cut short is removed and redone,
because the environment only counts once its ``.complete`` stamp is written.

The folder is ``$TASKPLUG_FLYTE2_ENV_ROOT`` if set, else ``~/.cache/taskplug-tests``.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Final

__all__ = ["FLYTE2_VERSION", "flyte2_env_dir", "flyte2_python"]

FLYTE2_VERSION: Final = "2.12.1"
"""The Flyte 2 SDK the tests run (its ``c0`` connector server and ``a0`` task runtime)."""

_STAMP = ".complete"


def flyte2_env_dir(version: str = FLYTE2_VERSION) -> Path:
    """Where the environment for ``version`` lives (keyed by the SDK's and this Python's versions)."""
    root = Path(os.environ.get("TASKPLUG_FLYTE2_ENV_ROOT") or Path.home() / ".cache" / "taskplug-tests")
    return root / f"flyte-{version}-py{sys.version_info.major}{sys.version_info.minor}"


def flyte2_python(version: str = FLYTE2_VERSION) -> Path:
    """The Python of an environment with ``flyte[connector]==version`` installed, created if missing."""
    env = flyte2_env_dir(version)
    python = env / "bin" / "python"
    if (env / _STAMP).is_file():
        return python
    env.parent.mkdir(parents=True, exist_ok=True)
    with (env.parent / f"{env.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if (env / _STAMP).is_file():  # another process built it while this one waited
            return python
        shutil.rmtree(env, ignore_errors=True)  # a build cut short
        # venv from the base interpreter: the environment must not see taskplug's own site-packages.
        base = getattr(sys, "_base_executable", sys.executable)
        _run([base, "-m", "venv", str(env)], env)
        _run(
            [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
             f"flyte[connector]=={version}"],
            env,
        )  # fmt: skip
        (env / _STAMP).write_text(version)
    return python


def _run(command: list[str], env: Path) -> None:
    proc = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    if proc.returncode != 0:
        shutil.rmtree(env, ignore_errors=True)
        raise RuntimeError(
            f"building the Flyte 2 test environment failed: {' '.join(command)} exited {proc.returncode}\n"
            f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
        )
