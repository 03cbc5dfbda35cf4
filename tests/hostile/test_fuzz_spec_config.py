"""Arbitrary YAML values in every field of a spec and of a config: a result or an error naming a field.

A valid spec (and a valid config: every known section with its defaults, in the file's layout) is walked;
each example replaces one node of its tree — or adds a key beside one — with an arbitrary YAML value (null,
booleans, integers far beyond 64 bits, floats with inf and NaN, strings, lists and maps of those), writes the
document as a YAML file and reads it back through the loader, as ``taskplug render`` / ``config validate``
do. The only outcomes allowed are a loaded spec or config, or a :class:`TaskplugError` (``SpecError``,
``ConfigError``, ``DocumentError``) whose ``path`` is not empty: never another exception.

Derandomized (a fixed sequence of examples), so CI sees the same cases every run.
"""

from __future__ import annotations

import copy
import math
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from taskplug.core import (
    ConfigError,
    PluginRegistry,
    SpecError,
    TaskplugError,
    load_config_file,
    load_platform_config,
)
from taskplug.executor import Platform, load_spec

REPO = Path(__file__).resolve().parents[2]

_SPEC = """
template:
  id: {resourceType: TASK, project: p, domain: d, name: hello, version: v1}
  type: container
  metadata: {interruptible: true, retries: {retries: 2}, timeout: 30s}
  interface:
    inputs:
      variables:
        x: {type: {simple: FLOAT}}
        xs: {type: {collectionType: {simple: INTEGER}}}
        name: {type: {simple: STRING}}
  container:
    image: python:3.11
    command: [python, -c]
    args: ["print('hi')"]
    resources: {requests: [{name: CPU, value: 500m}], limits: [{name: MEMORY, value: 1Gi}]}
    env: [{key: A, value: "1"}]
  config: {primary_container_name: main}
execution:
  id: {project: p, domain: d, name: exec1, nodeId: n0, retryAttempt: 0}
  generatedName: exec1-n0-0
  namespace: p-d
  labels: {team: ml}
  annotations: {note: hello}
  serviceAccount: default
  interruptible: false
  maxAttempts: 3
  environment: {LOG_LEVEL: debug}
  consoleUrl: https://console
  securityContext: {runAs: {k8sServiceAccount: sa}, secrets: [{group: g, key: k}]}
  platformResources: {requests: {cpu: "1", memory: 1Gi}, limits: {cpu: "4", memory: 8Gi}}
  ownerReference: {apiVersion: v1, kind: ConfigMap, name: owner, uid: u-1, controller: true}
  overrides:
    resources: {requests: {cpu: 250m}, limits: {memory: 2Gi}}
    extendedResources: {gpuAccelerator: {device: nvidia-tesla-a100}}
    containerImage: python:3.12
    podTemplate:
      primaryContainerName: main
      metadata: {labels: {a: b}, annotations: {c: d}}
      podSpec:
        containers:
          - name: main
            image: python:3.12
            command: [python]
            args: [-c, pass]
            env: [{name: A, value: b}]
            resources: {limits: {cpu: "1"}}
        nodeSelector: {disk: ssd}
inputs: {x: 3.5, xs: [1, 2], name: world}
"""

_ARRAY_SPEC = (REPO / "examples" / "map-task" / "by-hand.yaml").read_text()

YAML_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=8,
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every node of the tree (the root excluded), by its keys and indices."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield (*prefix, key)
            yield from _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield (*prefix, index)
            yield from _paths(value, (*prefix, index))


