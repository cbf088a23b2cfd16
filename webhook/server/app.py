"""The HTTPS transport: ``make_app()``, the webhook's ``web.Application``, and its jobs.

aiohttp appears in this package (and in the cluster layer's I/O), never in the pure engine.
The app routes ``/mutate``, ``/validate``, ``/extender/filter``, ``/extender/prioritize``,
``/healthz``, ``/readyz`` and the runtime's extra routes (``/metrics``); aiohttp's router
answers unknown paths with 404 and wrong methods with 405 and ``Allow``. The handlers are in
:mod:`webhook.server.handlers`. The runtime's background jobs run for the app's lifetime, as a
``cleanup_ctx`` generator that starts them and, at cleanup (after every connection is closed),
cancels and awaits them.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Final

from aiohttp import web, web_response
from prometheus_client import CollectorRegistry

from webhook.rules.risk import RiskScan
from webhook.server.body import Body, expect_handler
from webhook.server.handlers import (
    ADMISSION_BODY,
    EXTENDER_BODY,
    admission_handler,
    closing,
    extender_handler,
    healthz,
    not_ready,
    readyz,
)
from webhook.server.looplag import LoopLag
from webhook.server.metrics import CacheLike, Metrics, serve_metrics, store_caches
from webhook.server.riskmetrics import ZoneRisk
from webhook.server.runtime import Handler, Job, Route, Runtime

log = logging.getLogger("stszone.server")

# aiohttp announces "Python/3.x aiohttp/3.y" in every response, its own error pages included,
# and has no setting for it. It reads this module global when it writes headers; replacing it
# costs nothing per request (a response_prepare signal would run on every one).
web_response.SERVER_SOFTWARE = "stszone"  # type: ignore[attr-defined]

#: The runtime the app serves from.
RUNTIME: Final = web.AppKey("runtime", Runtime)
#: The background jobs' tasks while the app runs.
JOBS: Final = web.AppKey("jobs", list[asyncio.Task[None]])


def make_app(runtime: Runtime) -> web.Application:
    """The app serving ``runtime``; its background jobs run with the runner (``serve``)."""
    app = web.Application()
    app[RUNTIME] = runtime
    limit = runtime.settings.max_body

    def post(path: str, handler: Handler, *, body: Body) -> None:
        app.router.add_post(path, handler, expect_handler=expect_handler(body, limit=limit))

    post("/mutate", admission_handler("mutate", runtime=runtime), body=ADMISSION_BODY)
    post("/validate", admission_handler("validate", runtime=runtime), body=ADMISSION_BODY)
    post("/extender/filter", extender_handler("filter", runtime=runtime), body=EXTENDER_BODY)
    post(
        "/extender/prioritize",
        extender_handler("prioritize", runtime=runtime),
        body=EXTENDER_BODY,
    )
    app.router.add_get("/healthz", closing(healthz, runtime=runtime))
    app.router.add_get("/readyz", closing(readyz(runtime), runtime=runtime))
    for path, route in runtime.extra_routes.items():
        if route.method == "GET":
            app.router.add_get(path, route.handler)  # HEAD too, as for aiohttp's own GET routes
        else:
            app.router.add_route(route.method, path, route.handler)
    app.cleanup_ctx.append(_jobs)
    return app


async def _jobs(app: web.Application) -> AsyncIterator[None]:
    """Run the runtime's jobs from start-up (before the listener opens) to cleanup."""
    runtime = app[RUNTIME]
    tasks = app[JOBS] = [_start(job, runtime=runtime) for job in runtime.jobs]
    yield
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError, Exception):  # logged by _start
            await task


def _start(job: Job, *, runtime: Runtime) -> asyncio.Task[None]:
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


def install_metrics(
    runtime: Runtime,
    *,
    caches: Callable[[], Iterable[CacheLike]] | None = None,
    certificate: Callable[[], dt.datetime | None] | None = None,
    registry: CollectorRegistry | None = None,
    zone_risk: ZoneRisk | None = None,
) -> Metrics:
    """Give ``runtime`` metrics: the observer, ``/metrics`` on the app or ``--metrics-port``,
    the zone-risk gauges and the event-loop lag probe, with their background jobs.

    Call before ``make_app``. ``caches`` defaults to the sizes of the runtime's store tables;
    ``zone_risk`` to a scan of the runtime's store, refreshed while the runtime is ready.
    """
    if zone_risk is None:
        scan = RiskScan(runtime.store, excluded=runtime.defaults.excluded_namespaces)
        zone_risk = ZoneRisk(
            scan,
            ready=lambda: not not_ready(runtime),
            interval=runtime.settings.zone_risk_interval,
        )
    runtime.jobs.append(zone_risk.run)
    lag = LoopLag()
    runtime.jobs.append(lag.run)
    metrics = Metrics(
        registry=registry,
        caches=caches if caches is not None else store_caches(runtime.store),
        certificate=certificate,
        in_flight=lambda: runtime.in_flight.count,
        ready=lambda: not runtime.shutting_down and not not_ready(runtime),
        collectors=[zone_risk.collector, lag],
    )
    runtime.observers.append(metrics.observe)
    port = runtime.settings.metrics_port
    if port is None:
        runtime.extra_routes["/metrics"] = Route("GET", closing(metrics.handler, runtime=runtime))
    else:
        host = runtime.settings.host

        async def job() -> None:
            await serve_metrics(metrics, host=host, port=port)

        runtime.jobs.append(job)
    return metrics
