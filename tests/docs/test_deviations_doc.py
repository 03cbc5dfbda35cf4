"""docs/deviations.md lists every ``Deviation:`` mark in the source (it is generated; regenerate with
``.venv/bin/python scripts/deviations.py > docs/deviations.md``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_deviations_document_is_up_to_date() -> None:
    spec = importlib.util.spec_from_file_location("deviations", ROOT / "scripts" / "deviations.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    expected = module.render()
    assert (ROOT / "docs" / "deviations.md").read_text() == expected, (
        "docs/deviations.md is stale: run .venv/bin/python scripts/deviations.py > docs/deviations.md"
    )
    assert expected.count("\n- ") >= 20  # the marks are really found
