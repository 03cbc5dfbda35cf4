"""K8s task execution metadata (flytepropeller's nodes/task/k8s/task_exec_context.go): Flyte's
marshaler_test.go cases and the labels."""

from __future__ import annotations

import base64

import pytest
from flyteidl.core import identifier_pb2, security_pb2, tasks_pb2

from taskplug.core import BadTaskSpecification, TaskExecutionID, TaskExecutionMetadata
from taskplug.k8s import POD, K8sPluginConfig, build_object
from taskplug.k8s._secrets import (
    k8s_task_execution_metadata,
    marshal_secrets_to_annotations,
    sanitize_label_value,
    secret_text,
)
from taskplug.plugins.pod import plugin_entries
from taskplug.testing import fake_task_context, load_k8s_plugin


def decode(encoded: str) -> str:
    std = encoded.upper().translate(str.maketrans("123456", "234567"))
    return base64.b32decode(std + "=" * (-len(std) % 8)).decode()


@pytest.mark.parametrize(
    ("secrets", "want"),
    [
        pytest.param([], {}, id="empty"),
        pytest.param(
            [security_pb2.Secret(group=";':/\\")],
            {"flyte.secrets/s0": "m4zg54lqhiqceozhhixvyxbcbi"},
            id="forbidden_characters",
        ),
        pytest.param(
            [security_pb2.Secret(key="my_key")],
            {"flyte.secrets/s0": "nnsxsoraejwxsx2lmv3secq"},
            id="without_group",
        ),
    ],
)
def test_secrets_are_encoded_exactly_as_flyte_encodes_them(
    secrets: list[security_pb2.Secret], want: dict[str, str]
) -> None:
    assert marshal_secrets_to_annotations(secrets) == want


def test_each_secret_gets_its_own_indexed_annotation_in_go_text_form() -> None:
    secrets = [
        security_pb2.Secret(group="g", key="k", mount_requirement=security_pb2.Secret.MountType.FILE),
        security_pb2.Secret(group="other", env_var="X\n"),
    ]
    out = marshal_secrets_to_annotations(secrets)
    assert sorted(out) == ["flyte.secrets/s0", "flyte.secrets/s1"]
    assert decode(out["flyte.secrets/s0"]) == 'group: "g"\nkey: "k"\nmount_requirement: FILE\n'
    assert decode(out["flyte.secrets/s1"]) == 'group: "other"\nenv_var: "X\\n"\n'


def test_non_ascii_bytes_are_written_as_octal_escapes() -> None:
    assert secret_text(security_pb2.Secret(key="é")) == 'key: "\\303\\251"\n'


def test_invalid_mount_requirement_is_refused() -> None:
    with pytest.raises(BadTaskSpecification, match=r"invalid mount requirement \[7\]"):
        marshal_secrets_to_annotations([security_pb2.Secret(key="k", mount_requirement=7)])  # type: ignore[arg-type]


def test_oversized_secret_descriptor_is_refused() -> None:
    with pytest.raises(BadTaskSpecification, match="secret descriptor cannot exceed"):
        marshal_secrets_to_annotations([security_pb2.Secret(key="k" * 200_000)])


@pytest.mark.parametrize(
    ("value", "want"),
    [
        ("name@company.com", "name-company-com"),
        ("UPPER_case", "upper-case"),
        ("--x--", "x"),
        ("a" * 70, "a" * 63),
        ("a" * 62 + "@b", "a" * 62),
    ],
)
def test_execution_identity_is_sanitised_into_a_label_value(value: str, want: str) -> None:
    assert sanitize_label_value(value) == want


def _meta(identity: str = "") -> TaskExecutionMetadata:
    security = security_pb2.SecurityContext()
    security.run_as.execution_identity = identity
    return TaskExecutionMetadata(
        task_execution_id=TaskExecutionID("gen", identifier_pb2.TaskExecutionIdentifier(), "n0"),
        namespace="ns",
        labels={"l": "1"},
        annotations={"a": "1"},
        security_context=security,
    )


def test_metadata_with_secrets_gets_annotations_and_the_injection_label() -> None:
    template = tasks_pb2.TaskTemplate()
    template.security_context.secrets.add(group="g", key="k")
    meta = k8s_task_execution_metadata(_meta(identity="Me@Corp.io"), template)
    assert meta.annotations == {
        "a": "1",
        "flyte.secrets/s0": marshal_secrets_to_annotations([template.security_context.secrets[0]])[
            "flyte.secrets/s0"
        ],
    }
    assert meta.labels == {"l": "1", "inject-flyte-secrets": "true", "execution-identity": "me-corp-io"}


def test_metadata_without_secrets_or_identity_is_unchanged() -> None:
    meta = _meta()
    assert k8s_task_execution_metadata(meta, tasks_pb2.TaskTemplate()) is meta


# flytepropeller/pkg/controller/nodes/task/k8s/task_exec_context.go, newTaskExecutionMetadata: the secrets
# come from the task template (taskTmpl.GetSecurityContext().GetSecrets()), the identity from the execution
# (tCtx.GetSecurityContext().RunAs.GetExecutionIdentity(), tCtx being the TaskExecutionMetadata).


def test_the_identity_label_is_the_executions_identity() -> None:
    meta = k8s_task_execution_metadata(_meta(identity="launcher@corp.io"), tasks_pb2.TaskTemplate())
    assert meta.labels == {"l": "1", "execution-identity": "launcher-corp-io"}
    assert meta.annotations == {"a": "1"}


def test_an_identity_in_the_task_template_alone_gives_no_label() -> None:
    template = tasks_pb2.TaskTemplate()
    template.security_context.run_as.execution_identity = "author@corp.io"
    meta = _meta()
    assert k8s_task_execution_metadata(meta, template) is meta


def test_the_executions_identity_wins_over_the_templates() -> None:
    template = tasks_pb2.TaskTemplate()
    template.security_context.run_as.execution_identity = "author@corp.io"
    meta = k8s_task_execution_metadata(_meta(identity="launcher@corp.io"), template)
    assert meta.labels["execution-identity"] == "launcher-corp-io"


def test_secrets_come_from_the_template_not_the_execution() -> None:
    meta = _meta(identity="")
    meta.security_context.secrets.add(group="g", key="k")
    assert k8s_task_execution_metadata(meta, tasks_pb2.TaskTemplate()) is meta


def test_the_pod_built_for_an_execution_carries_the_executions_identity() -> None:
    # What the plugin manager creates (build_object) for a spec whose execution names who launched it.
    entry = next(e for e in plugin_entries() if "container" in e.registered_task_types)
    task = {"template": {"type": "container", "container": {"image": "x", "args": ["a"]}}}
    template_identity = {**task["template"], "securityContext": {"runAs": {"executionIdentity": "author"}}}
    launched = fake_task_context(
        {"template": template_identity},
        execution={"securityContext": {"runAs": {"executionIdentity": "Launcher@Corp.io"}}},
    )
    pod = build_object(load_k8s_plugin(entry), launched, K8sPluginConfig(), watched=POD)
    assert pod["metadata"]["labels"]["execution-identity"] == "launcher-corp-io"
