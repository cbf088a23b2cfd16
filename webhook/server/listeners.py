"""Listening addresses: a bind that fails is one line naming the flag, and ``--metrics-port``.

An address ``stszone serve`` cannot listen on (a port in use, an address not on this machine,
a privileged port) is a mistake in its flags, so it is a :class:`~webhook.errors.ConfigError`
naming the flag (:func:`bind_error`): the CLI prints it as one line and exits 2.

``--metrics-port`` serves ``/metrics`` over plain HTTP on a port of its own. Its address is
bound when the :class:`MetricsPort` is made, before the server starts: a port in use stops
start-up there, rather than in a background job after the webhook said it was serving. The job
:meth:`MetricsPort.run` serves the bound sockets for the server's lifetime and closes them.
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
from typing import Final

from aiohttp import web

from webhook.errors import ConfigError
from webhook.server.metrics import Metrics

#: The errors of a bind (as opposed to those of a connection being served).
BIND_ERRNOS: Final = frozenset({errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES})


def is_bind_error(err: OSError) -> bool:
    """Whether ``err`` says the address cannot be listened on (or ``--host`` does not resolve)."""
    return isinstance(err, socket.gaierror) or err.errno in BIND_ERRNOS


def bind_error(err: OSError, *, host: str, port: int, flag: str, what: str) -> ConfigError:
    """The one-line error for ``err`` from binding ``host:port``, the value of ``flag``, to
    serve ``what``: what happened, and what to do."""
    if isinstance(err, socket.gaierror):
        reason = f"--host does not resolve ({err.strerror})"
    else:  # uvloop's strerror repeats the address: the errno's own words
        reason = os.strerror(err.errno).lower() if err.errno else str(err)
    if isinstance(err, socket.gaierror) or err.errno == errno.EADDRNOTAVAIL:
        advice = "give --host an address of this machine (0.0.0.0: all of them)"
    elif err.errno == errno.EACCES:
        advice = f"choose a port above 1023 with {flag}, or run with the privilege to bind it"
    else:
        advice = f"stop what listens there, or choose another port with {flag}"
    return ConfigError(f"cannot serve {what} on {host}:{port}: {reason}; {advice}")


def _bind(host: str, port: int) -> list[socket.socket]:
    """Listening sockets on every address ``host`` resolves to, as asyncio's server binds
    them (``SO_REUSEADDR``; IPv6 sockets IPv6 only); OSError when one cannot be bound."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    addresses = dict.fromkeys((family, address) for family, _, _, _, address in infos)
    sockets: list[socket.socket] = []
    try:
        for family, address in addresses:
            sockets.append(socket.create_server(address, family=family))
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


class MetricsPort:
    """``/metrics`` of ``metrics`` over plain HTTP at ``host:port``, bound on creation."""

    FLAG: Final = "--metrics-port"

    def __init__(self, metrics: Metrics, *, host: str, port: int) -> None:
        self.metrics = metrics
        try:
            self.sockets = _bind(host, port)
        except OSError as err:
            raise bind_error(
                err,
                host=host,
                port=port,
                flag=f"{self.FLAG} (or leave it out to serve /metrics on --port)",
                what="/metrics",
            ) from None

    async def run(self) -> None:
        """Serve the bound sockets until cancelled (a job of the server), then close them."""
        runner = web.AppRunner(self.metrics.app(), access_log=None, handle_signals=False)
        try:
            await runner.setup()
            for sock in self.sockets:
                await web.SockSite(runner, sock).start()
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()
            self.close()

    def close(self) -> None:
        """Close the sockets (served or not)."""
        for sock in self.sockets:
            sock.close()
