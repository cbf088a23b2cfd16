"""Serving an app: the listener with its connection timeouts and background jobs, and SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from typing import Any

from webhook.config import Settings
from webhook.server.app import App
from webhook.server.http import Limits, Listener
from webhook.server.runtime import Job, Runtime

log = logging.getLogger("stszone.server")


class Server:
    """The app on a listening socket (:mod:`webhook.server.http`), and the runtime's jobs.

    The jobs start with the server and are cancelled (and awaited) after its connections are
    closed, so nothing the answers read goes away while they are written.

    Connection timeouts: a connection with no request in progress is closed ``idle_timeout``
    seconds after it opened or its last answer. That bounds idle keep-alive connections and a
    client trickling its request headers. It is longer than kube-apiserver's 90 s
    idle-connection timeout, so the API server, not us, closes idle connections (a POST on a
    connection the server is closing fails and is not retried). A body that stalls is bounded
    by ``body_timeout``; a TLS handshake by asyncio's 60 s.
    """

    def __init__(self, app: App, settings: Settings) -> None:
        self.app = app
        self.settings = settings
        limits = Limits(
            idle_timeout=settings.idle_timeout,
            body_timeout=settings.body_timeout,
            max_body=settings.max_body,
        )
        self.listener = Listener(app, limits, app.runtime.in_flight)
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self, host: str, port: int, *, ssl_context: Any) -> None:
        """Start the jobs, then listen on ``host:port`` (port 0: one the kernel picks)."""
        runtime = self.app.runtime
        self._tasks = [_start(job, runtime) for job in runtime.jobs]
        try:
            await self.listener.start(host, port, ssl=ssl_context)
        except BaseException:
            await self._stop_jobs()
            raise

    @property
    def port(self) -> int:
        return self.listener.port

    def stop_accepting(self) -> None:
        self.listener.stop_accepting()

    async def close(self) -> None:
        """Close every connection (cut after at most 1 s), then stop the jobs."""
        try:
            await self.listener.close(grace=min(self.settings.shutdown_grace, 1.0))
        finally:
            await self._stop_jobs()

    async def _stop_jobs(self) -> None:
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


async def serve(app: App, *, ssl_context: Any, settings: Settings) -> None:
    """Serve until SIGTERM/SIGINT; then fail readiness, stop accepting, finish in-flight work."""
    runtime = app.runtime
    in_flight = runtime.in_flight  # counted by the connections (see InFlight)
    server = Server(app, settings)
    await server.start(settings.host, settings.port, ssl_context=ssl_context)
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
        server.stop_accepting()  # refuse new connections; open ones keep being served
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
