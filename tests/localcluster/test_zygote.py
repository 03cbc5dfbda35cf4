"""Warm interpreters: a container whose command is a known Python entry point is forked from the zygote, and
keeps a pod's process semantics — its environment, working directory, exit code, signals, memory limit and
OOM kill, logs, and dying with the cluster. Every container here reports its parent, so each test also shows
that it was forked (its parent is the zygote) or exec'd (its parent is this process)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from taskplug.k8s import POD
from taskplug.localcluster import LocalCluster, Zygote
from taskplug.localcluster._zygote import Launch, warm_launch

from .conftest import phase_in, pod_manifest
from .test_kubelet import alive, terminated

DONE = phase_in("Succeeded", "Failed")
PROBE = '''
"""What a container sees of its process, printed as one JSON line."""
import json, os, signal, sys

print(json.dumps({
    "ppid": os.getppid(),
    "pgid": os.getpgid(0),
    "pid": os.getpid(),
    "cwd": os.getcwd(),
    "env": dict(os.environ),
    "argv": sys.argv,
    "path": sys.path[:3],
    "sigint_default": signal.getsignal(signal.SIGINT) is signal.default_int_handler,
    "sigint_module": getattr(signal.getsignal(signal.SIGINT), "__module__", None),
    "sigterm": str(signal.getsignal(signal.SIGTERM)),
    "blocked": sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])),
    "stdout_tty": sys.stdout.isatty(),
}), flush=True)
print("to stderr", file=sys.stderr, flush=True)
mode = sys.argv[1] if len(sys.argv) > 1 else ""
if mode == "exit":
    raise SystemExit(int(sys.argv[2]))
if mode == "raise":
    raise RuntimeError("the task failed")
if mode == "sleep":
    import time
    time.sleep(300)
if mode == "spawn":  # a process of its own in the container's group, as a task's subprocess is
    import subprocess, time
    print(subprocess.Popen(["sleep", "300"]).pid, flush=True)
    time.sleep(300)
if mode == "grow":
    import time
    blocks = []
    while True:
        blocks.append(b"x" * (8 << 20))
        time.sleep(0.01)
if mode == "atexit":
    import atexit
    atexit.register(lambda: print("at exit", flush=True))
'''


@pytest.fixture(scope="module")
def modules(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("zygote-modules")
    (folder / "zygote_probe.py").write_text(textwrap.dedent(PROBE))
    return folder


@pytest.fixture(scope="module")
def zygote() -> Iterator[Zygote]:
    # Set before the fork: a container must not see what the forking process's environment held.
    os.environ["TASKPLUG_ZYGOTE_TEST_LEAK"] = "1"
    try:
        with Zygote.fork(preload=("json",)) as zygote:
            yield zygote
    finally:
        os.environ.pop("TASKPLUG_ZYGOTE_TEST_LEAK", None)


@pytest.fixture
async def warm(zygote: Zygote) -> AsyncIterator[LocalCluster]:
    async with LocalCluster(
        mode="process", memory_poll_interval=0.02, kill_grace_seconds=1.0, zygote=zygote
    ) as cluster:
        yield cluster


def probe_pod(name: str, modules: Path, *args: str, **container: Any) -> dict[str, Any]:
    env = [{"name": "PYTHONPATH", "value": str(modules)}, {"name": "GREETING", "value": "hello"}]
    return pod_manifest(name, command=["python", "-m", "zygote_probe", *args], env=env, **container)


def report(cluster: LocalCluster, pod: str) -> dict[str, Any]:
    first = cluster.logs("default", pod).splitlines()[0]
    value: dict[str, Any] = json.loads(first)
    return value


async def _until(check: Any, within: float = 30) -> None:
    async with asyncio.timeout(within):
        while not check():
            await asyncio.sleep(0.02)


async def test_a_python_module_container_is_forked_with_the_containers_environment_and_folder(
    warm: LocalCluster, zygote: Zygote, modules: Path
) -> None:
    await warm.client().create(POD, probe_pod("env", modules, "plain"))
    pod = await warm.wait_for(POD, "default", "env", DONE, within=60)
    assert terminated(pod)["exitCode"] == 0
    seen = report(warm, "env")
    assert seen["ppid"] == zygote.pid  # forked by the zygote, not exec'd by the kubelet
    assert seen["env"]["GREETING"] == "hello"
    assert seen["env"]["HOSTNAME"] == "env"
    assert "TASKPLUG_ZYGOTE_TEST_LEAK" not in seen["env"]
    assert set(seen["env"]) == {
        "PATH",
        "HOME",
        "HOSTNAME",
        "LANG",
        "TERMINATION_MESSAGE_PATH",
        "PYTHONPATH",
        "GREETING",
    }
    assert Path(seen["cwd"]).name == "work" and "default_env_" in seen["cwd"]
    assert seen["argv"] == [str(modules / "zygote_probe.py"), "plain"]
    assert seen["path"][:2] == [seen["cwd"], str(modules)]  # as `python -m`: the folder, then PYTHONPATH
    assert not seen["stdout_tty"]


async def test_a_forked_container_has_a_new_interpreters_signals_and_its_own_process_group(
    warm: LocalCluster, zygote: Zygote, modules: Path
) -> None:
    await warm.client().create(POD, probe_pod("signals", modules))
    await warm.wait_for(POD, "default", "signals", DONE, within=60)
    seen = report(warm, "signals")
    assert seen["ppid"] == zygote.pid
    # A new interpreter's SIGINT, or flytekit's when the forking process had imported it: the child renews
    # flytekit's context as its import would have (its SIGINT handler), since the import does not run again.
    assert seen["sigint_default"] or str(seen["sigint_module"]).startswith("flytekit"), seen["sigint_module"]
    assert seen["sigterm"] == str(signal.SIG_DFL)
    assert seen["blocked"] == []
    assert seen["pgid"] == seen["pid"]


async def test_a_forked_containers_exit_code_is_its_system_exit_code(
    warm: LocalCluster, modules: Path
) -> None:
    await warm.client().create(POD, probe_pod("three", modules, "exit", "3"))
    pod = await warm.wait_for(POD, "default", "three", DONE, within=60)
    assert pod["status"]["phase"] == "Failed"
    assert (terminated(pod)["exitCode"], terminated(pod)["reason"]) == (3, "Error")


async def test_an_uncaught_exception_exits_1_with_its_traceback_in_the_log(
    warm: LocalCluster, zygote: Zygote, modules: Path
) -> None:
    await warm.client().create(
        POD, probe_pod("raises", modules, "raise", terminationMessagePolicy="FallbackToLogsOnError")
    )
    pod = await warm.wait_for(POD, "default", "raises", DONE, within=60)
    assert report(warm, "raises")["ppid"] == zygote.pid
    assert terminated(pod)["exitCode"] == 1
    assert "RuntimeError: the task failed" in terminated(pod)["message"]
    log = warm.logs("default", "raises")
    assert "to stderr\n" in log and "Traceback (most recent call last)" in log


async def test_atexit_functions_run_and_what_was_printed_is_flushed_before_the_exit(
    warm: LocalCluster, modules: Path
) -> None:
    await warm.client().create(POD, probe_pod("atexit", modules, "atexit"))
    pod = await warm.wait_for(POD, "default", "atexit", DONE, within=60)
    assert terminated(pod)["exitCode"] == 0
    assert warm.logs("default", "atexit").endswith("to stderr\nat exit\n")


async def test_deleting_a_pod_terminates_its_forked_process_with_sigterm(
    warm: LocalCluster, zygote: Zygote, modules: Path
) -> None:
    pod = probe_pod("held", modules, "sleep")
    pod["metadata"]["finalizers"] = ["taskplug.io/test"]
    await warm.client().create(POD, pod)
    await _until(lambda: warm.logs("default", "held").count("\n") >= 2)
    seen = report(warm, "held")
    assert seen["ppid"] == zygote.pid
    await warm.client().delete(POD, "default", "held")
    stopped = await warm.wait_for(POD, "default", "held", DONE, within=30)
    assert terminated(stopped)["exitCode"] == 143
    await _until(lambda: not alive(seen["pid"]))


async def test_a_forked_process_over_its_memory_limit_is_oom_killed(
    warm: LocalCluster, zygote: Zygote, modules: Path
) -> None:
    # The limit sits above what the child shares with the zygote (counted as its own, as for any process).
    rss = next(
        int(line.split()[1]) * 1024
        for line in Path(f"/proc/{zygote.pid}/status").read_text().splitlines()
        if line.startswith("VmRSS:")
    )
    limit = rss + (80 << 20)
    await warm.client().create(
        POD, probe_pod("hungry", modules, "grow", resources={"limits": {"memory": str(limit)}})
    )
    pod = await warm.wait_for(POD, "default", "hungry", DONE, within=60)
    assert report(warm, "hungry")["ppid"] == zygote.pid
    assert (terminated(pod)["exitCode"], terminated(pod)["reason"]) == (137, "OOMKilled")


async def test_leaving_the_cluster_kills_its_forked_processes(zygote: Zygote, modules: Path) -> None:
    async with LocalCluster(mode="process", zygote=zygote) as cluster:
        await cluster.client().create(POD, probe_pod("forever", modules, "sleep"))
        await _until(lambda: cluster.logs("default", "forever").count("\n") >= 2)
        seen = report(cluster, "forever")
        assert seen["ppid"] == zygote.pid and alive(seen["pid"])
    assert not alive(seen["pid"])


async def test_other_commands_are_execd_as_before(warm: LocalCluster, modules: Path) -> None:
    code = "import os; print(os.getppid())"
    await warm.client().create(POD, pod_manifest("plain", command=["python", "-c", code]))
    pod = await warm.wait_for(POD, "default", "plain", DONE, within=60)
    assert terminated(pod)["exitCode"] == 0
    assert int(warm.logs("default", "plain")) == os.getpid()  # the kubelet's child, a new interpreter


def test_the_zygote_its_containers_and_their_processes_die_with_the_process_that_forked_it(
    modules: Path, tmp_path: Path
) -> None:
    # The process running the cluster is SIGKILLed: no cleanup of its own runs; the zygote sees its control
    # socket close, kills its child's group (the container and the process it started) and exits.
    script = textwrap.dedent(
        """
        import asyncio, os, sys, time
        from taskplug.localcluster import Zygote
        from taskplug.localcluster._zygote import Launch
        zygote = Zygote.fork()
        log = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT)
        env = {"PATH": os.environ["PATH"], "PYTHONPATH": sys.argv[1]}
        launch = Launch(script=None, module="zygote_probe", args=("spawn",))
        child = asyncio.run(zygote.spawn(launch, env=env, cwd=os.getcwd(), log_fd=log, reaper_fd=None))
        while open(sys.argv[2]).read().count("\\n") < 3:
            time.sleep(0.02)
        grandchild = int(open(sys.argv[2]).read().splitlines()[2])
        print(zygote.pid, child.pid, grandchild, flush=True)
        time.sleep(300)
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    argv = [sys.executable, "-c", script, str(modules), str(tmp_path / "log")]
    parent = subprocess.Popen(argv, stdout=subprocess.PIPE, env=env, cwd=tmp_path)
    try:
        assert parent.stdout is not None
        pids = [int(p) for p in parent.stdout.readline().split()]
        assert len(pids) == 3 and all(alive(p) for p in pids)
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 30
        while any(alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not any(alive(p) for p in pids)
    finally:
        parent.kill()
        parent.wait()


@pytest.mark.parametrize("release", [False, True], ids=["closed", "released then closed"])
async def test_closing_the_zygote_kills_the_containers_it_still_runs(
    modules: Path, tmp_path: Path, release: bool
) -> None:
    zygote = Zygote.fork()
    try:
        log = os.open(tmp_path / "log", os.O_WRONLY | os.O_CREAT)
        launch = Launch(script=None, module="zygote_probe", args=("sleep",))
        env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(modules)}
        child = await zygote.spawn(launch, env=env, cwd=str(tmp_path), log_fd=log, reaper_fd=None)
        os.close(log)
        assert child is not None
        await _until(lambda: (tmp_path / "log").read_text().count("\n") >= 2)
        assert alive(child.pid)
        if release:  # the zygote ends on its own, while this process goes on; close only reaps it
            zygote.release()
            assert await child.wait() == -signal.SIGKILL
        await asyncio.to_thread(zygote.close)
        assert await child.wait() == -signal.SIGKILL
        assert not alive(child.pid)
        assert not alive(zygote.pid)
    finally:
        zygote.close()
    # A closed zygote takes nothing: the kubelet execs instead.
    assert await zygote.spawn(launch, env=env, cwd=str(tmp_path), log_fd=1, reaper_fd=None) is None


