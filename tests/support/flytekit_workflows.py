"""Real flytekit workflows as a Flyte user hands them over: written by ``pyflyte serialize workflows`` and
``pyflyte package``, run as subprocesses with the flytekit installed here."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

PYFLYTE = Path(sys.executable).parent / "pyflyte"

DEMO = textwrap.dedent(
    """
    from flytekit import LaunchPlan, conditional, dynamic, map_task, task, workflow


    @task
    def add(a: int, b: int) -> int:
        return a + b


    @task
    def double(a: int) -> int:
        return 2 * a


    @workflow
    def sub(a: int, b: int = 5) -> int:
        return add(a=a, b=b)


    sub_lp = LaunchPlan.get_or_create(sub, name="sub_lp", fixed_inputs={"a": 1})


    @workflow
    def inner(a: int) -> int:
        return double(a=a)


    @dynamic
    def fan(n: int) -> list[int]:
        return [double(a=i) for i in range(n)]


    @workflow
    def wf(x: int, y: int = 3) -> list[int]:
        fan(n=x)
        s = sub(a=x, b=y)
        t = sub_lp(b=s)
        c = conditional("big").if_(t > 5).then(inner(a=t)).else_().then(double(a=t))
        return map_task(double)(a=[s, t, c])
    """
)
"""``wf`` reaches every kind of reference: a ``@dynamic`` task, a sub-workflow, a launch plan (fixing ``a``),
a sub-workflow inside a branch, a map task; it is the one workflow no other runs."""

TWO = textwrap.dedent(
    """
    from flytekit import task, workflow


    @task
    def one() -> int:
        return 1


    @workflow
    def first() -> int:
        return one()


    @workflow
    def second() -> int:
        return one()
    """
)

REMOTE = textwrap.dedent(
    """
    from flytekit import eager, reference_launch_plan, reference_task, task, workflow


    @task
    def add(a: int, b: int) -> int:
        return a + b


    @eager
    async def eager_wf(a: int) -> int:
        return add(a=a, b=1)


    @reference_task(project="p", domain="d", name="remote.t", version="v1")
    def remote_task(a: int) -> int: ...


    @reference_launch_plan(project="p", domain="d", name="remote.lp", version="v1")
    def remote_lp(a: int) -> int: ...


    @workflow
    def uses_task(a: int) -> int:
        return remote_task(a=a)


    @workflow
    def uses_lp(a: int) -> int:
        return remote_lp(a=a)
    """
)


@dataclass(frozen=True)
class Serialized:
    module: Path
    """The module's file (its folder is the project root)."""
    folder: Path
    """What ``pyflyte serialize workflows -f`` wrote."""
    package: Path
    """What ``pyflyte package`` wrote."""

    def file(self, suffix: str) -> Path:
        """The one file written whose name ends with ``suffix`` (``wf_2.pb``)."""
        (found,) = [p for p in self.folder.iterdir() if p.name.endswith(suffix)]
        return found


def _pyflyte(root: Path, package: str, *args: str) -> None:
    done = subprocess.run(
        [str(PYFLYTE), "--pkgs", package, *args],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def serialize(root: Path, name: str, source: str) -> Serialized:
    """``source`` as module ``name`` in the project ``root``, serialized both ways."""
    root.mkdir(parents=True, exist_ok=True)
    module = root / f"{name}.py"
    module.write_text(source)
    folder = root / "serialized"
    folder.mkdir()
    _pyflyte(root, name, "serialize", "workflows", "-f", str(folder))
    package = root / "flyte-package.tgz"
    _pyflyte(root, name, "package", "--output", str(package))
    return Serialized(module, folder, package)
