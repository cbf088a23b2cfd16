"""The HTTPS transport: the webhook's routes behind one handler (``make_app``), and its jobs.

aiohttp appears in this package (and in the cluster layer's I/O), never in the pure engine.
``make_app(runtime)`` is the one handler aiohttp's low-level ``web.Server`` calls for every
request (:mod:`webhook.server.serve` runs it): a table of the paths ``/mutate``, ``/validate``,
``/extender/filter``, ``/extender/prioritize``, ``/healthz``, ``/readyz`` and the runtime's extra
routes (``/metrics``), each with its methods. An unknown path is answered 404, a wrong method
405 with ``Allow``, and a ``GET`` endpoint answers ``HEAD`` too. The table is aiohttp's router
cut to what stszone serves: a dictionary lookup where ``web.Application`` resolves a route,
builds its match info and checks middlewares and ``Expect`` for every request, about 4% of the
requests/s the webhook serves (docs/performance.md). The handlers are in
:mod:`webhook.server.handlers`; ``Expect: 100-continue`` is answered where a body is read
(:mod:`webhook.server.body`). The runtime's background jobs run for the server's lifetime:
:func:`start_jobs` and :func:`stop_jobs`.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from collections.abc import Awaitable, Callable, Iterable

from aiohttp import web, web_response
from prometheus_client import CollectorRegistry

from webhook.rules.risk import RiskScan
from webhook.server.cachemetrics import CacheLike, store_caches
from webhook.server.handlers import (
    admission_handler,
    closing,
    extender_handler,
    healthz,
    not_ready,
    plain,
    readyz,
)
from webhook.server.listeners import MetricsPort
from webhook.server.looplag import LoopLag
from webhook.server.metrics import Metrics
from webhook.server.riskmetrics import ZoneRisk
from webhook.server.runtime import Handler, Job, Route, Runtime

log = logging.getLogger("stszone.server")

# aiohttp announces "Python/3.x aiohttp/3.y" in every response, its own error pages included,
# and has no setting for it. It reads this module global when it writes headers; replacing it
# costs nothing per request (a response_prepare signal would run on every one).
web_response.SERVER_SOFTWARE = "stszone"  # type: ignore[attr-defined]

#: The handler of every request (aiohttp's ``web.Server`` calls it).
App = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]


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
    for methods in table.values():
        if "GET" in methods:
            methods.setdefault("HEAD", methods["GET"])  # aiohttp writes no body for HEAD
    return table


def make_app(runtime: Runtime) -> App:
    """The handler serving ``runtime``'s endpoints (see the module docstring)."""
    table = routes(runtime)
    served = ", ".join(table)

    async def app(request: web.BaseRequest) -> web.StreamResponse:
        methods = table.get(request.path)
        if methods is None:
            return plain(404, text=f"not found; stszone serves {served}")
        handler = methods.get(request.method)
        if handler is None:
            allow = ",".join(methods)
            response = plain(405, text=f"{request.path} takes {allow}, not {request.method}")
            response.headers["Allow"] = allow
            return response
        return await handler(request)

    return app


def start_jobs(runtime: Runtime) -> list[asyncio.Task[None]]:
    """Start the runtime's background jobs (before the listener opens)."""
    return [_start(job, runtime=runtime) for job in runtime.jobs]


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
        # Jobs run for the server's lifetime: one that ends early (a metrics port already in
        # use, a bug) is logged now, not at shutdown, and keeps /readyz from saying ready.
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
        collectors=[zone_risk.collector, lag],
    )
    runtime.observers.append(metrics.observe)
    port = runtime.settings.metrics_port
    if port is None:
        runtime.extra_routes["/metrics"] = Route("GET", closing(metrics.handler, runtime=runtime))
    else:
        # Bound now, before the server starts: a port in use is a ConfigError at start-up.
        runtime.jobs.append(MetricsPort(metrics, host=runtime.settings.host, port=port).run)
    return metrics
