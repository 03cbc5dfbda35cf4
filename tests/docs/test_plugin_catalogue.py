"""docs/plugins.md's catalogue lists every built-in plugin with its task types and config sections."""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

from taskplug.core import PluginRegistry

ROOT = Path(__file__).resolve().parents[2]


def _catalogue() -> dict[str, list[str]]:
    text = (ROOT / "docs" / "plugins.md").read_text()
    section = text.split("## The built-in plugins", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, list[str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells
    return rows


def test_every_built_in_plugin_is_in_the_catalogue_with_its_task_types_and_sections() -> None:
    rows = _catalogue()
    registry = PluginRegistry()
    for ep in importlib.metadata.entry_points(group="taskplug.plugins"):
        if ep.value.startswith("taskplug."):  # the example third-party plugin is not a built-in
            for entry in ep.load()():
                registry.register(entry)
    built_in = registry.entries
    assert {e.id for e in built_in} == set(rows)
    for entry in built_in:
        kind, task_types, _, sections = rows[entry.id][1:5]
        assert kind.replace(" ", "").lower() == str(entry.kind), entry.id
        if entry.id != "connector-service":  # its task types are discovered at run time
            assert set(re.findall(r"`([^`]+)`", task_types)) == set(entry.registered_task_types), entry.id
        declared = {s.path for s in getattr(entry, "config_sections", ())}
        listed = set(re.findall(r"`([^`]+)`", sections)) - {"plugins.k8s"}
        assert declared == listed, entry.id
