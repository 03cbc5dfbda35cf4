"""Cold start of the ``taskplug`` command line: wall time of fresh processes, against bare Python.

Each command runs N times (default 7) as a new process, after one untimed warm-up run that fills the OS file
cache and Python's bytecode cache; the timed runs are interleaved, one of each command per round, so a
burst of load on the machine spreads over every command instead of skewing one. Printed per command: the
median and minimum wall time in ms, the median minus the median of ``python -c pass`` (what taskplug
itself costs: imports, plugin discovery, config loading, the command's work), and the median CPU time (user +
system) of the process, which other work on a shared machine disturbs far less than wall time (compare
CPU ratios first). Every run must exit 0.

The commands are the console script next to the interpreter (``.venv/bin/taskplug``), falling back to
``python -m taskplug.cli``, run from the repository root so ``examples/hello.yaml`` resolves. Targets:
``taskplug --help`` ≤ 150 ms and ``taskplug render examples/hello.yaml`` ≤ 200 ms (wall time; issue 25).

With ``--baseline-src OTHER_CHECKOUT/src``, each taskplug command also runs with that checkout's sources first on
``PYTHONPATH``, right after this one's run of it in the same round, and prints beside it with the ratio.

    .venv/bin/python benchmarks/cli_startup.py [N] [--baseline-src BASE/src]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGETS_MS = {"taskplug --help": 150.0, "taskplug render examples/hello.yaml": 200.0}


def taskplug_command() -> list[str]:
    script = Path(sys.executable).parent / "taskplug"
    return [str(script)] if os.access(script, os.X_OK) else [sys.executable, "-m", "taskplug.cli"]


def commands() -> dict[str, list[str]]:
    taskplug = taskplug_command()
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "taskplug --help": [*taskplug, "--help"],
        "taskplug render examples/hello.yaml": [*taskplug, "render", "examples/hello.yaml"],
        "taskplug plugins -o json": [*taskplug, "plugins", "-o", "json"],
        "taskplug config show": [*taskplug, "config", "show"],
    }


def _environment() -> dict[str, str]:
    # Bytecode is cached as on a user's machine, whatever the calling shell says.
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed_run(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """One run: (wall ms, CPU ms of the process and its children)."""
    env = env if env is not None else _environment()
    cpu = _children_cpu_s()
    start = time.perf_counter()
    proc = subprocess.run(
        argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False
    )
    elapsed = (time.perf_counter() - start) * 1000
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stderr.decode()}")
    return elapsed, (_children_cpu_s() - cpu) * 1000


def _with_src(src: Path) -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(src), os.environ.get("PYTHONPATH")]))
    return {**_environment(), "PYTHONPATH": path}


def main(n: int, baseline: Path | None = None) -> None:
    table = commands()
    base_env = _with_src(baseline) if baseline is not None else None
    base_names = [name for name in table if name != "python -c pass"] if base_env is not None else []
    for name, argv in table.items():  # warm-up: bytecode and file caches
        timed_run(argv)
        if name in base_names:
            timed_run(argv, base_env)
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in table}
    base_samples: dict[str, list[tuple[float, float]]] = {name: [] for name in base_names}
    for _ in range(n):
        for name, argv in table.items():
            samples[name].append(timed_run(argv))
            if name in base_samples:  # right after this checkout's run of the same command
                base_samples[name].append(timed_run(argv, base_env))

    baseline_pass = _wall(samples["python -c pass"])
    print(f"cli_startup N={n} ({' '.join(taskplug_command())})")
    print(f"{'command':<38} {'median ms':>10} {'min ms':>8} {'- python ms':>12} {'cpu ms':>8}  target")
    for name, runs in samples.items():
        median = _wall(runs)
        over = "" if name == "python -c pass" else f"{median - baseline_pass:12.1f}"
        target = TARGETS_MS.get(name)
        verdict = ""
        if target is not None:
            verdict = f"<= {target:.0f} ms ({'met' if median <= target else 'MISSED'})"
        print(f"{name:<38} {median:10.1f} {_min(runs):8.1f} {over:>12} {_cpu(runs):8.1f}  {verdict}")
    if baseline is not None:
        print(f"baseline PYTHONPATH={baseline}, run alternately with the above:")
        for name, runs in base_samples.items():
            base = _wall(runs)
            ratio = _wall(samples[name]) / base
            cpu_ratio = _cpu(samples[name]) / _cpu(runs)
            print(
                f"{name:<38} {base:10.1f} {_min(runs):8.1f} {base - baseline_pass:12.1f} {_cpu(runs):8.1f}"
                f"  this / baseline {ratio:.2f}x (cpu {cpu_ratio:.2f}x)"
            )


def _wall(runs: list[tuple[float, float]]) -> float:
    return statistics.median(wall for wall, _ in runs)


def _min(runs: list[tuple[float, float]]) -> float:
    return min(wall for wall, _ in runs)


def _cpu(runs: list[tuple[float, float]]) -> float:
    return statistics.median(cpu for _, cpu in runs)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", nargs="?", type=int, default=7, help="timed runs per command (default 7)")
    parser.add_argument(
        "--baseline-src",
        type=Path,
        default=None,
        help="another checkout's sources, timed in the same rounds, each run right after this one's",
    )
    args = parser.parse_args()
    main(args.n, args.baseline_src.resolve() if args.baseline_src else None)
