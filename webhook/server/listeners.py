"""Listening addresses: every address by default, a bind that fails is one line naming the
flag, and ``--metrics-port``.

``--host`` left out (``""``) listens on every address of the machine, IPv4 and IPv6, as a Go
server's ``:8443`` does: in an IPv6-only cluster (EKS's, for one) the API server reaches the
pod on its IPv6 address, which an IPv4-only wildcard never answers. A family the machine lacks
(no IPv6 in the kernel, or none configured) is left out of that wildcard; a named address
must be bound.

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
from collections.abc import Sequence
from typing import Any, Final

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
        advice = "give --host an address of this machine, or leave it out to listen on all of them"
    elif err.errno == errno.EACCES:
        advice = f"choose a port above 1023 with {flag}, or run with the privilege to bind it"
    else:
        advice = f"stop what listens there, or choose another port with {flag}"
    return ConfigError(f"cannot serve {what} on {shown(host, port)}: {reason}; {advice}")


#: Errors of binding a wildcard of a family the machine does not have.
NO_FAMILY_ERRNOS: Final = frozenset({errno.EAFNOSUPPORT, errno.EADDRNOTAVAIL})


def shown(host: str, port: int) -> str:
    """``host:port`` as logs and errors name it: ``*:8443`` for every address, ``[::1]:8443``."""
    if not host:
        return f"*:{port}"
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def bind(host: str, port: int, *, reuse_port: bool = False) -> list[socket.socket]:
    """Listening sockets on every address ``host`` resolves to ("": every address of every
    family the machine has), each with ``SO_REUSEADDR`` and IPv6 sockets IPv6 only, all on one
    port (port 0: the one the kernel picks for the first); OSError when one cannot be bound."""
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    addresses = list(dict.fromkeys((family, address) for family, _, _, _, address in infos))
    return listen(addresses, wildcard=not host, reuse_port=reuse_port)


def listen(
    addresses: Sequence[tuple[int, Any]], *, wildcard: bool, reuse_port: bool = False
) -> list[socket.socket]:
    """The sockets of :func:`bind`; ``wildcard``: a family that cannot be bound (see
    :data:`NO_FAMILY_ERRNOS`) is left out, as long as one is bound."""
    sockets: list[socket.socket] = []
    missing: OSError | None = None
    try:
        for family, address in addresses:
            if sockets:  # port 0: every family on the port the first was given
                address = (address[0], sockets[0].getsockname()[1], *address[2:])
            try:
                sockets.append(socket.create_server(address, family=family, reuse_port=reuse_port))
            except OSError as err:
                if not (wildcard and err.errno in NO_FAMILY_ERRNOS):
                    raise
                missing = err
        if not sockets and missing is not None:
            raise missing
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
            self.sockets = bind(host, port)
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
