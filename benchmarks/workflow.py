"""Whole workflows through the executor, each beside the baseline it should keep up with, in one run.

1. On the in-process local cluster in simulated mode: a fan-out workflow (start → 100 independent pod task
   nodes → one node that takes all their outputs as a list) and a chain of 50 pod task nodes, as task nodes
   per second end to end (submit → the workflow's Success), beside the executor's single-task throughput
   measured in the same run: 101 single-task executions at once (for the fan-out) and 50 one after another
   (for the chain, whose nodes cannot overlap), of the nodes' own task with the same input and output.
   Target: ≥ 0.9× the baseline. The workflow runs with max parallelism 0 (no limit, as the single tasks have
   none) and with Flyte's default of 25 (shown for information: it caps the fan-out at 25 pods at a time).
2. A ``@dynamic`` node that fans out to 1,000 tasks beside a map task (ArrayNode) of 1,000 elements over the
   same task, each in a one-node workflow, as tasks per second, one of each per round (the median of the
   rounds' ratios). Target: ≥ 0.9× the map. A simulated pod runs nothing, so the dynamic
   task's output (the ``futures.pb`` a flytekit ``@dynamic`` task writes: its ``DynamicJobSpec``) is put in
   its output prefix before the run, as the task would have written it. While the executor does not run
   dynamic workflows the line says "not available" (the execution fails with the executor's
   unsupported-node error); no figure is made up.
3. On the embedded cluster with real processes, a 10-task flytekit workflow (9 independent tasks, then one
   that sums their outputs) end to end: ``taskplug run FILE.py wf`` beside ``pyflyte run FILE.py wf``
   (flytekit's local execution, in one process), wall time of each command, median of N runs interleaved.

The workflows are built with protobuf (``container`` task templates, as the other benchmarks'), compiled by
``taskplug.compiler.compile_workflow`` and made into a spec by ``workflow_execution_spec``. A simulated pod
writes no outputs, so the ``outputs.pb`` of every node whose outputs are read is put where the node's
container would write it (``<data-root>/metadata/<project>/<domain>/<name>/<node>/0/outputs.pb``) before the
timed run; the workflow still reads each of them as it would a real task's.

The simulated figures run with the garbage collector as ``taskplug run`` has it once its executor starts
(start-up's objects frozen, rarer collections: ``taskplug.cli._process``); ``--default-gc`` keeps CPython's
defaults instead.

    .venv/bin/python benchmarks/workflow.py [--repeat R] [--sqlite] [--skip-process | --skip-simulated]
        [--process-runs N] [--dynamic-size N] [--default-gc]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flyteidl.core import (
    compiler_pb2,
    dynamic_job_pb2,
    identifier_pb2,
    interface_pb2,
    literals_pb2,
    tasks_pb2,
    types_pb2,
    workflow_pb2,
)
from google.protobuf import json_format

# benchmarks/ is on the path when a script runs: the map benchmark's platform and stores.
from map_task import make_store, platform_for

from taskplug.cli._process import use_executor_collector
from taskplug.compiler import compile_workflow
from taskplug.executor import ExecutionSpec, Platform, executor_settings, open_executor, parse_spec
from taskplug.executor._spec import workflow_execution_spec
from taskplug.localcluster import LocalCluster

PROJECT, DOMAIN = "p", "d"
INT = types_pb2.LiteralType(simple=types_pb2.INTEGER)
INT_LIST = types_pb2.LiteralType(collection_type=INT)
UNSUPPORTED_CODES = frozenset({"UnsupportedNode", "DynamicWorkflowNotSupported"})
"""The executor's error codes for a node kind it does not run (a workflow node; a task that produced a
dynamic workflow)."""
TARGET = 0.9
BASES = {"at once": "single at once", "serial": "single one after another"}


# -- building workflows ---------------------------------------------------------------------------------------


def _id(kind: int, name: str) -> identifier_pb2.Identifier:
    return identifier_pb2.Identifier(
        resource_type=kind, project=PROJECT, domain=DOMAIN, name=name, version="v1"
    )


def _interface(
    inputs: dict[str, types_pb2.LiteralType], outputs: dict[str, types_pb2.LiteralType]
) -> interface_pb2.TypedInterface:
    interface = interface_pb2.TypedInterface()
    for name, literal_type in inputs.items():
        interface.inputs.variables[name].type.CopyFrom(literal_type)
    for name, literal_type in outputs.items():
        interface.outputs.variables[name].type.CopyFrom(literal_type)
    return interface


def container_task(
    name: str, inputs: dict[str, types_pb2.LiteralType], outputs: dict[str, types_pb2.LiteralType]
) -> tasks_pb2.TaskTemplate:
    """A pod task (``container``) with the small requests the other benchmarks' tasks have."""
    template = tasks_pb2.TaskTemplate(
        id=_id(identifier_pb2.TASK, name), type="container", interface=_interface(inputs, outputs)
    )
    template.container.image = "busybox"
    template.container.command.append("true")
    resources = template.container.resources
    resources.requests.add(name=tasks_pb2.Resources.CPU, value="10m")
    resources.requests.add(name=tasks_pb2.Resources.MEMORY, value="16Mi")
    return template


