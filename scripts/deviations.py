"""Print docs/deviations.md: every deliberate difference from Flyte marked ``Deviation:`` in the source.

    .venv/bin/python scripts/deviations.py > docs/deviations.md

tests/docs/test_deviations_doc.py fails when the file is out of date, so the list cannot drift.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_MARK = re.compile(r"Deviation(?: \([^)]*\))?:\s*(.*)")


_DOCSTRING_END = ('"""', "'''")


def _continuation(lines: list[str], start: int) -> list[str]:
    """The rest of the sentence: more comment lines after a ``#`` mark, more text lines in a docstring."""
    in_comment = lines[start].lstrip().startswith("#")
    if not in_comment and lines[start].rstrip().endswith(_DOCSTRING_END):
        return []  # the mark's sentence ends with its docstring
    out: list[str] = []
    for line in lines[start + 1 :]:
        stripped = line.strip()
        if in_comment:
            if not stripped.startswith("#"):
                break
            text = stripped.lstrip("#").strip()
        else:
            if not stripped or stripped.startswith((*_DOCSTRING_END, "*", "- ")):
                break
            text = stripped
        if not text or _MARK.search(text):
            break
        closes = not in_comment and text.endswith(_DOCSTRING_END)
        for end in _DOCSTRING_END:
            text = text.removesuffix(end).strip()
        out.append(text)
        if closes:
            break  # the docstring ends with this line; what follows is code
    return out


def collect() -> list[tuple[str, int, str]]:
    found = []
    for path in sorted((ROOT / "src" / "taskplug").rglob("*.py")):
        lines = path.read_text().splitlines()
        for number, line in enumerate(lines):
            match = _MARK.search(line)
            if match is None:
                continue
            text = " ".join([match.group(1).strip(), *_continuation(lines, number)]).strip()
            text = text.rstrip('"').strip()
            found.append((str(path.relative_to(ROOT)), number + 1, text))
    return found


def render() -> str:
    out = [
        "# Deliberate deviations from Flyte",
        "",
        "Where Flyte has a bug or a quirk that hurts its users, taskplug does what is right and marks the place",
        "with `Deviation:` in the code. This list is generated from those marks by `scripts/deviations.py`",
        "(the test suite fails when it is out of date). Quirks a Flyte user observes and relies on — the",
        '"Demistify Pending" reason, the zero `sizeLimit` on shared memory, `WithVersion` dropping the cleanup',
        "flag — are reproduced, not listed here.",
        "",
    ]
    current = None
    for path, _line, text in collect():
        module = path.removeprefix("src/")
        if module != current:
            out += ["", f"## `{module}`", ""]
            current = module
        out.append(f"- {text}")
    return "\n".join(out).replace("\n\n\n", "\n\n") + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
