"""The pure parts of the service's task logs (:mod:`taskplug.service._logs`): which attempt a pod ran, what
of a long log is kept, and how a followed log is cut into what was not shown yet."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from hypothesis import given
from hypothesis import strategies as st

from taskplug.k8s import ATTEMPT_ANNOTATION, EXECUTION_ID_LABEL
from taskplug.service._logs import ContainerLog, follow_logs, keep_tail, pod_attempt


def pod(annotation: str | None) -> dict[str, Any]:
    annotations = {ATTEMPT_ANNOTATION: annotation} if annotation is not None else {}
    return {"metadata": {"name": "x", "annotations": annotations}}


def test_a_pods_attempt_comes_from_its_attempt_annotation() -> None:
    assert pod_attempt(pod("p/d/name/n4-0-n0/2")) == ("p/d/name/", "n4-0-n0", 2)
    assert pod_attempt(pod(None)) is None
    assert pod_attempt(pod("p/d/name/n0/x")) is None
    assert pod_attempt(pod("p/d//n0/0")) is None
    assert pod_attempt(pod("p/d/name/n0/0/extra")) is None


@given(st.text(), st.integers(min_value=4, max_value=200))
def test_the_kept_tail_is_an_end_of_the_log_within_the_bound_and_still_utf8(text: str, bound: int) -> None:
    data = text.encode()
    kept = keep_tail(data, bound)
    assert data.endswith(kept) and len(kept) <= bound
    kept.decode()  # never a split character
    if len(data) <= bound:
        assert kept == data


def test_the_kept_tail_starts_at_a_line_when_one_begins_early() -> None:
    data = b"".join(f"line {i}\n".encode() for i in range(100))
    kept = keep_tail(data, 64)
    assert kept.startswith(b"line ") and data.endswith(kept)


def log(data: bytes, *, start: int = 0, ended: bool = False) -> ContainerLog:
    return ContainerLog("n0", 0, "pod", "c", data, start, ended)


def collect(reads: list[list[ContainerLog]], *, attempt: int | None = 0, headers: bool = False) -> list[str]:
    first, *later = reads

    async def read() -> list[ContainerLog]:
        return later.pop(0)

    async def terminal() -> bool:
        return False

    async def run() -> list[str]:
        return [
            text
            async for text in follow_logs(
                read, terminal, headers=headers, tail=None, follow=True, poll=0, first=first, attempt=attempt
            )
        ]

    return asyncio.run(run())


def test_a_followed_log_sends_what_was_appended_until_its_pod_ended() -> None:
    chunks = collect([[log(b"a\n")], [log(b"a\n")], [log(b"a\nb\n")], [log(b"a\nb\nc\n", ended=True)]])
    assert chunks == ["a\n", "b\n", "c\n"]


def test_a_followed_log_that_was_kept_cut_says_what_is_missing() -> None:
    # Shown "a\n" (2 bytes) live; the kept copy holds bytes 4.. of the whole log: 2 bytes were never seen.
    chunks = collect([[log(b"a\n")], [log(b"c\nd\n", start=4, ended=True)]])
    assert chunks == ["a\n", "[2 bytes not kept]\nc\nd\n"]


def test_a_log_kept_cut_says_so_before_its_text() -> None:
    (text,) = collect([[log(b"z\n", start=10, ended=True)]], headers=True)
    assert text.startswith("==> node n0, attempt 0: pod pod, container c <==\n[the first 10 bytes")
    assert text.endswith("z\n")


def test_a_followed_log_counts_as_a_live_stream_and_a_plain_read_does_not() -> None:
    from taskplug.service._limits import is_stream

    def scope(path: str, query: bytes = b"") -> dict[str, Any]:
        return {"type": "http", "method": "GET", "path": path, "query_string": query}

    assert is_stream(scope("/api/v1/executions/p/d/x/n0/logs", b"attempt=0&follow=true"))
    assert is_stream(scope("/executions/p/d/x/n0/logs/stream", b"attempt=0"))
    assert not is_stream(scope("/api/v1/executions/p/d/x/n0/logs", b"attempt=0"))
    assert not is_stream(scope("/api/v1/executions/p/d/x/n0/logs", b"follow=false"))


async def test_a_long_log_is_kept_cut_to_its_end_and_read_back_saying_so(postgres_dsn: str) -> None:
    """The keeper on the embedded cluster in this process (a real pod printing 2,000 lines) and PostgreSQL:
    the end is kept within the bound, and a reader says what was cut."""
    import psycopg
    from psycopg_pool import AsyncConnectionPool

    from taskplug.k8s import EXECUTION_ID_LABEL, POD
    from taskplug.localcluster import LocalCluster
    from taskplug.service import migrate
    from taskplug.service._logs import LogKeeper, LogReader

    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        migrate(conn)
        conn.execute("DELETE FROM taskplug_executions WHERE key = 'p/d/long/n0'")
        conn.execute(
            "INSERT INTO taskplug_executions (key, task_type, spec, object_owner) "
            "VALUES ('p/d/long/n0', 'container', '{}', 'default/long')"
        )
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "long-n0-0",
            "namespace": "default",
            "labels": {EXECUTION_ID_LABEL: "long"},
            "annotations": {ATTEMPT_ANNOTATION: "p/d/long/n0/0"},
        },
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "python",
                    "command": ["python", "-c", "for i in range(2000): print(f'line {i}')"],
                }
            ],
        },
    }
    async with LocalCluster(mode="process") as cluster:
        client = cluster.client()
        await client.create(POD, pod)
        await cluster.wait_for(
            POD,
            "default",
            "long-n0-0",
            lambda p: p.get("status", {}).get("phase") in ("Succeeded", "Failed"),
            within=30,
        )
        async with await psycopg.AsyncConnection.connect(postgres_dsn, autocommit=True) as conn:
            keeper = LogKeeper(conn, client, max_bytes=1000)
            assert await keeper.keep_ended() == 1
            assert await keeper.keep_ended() == 0  # kept once
        async with AsyncConnectionPool(postgres_dsn, min_size=1, max_size=2, open=False) as pool:
            reader = LogReader(pool, None, reads=asyncio.Semaphore(1))
            async with pool.connection() as c:
                cur = await c.execute("SELECT id FROM taskplug_executions WHERE key = 'p/d/long/n0'")
                row = await cur.fetchone()
            assert row is not None
            (kept,) = await reader.read(execution_id=row[0], key="p/d/long/n0", node="n0", attempt=0)
    whole = "".join(f"line {i}\n" for i in range(2000)).encode()
    assert kept.ended and kept.size == len(whole) and len(kept.data) <= 1000
    assert kept.data.startswith(b"line ") and whole.endswith(kept.data)

    async def nothing() -> Any:
        raise AssertionError("not followed: never read again")

    (text,) = [
        t
        async for t in follow_logs(
            nothing, nothing, headers=False, tail=None, follow=False, poll=0, first=[kept], attempt=0
        )
    ]
    assert text.startswith(f"[the first {kept.start} bytes of this log were not kept")
    assert text.endswith("line 1999\n")


def test_serve_refuses_a_malformed_kubeconfig_and_logs_server_names_what_it_needs(tmp_path: Any) -> None:
    from click.testing import CliRunner

    from taskplug.cli._logs import logs
    from taskplug.cli._serve import serve

    bad = tmp_path / "bad.kubeconfig"
    bad.write_text("apiVersion: v1\nkind: Config\nclusters: nope\n")
    refused = CliRunner().invoke(
        serve, ["--store", "postgresql://u@127.0.0.1:1/db", "--kubeconfig", str(bad)]
    )
    assert refused.exit_code == 2 and str(bad) in refused.output, refused.output
    name_only = CliRunner().invoke(logs, ["just-a-name", "--server", "http://127.0.0.1:1"])
    assert name_only.exit_code == 2 and "EXECUTION" in name_only.output
    token_alone = CliRunner().invoke(logs, ["p/d/x/n0", "--token-file", str(bad)])
    assert token_alone.exit_code == 2 and "--token-file" in token_alone.output
    unreachable = CliRunner().invoke(logs, ["p/d/x/n0", "--server", "http://127.0.0.1:1"])
    assert unreachable.exit_code == 2 and "--server" in unreachable.output


class CountingLogs:
    """The embedded cluster's own client, counting whole-log reads (everything else is the cluster's)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.whole_reads = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def pod_log(self, *args: Any, **kwargs: Any) -> str:
        self.whole_reads += 1
        text: str = await self.inner.pod_log(*args, **kwargs)
        return text


