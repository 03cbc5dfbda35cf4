"""Flyte's validateConfig (internal/webapi/core.go; core_test.go Test_validateConfig) and the quota map
shapes the config loader accepts."""

from __future__ import annotations

from datetime import timedelta

import pytest

from taskplug.core import ErrorCode
from taskplug.engine.webapi._validation import ConfigValidationError, format_go_float, validate_plugin_config
from taskplug.webapi import PluginConfig


def _config(*, qps: float, burst: int, size: int, resync: timedelta, workers: int) -> PluginConfig:
    return PluginConfig.model_validate(
        {
            "readRateLimiter": {"qps": qps, "burst": burst},
            "writeRateLimiter": {"qps": qps, "burst": burst},
            "caching": {"size": size, "resyncInterval": resync, "workers": workers},
        }
    )


def test_a_config_in_range_is_valid() -> None:
    validate_plugin_config(_config(qps=10, burst=100, size=10, resync=timedelta(seconds=10), workers=10))


def test_the_generic_defaults_are_valid() -> None:
    validate_plugin_config(PluginConfig())


def test_an_all_zero_config_reports_all_seven_violations_in_flytes_order() -> None:
    with pytest.raises(ConfigValidationError) as info:
        validate_plugin_config(_config(qps=0, burst=0, size=0, resync=timedelta(0), workers=0))
    assert str(info.value) == (
        "config validation failed. Error: "
        "\ncache size is expected to be between 10 and 500000. Provided value is 0"
        "\nworkers count is expected to be between 1 and 10000. Provided value is 0"
        "\nresync interval is expected to be between 5 and 3600. Provided value is 0"
        "\nread burst is expected to be between 5 and 10000. Provided value is 0"
        "\nread qps is expected to be between 1 and 100000. Provided value is 0"
        "\nwrite burst is expected to be between 5 and 10000. Provided value is 0"
        "\nwrite qps is expected to be between 1 and 100000. Provided value is 0"
    )
    assert info.value.code == ErrorCode.PLUGIN_INITIALIZATION_FAILED


def test_values_above_the_maximum_report_five_violations_and_qps_1000_is_legal() -> None:
    cfg = _config(
        qps=1000, burst=1_000_000, size=1_000_000_000, resync=timedelta(hours=10000), workers=1_000_000_000
    )
    with pytest.raises(ConfigValidationError) as info:
        validate_plugin_config(cfg)
    assert list(info.value.violations) == [
        "cache size is expected to be between 10 and 500000. Provided value is 1000000000",
        "workers count is expected to be between 1 and 10000. Provided value is 1000000000",
        "resync interval is expected to be between 5 and 3600. Provided value is 3.6e+07",
        "read burst is expected to be between 5 and 10000. Provided value is 1000000",
        "write burst is expected to be between 5 and 10000. Provided value is 1000000",
    ]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.0, "0"),
        (5.0, "5"),
        (0.5, "0.5"),
        (100000.0, "100000"),
        (1e6, "1e+06"),
        (3.6e7, "3.6e+07"),
        (1e-5, "1e-05"),
    ],
)
def test_floats_print_as_go_percent_v(value: float, text: str) -> None:
    assert format_go_float(value) == text


def test_quotas_load_from_a_list_of_single_key_maps() -> None:
    cfg = PluginConfig.model_validate({"resourceQuotas": [{"test": 1000}]})
    assert cfg.resource_quotas == {"test": 1000}


def test_quotas_load_from_a_map() -> None:
    cfg = PluginConfig.model_validate({"resourceQuotas": {"a": 1, "b": 2}})
    assert cfg.resource_quotas == {"a": 1, "b": 2}
