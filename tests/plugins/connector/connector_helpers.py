"""Helpers for the connector plugin tests: task contexts, templates, literals."""

from __future__ import annotations

from pathlib import Path

from flyteidl.core import identifier_pb2, interface_pb2, literals_pb2, security_pb2, tasks_pb2, types_pb2

from taskplug.core import (
    StaticInputReader,
    StaticOutputWriter,
    StaticTaskExecutionContext,
    StaticTaskReader,
    TaskExecutionID,
    TaskExecutionMetadata,
)

HERE = Path(__file__).resolve().parent


def task_execution_id(name: str = "exec1") -> TaskExecutionID:
    ident = identifier_pb2.TaskExecutionIdentifier(
        task_id=identifier_pb2.Identifier(
            resource_type=identifier_pb2.TASK, project="p", domain="d", name="t", version="v1"
        ),
        node_execution_id=identifier_pb2.NodeExecutionIdentifier(
            node_id="n0",
            execution_id=identifier_pb2.WorkflowExecutionIdentifier(project="p", domain="d", name=name),
        ),
        retry_attempt=0,
    )
    return TaskExecutionID(generated_name=f"{name}-n0-0", id=ident, unique_node_id="n0")


def make_tctx(
    template: tasks_pb2.TaskTemplate,
    inputs: literals_pb2.LiteralMap | None = None,
    *,
    output_prefix: str = "/tmp/123",
    name: str = "exec1",
) -> StaticTaskExecutionContext:
    metadata = TaskExecutionMetadata(
        task_execution_id=task_execution_id(name),
        namespace="p-d",
        labels={"team": "a"},
        annotations={"note": "b"},
        k8s_service_account="runner",
        environment_variables={"ENV": "1"},
        security_context=security_pb2.SecurityContext(run_as=security_pb2.Identity(k8s_service_account="sa")),
        max_attempts=3,
        interruptible=True,
    )
    return StaticTaskExecutionContext(
        metadata=metadata,
        task_reader=StaticTaskReader(template),
        input_reader=StaticInputReader(inputs, input_prefix="/in"),
        output_writer=StaticOutputWriter(output_prefix=output_prefix, raw_output_prefix="/raw"),
    )


def int_outputs(*names: str) -> interface_pb2.TypedInterface:
    return interface_pb2.TypedInterface(
        outputs=interface_pb2.VariableMap(
            variables={
                n: interface_pb2.Variable(type=types_pb2.LiteralType(simple=types_pb2.SimpleType.INTEGER))
                for n in names
            }
        )
    )


def int_literals(**values: int) -> literals_pb2.LiteralMap:
    return literals_pb2.LiteralMap(
        literals={
            k: literals_pb2.Literal(scalar=literals_pb2.Scalar(primitive=literals_pb2.Primitive(integer=v)))
            for k, v in values.items()
        }
    )


def string_literals(**values: str) -> literals_pb2.LiteralMap:
    return literals_pb2.LiteralMap(
        literals={
            k: literals_pb2.Literal(
                scalar=literals_pb2.Scalar(primitive=literals_pb2.Primitive(string_value=v))
            )
            for k, v in values.items()
        }
    )


def container_template(task_type: str = "spark", *, args: list[str] | None = None) -> tasks_pb2.TaskTemplate:
    return tasks_pb2.TaskTemplate(
        id=identifier_pb2.Identifier(resource_type=identifier_pb2.TASK, project="p", domain="d", name="t"),
        type=task_type,
        container=tasks_pb2.Container(
            image="img", args=args or ["pyflyte-fast-execute", "--output-prefix", "{{.outputPrefix}}"]
        ),
    )