def _promise(data: literals_pb2.BindingData, node_id: str, var: str) -> None:
    data.promise.node_id = node_id
    data.promise.var = var


def task_node(node_id: str, task: tasks_pb2.TaskTemplate) -> workflow_pb2.Node:
    node = workflow_pb2.Node(id=node_id)
    node.metadata.name = task.id.name
    node.task_node.reference_id.CopyFrom(task.id)
    return node


def workflow(
    name: str,
    interface: interface_pb2.TypedInterface,
    nodes: Sequence[workflow_pb2.Node],
    outputs: dict[str, tuple[str, str]],
) -> workflow_pb2.WorkflowTemplate:
    template = workflow_pb2.WorkflowTemplate(id=_id(identifier_pb2.WORKFLOW, name), interface=interface)
    template.nodes.extend(nodes)
    for var, (node_id, node_var) in outputs.items():
        binding = template.outputs.add(var=var)
        _promise(binding.binding, node_id, node_var)
    return template


STEP = container_task("step", {"x": INT}, {"o": INT})
"""The task of the fan-out's and the chain's nodes, and of their single-task baselines."""


def fan_out(width: int) -> tuple[compiler_pb2.CompiledWorkflowClosure, list[str]]:
    """start → ``width`` nodes ``n<i>`` (x from the workflow's input) → ``gather`` (xs: every ``n<i>.o``).
    Returns the closure and the nodes whose outputs are read."""
    step = STEP
    gather = container_task("gather", {"xs": INT_LIST}, {"o": INT})
    nodes = []
    for i in range(width):
        node = task_node(f"n{i}", step)
        _promise(node.inputs.add(var="x").binding, "start-node", "x")
        nodes.append(node)
    last = task_node("gather", gather)
    items = last.inputs.add(var="xs").binding.collection.bindings
    for node in nodes:
        _promise(items.add(), node.id, "o")
    template = workflow("fanout", _interface({"x": INT}, {"o": INT}), [*nodes, last], {"o": ("gather", "o")})
    closure = compile_workflow(template, tasks=[step, gather], max_nodes=0)
    return closure, [n.id for n in nodes] + ["gather"]


def chain(length: int) -> tuple[compiler_pb2.CompiledWorkflowClosure, list[str]]:
    """``n0`` (x from the workflow's input) → ``n1`` (x = n0.o) → … → ``n<length-1>``."""
    step = STEP
    nodes = []
    for i in range(length):
        node = task_node(f"n{i}", step)
        _promise(node.inputs.add(var="x").binding, f"n{i - 1}" if i else "start-node", "o" if i else "x")
        nodes.append(node)
    template = workflow("chain", _interface({"x": INT}, {"o": INT}), nodes, {"o": (f"n{length - 1}", "o")})
    closure = compile_workflow(template, tasks=[step], max_nodes=0)
    return closure, [n.id for n in nodes]


NOOP = container_task("noop", {"x": INT}, {})