def test_known_entry_points_of_this_interpreter_are_forked_and_nothing_else(tmp_path: Path) -> None:
    bin_dir = str(Path(sys.executable).parent)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    executable = Path(sys.executable).name
    assert warm_launch([executable, "-m", "pkg.mod", "--x"], env) == Launch(None, "pkg.mod", ("--x",))
    assert warm_launch([sys.executable, "-m", "pkg"], env) == Launch(None, "pkg", ())
    assert warm_launch([executable, "-c", "pass"], env) is None
    assert warm_launch([executable, "-u", "-m", "pkg"], env) is None
    assert warm_launch([executable, "-m", "not a module"], env) is None
    assert warm_launch(["sh", "-c", "true"], env) is None
    assert warm_launch([], env) is None
    if (Path(bin_dir) / "pyflyte-execute").exists():
        found = warm_launch(["pyflyte-execute", "--inputs", "x"], env)
        assert found == Launch(str(Path(bin_dir) / "pyflyte-execute"), None, ("--inputs", "x"))
    # A script of the same name elsewhere (another environment's) is exec'd.
    other = tmp_path / "pyflyte-execute"
    other.write_text(f"#!{sys.executable}\n")
    other.chmod(0o755)
    assert warm_launch(["pyflyte-execute"], {"PATH": str(tmp_path)}) is None
    assert warm_launch([str(other)], env) is None


