"""The HTTPS transport: ``make_app()``, the webhook's routes on an aiohttp ``web.Application``.

aiohttp appears in this package (and in the cluster layer's I/O), never in the pure engine.
The routes: ``POST /mutate``, ``/validate``, ``/extender/filter``, ``/extender/prioritize``;
``GET /healthz``, ``/readyz`` and the runtime's extra routes (``/metrics``). aiohttp's router
answers an unknown path 404, a wrong method 405 with ``Allow``, and ``HEAD`` on every ``GET``
route. ``client_max_size`` is the body cap; a POST route's ``expect_handler`` refuses, from its
headers alone, a body it will not take before asking for it (:mod:`webhook.server.body`); every
answer says ``Server: stszone`` (``on_response_prepare``). The runtime's background jobs run
for the app's lifetime, as a ``cleanup_ctx``: started before the listener opens, cancelled and
awaited after every connection is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Final

from aiohttp import hdrs, web
from prometheus_client import CollectorRegistry

from webhook.rules.risk import RiskScan
from webhook.server.body import expect_handler
from webhook.server.cachemetrics import CacheLike, store_caches
from webhook.server.handlers import (
    admission_handler,
    closing,
    extender_handler,
    healthz,
    not_ready,
    readyz,
)
from webhook.server.listeners import MetricsPort
from webhook.server.looplag import LoopLag
from webhook.server.metrics import Metrics
from webhook.server.poolrisk import PoolRiskCollector
from webhook.server.riskmetrics import ZoneRisk
from webhook.server.runtime import Handler, Job, Route, Runtime

log = logging.getLogger("stszone.server")

#: The ``Server`` header of every answer (aiohttp's own names Python and aiohttp versions).
SERVER: Final = "stszone"


def routes(runtime: Runtime) -> dict[str, dict[str, Handler]]:
    """Path -> method -> handler: every endpoint ``runtime`` is served with."""
    table: dict[str, dict[str, Handler]] = {
        "/mutate": {"POST": admission_handler("mutate", runtime=runtime)},
        "/validate": {"POST": admission_handler("validate", runtime=runtime)},
        "/extender/filter": {"POST": extender_handler("filter", runtime=runtime)},
        "/extender/prioritize": {"POST": extender_handler("prioritize", runtime=runtime)},
        "/healthz": {"GET": closing(healthz, runtime=runtime)},
        "/readyz": {"GET": closing(readyz(runtime), runtime=runtime)},
    }
    for path, route in runtime.extra_routes.items():
        table.setdefault(path, {})[route.method] = route.handler
    return table


async def _server_header(request: web.Request, response: web.StreamResponse) -> None:
    response.headers[hdrs.SERVER] = SERVER


def make_app(runtime: Runtime) -> web.Application:
    """The application serving ``runtime``'s endpoints (see the module docstring)."""
    app = web.Application(client_max_size=runtime.settings.max_body)
    for path, methods in routes(runtime).items():
        for method, handler in methods.items():
            if method == hdrs.METH_GET:
                app.router.add_get(path, handler)  # and HEAD
            else:
                app.router.add_route(method, path, handler, expect_handler=expect_handler)
    app.on_response_prepare.append(_server_header)
    app.cleanup_ctx.append(_jobs(runtime))
    return app


def _jobs(runtime: Runtime) -> Callable[[web.Application], AsyncIterator[None]]:
    """The runtime's background jobs as a ``cleanup_ctx``: run while the app is up."""

    async def running(app: web.Application) -> AsyncIterator[None]:
        tasks = [_start(job, runtime=runtime) for job in runtime.jobs]
        yield
        await stop_jobs(tasks)

    return running


async def stop_jobs(tasks: Iterable[asyncio.Task[None]]) -> None:
    """Cancel the jobs and wait for them (after every connection is closed)."""
    tasks = list(tasks)
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError, Exception):  # logged by _start
            await task


def _start(job: Job, *, runtime: Runtime) -> asyncio.Task[None]:
    name = getattr(job, "__qualname__", repr(job))

    def ended(task: asyncio.Task[None]) -> None:
        # Jobs run for the server's lifetime: one that ends early (a bug, a lost listener) is
        # logged now, not at shutdown, and keeps /readyz from saying ready.
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
    ``--metrics-port`` is bound here, so a port in use is a ConfigError before the server starts.
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
        collectors=[PoolRiskCollector(zone_risk.scan), lag],
        rendered=[zone_risk.exposition],
    )
    runtime.observers.append(metrics.observe)
    port = runtime.settings.metrics_port
    if port is None:
        runtime.extra_routes["/metrics"] = Route("GET", closing(metrics.handler, runtime=runtime))
    else:
        # Bound now, before the server starts: a port in use is a ConfigError at start-up.
        runtime.jobs.append(MetricsPort(metrics, host=runtime.settings.host, port=port).run)
    return metrics