async def test_a_followed_running_log_is_streamed_by_the_cluster_not_read_whole_again(
    postgres_dsn: str, tmp_path: Any
) -> None:
    import psycopg
    from psycopg_pool import AsyncConnectionPool

    from taskplug.k8s import EXECUTION_ID_LABEL, POD
    from taskplug.localcluster import LocalCluster
    from taskplug.service import migrate
    from taskplug.service._logs import LogReader

    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        migrate(conn)
        conn.execute("DELETE FROM taskplug_executions WHERE key = 'p/d/streamed/n0'")
        row = conn.execute(
            "INSERT INTO taskplug_executions (key, task_type, spec, object_owner) "
            "VALUES ('p/d/streamed/n0', 'container', '{}', 'default/streamed') RETURNING id"
        ).fetchone()
    assert row is not None
    gate = tmp_path / "gate"
    script = f"echo one; while [ ! -e {gate} ]; do sleep 0.05; done; echo two"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "streamed-n0-0",
            "namespace": "default",
            "labels": {EXECUTION_ID_LABEL: "streamed"},
            "annotations": {ATTEMPT_ANNOTATION: "p/d/streamed/n0/0"},
        },
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "sh", "command": ["sh", "-c", script]}],
        },
    }
    async with (
        LocalCluster(mode="process") as cluster,
        AsyncConnectionPool(postgres_dsn, min_size=1, open=False) as pool,
    ):
        client = CountingLogs(cluster.client())
        await client.create(POD, pod)
        reader = LogReader(pool, client, reads=asyncio.Semaphore(1), follow=True)
        try:
            while True:
                (first,) = await reader.read(
                    execution_id=row[0], key="p/d/streamed/n0", node=None, attempt=None
                )
                if first.data == b"one\n":
                    break
                await asyncio.sleep(0.05)  # the container starting: polled, as a client would
            reads = client.whole_reads
            for _ in range(3):  # the container waits for the gate: deterministic, running
                await asyncio.sleep(0.05)
                (again,) = await reader.read(
                    execution_id=row[0], key="p/d/streamed/n0", node=None, attempt=None
                )
                assert again.data == b"one\n" and not again.ended
            assert client.whole_reads == reads  # read from the stream, not asked for whole again
            gate.touch()
            while True:
                (later,) = await reader.read(
                    execution_id=row[0], key="p/d/streamed/n0", node=None, attempt=None
                )
                if later.data == b"one\ntwo\n" or later.ended:
                    break
                await asyncio.sleep(0.05)
        finally:
            await reader.close()
    assert later.data == b"one\ntwo\n"


