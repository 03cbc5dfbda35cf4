"""docs/config.md is generated from the config models (regenerate with
``.venv/bin/python scripts/config_doc.py > docs/config.md``): it is up to date, every field it draws on is
described, and every key it lists is a key the config loader accepts, with the default it shows."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from taskplug.core import ConfigError, PluginRegistry, field_docs, load_platform_config

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "config.md"
REGENERATE = ".venv/bin/python scripts/config_doc.py > docs/config.md"


@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("config_doc", ROOT / "scripts" / "config_doc.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def registry() -> PluginRegistry:
    return PluginRegistry.discover()


def _nested(path: str, value: Any) -> dict[str, Any]:
    node: Any = value
    for key in reversed(path.split(".")):
        node = {key: node}
    assert isinstance(node, dict)
    return node


def _at(document: Any, path: str) -> Any:
    for key in path.split("."):
        document = document[key]
    return document


def test_the_config_document_is_up_to_date(script: ModuleType) -> None:
    assert DOC.read_text() == script.render(), f"docs/config.md is stale: run {REGENERATE}"


def test_the_document_has_a_table_for_every_built_in_section(
    script: ModuleType, registry: PluginRegistry
) -> None:
    text = DOC.read_text()
    paths = [s.path for s in script.sections(registry)]
    core = {"tasks", "plugins.k8s", "plugins.logs", "executor", "propeller.resourcemanager"}
    assert core | {"plugins.spark", "plugins.connector-service"} <= set(paths)
    for path in paths:
        assert f"\n## `{path}`\n" in text


def test_every_field_of_every_section_has_a_description(script: ModuleType, registry: PluginRegistry) -> None:
    models = script.all_models(script.sections(registry))
    assert len(models) >= 15  # nested and item models are reached too
    undescribed = [
        f"{model.__module__}.{model.__qualname__}.{name}"
        for model in models
        for name in model.model_fields
        if not field_docs(model).get(name, "").strip()
    ]
    assert undescribed == [], "fields without a docstring under them"
    undocumented = [m.__qualname__ for m in models if not (m.__dict__.get("__doc__") or "").strip()]
    assert undocumented == [], "config models without a class docstring"


def test_every_section_docstring_names_its_yaml_path(script: ModuleType, registry: PluginRegistry) -> None:
    for section in script.sections(registry):
        assert f"``{section.path}``" in (section.model.__doc__ or ""), section.path


def test_the_example_plugin_section_is_described_too() -> None:
    config = pytest.importorskip("taskplug_batchjob._config")
    model = config.BATCHJOB_SECTION.model
    assert "``plugins.batchjob``" in (model.__doc__ or "")
    assert all(field_docs(model).get(name, "").strip() for name in model.model_fields)


def test_every_listed_key_loads_with_the_default_it_shows(
    script: ModuleType, registry: PluginRegistry
) -> None:
    section_list = script.sections(registry)
    effective = script.effective_defaults(registry)
    checked = 0
    for section in section_list:
        for row in script.section_rows(section, effective[section.path]):
            if not row.leaf:
                continue
            value = yaml.safe_load(row.default)
            document = _nested(f"{section.path}.{row.key}", value)
            loaded = load_platform_config(document, section_list).get(section)
            dumped = loaded.model_dump(mode="json", by_alias=True)
            assert _at(dumped, row.key) == value, f"{section.path}.{row.key}"
            checked += 1
    assert checked >= 100


def test_a_key_spelled_other_than_listed_is_rejected(script: ModuleType, registry: PluginRegistry) -> None:
    # The check above is meaningful: the loader refuses a key the document would not list.
    section_list = script.sections(registry)
    with pytest.raises(ConfigError, match="update_base_backoff_duration"):
        load_platform_config(_nested("plugins.k8s.update_base_backoff_duration", 10), section_list)


def test_units_are_stated_where_only_the_consumer_revealed_them(
    script: ModuleType, registry: PluginRegistry
) -> None:
    effective = script.effective_defaults(registry)
    by_key = {
        f"{s.path}.{row.key}": row
        for s in script.sections(registry)
        for row in script.section_rows(s, effective[s.path])
    }
    assert "milliseconds" in by_key["plugins.k8s.update-base-backoff-duration"].description
    assert "seconds" in by_key["tasks.backoff.base-second"].description
    assert "Go duration" in by_key["tasks.backoff.max-duration"].description
    assert by_key["plugins.k8s.default-cpus"].type == "quantity"
    assert by_key["executor.resync-period"].type == "duration"
    assert by_key["tasks.task-plugins.enabled-plugins"].code_default == "[]"
