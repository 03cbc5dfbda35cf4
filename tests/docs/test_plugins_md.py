"""docs/plugins.md is tested: every ```python block runs, in order, in one namespace (later blocks build on
earlier ones), and the checks the last blocks make pass. Tracebacks point at the guide's own lines."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import yaml

from taskplug.core import Phase, PhaseInfo
from taskplug.testing import ContractReport

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "plugins.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\s*$", re.S | re.M)


def blocks(language: str) -> list[tuple[int, str]]:
    """(line of the block's first code line, code) of every fenced block in ``language``."""
    text = GUIDE.read_text()
    return [
        (text.count("\n", 0, m.start(2)) + 1, m.group(2))
        for m in FENCE.finditer(text)
        if m.group(1) == language
    ]


def test_the_guide_walks_every_step_with_code() -> None:
    headings = re.findall(r"^## (\d+)\. ", GUIDE.read_text(), re.M)
    assert headings == [str(n) for n in range(1, 10)]
    assert len(blocks("python")) >= 9


def test_every_python_block_runs_in_order_in_one_namespace() -> None:
    namespace: dict[str, Any] = {"__name__": "docs_plugins_md"}
    for line, code in blocks("python"):
        # Padding keeps line numbers: a failure is reported at docs/plugins.md:<line>.
        exec(compile("\n" * (line - 1) + code, str(GUIDE), "exec"), namespace)
    report = namespace["report"]
    assert isinstance(report, ContractReport)
    assert report.passed, str(report)
    final = namespace["round_trip"]
    assert callable(final)
    assert isinstance(namespace["failed"], PhaseInfo)
    assert namespace["pending"].phase is Phase.INITIALIZING


def test_the_shown_report_matches_what_the_check_prints() -> None:
    namespace: dict[str, Any] = {"__name__": "docs_plugins_md"}
    for line, code in blocks("python")[:-1]:  # everything up to the local-cluster round trip
        exec(compile("\n" * (line - 1) + code, str(GUIDE), "exec"), namespace)
    printed = str(namespace["report"]).splitlines()
    shown = blocks("text")[0][1].splitlines()
    assert shown[0] == printed[0]
    for row in shown[1:]:
        if row.strip() != "...":
            prefix = row.removesuffix("...").rstrip()
            assert any(p.startswith(prefix) for p in printed), row


def test_the_config_and_registration_snippets_match_the_example_package() -> None:
    for _, code in blocks("yaml"):
        assert isinstance(yaml.safe_load(code), dict)
    (_, toml_block) = blocks("toml")[0]
    shown = tomllib.loads(toml_block)["project"]["entry-points"]["taskplug.plugins"]
    example = tomllib.loads((ROOT / "examples" / "custom-plugin" / "pyproject.toml").read_text())
    assert shown == example["project"]["entry-points"]["taskplug.plugins"]
