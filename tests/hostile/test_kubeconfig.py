"""A kubeconfig is a file someone else wrote: read through the bounded document reader, its fields typed.

Non-UTF-8 or binary bytes, ``/dev/zero``, a YAML alias bomb, a recursive alias: exit 2 naming the file, at
once and within a memory limit. A field of the wrong type, a server that is not an http(s) URL, base64 data
that is not base64, a context naming a cluster or user that does not exist: exit 2 naming the field (and
the file). Never a ``UnicodeDecodeError``, ``KeyError`` or ``msgspec`` traceback from the client library.
"""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from taskplug.core import ConfigError
from taskplug.engine.k8s import connect
from taskplug.engine.k8s._kubeconfig import load_kubeconfig
from taskplug.localcluster import LocalCluster

REPO = Path(__file__).resolve().parents[2]
HELLO = REPO / "examples" / "hello.yaml"
MEMORY = 1024**3


def _limits() -> None:  # in the child, before exec: a regression fails instead of eating the machine
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))
    resource.setrlimit(resource.RLIMIT_CPU, (60, 60))


def _good() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u", "namespace": "ns"}}],
        "current-context": "x",
        "preferences": {},
    }


def _write(tmp_path: Path, document: Any) -> Path:
    path = tmp_path / "kubeconfig.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


BOMB = (
    "a: &a ['x','x','x','x','x','x','x','x','x']\n"
    "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
    "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
    "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
    "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
    "f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
    "g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n"
    "clusters: [*g,*g,*g,*g,*g,*g,*g,*g,*g]\n"
)


@pytest.mark.integration
@pytest.mark.parametrize(
    ("content", "said"),
    [
        pytest.param(b"clusters: []\ncurrent-context: \xff\xfe\n", "is not UTF-8 text", id="not-utf8"),
        pytest.param(bytes(range(256)) * 4, "is not UTF-8 text", id="binary"),
        pytest.param(BOMB.encode(), "expands to more than", id="alias-bomb"),
        pytest.param(b"clusters: &a [*a]\n", "refers to itself", id="recursive-alias"),
        pytest.param(None, "larger than", id="dev-zero"),
        pytest.param(
            yaml.safe_dump({**_good(), "clusters": [{"name": "c", "cluster": {"server": ["x"]}}]}).encode(),
            "clusters[0].cluster.server",
            id="server-a-list",
        ),
    ],
)
def test_run_with_a_kubeconfig_it_cannot_read_exits_2_naming_the_file_and_creates_nothing(
    tmp_path: Path, content: bytes | None, said: str
) -> None:
    path = tmp_path / "kubeconfig.yaml"
    if content is None:
        path = Path("/dev/zero")
    else:
        path.write_bytes(content)
    proc = subprocess.run(
        [sys.executable, "-m", "taskplug.cli", "run", str(HELLO), "--kubeconfig", str(path), "-o", "json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        preexec_fn=_limits,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    assert said in proc.stderr and str(path) in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    ("change", "field", "said"),
    [
        pytest.param({"clusters": "c"}, "clusters", "valid list", id="clusters-a-string"),
        pytest.param(
            {"clusters": [{"name": 1, "cluster": {}}]}, "clusters[0].name", "string", id="name-an-int"
        ),
        pytest.param(
            {"clusters": [{"name": "c", "cluster": {"server": 6443}}]},
            "clusters[0].cluster.server",
            "string",
            id="server-a-number",
        ),
        pytest.param(
            {"clusters": [{"name": "c", "cluster": {"server": "127.0.0.1:6443"}}]},
            "clusters[0].cluster.server",
            "http(s) URL with a host",
            id="server-without-scheme",
        ),
        pytest.param(
            {"clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:99999"}}]},
            "clusters[0].cluster.server",
            "is not a URL",
            id="server-port-out-of-range",
        ),
        pytest.param(
            {
                "clusters": [
                    {"name": "c", "cluster": {"server": "https://h", "certificate-authority-data": "@@"}}
                ]
            },
            "clusters[0].cluster.certificate-authority-data",
            "is not base64",
            id="ca-data-not-base64",
        ),
        pytest.param(
            {
                "clusters": [
                    {"name": "c", "cluster": {"server": "https://h", "insecure-skip-tls-verify": "yes"}}
                ]
            },
            "clusters[0].cluster.insecure-skip-tls-verify",
            "boolean",
            id="insecure-a-string",
        ),
        pytest.param(
            {"users": [{"name": "u", "user": {"token": ["t"]}}]},
            "users[0].user.token",
            "string",
            id="token-a-list",
        ),
        pytest.param(
            {"users": [{"name": "u", "user": {"exec": {"apiVersion": "v1", "command": "x", "args": "a b"}}}]},
            "users[0].user.exec.args",
            "valid list",
            id="exec-args-a-string",
        ),
        pytest.param(
            {"contexts": [{"name": "x", "context": {"cluster": "nope"}}]},
            "contexts[0].context.cluster",
            "names no cluster",
            id="unknown-cluster",
        ),
        pytest.param(
            {"contexts": [{"name": "x", "context": {"cluster": "c", "user": "nobody"}}]},
            "contexts[0].context.user",
            "names no user",
            id="unknown-user",
        ),
        pytest.param(
            {"current-context": "gone"}, "current-context", "names no context", id="unknown-current"
        ),
        pytest.param({"current-context": 3}, "current-context", "string", id="current-an-int"),
    ],
)
def test_a_kubeconfig_field_of_the_wrong_shape_is_a_config_error_naming_it_and_the_file(
    tmp_path: Path, change: dict[str, Any], field: str, said: str
) -> None:
    path = _write(tmp_path, {**_good(), **change})
    with pytest.raises(ConfigError) as err:
        connect(path)
    assert err.value.path == field
    assert said in err.value.reason and str(path) in err.value.reason


