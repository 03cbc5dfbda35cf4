"""``taskplug cluster serve``: the embedded cluster over HTTP on 127.0.0.1, in its own process, until a
signal stops it. The test reads the URL it prints, asks it for pods as kubectl would, stops it, and checks
that it exited cleanly and let go of its port.
"""

from __future__ import annotations

import base64
import json
import re
import signal
import socket
import ssl
import subprocess
import urllib.request
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from .conftest import DEADLINE, TASKPLUG, invoke, stop_process, wait_until_ready

URL = re.compile(r"serving at (https://127\.0\.0\.1:(\d+))\n")


def _port_is_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.integration
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_serve_answers_kubernetes_requests_on_loopback_and_stops_cleanly_on_a_signal(
    tmp_path: Path, stop: signal.Signals
) -> None:
    kubeconfig = tmp_path / "kc"
    out = tmp_path / "serve.out"
    with out.open("wb") as sink:
        proc = subprocess.Popen(
            [*TASKPLUG, "cluster", "serve", "--port", "0", "--kubeconfig-out", str(kubeconfig)],
            cwd=tmp_path,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until_ready(
            lambda: URL.search(out.read_text()) is not None, proc, out, what="taskplug cluster serve"
        )
        printed = out.read_text()
        match = URL.search(printed)
        assert match is not None
        url, port = match.group(1), int(match.group(2))
        assert f"Local cluster (process) serving at {url}\nkubeconfig: {kubeconfig}\n" in printed

        # As kubectl would: trusting the CA and sending the token the kubeconfig holds.
        written = yaml.safe_load(kubeconfig.read_text())
        ca = base64.b64decode(written["clusters"][0]["cluster"]["certificate-authority-data"]).decode()
        request = urllib.request.Request(
            f"{url}/api/v1/namespaces/default/pods",
            headers={"Authorization": f"Bearer {written['users'][0]['user']['token']}"},
        )
        context = ssl.create_default_context(cadata=ca)
        with urllib.request.urlopen(request, timeout=DEADLINE, context=context) as response:
            assert response.status == 200
            pods = json.loads(response.read())
        assert (pods["kind"], pods["apiVersion"], pods["items"]) == ("PodList", "v1", [])

        assert written["current-context"] == "taskplug-local"
        assert [c["cluster"]["server"] for c in written["clusters"]] == [url]

        proc.send_signal(stop)
        assert proc.wait(timeout=DEADLINE) == 0, out.read_text()
        assert out.read_text().endswith("Stopping the local cluster\n")
        assert "Traceback" not in out.read_text()
        assert not _port_is_open(port)
    finally:
        stop_process(proc)


def test_a_port_out_of_range_exits_2_naming_the_option(runner: CliRunner) -> None:
    result = invoke(runner, "cluster", "serve", "--port", "70000")
    assert result.exit_code == 2
    assert "'--port'" in result.stderr and "70000" in result.stderr


def test_an_unknown_mode_exits_2_naming_the_option(runner: CliRunner) -> None:
    result = invoke(runner, "cluster", "serve", "--mode", "kind")
    assert result.exit_code == 2
    assert "'--mode'" in result.stderr and "'kind'" in result.stderr


def test_an_unknown_cluster_subcommand_exits_2_naming_it(runner: CliRunner) -> None:
    result = invoke(runner, "cluster", "start")
    assert result.exit_code == 2
    assert "No such command 'start'" in result.stderr
