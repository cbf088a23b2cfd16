"""The HTTPS transport: ``make_app()``, the routes, and the one place errors become HTTP.

aiohttp appears in this package (and in the cluster layer's I/O), never in the pure engine.
Admission handlers read the body under a 7 MiB cap, parse it, ask the engine, and write the
review back; a :class:`~webhook.errors.BadRequest` becomes a 4xx with a one-line
message, anything unexpected becomes a logged ``allowed: false`` answer with code 500 in an
HTTP 200 (so the API server shows the reason instead of a connection error), never a traceback.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass

from aiohttp import web, web_response
from prometheus_client import CollectorRegistry

from webhook.errors import BadRequest, PayloadTooLarge, RequestTimeout
from webhook.rules import admission, extender
from webhook.rules.risk import RiskScan
from webhook.server.metrics import CacheLike, Metrics, serve_metrics, store_caches
from webhook.server.riskmetrics import ZoneRisk
from webhook.server.runtime import RUNTIME, Job, Runtime
from webhook.wire import extender as extender_wire
from webhook.wire import review

log = logging.getLogger("stszone.server")

# aiohttp announces "Python/3.x aiohttp/3.y" in every response, its own error pages included,
# and has no setting for it. It reads this module global when it writes headers; replacing it
# costs nothing per request (a response_prepare signal did, ~3% of throughput).
web_response.SERVER_SOFTWARE = "stszone"  # type: ignore[attr-defined]


_JSON = "application/json"


def _plain(status: int, text: str) -> web.Response:
    return web.Response(status=status, text=text + "\n", content_type="text/plain")


async def _read_body(
    request: web.Request, limit: int, *, seconds: float, what: str = "the AdmissionReview"
) -> bytes:
    if request.content_type != _JSON:
        raise BadRequest(
            f"Content-Type must be {_JSON}, got {request.content_type or 'none'}; "
            f"send {what} as JSON"
        )
    if request.content_length is not None and request.content_length > limit:
        raise PayloadTooLarge(
            f"request body of {request.content_length} bytes is over the {limit} byte cap"
        )
    try:
        if request.content.is_eof():  # the whole body came with the headers: nothing to wait for
            return await request.read()
        # A client that stalls mid-body must not hold the connection (and a shutdown) forever;
        # aiohttp's keep-alive timer only covers connections waiting for their next request.
        async with asyncio.timeout(seconds):
            return await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise PayloadTooLarge(f"request body is over the {limit} byte cap") from None
    except TimeoutError:
        raise RequestTimeout(
            f"the request body did not arrive within {seconds:g}s; send it at once"
        ) from None


@dataclass(slots=True)
class _Exchange:
    """What one request came to, for the observers: the review, the decision, the status."""

    parsed: review.Request | None = None
    outcome: review.Outcome | None = None
    status: int = 200


Work = Callable[[web.Request, Runtime, _Exchange], Awaitable[web.Response]]


def _served(endpoint: str, work: Work) -> Callable[[web.Request], Awaitable[web.Response]]:
    """Wrap a POST handler: in-flight counting, observers, and BadRequest -> a one-line 4xx."""

    async def handle(request: web.Request) -> web.Response:
        runtime = request.app[RUNTIME]
        started = time.perf_counter()
        exchange = _Exchange()
        runtime.in_flight.enter()
        try:
            response = await work(request, runtime, exchange)
        except BadRequest as err:
            exchange.status = err.status
            response = _plain(err.status, err.message)
        finally:
            runtime.in_flight.leave()
            elapsed = time.perf_counter() - started
            for observe in runtime.observers:
                observe(endpoint, exchange.parsed, exchange.outcome, elapsed, exchange.status)
        if runtime.shutting_down:
            # Readiness is off and the listener closes soon: tell keep-alive clients (the API
            # server) to reconnect, to a ready replica, instead of sending their next request
            # on a connection that may be closed under it.
            response.force_close()
        return response

    return handle


def admission_handler(
    endpoint: admission.Endpoint,
) -> Callable[[web.Request], Awaitable[web.Response]]:
    """The handler answering AdmissionReviews on ``/mutate`` or ``/validate``."""
    answer = admission.ANSWER[endpoint]

    async def work(request: web.Request, runtime: Runtime, exchange: _Exchange) -> web.Response:
        settings = runtime.settings
        body = await _read_body(request, settings.max_body, seconds=settings.body_timeout)
        parsed = exchange.parsed = review.parse(body)
        try:
            outcome = answer(parsed, store=runtime.store, defaults=runtime.defaults)
        except Exception:
            log.exception("internal error answering %s %s/%s", endpoint, parsed.kind, parsed.name)
            outcome = review.denied(
                "stszone hit an internal error on this request; see the webhook's logs",
                code=500,
                reason="InternalError",
            )
        exchange.outcome = outcome
        return web.Response(body=review.dumps(review.response(parsed, outcome)), content_type=_JSON)

    return _served(endpoint, work)


def extender_handler(verb: extender_wire.Verb) -> Callable[[web.Request], Awaitable[web.Response]]:
    """The handler answering kube-scheduler's extender ``filter`` or ``prioritize`` verb.

    Bad input is a 4xx with a one-line reason. An internal error in ``filter`` is answered in
    ``ExtenderFilterResult.Error`` (kube-scheduler then reports it on the pod); in
    ``prioritize`` it is a 500, which kube-scheduler ignores, scoring with the other plugins.
    """

    async def work(request: web.Request, runtime: Runtime, exchange: _Exchange) -> web.Response:
        settings = runtime.settings
        try:
            body = await _read_body(
                request, settings.max_body, seconds=settings.body_timeout, what="ExtenderArgs"
            )
        except PayloadTooLarge as err:  # full Node objects of a large cluster add up
            raise PayloadTooLarge(
                f"{err.message}; set nodeCacheCapable: true to send node names"
            ) from None
        args = extender_wire.parse_args(body, store=runtime.store)
        store, defaults = runtime.store, runtime.defaults
        try:
            if verb == "filter":
                answer = extender_wire.dumps(
                    extender.filter_nodes(args, store=store, defaults=defaults)
                )
            else:
                answer = extender_wire.dumps(
                    extender.prioritize(args, store=store, defaults=defaults)
                )
        except BadRequest:
            raise
        except Exception:
            log.exception("internal error answering extender/%s", verb)
            message = "stszone hit an internal error on this pod; see the webhook's logs"
            if verb != "filter":
                exchange.status = 500
                return _plain(500, message)
            answer = extender_wire.dumps(extender.filter_error(args, message=message))
        return web.Response(body=answer, content_type=_JSON)

    return _served(f"extender/{verb}", work)


async def healthz(request: web.Request) -> web.Response:
    """Liveness: the event loop answers. Deliberately cheap."""
    return _plain(200, "ok")


def not_ready(runtime: Runtime) -> list[str]:
    """Why ``runtime`` is not ready: failed checks and failed jobs (empty when ready)."""
    failures = [detail for ok, detail in (check() for check in runtime.checks) if not ok]
    return failures + runtime.failed_jobs


async def readyz(request: web.Request) -> web.Response:
    """Readiness: every check passes and the server is not shutting down."""
    runtime = request.app[RUNTIME]
    if runtime.shutting_down:
        return _plain(503, "shutting down")
    failures = not_ready(runtime)
    if failures:
        return _plain(503, "not ready: " + "; ".join(failures))
    return _plain(200, "ok")


def _job_context(job: Job) -> Callable[[web.Application], AsyncIterator[None]]:
    name = getattr(job, "__qualname__", repr(job))

    async def context(app: web.Application) -> AsyncIterator[None]:
        runtime = app[RUNTIME]

        def ended(task: asyncio.Task[None]) -> None:
            # Jobs run for the app's lifetime: one that ends early (a metrics port already in
            # use, a bug) is logged now, not at shutdown, and keeps /readyz from saying ready.
            if task.cancelled() or task.exception() is None:
                return
            error = task.exception()
            log.error("background job %s failed: %s", name, error, exc_info=error)
            runtime.failed_jobs.append(f"background job {name} failed: {error}")

        task = asyncio.create_task(job())
        task.add_done_callback(ended)
        yield
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        except Exception:
            pass  # already logged by ended()

    return context


def make_app(runtime: Runtime) -> web.Application:
    """The aiohttp application; background jobs run as ``cleanup_ctx`` contexts."""
    app = web.Application(client_max_size=runtime.settings.max_body)
    app[RUNTIME] = runtime
    app.add_routes(
        [
            web.post("/mutate", admission_handler("mutate")),
            web.post("/validate", admission_handler("validate")),
            web.post("/extender/filter", extender_handler("filter")),
            web.post("/extender/prioritize", extender_handler("prioritize")),
            web.get("/healthz", healthz),
            web.get("/readyz", readyz),
            *runtime.extra_routes,
        ]
    )
    for job in runtime.jobs:
        app.cleanup_ctx.append(_job_context(job))
    return app


def install_metrics(
    runtime: Runtime,
    *,
    caches: Callable[[], Iterable[CacheLike]] | None = None,
    certificate: Callable[[], dt.datetime] | None = None,
    registry: CollectorRegistry | None = None,
    zone_risk: ZoneRisk | None = None,
) -> Metrics:
    """Give ``runtime`` metrics: the observer, ``/metrics`` on the app or ``--metrics-port``,
    and the zone-risk gauges with their background job.

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
    metrics = Metrics(
        registry=registry,
        caches=caches if caches is not None else store_caches(runtime.store),
        certificate=certificate,
        in_flight=lambda: runtime.in_flight.count,
        ready=lambda: not runtime.shutting_down and not not_ready(runtime),
        collectors=[zone_risk.collector],
    )
    runtime.observers.append(metrics.observe)
    port = runtime.settings.metrics_port
    if port is None:
        runtime.extra_routes.append(web.get("/metrics", metrics.handler))
    else:
        host = runtime.settings.host

        async def job() -> None:
            await serve_metrics(metrics, host=host, port=port)

        runtime.jobs.append(job)
    return metrics
