"""A web page on another origin cannot drive ``taskplug cluster serve``, in a real browser (Chromium).

DNS rebinding, as an attacker arranges it: the browser resolves ``attacker.example`` to 127.0.0.1
(``--host-resolver-rules``), loads the attacker's page from a server on port P, then that server goes away and
``cluster serve`` takes port P — so the page's own origin now reaches the cluster, and a JSON POST needs no
CORS preflight. The browser is told to accept any certificate (the worst case: a user who clicked through),
and the attacker's first server speaks the cluster's scheme. The page also tries the loopback names
cross-origin (with and without CORS) and a form POST. The cluster must create nothing and run nothing.
"""

from __future__ import annotations

import base64
import http.server
import json
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

playwright_sync = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (extra `test`)"
)

pytestmark = pytest.mark.integration

DEADLINE = 30.0


CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--host-resolver-rules=MAP attacker.example 127.0.0.1",
    "--ignore-certificate-errors",
]
ATTACK = """async ([targets, pod]) => {
    const out = [];
    for (const target of targets) {
        for (const [mode, type] of [["same-origin", "application/json"], ["no-cors", "text/plain"],
                                    ["cors", "application/json"]]) {
            try {
                const r = await fetch(target, {method: "POST", mode, body: JSON.stringify(pod),
                                               headers: {"Content-Type": type}});
                out.push(`${target} ${mode}: ${r.type} ${r.status}`);
            } catch (e) {
                out.push(`${target} ${mode}: ${e}`);
            }
        }
    }
    return out;
}"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _attacker_server(port: int, folder: Path, tls: ssl.SSLContext | None) -> http.server.ThreadingHTTPServer:
    def handler(*args: Any) -> http.server.SimpleHTTPRequestHandler:
        return http.server.SimpleHTTPRequestHandler(*args, directory=str(folder))

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _serve_cluster(port: int, kubeconfig: Path, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "taskplug.cli",
                "cluster",
                "serve",
                "--port",
                str(port),
                "--kubeconfig-out",
                str(kubeconfig),
            ],
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + DEADLINE
    while not kubeconfig.exists():
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, "cluster serve did not start"
        time.sleep(0.05)
    return proc


def _pods(config: dict[str, Any]) -> list[str]:
    """What the cluster holds, asked as kubectl would (its CA when it serves TLS, its token)."""
    cluster = config["clusters"][0]["cluster"]
    user = config["users"][0]["user"]
    request = urllib.request.Request(
        f"{cluster['server']}/api/v1/pods",
        headers={"Authorization": f"Bearer {user['token']}"} if "token" in user else {},
    )
    context = None
    if "certificate-authority-data" in cluster:
        ca = base64.b64decode(cluster["certificate-authority-data"]).decode()
        context = ssl.create_default_context(cadata=ca)
    with urllib.request.urlopen(request, timeout=DEADLINE, context=context) as response:
        return [p["metadata"]["name"] for p in json.loads(response.read())["items"]]


def test_a_rebound_page_or_another_origin_creates_no_pod(tmp_path: Path) -> None:
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("Chromium is not installed (scripts/setup installs Debian's chromium)")
    port = _free_port()
    kubeconfig = tmp_path / "kc.yaml"
    marker = tmp_path / "ran"
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("<!doctype html><title>the attacker's page</title>")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "from-a-web-page"},
        "spec": {
            "containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", f"touch {marker}"]}]
        },
    }
    # Which scheme the cluster speaks is learnt from a first start, so the rebinding page uses the same.
    probe = _serve_cluster(port, tmp_path / "probe.yaml", tmp_path / "probe.log")
    probe.terminate()
    probe.wait(timeout=DEADLINE)
    scheme = yaml.safe_load((tmp_path / "probe.yaml").read_text())["clusters"][0]["cluster"]["server"].split(
        ":"
    )[0]
    tls = None
    if scheme == "https":
        from taskplug.localcluster._tls import ServingCertificate

        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        certificate = ServingCertificate.generate()
        (tmp_path / "attacker.pem").write_bytes(certificate.cert_pem + certificate.key_pem)
        tls.load_cert_chain(tmp_path / "attacker.pem")
    attacker = _attacker_server(port, site, tls)
    cluster: subprocess.Popen[bytes] | None = None
    with playwright_sync.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.goto(f"{scheme}://attacker.example:{port}/index.html")
            attacker.shutdown()
            attacker.server_close()
            cluster = _serve_cluster(port, kubeconfig, tmp_path / "serve.log")  # the name now reaches it
            targets = [
                f"{scheme}://{host}:{port}/api/v1/namespaces/default/pods"
                for host in ("attacker.example", "127.0.0.1", "localhost")
            ]
            answers = page.evaluate(ATTACK, [targets, pod])
            assert len(answers) == 9
            # A form POST navigates the page: the browser sends it cross-site as a "simple" request.
            page.set_content(
                f"<form id=f method=post enctype=text/plain action='{targets[1]}'>"
                "<input name='{\"a\":\"' value='\"}'></form>"
            )
            with page.expect_navigation():
                page.evaluate("document.getElementById('f').submit()")
            config = yaml.safe_load(kubeconfig.read_text())
            assert _pods(config) == [], answers
        finally:
            browser.close()
            if cluster is not None:
                cluster.terminate()
                try:
                    cluster.wait(timeout=DEADLINE)
                except subprocess.TimeoutExpired:
                    cluster.kill()
                    cluster.wait()
    assert not marker.exists()
