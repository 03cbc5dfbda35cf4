"""Cold start of the ``taskplug`` command line: wall time of fresh processes, against bare Python.

Each command runs N times (default 7) as a new process, after one untimed warm-up run that fills the OS file
cache and Python's bytecode cache; the timed runs are interleaved, one of each command per round, so a
burst of load on the machine spreads over every command instead of skewing one. Printed per command: the
median and minimum wall time in ms, and the median minus the median of ``python -c pass`` (what taskplug
itself costs: imports, plugin discovery, config loading, the command's work). Every run must exit 0.

The commands are the console script next to the interpreter (``.venv/bin/taskplug``), falling back to
``python -m taskplug.cli``, run from the repository root so ``examples/hello.yaml`` resolves. Targets:
``taskplug --help`` ≤ 150 ms and ``taskplug render examples/hello.yaml`` ≤ 200 ms (wall time; issue 25).

    .venv/bin/python benchmarks/cli_startup.py [N]
"""

from __future__ import annotations

import argparse
import os
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


def wall_ms(argv: list[str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    elapsed = (time.perf_counter() - start) * 1000
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stderr.decode()}")
    return elapsed


def main(n: int) -> None:
    table = commands()
    for argv in table.values():  # warm-up: bytecode and file caches
        wall_ms(argv)
    samples: dict[str, list[float]] = {name: [] for name in table}
    for _ in range(n):
        for name, argv in table.items():
            samples[name].append(wall_ms(argv))

    baseline = statistics.median(samples["python -c pass"])
    print(f"cli_startup N={n} ({' '.join(taskplug_command())})")
    print(f"{'command':<38} {'median ms':>10} {'min ms':>8} {'- python ms':>12}  target")
    for name, runs in samples.items():
        median = statistics.median(runs)
        over = "" if name == "python -c pass" else f"{median - baseline:12.1f}"
        target = TARGETS_MS.get(name)
        verdict = ""
        if target is not None:
            verdict = f"<= {target:.0f} ms ({'met' if median <= target else 'MISSED'})"
        print(f"{name:<38} {median:10.1f} {min(runs):8.1f} {over:>12}  {verdict}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", nargs="?", type=int, default=7, help="timed runs per command (default 7)")
    main(parser.parse_args().n)