def _maps(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(node, dict):
        yield prefix
        for key, value in node.items():
            yield from _maps(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _maps(value, (*prefix, index))


def _replaced(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    out = copy.deepcopy(document)
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


def _added(document: Any, path: tuple[Any, ...], key: str, value: Any) -> Any:
    out = copy.deepcopy(document)
    node = out
    for part in path:
        node = node[part]
    node[key] = value
    return out


def _mutations(document: Any) -> st.SearchStrategy[Any]:
    paths = list(_paths(document))
    maps = list(_maps(document))
    replace = st.builds(_replaced, st.just(document), st.sampled_from(paths), YAML_VALUES)
    add = st.builds(
        _added, st.just(document), st.sampled_from(maps), st.text(min_size=1, max_size=8), YAML_VALUES
    )
    return st.one_of(replace, replace, add)


def _write(document: Any) -> Path:
    fd, name = tempfile.mkstemp(suffix=".yaml")
    with os.fdopen(fd, "w") as f:
        yaml.safe_dump(document, f, allow_unicode=False)
    return Path(name)


def _assert_named(error: TaskplugError) -> None:
    path = getattr(error, "path", "")
    assert isinstance(path, str) and path, f"{type(error).__name__} without a field path: {error}"


_FUZZ = settings(
    max_examples=250,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# -- specs -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [_SPEC, _ARRAY_SPEC], ids=["task", "array-node"])
def test_the_base_specs_load(text: str) -> None:
    path = _write(yaml.safe_load(text))
    try:
        load_spec(path)
    finally:
        path.unlink()


def _check_spec(document: Any) -> None:
    path = _write(document)
    try:
        load_spec(path)
    except TaskplugError as e:
        _assert_named(e)
    finally:
        path.unlink()


@_FUZZ
@given(_mutations(yaml.safe_load(_SPEC)))
def test_any_value_in_any_field_of_a_task_spec_loads_or_names_the_field(document: Any) -> None:
    _check_spec(document)


@settings(_FUZZ, max_examples=100)
@given(_mutations(yaml.safe_load(_ARRAY_SPEC)))
def test_any_value_in_any_field_of_an_array_node_spec_loads_or_names_the_field(document: Any) -> None:
    _check_spec(document)


@pytest.mark.parametrize(
    ("value", "path"),
    [
        (float("inf"), "template.custom.v"),
        (float("nan"), "template.custom.v"),
        (2**70, "template.custom.v"),
        ([[[[]]]], None),
    ],
)
def test_values_json_cannot_hold_are_named_where_protobuf_would_take_them(
    value: Any, path: str | None
) -> None:
    document = yaml.safe_load(_SPEC)
    document["template"]["custom"] = {"v": value}
    file = _write(document)
    try:
        if path is None:
            assert load_spec(file).template.custom["v"] is not None
        else:
            with pytest.raises(SpecError) as err:
                load_spec(file)
            assert err.value.path == path
    finally:
        file.unlink()


def _dotted(path: tuple[Any, ...]) -> str:
    out = ""
    for part in path:
        out = f"{out}[{part}]" if isinstance(part, int) else (f"{out}.{part}" if out else str(part))
    return out


def _leaves(document: Any, kind: type) -> list[tuple[Any, ...]]:
    return [p for p in _paths(document) if type(_at(document, p)) is kind]


@pytest.mark.parametrize("value", [["x", "y"], {"k": "v"}], ids=["list", "map"])
def test_a_list_or_a_map_for_any_string_of_a_spec_is_refused_naming_it(value: Any) -> None:
    """No list or map is ever turned into text: every string field of the spec refuses one, by its path."""
    document = yaml.safe_load(_SPEC)
    strings = _leaves(document, str)
    assert len(strings) > 40
    for path in strings:
        file = _write(_replaced(document, path, value))
        try:
            with pytest.raises(SpecError) as err:
                load_spec(file)
        finally:
            file.unlink()
        assert err.value.path.startswith(_dotted(path)), (path, str(err.value))


@pytest.mark.parametrize("value", [2**64, -1], ids=["beyond-64-bits", "negative"])
def test_an_integer_out_of_range_for_any_count_of_a_spec_is_refused_naming_it(value: int) -> None:
    document = yaml.safe_load(_SPEC)
    counts = [p for p in _leaves(document, int) if p[0] != "inputs"]  # inputs are typed by the interface
    assert len(counts) >= 3
    for path in counts:
        file = _write(_replaced(document, path, value))
        try:
            with pytest.raises(SpecError) as err:
                load_spec(file)
        finally:
            file.unlink()
        assert err.value.path.startswith(_dotted(path)), (path, str(err.value))


# -- configs ---------------------------------------------------------------------------------------------

_SECTIONS = Platform.sections_for(PluginRegistry.discover())
_CONFIG = Platform.load().config.effective()


def test_the_base_config_is_every_section_with_its_defaults() -> None:
    assert {"executor", "plugins", "tasks"} <= set(_CONFIG)
    load_platform_config(_CONFIG, _SECTIONS).effective()


@_FUZZ
@given(_mutations(_CONFIG))
def test_any_value_in_any_key_of_a_config_loads_or_names_the_key(document: Any) -> None:
    path = _write(document)
    try:
        load_platform_config(load_config_file(path), _SECTIONS).effective()
    except TaskplugError as e:
        _assert_named(e)
    finally:
        path.unlink()


@pytest.mark.parametrize("value", [["a", "b"], {"k": "v"}])
def test_a_list_or_a_map_where_a_string_is_expected_is_refused_in_every_section(value: Any) -> None:
    strings = [p for p in _paths(_CONFIG) if isinstance(_at(_CONFIG, p), str)]
    assert len(strings) > 50
    for path in strings:
        with pytest.raises(ConfigError) as err:
            load_platform_config(_replaced(_CONFIG, path, value), _SECTIONS).effective()
        assert err.value.path.startswith(".".join(str(p) for p in path)), (path, err.value)


def test_a_string_where_a_list_is_expected_is_refused_in_every_section() -> None:
    lists = [p for p in _paths(_CONFIG) if isinstance(_at(_CONFIG, p), list)]
    assert lists
    for path in lists:
        with pytest.raises(ConfigError) as err:
            load_platform_config(_replaced(_CONFIG, path, "a,b"), _SECTIONS).effective()
        assert err.value.path.startswith(".".join(str(p) for p in path)), (path, err.value)


def _at(document: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        document = document[key]
    return document


def test_non_finite_and_huge_numbers_in_a_config_are_named() -> None:
    for value in (math.inf, math.nan, 2**70):
        with pytest.raises(ConfigError) as err:
            load_platform_config(_replaced(_CONFIG, ("executor", "workers"), value), _SECTIONS)
        assert err.value.path == "executor.workers"