def dynamic_fan_out(size: int) -> tuple[compiler_pb2.CompiledWorkflowClosure, bytes]:
    """One node running the task ``spawn``; and the ``DynamicJobSpec`` that task produces: ``size`` nodes
    ``dn<i>`` running ``noop`` with x = i (as flytekit names a dynamic workflow's nodes)."""
    spawn = container_task("spawn", {}, {})
    template = workflow("dynamic", _interface({}, {}), [task_node("n0", spawn)], {})
    closure = compile_workflow(template, tasks=[spawn])
    job = dynamic_job_pb2.DynamicJobSpec(min_successes=size)
    job.tasks.append(NOOP)
    for i in range(size):
        node = task_node(f"dn{i}", NOOP)
        node.inputs.add(var="x").binding.scalar.primitive.integer = i
        job.nodes.append(node)
    return closure, job.SerializeToString()


def map_workflow() -> compiler_pb2.CompiledWorkflowClosure:
    """One ArrayNode mapping a ``noop`` task over the workflow's input ``xs``, every element at once (its
    template's interface takes the lists, as flytekit's ``map_task`` serializes it)."""
    mapped = container_task("map_noop", {"x": INT_LIST}, {})
    node = workflow_pb2.Node(id="n0")
    node.metadata.name = "map_noop"
    _promise(node.inputs.add(var="x").binding, "start-node", "xs")
    sub = node.array_node.node
    sub.CopyFrom(task_node("n0-noop", mapped))
    _promise(sub.inputs.add(var="x").binding, "start-node", "xs")
    node.array_node.parallelism = 0
    node.array_node.min_success_ratio = 1.0
    template = workflow("mapped", _interface({"xs": INT_LIST}, {}), [node], {})
    return compile_workflow(template, tasks=[mapped])


def int_inputs(**values: int | list[int]) -> literals_pb2.LiteralMap:
    out = literals_pb2.LiteralMap()
    for name, value in values.items():
        if isinstance(value, list):
            items = out.literals[name].collection.literals
            for v in value:
                items.add().scalar.primitive.integer = v
        else:
            out.literals[name].scalar.primitive.integer = value
    return out


def workflow_spec(
    closure: compiler_pb2.CompiledWorkflowClosure,
    inputs: literals_pb2.LiteralMap,
    name: str,
    max_parallelism: int,
) -> ExecutionSpec:
    execution = {"id": {"project": PROJECT, "domain": DOMAIN, "name": name}}
    return workflow_execution_spec(closure, inputs, execution=execution, max_parallelism=max_parallelism)


def output_dir(workdir: Path, execution: str, unique: str) -> Path:
    """Where node ``unique``'s first attempt writes its outputs (the executor's data layout)."""
    root = (workdir / "data").resolve()
    return root / "metadata" / PROJECT / DOMAIN / execution / unique / "0"


def seed(workdir: Path, execution: str, nodes: Sequence[str], name: str, data: bytes) -> None:
    """Write what the nodes' containers would have written (a simulated pod writes nothing)."""
    for unique in nodes:
        folder = output_dir(workdir, execution, unique)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)


# -- running ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Timed:
    """One timed run: how many tasks (nodes) ran, its wall seconds and this process's CPU seconds (the
    executor and the in-process cluster alike; CPU time moves less than wall time on a busy machine)."""

    count: int
    wall: float
    cpu: float

    @property
    def rate(self) -> float:
        return self.count / self.wall

    @property
    def cpu_ms(self) -> float:
        return self.cpu * 1000 / self.count


async def run_workflow(
    platform: Platform, workdir: Path, spec: ExecutionSpec, sqlite: bool, store_name: str, count: int
) -> tuple[Timed, Any, int]:
    """The run from submit to the end, the result, and the executor's rounds (of the workflow)."""
    store = make_store(workdir, store_name, sqlite)
    gc.collect()
    async with (
        LocalCluster(mode="simulated") as cluster,
        open_executor(
            platform, kube_client=cluster.client(), store=store, settings=executor_settings(platform)
        ) as ex,
    ):
        start, cpu = time.perf_counter(), time.process_time()
        key = await ex.submit(spec)
        result = await ex.wait(key)
        timed = Timed(count, time.perf_counter() - start, time.process_time() - cpu)
        rounds = ex.rounds
    store.close()
    return timed, result, rounds


