"""A launch plan's inputs, as flyteadmin computes them: the inputs it expects (at registration) and an
execution's inputs (at launch).

- :func:`expected_inputs` follows ``flyteadmin/pkg/manager/impl/validation/launch_plan_validator.go
  checkAndFetchExpectedInputForLaunchPlan``: each workflow input is the launch plan's default parameter when
  it has one; else, unless the launch plan fixes it, a required parameter typed by the workflow; a fixed input
  is not expected at all. A default or fixed input the workflow does not declare, or of a type that cannot
  be cast to the workflow's, is refused with Admin's message.
- :func:`execution_inputs` follows ``validation/execution_validator.go CheckAndFetchInputsForExecution``:
  a given input must be expected and castable to its type, a required one must be given, an optional one
  left out takes its default, and the fixed inputs are added last (one already present cannot be
  overridden).
- :func:`workflow_inputs_from_plain` types plain values (a YAML spec's ``inputs``, command-line options) by
  the workflow's interface, as :func:`~taskplug.core.literal_map_from_plain` does a task's.

Every refusal is a :class:`~taskplug.core.SpecError` whose reason is Admin's message (what ``flytectl``
prints after ``InvalidArgument``) and whose path names the input, so ``taskplug run`` exits 2 naming it.

Admin iterates Go maps (a random order): when several inputs are wrong, which one it names varies. Here the
names are taken in sorted order, so the same input is named every time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flyteidl.admin import launch_plan_pb2
from flyteidl.core import interface_pb2, literals_pb2, types_pb2

from taskplug.compiler._bundle import WorkflowBundle
from taskplug.compiler._typing import go_text
from taskplug.core import SpecError, literal_map_from_plain

__all__ = [
    "execution_inputs",
    "expected_inputs",
    "launch_inputs",
    "workflow_inputs_from_plain",
]

_Simple = types_pb2.SimpleType


def expected_inputs(
    launch_plan: launch_plan_pb2.LaunchPlan, workflow_interface: interface_pb2.TypedInterface
) -> interface_pb2.ParameterMap:
    """The inputs an execution of ``launch_plan`` takes (Admin's ``closure.expected_inputs``), given the
    interface of the workflow it runs. Errors are :class:`SpecError` at ``launchPlan.<which>.<name>``."""
    declared = workflow_interface.inputs.variables
    defaults = launch_plan.spec.default_inputs.parameters
    fixed = launch_plan.spec.fixed_inputs.literals
    if not declared:
        if defaults:
            raise SpecError(
                "launchPlan.defaultInputs",
                f"invalid launch plan default inputs, expected none but found {len(defaults)}",
            )
        if fixed:
            raise SpecError(
                "launchPlan.fixedInputs",
                f"invalid launch plan fixed inputs, expected none but found {len(fixed)}",
            )
        return interface_pb2.ParameterMap()
    for name in sorted(defaults):
        where = f"launchPlan.defaultInputs.{name}"
        if name not in declared:
            raise SpecError(where, f"unexpected default_input {name}")
        # Admin's message names the default's type as "expected" and the workflow's as "got".
        default_type, workflow_type = defaults[name].var.type, declared[name].type
        if not _types_castable(default_type, workflow_type):
            raise SpecError(
                where,
                f"invalid default_input wrong type {name}, expected {go_text(default_type)}, "
                f"got {go_text(workflow_type)} instead",
            )
    for name in sorted(fixed):
        where = f"launchPlan.fixedInputs.{name}"
        if name not in declared:
            raise SpecError(where, f"unexpected fixed_input {name}")
        fixed_type = _literal_type_of(fixed[name])
        if not _types_castable(fixed_type, declared[name].type):
            raise SpecError(
                where,
                f"invalid fixed_input wrong type {name}, expected {go_text(declared[name].type)}, "
                f"got {go_text(fixed_type)} instead",
            )
    out = interface_pb2.ParameterMap()
    for name, variable in declared.items():
        if name in defaults:
            out.parameters[name].CopyFrom(defaults[name])
        elif name not in fixed:
            parameter = out.parameters[name]
            parameter.var.type.CopyFrom(variable.type)
            parameter.var.description = variable.description
            parameter.required = True
    return out


def execution_inputs(
    launch_plan: launch_plan_pb2.LaunchPlan,
    expected: interface_pb2.ParameterMap,
    given: literals_pb2.LiteralMap,
    *,
    partial: bool = False,
) -> literals_pb2.LiteralMap:
    """The inputs of an execution of ``launch_plan`` whose user gave ``given``: checked against the
    ``expected`` inputs (:func:`expected_inputs`), completed with their defaults and the launch plan's fixed
    inputs. Errors are :class:`SpecError` at ``inputs.<name>``. ``partial``: a required input not given is
    left out instead of refused (``taskplug render`` of a workflow, whose compiled closure does not depend on
    its inputs)."""
    parameters = expected.parameters
    out = literals_pb2.LiteralMap()
    for name in sorted(given.literals):
        if name not in parameters:
            raise SpecError(f"inputs.{name}", f"invalid input {name}")
        out.literals[name].CopyFrom(given.literals[name])
    for name in sorted(parameters):
        parameter = parameters[name]
        if name not in out.literals:
            if parameter.required and partial:
                continue
            if parameter.required:
                raise SpecError(f"inputs.{name}", f"expected_inputs {name} missing")
            if not parameter.HasField("default"):
                # Deviation: Admin stores a nil literal for an input neither required nor defaulted (a
                # default that is an artifact query, which only Flyte's artifact service resolves), and the
                # execution then fails reading it; refused here, before anything runs.
                raise SpecError(
                    f"inputs.{name}",
                    f"expected_inputs {name} missing (its default is an artifact query, which taskplug "
                    "cannot resolve)",
                )
            out.literals[name].CopyFrom(parameter.default)
            continue
        given_type = _literal_type_of(out.literals[name])
        if not _types_castable(given_type, parameter.var.type):
            raise SpecError(
                f"inputs.{name}",
                f"invalid {name} input wrong type. Expected {go_text(parameter.var.type)}, "
                f"but got {go_text(given_type)}",
            )
    fixed = launch_plan.spec.fixed_inputs.literals
    for name in sorted(fixed):
        if name in out.literals:
            raise SpecError(f"inputs.{name}", f"fixed_inputs {name} cannot be overridden")
        out.literals[name].CopyFrom(fixed[name])
    return out


def workflow_inputs_from_plain(
    values: Mapping[str, Any], interface: interface_pb2.TypedInterface, *, path: str = "inputs"
) -> literals_pb2.LiteralMap:
    """Plain values (or Literal JSON) of a workflow's inputs as a LiteralMap typed by its interface. A name
    the workflow does not declare is Admin's ``invalid input <name>``."""
    declared = interface.inputs.variables
    for name in values:
        if name not in declared:
            raise SpecError(f"{path}.{name}", f"invalid input {name}")
    return literal_map_from_plain(values, interface.inputs, path)


def launch_inputs(
    bundle: WorkflowBundle, values: Mapping[str, Any], *, partial: bool = False
) -> literals_pb2.LiteralMap:
    """The inputs of an execution of ``bundle``'s launch plan whose user gave the plain ``values``: the
    expected inputs computed, the values typed by the workflow's interface, then merged as Admin merges them
    (``partial``: see :func:`execution_inputs`)."""
    expected = expected_inputs(bundle.launch_plan, bundle.workflow.interface)
    given = workflow_inputs_from_plain(values, bundle.workflow.interface)
    return execution_inputs(bundle.launch_plan, expected, given, partial=partial)


# -- types of literals, and whether one casts to another -------------------------------------------------------


def _literal_type_of(literal: literals_pb2.Literal) -> types_pb2.LiteralType:
    """The type of a literal as Admin infers it (``compiler/validators/utils.go LiteralTypeForLiteral``):
    a collection's or map's element type is its elements' one type, a union of them when they differ, NONE
    when empty."""
    kind = literal.WhichOneof("value")
    if kind == "collection":
        return types_pb2.LiteralType(collection_type=_common_type(literal.collection.literals))
    if kind == "map":
        return types_pb2.LiteralType(map_value_type=_common_type(literal.map.literals.values()))
    if kind == "offloaded_metadata":
        return literal.offloaded_metadata.inferred_type
    if kind != "scalar":
        return types_pb2.LiteralType()
    scalar = literal.scalar
    which = scalar.WhichOneof("value")
    if which == "primitive":
        simple = {
            "integer": _Simple.INTEGER,
            "float_value": _Simple.FLOAT,
            "string_value": _Simple.STRING,
            "boolean": _Simple.BOOLEAN,
            "datetime": _Simple.DATETIME,
            "duration": _Simple.DURATION,
        }.get(scalar.primitive.WhichOneof("value") or "", _Simple.NONE)
        return types_pb2.LiteralType(simple=simple)
    if which == "blob":
        return types_pb2.LiteralType(blob=scalar.blob.metadata.type)
    if which == "schema":
        return types_pb2.LiteralType(schema=scalar.schema.type)
    if which == "none_type":
        return types_pb2.LiteralType(simple=_Simple.NONE)
    if which == "error":
        return types_pb2.LiteralType(simple=_Simple.ERROR)
    if which == "generic":
        return types_pb2.LiteralType(simple=_Simple.STRUCT)
    if which == "binary":
        return types_pb2.LiteralType(simple=_Simple.BINARY)
    if which == "structured_dataset":
        metadata = scalar.structured_dataset.metadata.structured_dataset_type
        return types_pb2.LiteralType(
            structured_dataset_type=types_pb2.StructuredDatasetType(format=metadata.format)
        )
    if which == "union":
        return scalar.union.type
    return types_pb2.LiteralType()


def _common_type(literals: Any) -> types_pb2.LiteralType:
    distinct: dict[bytes, types_pb2.LiteralType] = {}
    for item in literals:
        found = _literal_type_of(item)
        distinct.setdefault(found.SerializeToString(deterministic=True), found)
    if not distinct:
        return types_pb2.LiteralType(simple=_Simple.NONE)
    if len(distinct) == 1:
        return next(iter(distinct.values()))
    return types_pb2.LiteralType(union_type=types_pb2.UnionType(variants=list(distinct.values())))


def _types_castable(upstream: types_pb2.LiteralType, downstream: types_pb2.LiteralType) -> bool:
    """The one place launch-plan inputs ask whether a type casts to another.

    TODO(merge): call ``taskplug.compiler.are_types_castable(upstream, downstream)`` (flytepropeller's
    ``compiler/validators/typing.go AreTypesCastable``, written beside this module) here; until then a
    structural check that accepts what flytekit produces for a declared type. (:func:`_literal_type_of`, the
    upstream side for a literal, may likewise give way to the compiler's ``LiteralTypeForLiteral``.)"""
    return _structurally_castable(upstream, downstream)


def _structurally_castable(upstream: types_pb2.LiteralType, downstream: types_pb2.LiteralType) -> bool:
    up, down = upstream.WhichOneof("type"), downstream.WhichOneof("type")
    if down == "union_type":
        if up == "union_type":
            return all(_structurally_castable(u, downstream) for u in upstream.union_type.variants)
        return any(_structurally_castable(upstream, v) for v in downstream.union_type.variants)
    if up == "union_type":
        return all(_structurally_castable(u, downstream) for u in upstream.union_type.variants)
    if down == "collection_type":
        return up == "collection_type" and _element_castable(
            upstream.collection_type, downstream.collection_type
        )
    if down == "map_value_type":
        return up == "map_value_type" and _element_castable(
            upstream.map_value_type, downstream.map_value_type
        )
    if down == "blob":
        if up != "blob":
            return False
        a, b = upstream.blob, downstream.blob
        return bool(
            a.dimensionality == b.dimensionality and (not a.format or not b.format or a.format == b.format)
        )
    if down == "structured_dataset_type":
        if up != "structured_dataset_type":
            return False
        a_format, b_format = (
            upstream.structured_dataset_type.format,
            downstream.structured_dataset_type.format,
        )
        return bool(not a_format or not b_format or a_format == b_format)
    if down == "schema":
        return bool(up == "schema")
    if down == "enum_type":
        # flytekit passes an enum's value as a string.
        return bool(
            (up == "simple" and upstream.simple == _Simple.STRING)
            or (up == "enum_type" and set(upstream.enum_type.values) <= set(downstream.enum_type.values))
        )
    if down == "simple":
        if up != "simple":
            return False
        if upstream.simple == downstream.simple:
            return True
        # A dataclass or dict input travels as msgpack bytes (flytekit 1.14+), typed STRUCT.
        return bool(upstream.simple == _Simple.BINARY and downstream.simple == _Simple.STRUCT)
    return bool(up == down)


def _element_castable(upstream: types_pb2.LiteralType, downstream: types_pb2.LiteralType) -> bool:
    # An empty collection or map has elements of type NONE: it fits any element type.
    if upstream.WhichOneof("type") == "simple" and upstream.simple == _Simple.NONE:
        return True
    return _structurally_castable(upstream, downstream)
