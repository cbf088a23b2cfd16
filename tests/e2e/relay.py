"""A TCP relay between stszone and the API server, which a test can cut.

Bytes pass through untouched (TLS is end to end), so the API server still checks every
credential. :meth:`Relay.cut` resets every connection it carries, as an API server restart or a
load balancer would: a client's watches reconnect, and each new request is authenticated again
with whatever credentials the client holds then, rather than riding a watch opened long before.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Relay:
    """Listens on 127.0.0.1 at a port the kernel picks; forwards each connection to ``target``."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        #: Connections accepted so far: a client that connected at all shows here.
        self.accepted = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # the listener is closed
                return
            try:
                upstream = socket.create_connection(self.target, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self.accepted += 1
                self._open |= {client, upstream}
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            self._drop(source, sink)

    def _drop(self, *sockets: socket.socket) -> None:
        with self._lock:
            self._open -= set(sockets)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # wakes the other pump's recv()
            sock.close()

    def cut(self) -> None:
        """Reset every connection carried now; new ones are accepted as before."""
        with self._lock:
            carried = list(self._open)
        self._drop(*carried)

    def close(self) -> None:
        self._listener.close()
        self.cut()


@contextmanager
def relaying(target: tuple[str, int]) -> Iterator[Relay]:
    """A :class:`Relay` to ``target``, closed with every connection it carries afterwards."""
    relay = Relay(target)
    try:
        yield relay
    finally:
        relay.close()
