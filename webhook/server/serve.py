"""Serving the app: aiohttp's runner and TLS site with the connection timeouts, and SIGTERM."""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
import ssl
from typing import Final

from aiohttp import web

from webhook.config import Settings
from webhook.server.app import make_app
from webhook.server.handlers import not_ready
from webhook.server.listeners import bind, shown
from webhook.server.runtime import Runtime

log = logging.getLogger("stszone.server")

#: After refusing a body that is still coming, read and drop it this long before closing: a
#: socket closed with unread bytes sends a reset, which can destroy the answer unread.
LINGER: Final = 2.0
#: Seconds between looks at readiness before a shared (``--reuse-port``) listener opens.
READY_POLL: Final = 0.1


class Server:
    """The runtime's application (:func:`~webhook.server.app.make_app`) on aiohttp's
    ``AppRunner``, a TLS site on each listening socket.

    Connection timeouts: a connection with no request in progress is closed ``idle_timeout``
    seconds after it opened or its last answer (aiohttp's ``keepalive_timeout``). That bounds
    idle keep-alive connections and a client trickling its request headers. It is longer than
    kube-apiserver's 90 s idle-connection timeout, so the API server, not us, closes idle
    connections (a POST on a connection the server is closing fails and is not retried). A body
    that stalls is bounded by ``body_timeout`` in the handlers; a TLS handshake by asyncio's
    60 s. Pipelined requests wait in a queue aiohttp bounds (``MAX_MSG_QUEUE_SIZE``), beyond
    which it stops reading, as it does from a client that does not read its answers.

    The runtime's jobs start with the runner (:meth:`setup`, before the site listens) and are
    cancelled, and awaited, after the connections are closed (the app's ``cleanup_ctx``):
    nothing the answers read goes away while they are written.
    """

    def __init__(self, runtime: Runtime, *, settings: Settings) -> None:
        self.runtime = runtime
        self.settings = settings
        self.runner = web.AppRunner(
            make_app(runtime),
            handle_signals=False,
            access_log=None,
            keepalive_timeout=settings.idle_timeout,
            lingering_time=LINGER,
            # Only answers being written remain at cleanup; the grace is spent in serve().
            shutdown_timeout=min(settings.shutdown_grace, 1.0),
        )
        self.sites: list[web.SockSite] = []
        self.sockets: list[socket.socket] = []

    async def setup(self) -> None:
        """Start the runtime's jobs and the runner (nothing listens yet)."""
        await self.runner.setup()

    async def start(self, host: str, port: int, *, ssl_context: ssl.SSLContext) -> None:
        """Start the jobs, then listen on ``host:port`` (port 0: one the kernel picks)."""
        await self.setup()
        await self.listen(host, port, ssl_context=ssl_context)

    async def listen(self, host: str, port: int, *, ssl_context: ssl.SSLContext) -> None:
        """Listen on ``host:port`` (:func:`~webhook.server.listeners.bind`: "" is every
        address, IPv4 and IPv6), the jobs started (:meth:`setup`)."""
        sockets: list[socket.socket] = []
        try:
            # Several processes on one address (SO_REUSEPORT): the kernel spreads new
            # connections over the listeners, and one that stops accepting drops out.
            sockets = bind(host, port, reuse_port=self.settings.reuse_port)
            for sock in sockets:
                site = web.SockSite(self.runner, sock, ssl_context=ssl_context)
                self.sites.append(site)
                await site.start()
        except BaseException:
            for sock in sockets:
                sock.close()
            await self.close()
            raise
        self.sockets = sockets

    @property
    def port(self) -> int:
        """The port listened on."""
        assert self.sockets, "not started"
        port: int = self.sockets[0].getsockname()[1]
        return port

    @property
    def addresses(self) -> str:
        """Where it listens, as the log names it: ``https://0.0.0.0:8443, https://[::]:8443``."""
        return ", ".join(
            f"https://{shown(sock.getsockname()[0], sock.getsockname()[1])}"
            for sock in self.sockets
        )

    async def stop_accepting(self) -> None:
        """Close the listening sockets; accepted connections are served on."""
        sites, self.sites = self.sites, []
        for site in sites:
            await site.stop()

    async def close(self) -> None:
        """Close every connection (cut after at most 1 s), then stop the jobs."""
        await self.runner.cleanup()


async def serve(runtime: Runtime, *, ssl_context: ssl.SSLContext, settings: Settings) -> None:
    """Serve until SIGTERM/SIGINT; then fail readiness, stop accepting, finish in-flight work.

    With ``--reuse-port`` the listener opens only once the process is Ready: on a shared
    address the kernel hands new connections to every listener, so a listener is what an
    endpoint in the Service is, and a replica still listing the cluster (or still waiting for
    its certificate) would answer admissions it cannot judge. Without it, the listener opens at
    once, so that probes are answered and the Service routes by readiness.
    """
    in_flight = runtime.in_flight  # counted by the handlers (see InFlight)
    server = Server(runtime, settings=settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await server.setup()
    try:
        if settings.reuse_port and not await _ready_or_stopped(runtime, stop):
            return
        await server.listen(settings.host, settings.port, ssl_context=ssl_context)
        log.info(
            "serving %s (mutate, validate, extender, healthz, readyz)%s",
            server.addresses,
            ", sharing the port with other listeners (--reuse-port)" if settings.reuse_port else "",
        )
        await stop.wait()
        runtime.shutting_down = True
        log.info("shutting down: readiness off, closing in %.1fs", settings.shutdown_delay)
        await asyncio.sleep(settings.shutdown_delay)
        await server.stop_accepting()  # refuse new connections; open ones keep being served
        try:
            # A connection accepted just before the close may have its request on the wire
            # (every answer since SIGTERM said Connection: close, so clients reconnect, and the
            # last reconnects race the close): serve open connections until they go quiet.
            async with asyncio.timeout(settings.shutdown_grace):
                await in_flight.drained(settings.shutdown_linger)
        except TimeoutError:
            log.warning("%d requests still in flight after the grace period; cut", in_flight.count)
    finally:
        await server.close()
        log.info("stopped")


async def _ready_or_stopped(runtime: Runtime, stop: asyncio.Event) -> bool:
    """Wait until every readiness check passes (True), or SIGTERM comes first (False)."""
    if not_ready(runtime):
        log.info("not listening until Ready: the address is shared (--reuse-port)")
    while failures := not_ready(runtime):
        try:
            async with asyncio.timeout(READY_POLL):
                await stop.wait()
            log.info("stopped before Ready: %s", "; ".join(failures))
            return False
        except TimeoutError:
            continue
    return True
