"""The gate node's rules (flytekit's ``sleep``, ``approve`` and ``wait_for_input``): pure decisions, no I/O.

Follows flytepropeller/pkg/controller/nodes/gate/handler.go. A round of a gate node asks the signal store for
its signal (``get_or_create_signal``, what :func:`signal_request` names) and hands the answer to
:func:`evaluate_gate`, which says whether the node still waits (and, for a sleep, for how long, so that the
executor can wake it exactly on time), succeeded (with its outputs) or failed (with propeller's error).

- sleep: done once ``now - started_at >= duration`` (``started_at`` is the attempt's start, propeller's
  ``LastAttemptStartedAt``); no outputs.
- approve: a BOOLEAN signal named by the gate; ``true`` passes the node's inputs through as its outputs,
  ``false`` fails it ``USER ReceivedRejectSignal``, any other value fails it ``UNKNOWN RuntimeExecutionError``.
- signal: a signal of the declared type; its value becomes the output ``output_variable_name``.

Deviation: propeller notices an ended sleep only when it evaluates the workflow again; the outcome here
carries the seconds left, so a local executor wakes the node when the sleep ends.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

from flyteidl.core import literals_pb2, types_pb2, workflow_pb2
from google.protobuf import text_format

__all__ = [
    "BAD_SPECIFICATION",
    "RECEIVED_REJECT_SIGNAL",
    "RUNTIME_EXECUTION_ERROR",
    "GateOutcome",
    "GatePhase",
    "evaluate_gate",
    "signal_request",
]

RECEIVED_REJECT_SIGNAL: Final = "ReceivedRejectSignal"
RUNTIME_EXECUTION_ERROR: Final = "RuntimeExecutionError"
BAD_SPECIFICATION: Final = "BadSpecificationError"

_BOOLEAN: Final = types_pb2.LiteralType(simple=types_pb2.SimpleType.BOOLEAN)


class GatePhase(enum.Enum):
    WAITING = "waiting"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class GateOutcome:
    """What a round of a gate node decided; built by :meth:`waiting`, :meth:`succeeded`, :meth:`failed`.

    ``wake_in``: while waiting on a sleep, the seconds until it ends (None: waiting on a person, woken by
    the signal being set). ``outputs``: once succeeded. ``error``: once failed, ``{code, message, kind}``
    as the node step's ``error_json`` writes an error (``kind`` is flyteidl's ExecutionError kind name,
    ``USER``, ``SYSTEM`` or ``UNKNOWN``)."""

    phase: GatePhase
    wake_in: float | None = None
    outputs: literals_pb2.LiteralMap | None = None
    error: dict[str, str] | None = None

    @classmethod
    def waiting(cls, wake_in: float | None = None) -> GateOutcome:
        return cls(GatePhase.WAITING, wake_in=wake_in)

    @classmethod
    def succeeded(cls, outputs: literals_pb2.LiteralMap) -> GateOutcome:
        return cls(GatePhase.SUCCEEDED, outputs=outputs)

    @classmethod
    def failed(cls, kind: str, code: str, message: str) -> GateOutcome:
        return cls(GatePhase.FAILED, error={"code": code, "message": message, "kind": kind})


def signal_request(gate: workflow_pb2.GateNode) -> tuple[str, types_pb2.LiteralType] | None:
    """The signal a gate waits for, as ``(signal_id, type)`` to ask the store for (``GetOrCreateSignal``):
    BOOLEAN for an approve gate, the declared type for a signal gate; None for a sleep (or no condition)."""
    kind = gate.WhichOneof("condition")
    if kind == "approve":
        return gate.approve.signal_id, _BOOLEAN
    if kind == "signal":
        return gate.signal.signal_id, gate.signal.type
    return None


def evaluate_gate(
    gate: workflow_pb2.GateNode,
    *,
    started_at: float | None,
    now: float,
    signal_value: literals_pb2.Literal | None,
    inputs: literals_pb2.LiteralMap,
) -> GateOutcome:
    """One round of ``gate``: ``started_at`` is the current attempt's start (epoch seconds; None before it is
    recorded), ``now`` the clock's reading, ``signal_value`` what the store answered for
    :func:`signal_request` (None, or a Literal holding nothing: not set yet), ``inputs`` the node's
    resolved inputs (an approve gate's pass-through)."""
    kind = gate.WhichOneof("condition")
    if kind == "sleep":
        duration = gate.sleep.duration.seconds + gate.sleep.duration.nanos / 1e9
        if started_at is None:
            return GateOutcome.waiting(duration)
        left = duration - (now - started_at)
        return GateOutcome.succeeded(literals_pb2.LiteralMap()) if left <= 0 else GateOutcome.waiting(left)
    if kind == "approve":
        if not _has_value(signal_value):
            return GateOutcome.waiting()
        assert signal_value is not None
        approved = _boolean(signal_value)
        if approved is None:
            return GateOutcome.failed(
                "UNKNOWN",
                RUNTIME_EXECUTION_ERROR,
                f"received a non-boolean approve signal value [{_shown(signal_value)}]",
            )
        if not approved:
            return GateOutcome.failed(
                "USER", RECEIVED_REJECT_SIGNAL, "received a reject signal to disapprove the node input values"
            )
        passed = literals_pb2.LiteralMap()
        passed.CopyFrom(inputs)
        return GateOutcome.succeeded(passed)
    if kind == "signal":
        if not _has_value(signal_value):
            return GateOutcome.waiting()
        assert signal_value is not None
        outputs = literals_pb2.LiteralMap()
        outputs.literals[gate.signal.output_variable_name].CopyFrom(signal_value)
        return GateOutcome.succeeded(outputs)
    return GateOutcome.failed(
        "SYSTEM", BAD_SPECIFICATION, "gateNode does not have a supported condition reference"
    )


def _has_value(literal: literals_pb2.Literal | None) -> bool:
    # propeller: ``signal.Value != nil && signal.Value.Value != nil`` — an empty Literal is no answer.
    return literal is not None and literal.WhichOneof("value") is not None


def _boolean(literal: literals_pb2.Literal) -> bool | None:
    """The literal's boolean, or None when it is not a boolean primitive (propeller's ``getBoolean``)."""
    if literal.WhichOneof("value") != "scalar" or literal.scalar.WhichOneof("value") != "primitive":
        return None
    primitive = literal.scalar.primitive
    return primitive.boolean if primitive.WhichOneof("value") == "boolean" else None


def _shown(literal: literals_pb2.Literal) -> str:
    # Go prints the message in its compact text form; protobuf's one-line text format is the closest.
    return str(text_format.MessageToString(literal, as_one_line=True))
