"""The process kubelet's own CPU while containers run: what the embedded cluster takes from them.

K pods (default 8), each a container running ``sleep S`` (default 3 s) with a memory limit (so the kubelet
samples its memory, 20 times a second), are created at once on an in-process ``LocalCluster(mode="process")``
and watched to Succeeded; printed: the CPU time of the process holding the cluster (user + system, the
containers' own excluded) and the wall time, medians of N rounds (default 3), and the CPU per container-second.

With ``--baseline-src OTHER_CHECKOUT/src``, each round also runs with that checkout's sources, right after this
one's, and the medians print side by side with the ratio. Each measurement is a child process (the sources
are chosen by its ``PYTHONPATH``).

    .venv/bin/python benchmarks/kubelet_containers.py [N] [--pods K] [--seconds S] [--baseline-src BASE/src]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def pod(name: str, seconds: float) -> dict[str, object]:
    container = {
        "name": "main",
        "image": "busybox",
        "command": ["sleep", str(seconds)],
        "resources": {"limits": {"memory": "500Mi"}},
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"restartPolicy": "Never", "containers": [container]},
    }


async def measure(pods: int, seconds: float) -> dict[str, float]:
    from taskplug.k8s import POD
    from taskplug.localcluster import LocalCluster

    def done(obj: dict[str, object]) -> bool:
        status = obj.get("status")
        return isinstance(status, dict) and status.get("phase") in ("Succeeded", "Failed")

    async with LocalCluster(mode="process") as cluster:
        client = cluster.client()
        cpu, wall = time.process_time(), time.perf_counter()
        for i in range(pods):
            await client.create(POD, pod(f"sleeper-{i}", seconds))
        for i in range(pods):
            found = await cluster.wait_for(POD, "default", f"sleeper-{i}", done, within=seconds + 60)
            if found["status"]["phase"] != "Succeeded":
                raise SystemExit(f"sleeper-{i} ended {found['status']['phase']}")
        return {"cpu": time.process_time() - cpu, "wall": time.perf_counter() - wall}


def run_child(src: Path, pods: int, seconds: float) -> dict[str, float]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(src), os.environ.get("PYTHONPATH")])),
    }
    argv = [sys.executable, __file__, "--child", "--pods", str(pods), "--seconds", str(seconds)]
    out = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"the measurement with {src} failed:\n{out.stderr}")
    result: dict[str, float] = json.loads(out.stdout.splitlines()[-1])
    return result


def main(n: int, pods: int, seconds: float, baseline: Path | None) -> None:
    trees = {"this": SRC, **({"baseline": baseline} if baseline is not None else {})}
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    for _ in range(n):
        for name, src in trees.items():
            samples[name].append(run_child(src, pods, seconds))
    print(f"kubelet_containers N={n}: {pods} containers of `sleep {seconds:g}` with a memory limit, at once")
    cpu = {name: statistics.median(s["cpu"] for s in runs) for name, runs in samples.items()}
    for name, runs in samples.items():
        wall = statistics.median(s["wall"] for s in runs)
        per = cpu[name] / (pods * seconds) * 1000
        line = f"  {name:<9} kubelet process CPU {cpu[name] * 1000:7.0f} ms   wall {wall:5.2f} s   {per:5.1f} ms CPU per container-second"
        if name == "baseline":
            line += f"   this / baseline {cpu['this'] / cpu['baseline']:.2f}x"
        print(line)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", nargs="?", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--pods", type=int, default=8, help="containers at once (default 8)")
    parser.add_argument("--seconds", type=float, default=3.0, help="how long each container runs (default 3)")
    parser.add_argument("--baseline-src", type=Path, default=None, help="another checkout's sources")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(measure(args.pods, args.seconds))))
    else:
        main(args.n, args.pods, args.seconds, args.baseline_src.resolve() if args.baseline_src else None)