def test_a_kubeconfig_that_is_not_a_mapping_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig.yaml"
    path.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="must be a mapping at the top level") as err:
        connect(path)
    assert str(path) in str(err.value)


def test_a_kubeconfig_without_a_current_context_says_so_naming_the_file(tmp_path: Path) -> None:
    document = _good()
    del document["current-context"]
    path = _write(tmp_path, document)
    with pytest.raises(ConfigError, match="No current context") as err:
        connect(path)
    assert str(path) in str(err.value)


async def test_a_well_formed_kubeconfig_keeps_what_the_client_ignores_and_connects(tmp_path: Path) -> None:
    document = _good()
    document["clusters"][0]["cluster"]["proxy-url"] = "http://proxy:3128"  # kubectl's; kept, not refused
    path = _write(tmp_path, document)
    loaded = load_kubeconfig(path)
    assert loaded["clusters"][0]["cluster"]["proxy-url"] == "http://proxy:3128"
    assert loaded["current-context"] == "x"
    client = connect(path, timeout=2.0)
    try:
        assert client.namespace == "ns"  # type: ignore[attr-defined]
        assert client.server == "https://127.0.0.1:6443"  # type: ignore[attr-defined]
    finally:
        await client.close()


def test_the_kubeconfig_the_embedded_cluster_writes_loads(tmp_path: Path) -> None:
    path = LocalCluster.write_kubeconfig(tmp_path / "kc.yaml", "http://127.0.0.1:1234", namespace="team")
    loaded = load_kubeconfig(path)
    assert loaded["clusters"][0]["cluster"]["server"] == "http://127.0.0.1:1234"


def test_a_missing_kubeconfig_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read kubeconfig") as err:
        connect(tmp_path / "absent.yaml")
    assert err.value.path == str(tmp_path / "absent.yaml")


def test_certificate_data_that_is_base64_but_no_certificate_is_refused_naming_the_file(
    tmp_path: Path,
) -> None:
    document = _good()
    document["clusters"][0]["cluster"]["certificate-authority-data"] = "bm90IGEgY2VydA==\n"  # "not a cert"
    path = _write(tmp_path, document)
    assert load_kubeconfig(path)["clusters"][0]["cluster"]["certificate-authority-data"]  # base64: passes
    with pytest.raises(ConfigError) as err:
        connect(path)
    assert "cannot set up the connection to https://127.0.0.1:6443" in str(err.value)
    assert str(path) in str(err.value)
