"""Writes the binary TaskTemplate of a Flyte 2 task, for an execution spec's ``templateFile:``.

Run it with the Python that has the ``flyte`` SDK (it imports nothing of taskplug):

    python examples/flyte2/write_template.py examples/flyte2/hello.py add add.pb
    python examples/flyte2/write_template.py --local examples/flyte2/hello.py add add.pb

It serializes the task with the SDK's offline serializer, ``flyte.extras.serialize`` (``translate_task_to_wire``,
what ``flyte deploy`` sends), and writes the ``TaskSpec``'s ``task_template``. The module is imported by its
dotted name from its project root (the first folder above it without an ``__init__.py``), which is how the
task's container (``a0 … mod <module> instance <task>``) will import it: the image must hold the module there.
With ``--local`` the container's environment also gets what taskplug's embedded cluster needs to run the task on
this machine (which ignores images): ``PYTHONPATH`` = the project root and ``PATH`` with this Python's ``bin``
(and its ``a0``) first.
"""

from __future__ import annotations

import argparse
import importlib
import pathlib
import sys

from flyte._task import TaskTemplate
from flyte.extras import serialize
from flyte.models import SerializationContext
from flyteidl2.core import literals_pb2


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("module", type=pathlib.Path, help="the Flyte 2 module (a .py file)")
    parser.add_argument("task", help="the task's name in the module")
    parser.add_argument("out", type=pathlib.Path, help="where to write the binary TaskTemplate")
    parser.add_argument("--version", default="v1", help="the task's version [default: v1]")
    parser.add_argument("--project", default="flytesnacks")
    parser.add_argument("--domain", default="development")
    parser.add_argument("--local", action="store_true", help="for taskplug's embedded cluster (see above)")
    args = parser.parse_args()

    source = args.module.resolve()
    root = source.parent
    while (root / "__init__.py").exists():
        root = root.parent
    sys.path.insert(0, str(root))
    module = importlib.import_module(".".join(source.relative_to(root).with_suffix("").parts))
    task = getattr(module, args.task, None)
    if not isinstance(task, TaskTemplate):
        tasks = sorted(name for name, value in vars(module).items() if isinstance(value, TaskTemplate))
        parser.error(f"{args.module} has no task {args.task!r}: it has {', '.join(tasks) or 'none'}")
    context = SerializationContext(
        version=args.version, project=args.project, domain=args.domain, root_dir=root
    )
    template = serialize(task, context).task_template
    if args.local and template.HasField("container"):
        template.container.env.extend(
            [
                literals_pb2.KeyValuePair(key="PYTHONPATH", value=str(root)),
                literals_pb2.KeyValuePair(
                    key="PATH", value=f"{pathlib.Path(sys.executable).parent}:/usr/bin:/bin"
                ),
            ]
        )
    args.out.write_bytes(template.SerializeToString())
    print(f"wrote {template.type} task {template.id.name} to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
