"""Stand-ins for the Ray processes of a KubeRay cluster, run by the embedded cluster's kubelet.

Ray itself is not installed here (it is large), so the local KubeRay operator gives the head and worker pods
these small processes in place of ``ray start``: the head listens on 127.0.0.1 on the GCS and dashboard
ports the operator chose (the dashboard answers HTTP GETs with a small JSON document), a worker connects to
the head's GCS port and stays connected, as a raylet does, until it is stopped. The operator's readiness
probe is a connection to the head's GCS port.

The operator passes this file's source to ``python -c`` (it imports nothing but the standard library, so a
pod starts in milliseconds and needs nothing installed):

    python -c SOURCE head --gcs-port P --dashboard-port D
    python -c SOURCE worker --address 127.0.0.1:P [--connect-timeout SECONDS]

SIGTERM (what the kubelet sends when a pod is deleted) stops either one with exit code 0.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys

__all__ = ["main"]

_HOST = "127.0.0.1"


def _stop_event() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def _hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A node (or the operator's probe) connected to the GCS port: keep the connection until it closes."""
    try:
        while await reader.read(4096):
            pass
    except OSError:
        pass
    finally:
        writer.close()


async def _dashboard(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Answer one HTTP request with what a Ray dashboard's ``/api/version`` would say."""
    try:
        await reader.readuntil(b"\r\n\r\n")
        body = json.dumps({"ray_version": "stand-in", "ray_commit": "", "version": "stand-in"}).encode()
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await writer.drain()
    except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()


async def head(gcs_port: int, dashboard_port: int) -> int:
    stop = _stop_event()
    gcs = await asyncio.start_server(_hold, _HOST, gcs_port)
    dashboard = await asyncio.start_server(_dashboard, _HOST, dashboard_port)
    print(f"ray head stand-in: GCS on {_HOST}:{gcs_port}, dashboard on {_HOST}:{dashboard_port}", flush=True)
    async with gcs, dashboard:
        await stop.wait()
    print("ray head stand-in: stopped", flush=True)
    return 0


async def worker(address: str, connect_timeout: float) -> int:
    stop = _stop_event()
    host, _, port = address.rpartition(":")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + connect_timeout
    while True:
        try:
            reader, writer = await asyncio.open_connection(host, int(port))
            break
        except OSError as e:
            if loop.time() > deadline or stop.is_set():
                print(f"ray worker stand-in: no head at {address}: {e}", flush=True)
                return 1
            await asyncio.sleep(0.1)
    print(f"ray worker stand-in: joined the cluster at {address}", flush=True)
    head_gone = asyncio.ensure_future(reader.read())
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({head_gone, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        head_gone.cancel()
        stopped.cancel()
        writer.close()
    print("ray worker stand-in: stopped", flush=True)
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="ray-stand-in")
    sub = parser.add_subparsers(dest="role", required=True)
    head_args = sub.add_parser("head")
    head_args.add_argument("--gcs-port", type=int, required=True)
    head_args.add_argument("--dashboard-port", type=int, required=True)
    worker_args = sub.add_parser("worker")
    worker_args.add_argument("--address", required=True)
    worker_args.add_argument("--connect-timeout", type=float, default=60.0)
    args = parser.parse_args(argv)
    if args.role == "head":
        return asyncio.run(head(args.gcs_port, args.dashboard_port))
    return asyncio.run(worker(args.address, args.connect_timeout))


if __name__ == "__main__":
    # ``python -c SOURCE ARGS...`` puts "-c" in argv[0].
    sys.exit(main(sys.argv[1:]))