def step_specs(workdir: Path, n: int, tag: str, outputs: bytes) -> list[ExecutionSpec]:
    """``n`` single-task executions of the workflows' own task ``step`` (x = 1 in, ``o`` out, its
    ``outputs.pb`` written where its container would write it), as the baseline of the workflows' nodes: the
    same task with the same inputs and outputs, so that what is compared is what running it as a node adds."""
    document: dict[str, Any] = {"template": json_format.MessageToDict(STEP), "inputs": {"x": 1}}
    specs = []
    for i in range(n):
        name = f"single-{tag}-{i}"
        execution = {"id": {"project": PROJECT, "domain": DOMAIN, "name": name, "nodeId": "n0"}}
        seed(workdir, name, ["n0"], "outputs.pb", outputs)
        specs.append(parse_spec({**document, "execution": execution}))
    return specs


async def run_singles(
    platform: Platform, workdir: Path, specs: list[ExecutionSpec], sqlite: bool, *, at_once: bool, tag: str
) -> Timed:
    """Single-task executions, submitted at once or one after another."""
    n = len(specs)
    store = make_store(workdir, f"single-{tag}", sqlite)
    gc.collect()
    async with (
        LocalCluster(mode="simulated") as cluster,
        open_executor(
            platform, kube_client=cluster.client(), store=store, settings=executor_settings(platform)
        ) as ex,
    ):
        start, cpu = time.perf_counter(), time.process_time()
        if at_once:
            keys = [await ex.submit(spec) for spec in specs]
            results = await asyncio.gather(*(ex.wait(k) for k in keys))
        else:
            results = [await ex.wait(await ex.submit(spec)) for spec in specs]
        timed = Timed(n, time.perf_counter() - start, time.process_time() - cpu)
    store.close()
    assert {r.phase for r in results} == {"Success"}, collections.Counter(r.phase for r in results)
    return timed


def _check(result: Any, what: str) -> None:
    if result.phase != "Success":
        raise SystemExit(f"{what} ended {result.phase}: {result.error}")


async def simulated(repeat: int, sqlite: bool, dynamic_size: int) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="taskplug-wf-bench-"))
    platform = platform_for(workdir)
    store_name = "sqlite" if sqlite else "memory"
    width, length = 100, 50
    fan_closure, fan_read = fan_out(width)
    chain_closure, chain_read = chain(length)
    one = literals_pb2.LiteralMap()
    one.literals["o"].scalar.primitive.integer = 1
    outputs = one.SerializeToString()
    counter = iter(range(1_000_000))

    async def run(
        closure: compiler_pb2.CompiledWorkflowClosure, read: list[str], max_parallelism: int
    ) -> Timed:
        name = f"{closure.primary.template.id.name}-{next(counter)}"
        seed(workdir, name, read, "outputs.pb", outputs)
        spec = workflow_spec(closure, int_inputs(x=1), name, max_parallelism)
        timed, result, _ = await run_workflow(platform, workdir, spec, sqlite, name, len(read))
        _check(result, name)
        return timed

    # Interleaved, one of each per round, and compared round by round: the machine's speed drifts. Every
    # other round runs the workflows before their baselines, so that neither side is always the one that
    # follows the other.
    async def measure(name: str, r: int) -> Timed:
        if name == "at once":
            specs = step_specs(workdir, width + 1, f"a{r}", outputs)
            return await run_singles(platform, workdir, specs, sqlite, at_once=True, tag=f"a{r}")
        if name == "serial":
            specs = step_specs(workdir, length, f"s{r}", outputs)
            return await run_singles(platform, workdir, specs, sqlite, at_once=False, tag=f"s{r}")
        if name == "chain":
            return await run(chain_closure, chain_read, 0)
        return await run(fan_closure, fan_read, 25 if name == "fan 25" else 0)

    figures: dict[str, list[Timed]] = collections.defaultdict(list)
    for r in range(repeat):
        for group in (("at once", "fan 0", "fan 25"), ("serial", "chain")):
            for name in group if r % 2 == 0 else reversed(group):
                figures[name].append(await measure(name, r))

    def row(label: str, name: str, unit: str, base: str | None = None, target: bool = False) -> None:
        runs = figures[name]
        rates = [t.rate for t in runs]
        text = (
            f"  {label:<42} {statistics.median(rates):6,.0f} {unit:<7} (min {min(rates):,.0f}, "
            f"max {max(rates):,.0f})  CPU {statistics.median(t.cpu_ms for t in runs):.2f} ms/task"
        )
        if base is not None:
            pairs = list(zip(runs, figures[base], strict=True))
            ratio = statistics.median(a.rate / b.rate for a, b in pairs)
            cpu_ratio = statistics.median(a.cpu_ms / b.cpu_ms for a, b in pairs)
            text += f"\n  {'':<42} {ratio:.2f}x {BASES[base]}, CPU per task {cpu_ratio:.2f}x"
            if target:
                text += f" [target >= {TARGET}x: {'met' if ratio >= TARGET else 'MISSED'}]"
        print(text)

    print(f"workflow benchmark store={store_name} (simulated local cluster, in process), median of {repeat}")
    row(f"single tasks, {width + 1} at once", "at once", "tasks/s")
    row(f"single tasks, {length} one after another", "serial", "tasks/s")
    row(f"fan-out {width}+1 nodes, max parallelism 0", "fan 0", "nodes/s", "at once", target=True)
    row(f"fan-out {width}+1 nodes, max parallelism 25", "fan 25", "nodes/s", "at once")
    row(f"chain of {length} nodes", "chain", "nodes/s", "serial", target=True)
    await dynamic_vs_map(platform, workdir, sqlite, dynamic_size, repeat)


