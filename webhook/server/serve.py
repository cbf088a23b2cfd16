"""Serving an app: the runner with its connection timeouts and background jobs, and SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from typing import Any

from aiohttp import web

from webhook.config import Settings
from webhook.server.app import App
from webhook.server.runtime import Job, Runtime

log = logging.getLogger("stszone.server")


class Runner(web.BaseRunner):
    """Serves an :class:`App` on aiohttp's low-level server and runs the runtime's jobs.

    The jobs start when the server is set up and are cancelled (and awaited) after its
    connections are closed at cleanup, the order an Application's ``cleanup_ctx`` kept.
    """

    __slots__ = ("_app", "_tasks")

    def __init__(self, app: App, **kwargs: Any) -> None:
        super().__init__(handle_signals=False, **kwargs)
        self._app = app
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def app(self) -> App:
        return self._app

    async def shutdown(self) -> None:
        pass  # the SIGTERM sequence of serve() has already run by the time cleanup comes

    async def _make_server(self) -> web.Server:
        runtime = self._app.runtime
        self._tasks = [_start(job, runtime) for job in runtime.jobs]
        return web.Server(self._app, **self._kwargs)

    async def _cleanup_server(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):  # logged by _start
                await task
        self._tasks = []


def _start(job: Job, runtime: Runtime) -> asyncio.Task[None]:
    name = getattr(job, "__qualname__", repr(job))

    def ended(task: asyncio.Task[None]) -> None:
        # Jobs run for the app's lifetime: one that ends early (a metrics port already in use,
        # a bug) is logged now, not at shutdown, and keeps /readyz from saying ready.
        if task.cancelled() or task.exception() is None:
            return
        error = task.exception()
        log.error("background job %s failed: %s", name, error, exc_info=error)
        runtime.failed_jobs.append(f"background job {name} failed: {error}")

    task = asyncio.create_task(job())
    task.add_done_callback(ended)
    return task


def make_runner(app: App, settings: Settings) -> Runner:
    """The runner ``serve()`` uses, with its connection timeouts (tests build theirs with it).

    ``keepalive_timeout`` closes a connection that has no request in progress for
    ``idle_timeout`` seconds, counted from the connection's start or its last response: it bounds
    both idle keep-alive connections and a client trickling its request headers. It is longer
    than kube-apiserver's 90 s idle-connection timeout, so the API server, not us, closes idle
    connections (a POST on a connection the server is closing fails and is not retried). A body
    that stalls is bounded by ``body_timeout`` in the handlers; a TLS handshake by asyncio's 60 s.
    """
    return Runner(
        app,
        access_log=None,
        keepalive_timeout=settings.idle_timeout,
        # Only responses being written remain at cleanup; the grace is spent waiting below.
        shutdown_timeout=min(settings.shutdown_grace, 1.0),
    )


async def serve(app: App, *, ssl_context: Any, settings: Settings) -> None:
    """Serve until SIGTERM/SIGINT; then fail readiness, stop accepting, finish in-flight work."""
    runtime = app.runtime
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
