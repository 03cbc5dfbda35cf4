"""The gate node's pure rules (flytepropeller nodes/gate/handler.go) over gates that flytekit 1.16 serializes
from a real workflow: ``sleep``, ``approve`` and ``wait_for_input``."""

from __future__ import annotations

from collections import OrderedDict
from datetime import timedelta

import pytest
from flyteidl.core import literals_pb2, types_pb2, workflow_pb2
from flytekit import approve, sleep, task, wait_for_input, workflow
from flytekit.configuration import ImageConfig, SerializationSettings
from flytekit.tools.translator import get_serializable

from taskplug.core import plain_to_literal
from taskplug.executor.nodes._gate_rules import GateOutcome, GatePhase, evaluate_gate, signal_request


@task
def double(x: int) -> int:
    return x * 2


@task
def add(a: int, b: int) -> int:
    return a + b


@workflow
def gated(x: int) -> int:
    y = double(x=x)
    approved = approve(y, "approve-y", timeout=timedelta(hours=2))
    count = wait_for_input("count", timeout=timedelta(minutes=5), expected_type=int)
    pause = sleep(timedelta(seconds=3))
    y >> pause
    return add(a=approved, b=count)


def _gates() -> dict[str, workflow_pb2.GateNode]:
    settings = SerializationSettings(image_config=ImageConfig.auto_default_image())
    entity = get_serializable(OrderedDict(), settings, gated)
    found = {}
    for node in entity.template.nodes:
        proto = node.to_flyte_idl()
        if proto.HasField("gate_node"):
            found[proto.gate_node.WhichOneof("condition")] = proto.gate_node
    return found


GATES = _gates()
INT = types_pb2.LiteralType(simple=types_pb2.SimpleType.INTEGER)
BOOL = types_pb2.LiteralType(simple=types_pb2.SimpleType.BOOLEAN)


def _inputs() -> literals_pb2.LiteralMap:
    out = literals_pb2.LiteralMap()
    out.literals["o0"].CopyFrom(plain_to_literal(42, INT, "o0"))
    return out


def _evaluate(
    kind: str, value: literals_pb2.Literal | None, *, started: float | None = 100.0, now: float = 100.0
) -> GateOutcome:
    return evaluate_gate(GATES[kind], started_at=started, now=now, signal_value=value, inputs=_inputs())


def test_flytekit_serializes_the_three_gate_kinds() -> None:
    assert set(GATES) == {"sleep", "approve", "signal"}


def test_the_signal_requested_is_boolean_for_approve_the_declared_type_for_a_signal_and_none_for_sleep() -> (
    None
):
    assert signal_request(GATES["approve"]) == ("approve-y", BOOL)
    assert signal_request(GATES["signal"]) == ("count", INT)
    assert signal_request(GATES["sleep"]) is None


@pytest.mark.parametrize(
    ("started", "now", "expected"),
    [
        (None, 500.0, GateOutcome.waiting(3.0)),  # not started yet: the whole duration is left
        (100.0, 100.0, GateOutcome.waiting(3.0)),
        (100.0, 101.5, GateOutcome.waiting(1.5)),
        (100.0, 103.0, GateOutcome.succeeded(literals_pb2.LiteralMap())),  # duration <= elapsed
        (100.0, 250.0, GateOutcome.succeeded(literals_pb2.LiteralMap())),
    ],
)
def test_a_sleep_waits_the_seconds_left_since_the_attempt_started_then_succeeds_without_outputs(
    started: float | None, now: float, expected: GateOutcome
) -> None:
    assert _evaluate("sleep", None, started=started, now=now) == expected


@pytest.mark.parametrize("kind", ["approve", "signal"])
def test_a_gate_without_a_value_waits_for_a_person(kind: str) -> None:
    assert _evaluate(kind, None) == GateOutcome.waiting(None)
    # A signal created by GetOrCreateSignal holds an empty Literal until it is set.
    assert _evaluate(kind, literals_pb2.Literal()) == GateOutcome.waiting(None)


def test_an_approval_passes_the_node_inputs_through_as_its_outputs() -> None:
    outcome = _evaluate("approve", plain_to_literal(True, BOOL, "v"))
    assert outcome.phase is GatePhase.SUCCEEDED
    assert outcome.outputs == _inputs()


def test_a_rejection_fails_the_node_as_a_user_error() -> None:
    assert _evaluate("approve", plain_to_literal(False, BOOL, "v")) == GateOutcome.failed(
        "USER", "ReceivedRejectSignal", "received a reject signal to disapprove the node input values"
    )


def test_a_non_boolean_approval_fails_the_node_with_an_unknown_runtime_error_naming_the_value() -> None:
    outcome = _evaluate("approve", plain_to_literal(1, INT, "v"))
    assert outcome.phase is GatePhase.FAILED and outcome.error is not None
    assert (outcome.error["kind"], outcome.error["code"]) == ("UNKNOWN", "RuntimeExecutionError")
    assert outcome.error["message"].startswith("received a non-boolean approve signal value [")
    assert "integer: 1" in outcome.error["message"]


def test_a_signal_value_becomes_the_output_named_by_the_gate() -> None:
    value = plain_to_literal(7, INT, "v")
    outcome = _evaluate("signal", value)
    assert outcome.phase is GatePhase.SUCCEEDED and outcome.outputs is not None
    assert dict(outcome.outputs.literals) == {"o0": value}


def test_a_gate_without_a_condition_fails_as_a_bad_specification() -> None:
    outcome = evaluate_gate(
        workflow_pb2.GateNode(), started_at=0.0, now=0.0, signal_value=None, inputs=literals_pb2.LiteralMap()
    )
    assert outcome.error == {
        "code": "BadSpecificationError",
        "message": "gateNode does not have a supported condition reference",
        "kind": "SYSTEM",
    }