async def dynamic_vs_map(platform: Platform, workdir: Path, sqlite: bool, size: int, repeat: int) -> None:
    """The map task and the ``@dynamic`` fan-out, one of each per round for ``repeat`` rounds (the machine's
    speed drifts), compared round by round."""
    maps: list[Timed] = []
    dynamics: list[Timed] = []
    rounds: dict[str, int] = {}
    for r in range(repeat):
        if r % 2 == 1:  # every other round, the map after the @dynamic fan-out (see ``simulated``)
            maps.append(await _run_map(platform, workdir, sqlite, size, r, rounds))
        name = f"dynamic-{r}"
        closure, futures = dynamic_fan_out(size)
        seed(workdir, name, ["n0"], "futures.pb", futures)
        spec = workflow_spec(closure, literals_pb2.LiteralMap(), name, 0)
        timed, result, rounds["dynamic"] = await run_workflow(platform, workdir, spec, sqlite, name, size)
        if result.phase != "Success" and _unsupported(result):
            code = _error_codes(result) & UNSUPPORTED_CODES
            label = f"  {f'@dynamic fan-out of {size:,} tasks':<44} "
            print(f"{label}not available (the executor does not run it yet: {', '.join(sorted(code))})")
            return
        _check(result, "the @dynamic fan-out")
        dynamics.append(timed)
        if r % 2 == 0:
            maps.append(await _run_map(platform, workdir, sqlite, size, r, rounds))

    def line(label: str, runs: list[Timed], kind: str) -> str:
        rates = [t.rate for t in runs]
        return (
            f"  {label:<44} {statistics.median(rates):7,.0f} tasks/s (min {min(rates):,.0f}, max {max(rates):,.0f})"
            f"  CPU {statistics.median(t.cpu_ms for t in runs):.2f} ms/task  rounds = {rounds[kind]}"
        )

    print(line(f"map task of {size:,} elements (in a workflow)", maps, "map"))
    print(line(f"@dynamic fan-out of {size:,} tasks", dynamics, "dynamic"))
    pairs = list(zip(dynamics, maps, strict=True))
    ratio = statistics.median(d.rate / m.rate for d, m in pairs)
    cpu_ratio = statistics.median(d.cpu_ms / m.cpu_ms for d, m in pairs)
    print(
        f"  {'':<44} {ratio:.2f}x the map task, CPU per task {cpu_ratio:.2f}x "
        f"[target >= {TARGET}x: {'met' if ratio >= TARGET else 'MISSED'}]"
    )


