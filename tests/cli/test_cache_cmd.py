"""``taskplug cache list | show | clear`` over a state file whose catalog two executions filled."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from click.testing import CliRunner

from executor.test_cache import SquarePlugin, run, task_spec
from taskplug.cli._cache_cmd import cache


def test_cached_results_are_listed_shown_with_their_outputs_and_cleared(tmp_path: Path) -> None:
    plugin = SquarePlugin()
    asyncio.run(run(tmp_path, plugin, task_spec("e1", x=2)))
    asyncio.run(run(tmp_path, plugin, task_spec("e2", x=3, version="2")))
    db = str(tmp_path / "state.db")
    runner = CliRunner()

    listed = runner.invoke(cache, ["list", "--state-db", db, "-o", "json"])
    assert listed.exit_code == 0, listed.output
    entries = json.loads(listed.output)
    assert [(e["taskName"], e["discoveryVersion"], e["source"]) for e in entries] == [
        ("sq", "2", "p/d/e2/n0"),
        ("sq", "1", "p/d/e1/n0"),
    ]
    only = json.loads(runner.invoke(cache, ["list", "--state-db", db, "--version", "1", "-o", "json"]).output)
    assert [e["source"] for e in only] == ["p/d/e1/n0"]

    shown = runner.invoke(cache, ["show", entries[1]["tag"][:20], "--state-db", db, "-o", "json"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output)["outputs"] == {"o0": 4}

    refused = runner.invoke(cache, ["clear", "--state-db", db])
    assert refused.exit_code == 2 and "--all" in refused.output
    cleared = runner.invoke(cache, ["clear", "--state-db", db, "--task", "sq", "--version", "1"])
    assert cleared.exit_code == 0 and "forgot 1" in cleared.output
    assert asyncio.run(run(tmp_path, plugin, task_spec("e3", x=2))).cache_status == "CACHE_POPULATED"
    assert asyncio.run(run(tmp_path, plugin, task_spec("e4", x=3, version="2"))).cache_status == "CACHE_HIT"
