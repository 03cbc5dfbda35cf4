"""Config primitives: Go durations, Flyte's map shapes, strict sections, the ``tasks`` section
(flytepropeller's nodes/task/config/config.go)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import Field, ValidationError, model_validator

from taskplug.core import (
    TASKS_SECTION,
    ConfigError,
    ConfigSection,
    GoDuration,
    Quantity,
    QuantityField,
    StrictModel,
    StrMap,
    TasksConfig,
    format_go_duration,
    list_of_maps_to_map,
    load_config_file,
    load_platform_config,
    merge_documents,
    parse_go_duration,
)

# -- Go durations ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("3m", timedelta(minutes=3)),
        ("30s", timedelta(seconds=30)),
        ("1h", timedelta(hours=1)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("2h45m30.5s", timedelta(hours=2, minutes=45, seconds=30.5)),
        ("1.5h", timedelta(hours=1, minutes=30)),
        ("500ms", timedelta(milliseconds=500)),
        ("1500us", timedelta(microseconds=1500)),
        ("1500µs", timedelta(microseconds=1500)),
        ("1000ns", timedelta(microseconds=1)),
        (".5s", timedelta(milliseconds=500)),
        ("5.s", timedelta(seconds=5)),
        ("0", timedelta(0)),
        ("0s", timedelta(0)),
        ("+5s", timedelta(seconds=5)),
        ("-1m", timedelta(minutes=-1)),
        ("1m1m", timedelta(minutes=2)),
    ],
)
def test_go_durations_parse(text: str, expected: timedelta) -> None:
    assert parse_go_duration(text) == expected


def test_a_number_is_nanoseconds_as_in_flyte() -> None:
    assert parse_go_duration(1_000_000_000) == timedelta(seconds=1)
    assert parse_go_duration(timedelta(seconds=2)) == timedelta(seconds=2)


@pytest.mark.parametrize(
    "text", ["", " ", "1", "3 minutes", "1h-1m", "m", "1d", "1.5.3s", "-", "+", "s", "1hh", True, None]
)
def test_bad_go_durations_are_value_errors(text: object) -> None:
    with pytest.raises(ValueError):
        parse_go_duration(text)


@pytest.mark.parametrize(
    "value",
    [
        "99999999999999h",
        "2562048h",
        "-2562048h",
        "9" * 400 + "h",
        2**63,
        float("inf"),
        float("nan"),
        1e400,
    ],
)
def test_a_duration_go_cannot_hold_is_a_value_error_not_an_overflow(value: object) -> None:
    with pytest.raises(ValueError, match="out of range"):
        parse_go_duration(value)


def test_the_longest_go_duration_parses() -> None:
    assert parse_go_duration("2562047h") == timedelta(hours=2562047)
    assert parse_go_duration(2**63 - 1) > timedelta(days=106_000)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (timedelta(minutes=3), "3m0s"),
        (timedelta(hours=1, minutes=30), "1h30m0s"),
        (timedelta(hours=1), "1h0m0s"),
        (timedelta(hours=100), "100h0m0s"),
        (timedelta(milliseconds=500), "500ms"),
        (timedelta(microseconds=1500), "1.5ms"),
        (timedelta(microseconds=1), "1µs"),
        (timedelta(seconds=1.5), "1.5s"),
        (timedelta(seconds=30), "30s"),
        (timedelta(minutes=1, milliseconds=500), "1m0.5s"),
        (timedelta(0), "0s"),
        (timedelta(minutes=-3), "-3m0s"),
    ],
)
def test_go_duration_string_form(value: timedelta, text: str) -> None:
    assert format_go_duration(value) == text
    assert parse_go_duration(text) == value


# -- map shapes ------------------------------------------------------------------------------------------


def test_a_list_of_single_key_maps_is_merged_into_one_map() -> None:
    assert list_of_maps_to_map([{"a": "1"}, {"b": "2"}, {"a": "3"}]) == {"a": "3", "b": "2"}
    assert list_of_maps_to_map({"a": "1"}) == {"a": "1"}


def test_a_list_item_that_is_not_a_map_is_an_error() -> None:
    with pytest.raises(ValueError, match="item 1"):
        list_of_maps_to_map([{"a": "1"}, "b"])


class _Sample(StrictModel):
    """A small section to exercise the loader."""

    labels: StrMap = Field(default_factory=dict)
    timeout: GoDuration = timedelta(minutes=3)
    cpu: QuantityField = Quantity("1000m")
    some_flag: bool = False


class _Child(StrictModel):
    level: int = 1


SAMPLE = ConfigSection("plugins.sample", _Sample)
CHILD = ConfigSection("plugins.sample.child", _Child)


def test_numbers_and_bools_in_string_maps_load_as_strings() -> None:
    config = load_platform_config(
        {"plugins": {"sample": {"labels": [{"a": 5}, {"b": True}, {"c": "x"}]}}}, [SAMPLE]
    )
    assert config.get(SAMPLE).labels == {"a": "5", "b": "true", "c": "x"}


def test_keys_are_kebab_case_and_values_are_parsed() -> None:
    config = load_platform_config(
        {"plugins": {"sample": {"some-flag": True, "timeout": "1h30m", "cpu": "500m"}}}, [SAMPLE]
    )
    sample = config.get(SAMPLE)
    assert sample.some_flag is True
    assert sample.timeout == timedelta(hours=1, minutes=30)
    assert sample.cpu == Quantity("500m")


def test_a_section_missing_from_the_file_has_its_defaults() -> None:
    config = load_platform_config({}, [SAMPLE])
    assert config.get(SAMPLE) == _Sample()
    assert load_platform_config({"plugins": None}, [SAMPLE]).get(SAMPLE) == _Sample()


class _Leaf(StrictModel):
    depth: int = 1
    names: list[str] = Field(default_factory=lambda: ["a"])


class _Tree(StrictModel):
    leaf: _Leaf = Field(default_factory=_Leaf)
    wait: GoDuration = timedelta(seconds=5)


class _Checked(StrictModel):
    low: int = 1
    high: int = 0

    @model_validator(mode="after")
    def _high_at_least_low(self) -> _Checked:
        if self.high < self.low:
            raise ValueError("high must be at least low")
        return self


class _Renamed(StrictModel):
    value: int = 1

    @model_validator(mode="before")
    @classmethod
    def _fill(cls, data: Any) -> Any:
        return {"value": 2, **data} if isinstance(data, dict) else data


class _ParsedDefault(StrictModel):
    wait: GoDuration = Field(default="90s", validate_default=True)  # type: ignore[assignment]


@pytest.mark.parametrize("model", [_Tree, _Renamed, _ParsedDefault, TasksConfig])
def test_a_section_missing_from_the_file_is_what_its_model_makes_with_no_arguments(
    model: type[StrictModel],
) -> None:
    section = ConfigSection("plugins.absent", model)
    value = load_platform_config({}, [section]).get(section)
    assert value == model()
    assert value.model_fields_set == model().model_fields_set
    assert value.model_dump(mode="json") == model().model_dump(mode="json")


def test_a_missing_section_whose_model_refuses_its_own_defaults_is_refused_when_read() -> None:
    section = ConfigSection("plugins.absent", _Checked)
    config = load_platform_config({}, [section])
    with pytest.raises(ValidationError, match="high must be at least low"):
        config.get(section)


def test_a_missing_sections_nested_defaults_are_not_shared_between_configs() -> None:
    section = ConfigSection("plugins.absent", _Tree)
    first = load_platform_config({}, [section]).get(section)
    second = load_platform_config({}, [section]).get(section)
    assert first.leaf.names == ["a"]
    assert first.leaf.names is not second.leaf.names


@pytest.mark.parametrize(
    ("document", "path"),
    [
        ({"plugins": {"sample": {"no-such-key": 1}}}, "plugins.sample.no-such-key"),
        ({"plugins": {"sample": {"some_flag": True}}}, "plugins.sample.some_flag"),
        ({"plugins": {"other": {}}}, "plugins.other"),
        ({"nothing-here": 1}, "nothing-here"),
        ({"plugins": {"sample": {"child": {"depth": 2}}}}, "plugins.sample.child.depth"),
    ],
)
def test_an_unknown_key_is_an_error_naming_its_full_path(document: dict, path: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_platform_config(document, [SAMPLE, CHILD])
    assert err.value.path == path
    assert path in str(err.value)


@pytest.mark.parametrize(
    ("document", "path"),
    [
        ({"plugins": {"sample": {"timeout": "3 minutes"}}}, "plugins.sample.timeout"),
        ({"plugins": {"sample": {"timeout": ""}}}, "plugins.sample.timeout"),
        ({"plugins": {"sample": {"cpu": "1K"}}}, "plugins.sample.cpu"),
        ({"plugins": {"sample": {"cpu": 1.5}}}, "plugins.sample.cpu"),
        ({"plugins": {"sample": {"some-flag": "maybe"}}}, "plugins.sample.some-flag"),
        ({"plugins": {"sample": {"labels": ["x"]}}}, "plugins.sample.labels"),
        ({"plugins": {"sample": {"labels": {"a": {"b": 1}}}}}, "plugins.sample.labels.a"),
        ({"plugins": {"sample": {"child": {"level": "high"}}}}, "plugins.sample.child.level"),
        ({"plugins": {"sample": []}}, "plugins.sample"),
        ({"plugins": 3}, "plugins"),
    ],
)
def test_a_bad_value_is_an_error_naming_its_path(document: dict, path: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_platform_config(document, [SAMPLE, CHILD])
    assert err.value.path == path
    assert str(err.value).startswith(path + ": ")


class _Typed(StrictModel):
    """Every kind of field a section has."""

    name: str = ""
    names: list[str] = Field(default_factory=list)
    hosts: tuple[str, ...] = ()
    count: int = 0
    ratio: float = 0.0
    enabled: bool = False
    mode: Literal["a", "b"] = "a"
    timeout: GoDuration = timedelta(seconds=1)
    extra: dict[str, Any] = Field(default_factory=dict)


TYPED = ConfigSection("typed", _Typed)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("name", ["a", "b"]),
        ("name", {"a": 1}),
        ("name", 5),
        ("name", True),
        ("names", "a,b"),
        ("names", {"a": 1}),
        ("names", [1]),
        ("hosts", "h1"),
        ("count", "5"),
        ("count", 5.0),
        ("count", True),
        ("count", [5]),
        ("ratio", "0.5"),
        ("enabled", "yes"),
        ("enabled", 1),
        ("mode", ["a"]),
        ("timeout", ["1s"]),
        ("extra", ["a"]),
    ],
)
def test_a_value_of_another_type_is_refused_never_converted(key: str, value: object) -> None:
    with pytest.raises(ConfigError) as err:
        load_platform_config({"typed": {key: value}}, [TYPED])
    assert err.value.path.startswith(f"typed.{key}")
    assert str(err.value).startswith(err.value.path + ": ")


def test_values_of_their_own_type_load_strictly() -> None:
    typed = load_platform_config(
        {
            "typed": {
                "name": "n",
                "names": ["a"],
                "hosts": ["h1", "h2"],
                "count": 3,
                "ratio": 1,
                "enabled": True,
                "mode": "b",
                "timeout": "2s",
                "extra": {"deep": [1, {"x": None}]},
            }
        },
        [TYPED],
    ).get(TYPED)
    assert typed.hosts == ("h1", "h2")
    assert (typed.count, typed.ratio, typed.enabled, typed.mode) == (3, 1.0, True, "b")
    assert typed.timeout == timedelta(seconds=2)


@pytest.mark.parametrize(
    ("value", "path"),
    [
        (float("inf"), "typed.ratio"),
        (float("nan"), "typed.ratio"),
        ({"deep": [1, float("-inf")]}, "typed.extra.deep[1]"),
        ({"big": 2**64}, "typed.extra.big"),
        ("99999999999999h", "typed.timeout"),
    ],
)
def test_a_value_no_field_can_hold_is_an_error_naming_its_key(value: object, path: str) -> None:
    key = path.split(".")[1].split("[")[0]
    with pytest.raises(ConfigError) as err:
        load_platform_config({"typed": {key: value}}, [TYPED])
    assert err.value.path == path


def test_nested_sections_are_parsed_separately() -> None:
    config = load_platform_config(
        {"plugins": {"sample": {"some-flag": True, "child": {"level": 3}}}}, [SAMPLE, CHILD]
    )
    assert config.get(SAMPLE).some_flag is True
    assert config.get(CHILD).level == 3


def test_effective_config_shows_defaults_in_the_files_layout_with_go_durations() -> None:
    config = load_platform_config({}, [SAMPLE])
    assert config.effective() == {
        "plugins": {"sample": {"labels": {}, "timeout": "3m0s", "cpu": "1", "some-flag": False}}
    }


def test_models_are_frozen() -> None:
    sample = load_platform_config({}, [SAMPLE]).get(SAMPLE)
    with pytest.raises(ValidationError, match="frozen"):
        sample.some_flag = True  # type: ignore[misc]


# -- files and merging -----------------------------------------------------------------------------------


def test_load_config_file_reads_yaml(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("plugins:\n  sample:\n    some-flag: true\n")
    assert load_config_file(path) == {"plugins": {"sample": {"some-flag": True}}}
    (tmp_path / "empty.yaml").write_text("")
    assert load_config_file(tmp_path / "empty.yaml") == {}


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (None, "cannot read"),
        (b"a: [", "not valid YAML"),
        (b"- a\n- b\n", "mapping at the top level"),
        (b"plugins:\n  k8s: {scheduler-name: \xff}\n", r"not UTF-8 text \(byte 33 is 0xff\)"),
        (b"\x89PNG\r\n\x1a\n\x00\x00", "not UTF-8 text"),
        (b"a: &a [*a]\n", "recursive YAML alias"),
        (b"a: [" * 300 + b"]" * 300, "nests deeper than"),
        (b"#" * (4 * 1024 * 1024 + 1), "larger than"),
    ],
    ids=["missing", "bad-yaml", "not-a-mapping", "not-utf8", "binary", "recursive", "deep", "too-large"],
)
def test_load_config_file_errors_name_the_file(tmp_path: Path, content: bytes | None, match: str) -> None:
    path = tmp_path / "c.yaml"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ConfigError, match=match) as err:
        load_config_file(path)
    assert str(path) in str(err.value)


def test_merge_documents_merges_mappings_and_replaces_everything_else() -> None:
    base = {"a": {"x": 1, "y": [1, 2]}, "b": 1}
    overlay = {"a": {"y": [3], "z": 2}, "c": 3}
    assert merge_documents(base, overlay) == {"a": {"x": 1, "y": [3], "z": 2}, "b": 1, "c": 3}
    assert base == {"a": {"x": 1, "y": [1, 2]}, "b": 1}


# -- the tasks section (nodes/task/config/config.go) -----------------------------------------------------


def test_tasks_section_defaults_are_flytes() -> None:
    tasks = load_platform_config({}, [TASKS_SECTION]).get(TASKS_SECTION)
    assert tasks.task_plugins.enabled_plugins == []
    assert tasks.task_plugins.default_for_task_types == {}
    assert tasks.task_plugins.fallback_to_default_plugin is False
    assert tasks.max_plugin_phase_versions == 100000
    assert tasks.backoff.base_second == 2
    assert tasks.backoff.max_duration == timedelta(seconds=20)
    assert tasks.max_log_message_length == 0


def test_tasks_section_reads_flytes_keys() -> None:
    document = {
        "tasks": {
            "task-plugins": {
                "enabled-plugins": ["container", "sidecar"],
                "default-for-task-types": [{"container": "container"}, {"sidecar": "sidecar"}],
            },
            "max-plugin-phase-versions": 10,
            "backoff": {"base-second": 3, "max-duration": "1m"},
            "maxLogMessageLength": 2048,
        }
    }
    tasks: TasksConfig = load_platform_config(document, [TASKS_SECTION]).get(TASKS_SECTION)
    assert tasks.task_plugins.enabled_plugins == ["container", "sidecar"]
    assert tasks.task_plugins.default_for_task_types == {"container": "container", "sidecar": "sidecar"}
    assert tasks.max_plugin_phase_versions == 10
    assert tasks.backoff.base_second == 3
    assert tasks.backoff.max_duration == timedelta(minutes=1)
    assert tasks.max_log_message_length == 2048


@pytest.mark.parametrize(
    ("document", "path"),
    [
        ({"tasks": {"task-plugins": {"nope": 1}}}, "tasks.task-plugins.nope"),
        ({"tasks": {"backoff": {"max-duration": "x"}}}, "tasks.backoff.max-duration"),
        ({"tasks": {"backoff": {"base-second": "two"}}}, "tasks.backoff.base-second"),
        ({"tasks": {"max-log-message-length": 1}}, "tasks.max-log-message-length"),
    ],
)
def test_tasks_section_errors_name_the_key(document: dict, path: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_platform_config(document, [TASKS_SECTION])
    assert err.value.path == path


def test_a_bad_value_names_the_file_it_came_from_when_given() -> None:
    with pytest.raises(ConfigError) as err:
        load_platform_config({"typed": {"count": "5"}}, [TYPED], source="platform.yaml")
    assert err.value.path == "typed.count"
    assert str(err.value).startswith("typed.count: ")
    assert str(err.value).endswith("(in config file 'platform.yaml')")
