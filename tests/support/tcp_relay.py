"""A TCP relay on 127.0.0.1 that a test can cut and restore: a database or server that goes away (every
connection closed, new ones refused, as a crash or a network partition does) and comes back on the same
port, without stopping the real peer behind it that other tests share."""

from __future__ import annotations

import contextlib
import socket
import threading
from urllib.parse import urlsplit

__all__ = ["Relay", "relay_to_postgres"]


class Relay:
    """A TCP relay 127.0.0.1:port → target that can be cut (every connection closed, new ones refused)
    and restored on the same port."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self.accepted = 0
        """Connections accepted so far (each a client's new connection)."""
        self._serve()

    def _serve(self) -> None:
        listener = self._listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True, name="relay-accept").start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut
            with self._lock:
                self.accepted += 1
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._open |= {client, upstream}
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True, name="relay-pipe").start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        for s in (source, sink):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        # shutdown() first: close() alone does not wake a thread blocked in accept(), which would go on
        # accepting on the still-listening socket.
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        with self._lock:
            doomed, self._open = self._open, set()
        for s in doomed:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def restore(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", self.port), reuse_port=False)
        self._serve()


def relay_to_postgres(dsn: str) -> tuple[Relay, str]:
    """A relay to the PostgreSQL of ``dsn`` (a ``postgresql://`` URL, as the fixtures give), and the same URL
    through it, with a short connect timeout so that a cut relay is noticed at once."""
    parts = urlsplit(dsn)
    relay = Relay((str(parts.hostname), parts.port or 5432))
    user = f"{parts.username}@" if parts.username else ""
    query = f"{parts.query}&connect_timeout=2" if parts.query else "connect_timeout=2"
    return relay, parts._replace(netloc=f"{user}127.0.0.1:{relay.port}", query=query).geturl()
