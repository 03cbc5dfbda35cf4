"""The Table ``kubectl get`` receives: kubectl's pod columns and cells (printers.go's ``printPod``), the AGE
cell as ``duration.HumanDuration`` writes it, and which Accept headers ask for one."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from taskplug.k8s import POD
from taskplug.localcluster._table import human_duration, table, wants_table

NOW = datetime(2026, 1, 1, 1, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (5, "5s"),
        (119, "119s"),
        (187, "3m7s"),
        (300, "5m"),
        (3600, "60m"),
        (4 * 3600 + 60, "4h1m"),
        (30 * 3600, "30h"),
        (3 * 86400 + 7200, "3d2h"),
    ],
)
def test_age_is_written_as_kubectl_writes_it(seconds: int, text: str) -> None:
    assert human_duration(seconds) == text


def test_a_running_pod_and_a_crashing_one_read_as_kubectl_prints_them() -> None:
    def pod(name: str, status: dict[str, object]) -> dict[str, object]:
        return {
            "metadata": {"name": name, "creationTimestamp": "2026-01-01T00:55:00Z"},
            "spec": {"containers": [{"name": "a"}, {"name": "b"}], "nodeName": "local"},
            "status": {"phase": "Running", "podIP": "10.0.0.7", **status},
        }

    running = pod(
        "r",
        {
            "containerStatuses": [
                {"name": "a", "ready": True, "restartCount": 1, "state": {"running": {}}},
                {"name": "b", "ready": True, "restartCount": 0, "state": {"running": {}}},
            ]
        },
    )
    crashing = pod(
        "c",
        {
            "containerStatuses": [
                {
                    "name": "a",
                    "ready": False,
                    "restartCount": 3,
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                },
                {"name": "b", "ready": True, "restartCount": 0, "state": {"running": {}}},
            ]
        },
    )
    document = table(POD, [running, crashing], now=NOW)
    assert [c["name"] for c in document["columnDefinitions"] if c["priority"] == 0] == [
        "Name",
        "Ready",
        "Status",
        "Restarts",
        "Age",
    ]
    assert [row["cells"] for row in document["rows"]] == [
        ["r", "2/2", "Running", "1", "5m", "10.0.0.7", "local", "<none>", "<none>"],
        ["c", "1/2", "CrashLoopBackOff", "3", "5m", "10.0.0.7", "local", "<none>", "<none>"],
    ]
    assert document["rows"][0]["object"]["kind"] == "PartialObjectMetadata"


def test_only_a_table_asked_for_first_is_answered_with_one() -> None:
    assert wants_table(
        "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
    )
    assert not wants_table("application/json")
    assert not wants_table(None)
    assert not wants_table("application/json, application/json;as=Table;v=v1;g=meta.k8s.io")
