"""``pods/{name}/log`` over HTTP as the API server answers it: ``follow`` streams a running container's
output as it prints and ends with the container; ``previous`` is the API server's 400 for a container never
restarted; ``limitBytes``; a bad ``tailLines`` is a 400 naming it. A process-mode cluster on 127.0.0.1."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from support.cluster_http import cluster_session
from taskplug.k8s import POD, KubeApiError
from taskplug.localcluster import LocalCluster
from taskplug.localcluster._podlog import LogOptions, select_log

from .conftest import pod_manifest

pytestmark = pytest.mark.integration

DEADLINE = 30.0


async def test_follow_streams_what_a_running_container_prints_and_ends_with_it(tmp_path: Path) -> None:
    go = tmp_path / "go"
    script = (
        "import os, sys, time\nprint('first', flush=True)\n"
        f"deadline = time.monotonic() + {DEADLINE}\n"
        f"while not os.path.exists({str(go)!r}) and time.monotonic() < deadline:\n    time.sleep(0.02)\n"
        "print('second', flush=True)\n"
    )
    async with LocalCluster(mode="process") as cluster:
        url = await cluster.serve_http()
        await cluster.client().create(POD, pod_manifest("talker", command=[sys.executable, "-c", script]))
        await cluster.wait_for(
            POD, "default", "talker", lambda o: o["status"]["phase"] == "Running", within=DEADLINE
        )
        base = f"{url}/api/v1/namespaces/default/pods/talker/log"
        async with cluster_session(cluster) as session:
            async with session.get(f"{base}?follow=true") as response:
                assert response.status == 200
                received = b""
                while b"first\n" not in received:
                    received += await asyncio.wait_for(response.content.readany(), DEADLINE)
                # The container still runs: the stream is open, and has not seen what it prints next.
                pod = cluster.store.get(POD, "default", "talker")
                assert pod["status"]["phase"] == "Running" and b"second" not in received
                go.touch()
                received += await asyncio.wait_for(response.content.read(), DEADLINE)  # to the end
            assert received == b"first\nsecond\n"

            async with session.get(f"{base}?previous=true") as response:
                assert response.status == 400
                assert (await response.json())["message"] == (
                    'previous terminated container "main" in pod "talker" not found'
                )
            async with session.get(f"{base}?limitBytes=3") as response:
                assert await response.text() == "fir"
            async with session.get(f"{base}?tailLines=-1") as response:
                assert response.status == 400 and "tailLines" in (await response.json())["message"]


def test_the_selection_takes_the_last_lines_then_the_byte_limit() -> None:
    text = "a\nbb\nccc\n"
    assert select_log(text, LogOptions(tail_lines=2)) == "bb\nccc\n"
    assert select_log(text, LogOptions(tail_lines=0)) == ""
    assert select_log(text, LogOptions(tail_lines=2, limit_bytes=4)) == "bb\nc"
    assert LogOptions.from_query({"follow": "true", "sinceSeconds": "10"}) == LogOptions(
        since_seconds=10, follow=True
    )


async def test_the_in_process_logs_take_the_same_options() -> None:
    async with LocalCluster(mode="process") as cluster:
        script = "print('a'); print('bb'); print('ccc')"
        await cluster.client().create(POD, pod_manifest("p", command=[sys.executable, "-c", script]))
        await cluster.wait_for(
            POD, "default", "p", lambda o: o["status"]["phase"] == "Succeeded", within=DEADLINE
        )
        assert cluster.logs("default", "p") == "a\nbb\nccc\n"
        assert cluster.logs("default", "p", tail_lines=2) == "bb\nccc\n"
        assert cluster.logs("default", "p", tail_lines=2, limit_bytes=4) == "bb\nc"
        with pytest.raises(KubeApiError) as caught:
            cluster.logs("default", "p", previous=True)
        assert caught.value.status == 400
        assert 'previous terminated container "main" in pod "p" not found' in str(caught.value)
