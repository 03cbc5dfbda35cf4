"""Run Flyte 2's connector server (the ``flyte`` SDK's ``c0``) with every server it starts bound to loopback.

``c0`` binds gRPC on ``[::]:port`` and prometheus on 0.0.0.0 with no flag to change either. This wrapper
rewrites both addresses to 127.0.0.1, then runs ``c0``'s own command line (run it with the Python of an
environment where ``pip install 'flyte[connector]'`` was done):

    python c0_loopback.py --port 18100 --prometheus_port 19190 --modules my_flyte2_connectors
"""

from __future__ import annotations

import sys
from typing import Any

import grpc.aio._server
import prometheus_client

_add_insecure_port = grpc.aio._server.Server.add_insecure_port
_start_http_server = prometheus_client.start_http_server


def _loopback_port(self: Any, address: str) -> int:
    port = address.rsplit(":", 1)[1]
    return int(_add_insecure_port(self, f"127.0.0.1:{port}"))


def _loopback_http_server(port: int, addr: str = "0.0.0.0", *args: Any, **kwargs: Any) -> Any:
    return _start_http_server(port, "127.0.0.1", *args, **kwargs)


grpc.aio._server.Server.add_insecure_port = _loopback_port  # type: ignore[method-assign]
prometheus_client.start_http_server = _loopback_http_server

if __name__ == "__main__":
    from flyte._bin.connect import main

    sys.exit(main(sys.argv[1:]))