async def test_what_prepare_returns_is_handed_back_and_the_containers_have_what_it_imported(
    modules: Path, tmp_path: Path
) -> None:
    def prepare() -> dict[str, Any]:
        import zygote_prepared  # noqa: F401  (imported in the zygote only)

        # A read-only mapping (as a compiled workflow bundle holds) is handed back too.
        return {"pid": os.getpid(), "pgid": os.getpgid(0), "frozen": MappingProxyType({"a": 1})}

    (modules / "zygote_prepared.py").write_text("")
    sys.path.insert(0, str(modules))
    try:
        zygote = Zygote.fork(prepare=prepare)
    finally:
        sys.path.remove(str(modules))
    try:
        prepared = zygote.prepared()
        assert prepared["pid"] == zygote.pid
        assert prepared["pgid"] == os.getpgid(0)  # prepared in the caller's group, as the caller would have
        assert isinstance(prepared["frozen"], MappingProxyType) and prepared["frozen"] == {"a": 1}
        assert "zygote_prepared" not in sys.modules
        log = os.open(tmp_path / "log", os.O_WRONLY | os.O_CREAT)
        script = tmp_path / "has_it.py"
        script.write_text("import sys\nprint('zygote_prepared' in sys.modules)\n")
        launch = Launch(script=None, module="has_it", args=())
        env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(tmp_path)}
        child = await zygote.spawn(launch, env=env, cwd=str(tmp_path), log_fd=log, reaper_fd=None)
        os.close(log)
        assert child is not None
        assert await child.wait() == 0
        assert (tmp_path / "log").read_text() == "True\n"
    finally:
        zygote.close()


