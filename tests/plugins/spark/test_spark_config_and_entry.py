"""The ``plugins.spark`` section (Flyte's plugins/k8s/spark/config.go, loaded as its testdata config.yaml
is) and the plugin's registration."""

from __future__ import annotations

import pytest
import yaml

from taskplug.core import ConfigError, FakeClock, PlatformConfig, load_platform_config
from taskplug.k8s import K8S_SECTION, LOGS_SECTION, PLUGINS_ROOT_SECTION, K8sPluginProperties, K8sPluginSetup
from taskplug.k8s._tasklog import log_templates
from taskplug.plugins.spark import (
    SPARK_APPLICATION,
    SPARK_SECTION,
    SparkConfig,
    SparkDriverOperator,
    SparkPlugin,
    plugin_entries,
)

# Shaped like flyteplugins/go/tasks/testdata/config.yaml: maps written as lists of single-key maps.
FLYTE_TESTDATA = """
plugins:
  enabled-plugins: [container]
  k8s:
    default-annotations:
      - annotationKey1: annotationValue1
      - annotationKey2: annotationValue2
  spark:
    spark-config-default:
      - spark.hadoop.mapreduce.fileoutputcommitter.algorithm.version: "2"
      - spark.kubernetes.allocation.batch.size: "50"
      - spark.hadoop.fs.s3a.acl.default: "BucketOwnerFullControl"
      - spark.hadoop.fs.s3n.impl: "org.apache.hadoop.fs.s3a.S3AFileSystem"
      - spark.hadoop.fs.AbstractFileSystem.s3n.impl: "org.apache.hadoop.fs.s3a.S3A"
      - spark.hadoop.fs.s3.impl: "org.apache.hadoop.fs.s3a.S3AFileSystem"
      - spark.hadoop.fs.AbstractFileSystem.s3.impl: "org.apache.hadoop.fs.s3a.S3A"
      - spark.hadoop.fs.s3a.impl: "org.apache.hadoop.fs.s3a.S3AFileSystem"
      - spark.hadoop.fs.AbstractFileSystem.s3a.impl: "org.apache.hadoop.fs.s3a.S3A"
      - spark.hadoop.fs.s3a.multipart.threshold: "536870912"
      - spark.blacklist.enabled: "true"
      - spark.blacklist.timeout: "5m"
    features:
      - name: "feature1"
        spark-config:
          - spark.hadoop.feature1: "true"
          - spark.sql.feature1: "true"
      - name: "feature2"
        spark-config:
          - spark.hadoop.feature2: "true"
          - spark.sql.feature2: "true"
    logs:
      mixed:
        kubernetes-enabled: true
        kubernetes-url: "http://localhost:30082"
  logs:
    kubernetes-enabled: true
    kubernetes-url: "http://localhost:30082"
"""

SECTIONS = [PLUGINS_ROOT_SECTION, K8S_SECTION, LOGS_SECTION, SPARK_SECTION]


def load(text: str) -> PlatformConfig:
    return load_platform_config(yaml.safe_load(text), SECTIONS)


def test_flytes_testdata_spark_section_loads_strictly() -> None:
    spark = load(FLYTE_TESTDATA).get(SPARK_SECTION)
    assert len(spark.spark_config_default) == 12
    assert spark.spark_config_default["spark.blacklist.timeout"] == "5m"
    assert [f.name for f in spark.features] == ["feature1", "feature2"]
    assert spark.features[1].spark_config == {"spark.hadoop.feature2": "true", "spark.sql.feature2": "true"}
    assert spark.logs.mixed.kubernetes_enabled is True
    assert spark.spark_history_server_url == ""


def test_defaults_enable_only_the_mixed_kubernetes_link_with_flytes_template() -> None:
    spark = SparkConfig()
    assert spark.logs.mixed.kubernetes_enabled is True
    assert spark.logs.mixed.kubernetes_template_uri == (
        "http://localhost:30082/#!/log/{{ .namespace }}/{{ .podName }}/pod?namespace={{ .namespace }}"
    )
    for source in (spark.logs.user, spark.logs.system, spark.logs.all_user):
        assert log_templates(source) == ()


def test_a_user_log_config_that_enables_cloudwatch_does_not_also_get_kubernetes_links() -> None:
    spark = load(
        """
plugins:
  spark:
    logs:
      user:
        cloudwatch-enabled: true
        cloudwatch-template-uri: "https://cw/{{ .podName }}"
      all-user:
        kubernetes-enabled: true
        kubernetes-url: "http://k8s"
"""
    ).get(SPARK_SECTION)
    assert [t.display_name for t in log_templates(spark.logs.user)] == ["Cloudwatch Logs"]
    assert log_templates(spark.logs.all_user)[0].template_uris == (
        "http://k8s/#!/log/{{ .namespace }}/{{ .podName }}/pod?namespace={{ .namespace }}",
    )


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("plugins:\n  spark:\n    spark-config-defaults: {}\n", "plugins.spark"),
        ("plugins:\n  spark:\n    features: [{name: f, sparkConfig: {}}]\n", "plugins.spark"),
        ("plugins:\n  spark:\n    logs: {everything: {}}\n", "plugins.spark"),
    ],
)
def test_unknown_spark_keys_are_rejected_naming_the_path(text: str, path: str) -> None:
    with pytest.raises(ConfigError) as info:
        load(text)
    assert str(info.value).startswith(path)


def test_the_entry_registers_task_type_spark_watching_spark_applications() -> None:
    [entry] = plugin_entries()
    entry.validate()
    assert entry.id == "spark"
    assert entry.registered_task_types == ("spark",)
    assert entry.is_default is False
    assert entry.resource_to_watch == SPARK_APPLICATION
    assert (SPARK_APPLICATION.api_version, SPARK_APPLICATION.kind, SPARK_APPLICATION.plural) == (
        "sparkoperator.k8s.io/v1beta2",
        "SparkApplication",
        "sparkapplications",
    )
    assert entry.config_sections == (SPARK_SECTION,)
    assert entry.local_operator is not None
    assert isinstance(entry.local_operator(), SparkDriverOperator)


def test_the_loaded_plugin_reads_its_section_and_has_default_properties() -> None:
    [entry] = plugin_entries()
    config = load(FLYTE_TESTDATA)
    plugin = entry.load_plugin(K8sPluginSetup(config, clock=FakeClock()))
    assert isinstance(plugin, SparkPlugin)
    assert plugin.config.spark_config_default["spark.kubernetes.allocation.batch.size"] == "50"
    assert plugin.platform.k8s.default_annotations["annotationKey1"] == "annotationValue1"
    assert plugin.get_properties() == K8sPluginProperties()
    assert plugin.build_identity_resource(None) == {  # type: ignore[arg-type]
        "apiVersion": "sparkoperator.k8s.io/v1beta2",
        "kind": "SparkApplication",
    }
