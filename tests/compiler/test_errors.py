"""How compile errors read: Flyte's ``Code: …, Node Id: …, Description: …``, several sorted by code then
text with duplicates merged, and a user error the CLI answers with exit code 2."""

from __future__ import annotations

import pytest

from taskplug.cli._output import EXIT_BAD_INPUT, handles_bad_input
from taskplug.compiler import COMPILE_ERROR, CompileError, CompileErrors
from taskplug.core import TaskplugError


def test_one_error_reads_as_flytes_compile_error() -> None:
    error = CompileErrors([CompileError("ParameterNotBound", "n1", "Parameter not bound [b].")])
    assert str(error) == "Code: ParameterNotBound, Node Id: n1, Description: Parameter not bound [b]."
    assert error.code == COMPILE_ERROR == "CompileError"
    assert isinstance(error, TaskplugError)


def test_several_are_sorted_by_code_then_text_and_merged() -> None:
    unbound_b = CompileError("ParameterNotBound", "n1", "Parameter not bound [b].")
    unbound_a = CompileError("ParameterNotBound", "n2", "Parameter not bound [a].")
    cycle = CompileError(
        "CycleDetected", "start-node", "A cycle has been detected while traversing the Workflow [x]."
    )
    error = CompileErrors([unbound_b, unbound_a, cycle, unbound_b])
    assert error.errors == (cycle, unbound_b, unbound_a)
    assert str(error) == (
        "Collected Errors: 3\n"
        "\tError 0: Code: CycleDetected, Node Id: start-node, Description: A cycle has been detected while "
        "traversing the Workflow [x].\n"
        "\tError 1: Code: ParameterNotBound, Node Id: n1, Description: Parameter not bound [b].\n"
        "\tError 2: Code: ParameterNotBound, Node Id: n2, Description: Parameter not bound [a]."
    )


def test_the_cli_exits_2_on_a_compile_error(capsys: pytest.CaptureFixture[str]) -> None:
    @handles_bad_input
    def run() -> None:
        raise CompileErrors([CompileError("NoNodesFound", "wf", "Can't find any nodes in workflow [wf].")])

    with pytest.raises(SystemExit) as exited:
        run()
    assert exited.value.code == EXIT_BAD_INPUT == 2
    assert "Code: NoNodesFound, Node Id: wf" in capsys.readouterr().err
