"""``GET /api/v1/executions/{key}/logs``: what an execution's containers printed, as text, followed while it
runs (:mod:`._logs` reads them: the replicas' kept copies, and the cluster's ``pods/log`` for pods not kept).

The read role suffices, as for the rest of an execution; a log can hold whatever a task printed (a secret it
echoed included), which ``docs/security.md`` says. Flyte's admin API has no log route (its console opens the
plugins' log links); this is ``kubectl logs`` over the service's own access to the cluster.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any, Final

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse

from taskplug.service._api import API_PREFIX, ApiError, _errors
from taskplug.service._logs import MAX_LIVE_PODS, ContainerLog, LogReader, follow_logs

__all__ = ["page_router", "router"]

router = APIRouter(prefix=API_PREFIX)
page_router = APIRouter()
"""The web view's log panes: ``/executions/{key}/logs/stream`` (always followed, and empty rather than
404 when an attempt kept no log, so that a page shows an empty pane rather than a failed request)."""

LOG_POLL: Final = 1.0
"""Seconds between two reads of a followed log (the cluster's ``pods/log`` and the kept copies)."""

_ROW = "SELECT id, terminal FROM taskplug_executions WHERE key = %s"
_TERMINAL = "SELECT terminal FROM taskplug_executions WHERE id = %s"

_TEXT: Final[dict[int | str, dict[str, Any]]] = {
    200: {
        "description": "The logs as text: with `attempt` given and one container's log found, that log as it "
        "printed it; otherwise each log after a `==> node N, attempt A: pod P, container C <==` line. With "
        "`follow`, the answer stays open and carries what is printed until the attempt (or, without "
        "`attempt`, the execution) has ended.",
        "content": {"text/plain": {"schema": {"type": "string"}}},
    }
}


@router.get(
    "/executions/{key:path}/logs",
    response_class=StreamingResponse,
    responses={**_TEXT, **_errors(404, 422)},
)
async def execution_logs(
    request: Request,
    key: str,
    node: Annotated[
        str | None,
        Query(
            max_length=256,
            description="A node's unique id (`n0` for a task, a workflow node's `n1`, `n4-0-n0`); every "
            "node when absent.",
        ),
    ] = None,
    attempt: Annotated[int | None, Query(ge=0, le=1_000_000, description="One attempt only.")] = None,
    follow: Annotated[bool, Query(description="Keep the answer open while the task prints.")] = False,
    tail: Annotated[
        int | None, Query(ge=0, le=1_000_000, description="The last N lines of each log.")
    ] = None,
) -> StreamingResponse:
    """What the execution's containers printed: the copies the replicas kept when each attempt's pod ended,
    and, for pods not kept yet, the cluster's own log (when this server reaches the cluster, ``taskplug
    serve --kubeconfig``). 404 naming `node` or `attempt` when none of theirs is found (without `follow`)."""
    return await _logs(request, key, node=node, attempt=attempt, follow=follow, tail=tail, missing_ok=False)


@page_router.get("/executions/{key:path}/logs/stream", include_in_schema=False)
async def page_logs(
    request: Request,
    key: str,
    node: Annotated[str | None, Query(max_length=256)] = None,
    attempt: Annotated[int | None, Query(ge=0, le=1_000_000)] = None,
) -> StreamingResponse:
    """A log pane's text: the API's answer with ``follow``, empty where the API would answer 404."""
    return await _logs(request, key, node=node, attempt=attempt, follow=True, tail=None, missing_ok=True)


async def _logs(
    request: Request,
    key: str,
    *,
    node: str | None,
    attempt: int | None,
    follow: bool,
    tail: int | None,
    missing_ok: bool,
) -> StreamingResponse:
    pool = request.app.state.db.pool
    async with pool.connection() as conn:
        cur = await conn.execute(_ROW, (key,))
        row = await cur.fetchone()
    if row is None:
        raise ApiError(404, f"no execution {key!r}", field="key")
    execution_id, terminal = int(row[0]), bool(row[1])
    # An execution that ended is still followed while none of its logs was found: a replica keeps an ended
    # pod's log at its next reaper pass (follow_logs waits for it a while).
    following = follow
    reader = LogReader(
        pool,
        request.app.state.log_cluster,
        reads=request.app.state.stream_reads,
        follow=following,
        jobs=request.app.state.job_logs,
    )

    async def read() -> list[ContainerLog]:
        return await reader.read(execution_id=execution_id, key=key, node=node, attempt=attempt)

    try:
        first = await read()
    except BaseException:
        await reader.close()
        raise
    following = following and (not terminal or not first)
    if not first and not following and not missing_ok:
        await reader.close()
        field = "attempt" if attempt is not None else "node" if node is not None else "key"
        what = " ".join(
            part
            for part in (
                f"node {node}" if node is not None else "",
                f"attempt {attempt}" if attempt is not None else "",
            )
            if part
        )
        where = f" ({reader.cluster_problem})" if reader.cluster_problem and not terminal else ""
        raise ApiError(
            404, f"no logs of {what + ' of ' if what else ''}execution {key!r} yet{where}", field=field
        )

    async def terminal_now() -> bool:
        async with pool.connection() as c:
            cur = await c.execute(_TERMINAL, (execution_id,))
            found = await cur.fetchone()
            return found is None or bool(found[0])

    async def body() -> AsyncIterator[bytes]:
        try:
            if reader.pods_left_out:
                yield (
                    f"[{reader.pods_left_out} more running pods' logs are not shown: at most {MAX_LIVE_PODS} "
                    "are read at once; ask for one node's (node=)]\n"
                ).encode()
            async for text in follow_logs(
                read,
                terminal_now,
                headers=attempt is None or len(first) > 1,
                tail=tail,
                follow=following,
                poll=request.app.state.log_poll,
                first=first,
                attempt=attempt,
            ):
                yield text.encode()
        finally:
            await reader.close()  # the client went away, or the log ended: no stream is left open

    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    if reader.kube is None:
        # What a page tells its reader while a running attempt shows nothing yet.
        headers["X-Taskplug-Log-Source"] = "kept-only"
    return StreamingResponse(body(), media_type="text/plain; charset=utf-8", headers=headers)
