"""A flytekit task's first result: ``taskplug run`` beside ``pyflyte run``, and a spec's run beside bare Python.

1. ``taskplug run workflows.py add --a 2 --b 3`` (``examples/flytekit/workflows.py``; the task runs in its own
   pod process on the embedded cluster) beside ``pyflyte run workflows.py add --a 2 --b 3`` (flytekit's local
   execution, in its own process): wall time of each command from start to exit, as a user waits for it.
   Target: taskplug's median ≤ 1.0× pyflyte's.
2. ``taskplug run examples/hello.yaml -o json`` end to end beside ``python -c pass``. Target: ≤ 0.40 s.

With ``--baseline-src OTHER_CHECKOUT/src``, each round also runs the two taskplug commands with that checkout's
sources, right after this one's, and the figures print side by side with this/baseline ratios: a before/after
measured under the same load.

Each command runs as a new process, N times (default 5, at least 4), after one untimed round that fills the
OS file cache and Python's bytecode cache (written even if ``PYTHONDONTWRITEBYTECODE`` is set here). The rounds alternate the commands (one of each per round), so a
burst of load on the machine (two cores, shared) spreads over both sides instead of skewing one. Each run is
checked: it exits 0 and prints the task's output. Each command runs in a fresh temporary folder (a copy of the
module or spec), so no state DB or cluster folder grows from run to run; taskplug imports this checkout's
``src`` (``PYTHONPATH``), pyflyte and the pod's ``pyflyte-execute`` the virtual environment's flytekit.

    .venv/bin/python benchmarks/first_result.py [N] [--src OTHER_CHECKOUT/src] [--baseline-src BASE/src]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
FIRST_TARGET = 1.0
HELLO_TARGET_S = 0.40


def _env(src: Path) -> dict[str, str]:
    # The taskplug sources first; the venv's scripts (pyflyte, pyflyte-execute) on the PATH.
    # Bytecode is cached as on a user's machine (a shell that sets PYTHONDONTWRITEBYTECODE would make every
    # run compile taskplug's sources again, and measure that).
    path = os.pathsep.join(filter(None, [str(src), os.environ.get("PYTHONPATH")]))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPATH": path, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


def _taskplug() -> list[str]:
    return [sys.executable, "-m", "taskplug.cli"]


def _commands() -> dict[str, tuple[list[str], str, bytes]]:
    """name → (argv, the file the folder holds, what stdout must contain)."""
    module = "examples/flytekit/workflows.py"
    return {
        "taskplug run workflows.py add": (
            [*_taskplug(), "run", "workflows.py", "add", "--a", "2", "--b", "3"],
            module,
            b'"o0": 5',
        ),
        "pyflyte run workflows.py add": (
            [str(BIN / "pyflyte"), "run", "workflows.py", "add", "--a", "2", "--b", "3"],
            module,
            b"5",
        ),
        "taskplug run hello.yaml -o json": (
            [*_taskplug(), "run", "hello.yaml", "-o", "json"],
            "examples/hello.yaml",
            b'"hello, world"',
        ),
        "python -c pass": ([sys.executable, "-c", "pass"], "examples/hello.yaml", b""),
    }


def _wall(argv: list[str], source: str, expect: bytes, env: dict[str, str]) -> float:
    with tempfile.TemporaryDirectory(prefix="taskplug-first-") as folder:
        shutil.copy(REPO / source, folder)
        start = time.perf_counter()
        proc = subprocess.run(argv, cwd=folder, env=env, capture_output=True, check=False)
        elapsed = time.perf_counter() - start
    if proc.returncode != 0 or expect not in proc.stdout:
        raise SystemExit(
            f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stdout.decode()}{proc.stderr.decode()}"
        )
    return elapsed


def main(n: int, src: Path, baseline: Path | None = None) -> None:
    table = _commands()
    env = _env(src)
    # The baseline checkout runs the taskplug commands only (pyflyte and bare Python are the same for both).
    base_names = [name for name in table if name.startswith("taskplug")] if baseline is not None else []
    base_env = _env(baseline) if baseline is not None else env
    samples: dict[str, list[float]] = {name: [] for name in table}
    base_samples: dict[str, list[float]] = {name: [] for name in base_names}
    for round_ in range(n + 1):  # the first round warms the caches and is not counted
        for name, command in table.items():
            elapsed = _wall(*command, env)
            if round_:
                samples[name].append(elapsed)
            if name in base_samples:  # right after this checkout's run of the same command
                elapsed = _wall(*command, base_env)
                if round_:
                    base_samples[name].append(elapsed)
    median = {name: statistics.median(runs) for name, runs in samples.items()}
    print(f"first_result N={n} ({' '.join(_taskplug())}, PYTHONPATH={src})")
    for name, runs in samples.items():
        print(f"  {name:<34} {median[name]:6.2f} s wall  (min {min(runs):.2f}, max {max(runs):.2f})")
    if baseline is not None:
        print(f"  baseline PYTHONPATH={baseline}, run alternately with the above:")
        for name, runs in base_samples.items():
            base = statistics.median(runs)
            print(
                f"  {name:<34} {base:6.2f} s wall  (min {min(runs):.2f}, max {max(runs):.2f}); "
                f"this / baseline {median[name] / base:.2f}x"
            )
        ratio = (
            statistics.median(base_samples["taskplug run workflows.py add"])
            / median["pyflyte run workflows.py add"]
        )
        print(f"  baseline taskplug run / pyflyte run: {ratio:.2f}x")
    ratio = median["taskplug run workflows.py add"] / median["pyflyte run workflows.py add"]
    verdict = "met" if ratio <= FIRST_TARGET else "MISSED"
    print(f"  taskplug run / pyflyte run: {ratio:.2f}x  (target <= {FIRST_TARGET:.1f}x: {verdict})")
    hello = median["taskplug run hello.yaml -o json"]
    verdict = "met" if hello <= HELLO_TARGET_S else "MISSED"
    print(
        f"  taskplug run hello.yaml -o json: {hello:.2f} s, {hello - median['python -c pass']:.2f} s over "
        f"python -c pass  (target <= {HELLO_TARGET_S:.2f} s: {verdict})"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", nargs="?", type=int, default=5, help="timed runs per command (default 5, >= 4)")
    parser.add_argument(
        "--src",
        type=Path,
        default=REPO / "src",
        help="the taskplug sources to time (default: this checkout's; another checkout's for a before/after)",
    )
    parser.add_argument(
        "--baseline-src",
        type=Path,
        default=None,
        help="another checkout's sources, timed in the same rounds, each run right after this one's",
    )
    args = parser.parse_args()
    if args.n < 4:
        parser.error("N must be at least 4 (a median of fewer says little on a shared machine)")
    main(args.n, args.src.resolve(), args.baseline_src.resolve() if args.baseline_src else None)
