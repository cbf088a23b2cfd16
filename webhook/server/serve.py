"""Serving an app: the runner with its connection timeouts, and the SIGTERM sequence."""

from __future__ import annotations

import asyncio
import logging
import signal
from typing import Any

from aiohttp import web

from webhook.config import Settings
from webhook.server.runtime import RUNTIME

log = logging.getLogger("stszone.server")


def make_runner(app: web.Application, settings: Settings) -> web.AppRunner:
    """The runner ``serve()`` uses, with its connection timeouts (tests build theirs with it).

    ``keepalive_timeout`` closes a connection that has no request in progress for
    ``idle_timeout`` seconds, counted from the connection's start or its last response: it bounds
    both idle keep-alive connections and a client trickling its request headers. It is longer
    than kube-apiserver's 90 s idle-connection timeout, so the API server, not us, closes idle
    connections (a POST on a connection the server is closing fails and is not retried). A body
    that stalls is bounded by ``body_timeout`` in the handlers; a TLS handshake by asyncio's 60 s.
    """
    return web.AppRunner(
        app,
        access_log=None,
        handle_signals=False,
        keepalive_timeout=settings.idle_timeout,
        # Only responses being written remain at cleanup; the grace is spent waiting below.
        shutdown_timeout=min(settings.shutdown_grace, 1.0),
    )


async def serve(app: web.Application, *, ssl_context: Any, settings: Settings) -> None:
    """Serve until SIGTERM/SIGINT; then fail readiness, stop accepting, finish in-flight work."""
    runtime = app[RUNTIME]
    in_flight = runtime.in_flight  # counted by the handlers (see InFlight)
    runner = make_runner(app, settings)
    await runner.setup()
    site = web.TCPSite(
        runner,
        host=settings.host,
        port=settings.port,
        ssl_context=ssl_context,
        reuse_address=True,
    )
    await site.start()
    log.info(
        "serving https://%s:%d (mutate, validate, extender, healthz, readyz)",
        settings.host,
        settings.port,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
        runtime.shutting_down = True
        log.info("shutting down: readiness off, closing in %.1fs", settings.shutdown_delay)
        await asyncio.sleep(settings.shutdown_delay)
        await site.stop()  # refuse new connections; open ones keep being served
        try:
            # A connection accepted just before the close may have its request on the wire
            # (every answer since SIGTERM said Connection: close, so clients reconnect, and the
            # last reconnects race the close): serve open connections until they go quiet.
            async with asyncio.timeout(settings.shutdown_grace):
                await in_flight.drained(settings.shutdown_linger)
        except TimeoutError:
            log.warning("%d requests still in flight after the grace period; cut", in_flight.count)
    finally:
        await runner.cleanup()
        log.info("stopped")