async def _run_map(
    platform: Platform, workdir: Path, sqlite: bool, size: int, r: int, rounds: dict[str, int]
) -> Timed:
    name = f"mapped-{r}"
    map_spec = workflow_spec(map_workflow(), int_inputs(xs=list(range(size))), name, 0)
    timed, result, rounds["map"] = await run_workflow(platform, workdir, map_spec, sqlite, name, size)
    _check(result, "the map task")
    return timed


def _error_codes(result: Any) -> set[str]:
    codes = {(result.error or {}).get("code", "")}
    stack = list(result.nodes or [])
    while stack:
        node = stack.pop()
        codes.add((node.get("error") or {}).get("code", ""))
        stack.extend(node.get("nodes") or [])
    return codes


def _unsupported(result: Any) -> bool:
    return bool(_error_codes(result) & UNSUPPORTED_CODES)


# -- real processes -------------------------------------------------------------------------------------------------

FLYTEKIT_WORKFLOW = '''
"""Ten flytekit tasks: nine independent squares, then their sum."""

from flytekit import task, workflow


@task
def square(x: int) -> int:
    return x * x


@task
def total(xs: list[int]) -> int:
    return sum(xs)


@workflow
def wf(n: int = 3) -> int:
    return total(xs=[square(x=n) for _ in range(9)])
'''


def process_mode(runs: int) -> None:
    folder = Path(tempfile.mkdtemp(prefix="taskplug-wf-process-"))
    module = folder / "ten_tasks.py"
    module.write_text(textwrap.dedent(FLYTEKIT_WORKFLOW).lstrip())
    bin_dir = Path(sys.executable).parent
    commands = {
        "taskplug run ten_tasks.py wf": [str(bin_dir / "taskplug"), "run", module.name, "wf", "--n", "2"],
        "pyflyte run ten_tasks.py wf": [str(bin_dir / "pyflyte"), "run", module.name, "wf", "--n", "2"],
    }
    # The embedded cluster runs each task's pod as a local process: pyflyte-execute must be on its PATH.
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for round_ in range(runs + 1):  # the first round warms the caches and is not counted
        for name, argv in commands.items():
            start = time.perf_counter()
            proc = subprocess.run(argv, cwd=folder, env=env, capture_output=True, check=False)
            elapsed = time.perf_counter() - start
            if proc.returncode != 0 or b"36" not in proc.stdout:  # 9 squares of 2
                raise SystemExit(
                    f"{name} exited {proc.returncode}:\n{proc.stdout.decode()}{proc.stderr.decode()}"
                )
            if round_:
                samples[name].append(elapsed)
    taskplug, pyflyte = (statistics.median(s) for s in samples.values())
    print(f"10-task flytekit workflow, real processes (LocalCluster mode=process), median of {runs} runs")
    for name, runs_ in samples.items():
        print(
            f"  {name:<30} {statistics.median(runs_):6.2f} s wall  (min {min(runs_):.2f}, max {max(runs_):.2f})"
        )
    print(f"  taskplug / pyflyte: {taskplug / pyflyte:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="timed runs of each simulated figure (median)")
    parser.add_argument("--sqlite", action="store_true", help="SQLite state store instead of memory")
    parser.add_argument("--dynamic-size", type=int, default=1_000)
    parser.add_argument("--skip-process", action="store_true", help="skip the real-process comparison")
    parser.add_argument("--process-runs", type=int, default=3)
    parser.add_argument("--skip-simulated", action="store_true", help="only the real-process comparison")
    parser.add_argument(
        "--default-gc", action="store_true", help="CPython's collector settings, not the command's"
    )
    args = parser.parse_args()
    if not args.skip_simulated:
        if not args.default_gc:
            use_executor_collector()
        asyncio.run(simulated(args.repeat, args.sqlite, args.dynamic_size))
    if not args.skip_process:
        process_mode(args.process_runs)


if __name__ == "__main__":
    main()