def test_a_followed_log_waits_after_the_end_for_a_copy_not_kept_yet_and_then_for_no_longer_than_the_grace() -> (
    None
):
    async def run(reads: list[list[ContainerLog]], grace: float) -> list[str]:
        async def read() -> list[ContainerLog]:
            return reads.pop(0) if reads else []

        async def terminal() -> bool:
            return True

        return [
            text
            async for text in follow_logs(
                read,
                terminal,
                headers=False,
                tail=None,
                follow=True,
                poll=0.01,
                first=[],
                attempt=None,
                grace=grace,
            )
        ]

    # Ended, nothing kept at first: the copy the replica keeps a moment later is still shown.
    assert asyncio.run(run([[], [], [log(b"kept\n", ended=True)]], grace=60)) == ["kept\n"]
    # Nothing ever kept (a task that made no pod): the answer ends after the grace.
    assert asyncio.run(run([], grace=0.05)) == []


class _OneExecutionStore:
    """The part of the replica's store a keeper reads: every pod is of execution ``k``."""

    def __init__(self) -> None:
        self.kept: list[tuple[str, int, str, str]] = []

    def key_of_object(self, object_owner: str, prefix: str) -> str | None:
        return "k"

    def keep_log(
        self, key: str, ident: tuple[str, int, str, str], data: bytes, size: int, *, ended: bool
    ) -> bool:
        self.kept.append(ident)
        return True

    def logs_pending(self, key: str) -> bool:
        return False


class _LogCluster:
    """A cluster of one listed pod whose log reads are counted."""

    def __init__(self, pod: dict[str, Any]) -> None:
        self.pod = pod
        self.reads = 0

    async def pod_log(
        self, namespace: str, name: str, container: str | None = None, *, tail_lines: int | None = None
    ) -> str:
        self.reads += 1
        return "done\n"

    async def list(
        self, rtype: Any, namespace: str | None = None, *, label_selector: str | None = None
    ) -> Any:
        return [self.pod], "1"


def _ended_pod(uid: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "k-n0-0",
            "namespace": "default",
            "uid": uid,
            "labels": {EXECUTION_ID_LABEL: "k"},
            "annotations": {ATTEMPT_ANNOTATION: "p/d/k/n0/0"},
        },
        "spec": {"containers": [{"name": "main"}]},
        "status": {"phase": "Succeeded"},
    }


async def test_an_ended_pod_being_deleted_here_is_not_kept_again_but_a_new_pod_of_its_name_is() -> None:
    """Its log was kept from the event of its end, before its delete; until the delete lands the pod still
    shows ended (another event, a pass's list): its log is not read and written again. A new pod of the same
    name is kept, and so is a pod that ended after its delete began."""
    from taskplug.service._logs import LogKeeper

    pod = _ended_pod("first")
    cluster = _LogCluster(pod)
    store = _OneExecutionStore()
    keeper = LogKeeper(cast(Any, None), cast(Any, cluster), max_bytes=100, store=cast(Any, store))
    keeper.seen(pod)
    keeping = keeper.taken("default", "k-n0-0")  # the delete starts: it waits for this keeping
    assert keeping is not None and await keeping == (1, "k")
    assert await keeper.keep_ended() == 0
    keeper.seen(pod)
    for _ in range(3):
        await asyncio.sleep(0)  # a keeping started would have read the log by now
    assert cluster.reads == 1 and store.kept == [("n0", 0, "k-n0-0", "main")]

    cluster.pod = _ended_pod("second")
    keeper.seen(cluster.pod)
    keeping = keeper.taken("default", "k-n0-0")
    assert keeping is not None and await keeping == (1, "k")
    assert cluster.reads == 2

    # A pod deleted while it ran (an abort: its log read by the delete itself) is kept again once it ended.
    assert keeper.taken("default", "k-n0-1") is None
    running = _ended_pod("third")
    running["metadata"]["name"] = "k-n0-1"
    keeper.seen(running)
    for _ in range(3):
        await asyncio.sleep(0)
    assert cluster.reads == 3