_PREPARE_SCRIPT = """
import os, signal, sys, time
from taskplug.localcluster import PrepareFailed, Zygote

mode = sys.argv[1]

def prepare():
    print("preparing", os.getpid(), flush=True)
    if mode == "raise":
        raise LookupError("no such task")
    if mode == "interrupt":
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)
        print("deaf to SIGINT and SIGTERM", flush=True)
        os.kill(os.getppid(), signal.SIGKILL)
    while True:
        time.sleep(0.05)

try:
    zygote = Zygote.fork(prepare=prepare)
except LookupError as e:  # only in the forked copy: it goes on as the caller would have
    print(f"the copy reports: {e}", flush=True)
    raise SystemExit(3) from None
try:
    zygote.prepared()
except PrepareFailed as failed:
    print(f"the caller exits {failed.exit_code}", flush=True)
"""


def _prepare_script(mode: str, tmp_path: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.Popen(
        [sys.executable, "-c", _PREPARE_SCRIPT, mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )


def test_when_prepare_raises_the_forked_copy_goes_on_with_the_error_and_the_caller_gets_its_exit_code(
    tmp_path: Path,
) -> None:
    proc = _prepare_script("raise", tmp_path)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("preparing ")
    assert lines[1:] == ["the copy reports: no such task", "the caller exits 3"]


def test_a_zygote_that_prepares_ignores_the_terminals_signals_and_dies_with_the_process_that_forked_it(
    tmp_path: Path,
) -> None:
    proc = _prepare_script("interrupt", tmp_path)
    assert proc.stdout is not None
    zygote = int(proc.stdout.readline().split()[1])
    # SIGINT and SIGTERM are the caller's to answer: the zygote goes on preparing, until the caller is gone.
    assert proc.stdout.read() == "deaf to SIGINT and SIGTERM\n"  # to its end: the zygote has closed it too
    assert proc.wait(timeout=60) == -signal.SIGKILL
    deadline = time.monotonic() + 30
    while alive(zygote) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(zygote)
