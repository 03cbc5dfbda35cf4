"""The command line's one-line errors: a traceback is said by its exception, the whole of it."""

from __future__ import annotations

from taskplug.cli._text import error_text, exception_text, reason_line

FLYTEKIT_ERROR = """Trace:

    Traceback (most recent call last):
      File "/venv/flytekit/core/base_task.py", line 767, in dispatch_execute
        native_outputs = self.execute(**native_inputs)
      File "/work/wf.py", line 80, in inner
        s = scale(x=i) if s == 0 else 0
    ValueError: Cannot perform truth value testing. Expr Comp(Promise(node:dn0.o0.[]) == Literal):
      scalar:
        primitive:
          integer: 0)

Message:

    ValueError: Cannot perform truth value testing. Expr Comp(Promise(node:dn0.o0.[]) == Literal):
      scalar:
        primitive:
          integer: 0)"""

PYTHON_TRACEBACK = """Traceback (most recent call last):
  File "<string>", line 1, in <module>
    raise KeyError("a")
  File "x.py", line 2, in f
    pass
KeyError: 'a'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "<string>", line 3, in <module>
    raise RuntimeError("first line\\nsecond line")
RuntimeError: first line
second line
"""


def test_a_flytekit_error_is_said_by_its_message_section_whole() -> None:
    text = exception_text(FLYTEKIT_ERROR)
    assert text.startswith("ValueError: Cannot perform truth value testing.")
    assert text.endswith("integer: 0)")
    assert "Traceback" not in text and "File " not in text
    assert error_text(FLYTEKIT_ERROR).startswith("ValueError: Cannot perform")


def test_a_python_traceback_is_said_by_its_last_exception_with_all_its_lines() -> None:
    assert exception_text(PYTHON_TRACEBACK) == "RuntimeError: first line\nsecond line"
    assert error_text(PYTHON_TRACEBACK) == "RuntimeError: first line second line"


def test_other_reasons_are_kept_as_they_are() -> None:
    assert reason_line("OOMKilled: the container used more than 256Mi") == (
        "OOMKilled: the container used more than 256Mi"
    )
    assert error_text("a\n  b", limit=3) == "a b"
    assert error_text("x" * 10, limit=5) == "xxxx…"
