"""The webhook's request handlers, and the one place errors become HTTP.

Admission handlers read the body (:mod:`webhook.server.body`), parse it, ask the engine, and
write the review back. A :class:`~webhook.errors.BadRequest` becomes a 4xx with a one-line
message; anything unexpected in the engine becomes a logged ``allowed: false`` answer with code
500 in an HTTP 200 (so the API server shows the reason instead of a connection error), never a
traceback. Once SIGTERM came, every answer says ``Connection: close``: keep-alive clients (the
API server) reconnect, to a ready replica, instead of sending their next request on a
connection that may be closed under them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from aiohttp import web

from webhook.errors import BadRequest
from webhook.rules import extender
from webhook.rules.admission import Endpoint
from webhook.rules.decision import refuse
from webhook.server.body import BODIES, JSON, answer, plain, read_body, refused
from webhook.server.runtime import Handler, Observer, Runtime
from webhook.wire import extender as extender_wire
from webhook.wire import review

log = logging.getLogger("stszone.server")


@dataclass(slots=True)
class _Exchange:
    """What one request came to, for the observers: the review, the answer, the status."""

    parsed: review.Review | None = None
    answered: review.Answer | None = None
    #: The HTTP status, or 500 for an internal error answered in a 200 (extender ``filter``).
    status: int = 200


Work = Callable[[bytes, _Exchange], web.Response]


def _served(endpoint: str, *, path: str, work: Work, runtime: Runtime) -> Handler:
    """A POST handler: in-flight counting, the body read, observers, BadRequest -> a 4xx.

    The observers (metrics, the decision log) run once the answer is written: aiohttp writes
    it when the handler returns, and the loop calls them soon after (``call_soon``). Their cost
    is then off the API server's wait. The duration they record runs from the complete body to
    the answer (0 for a body refused before it was read).
    """
    in_flight, observers = runtime.in_flight, runtime.observers
    body, seconds = BODIES[path], runtime.settings.body_timeout

    async def handle(request: web.BaseRequest) -> web.StreamResponse:
        in_flight.enter()
        exchange = _Exchange()
        elapsed = 0.0
        answered = True
        try:
            try:
                data = await read_body(request, body=body, seconds=seconds)
            except BadRequest as err:
                exchange.status = err.status
                if request.content.is_eof():
                    return answer(err, body=body)
                # The rest of the body is still coming, or never will.
                return refused(err, body=body)
            except ConnectionError:
                # The client went away mid-body: nobody to answer, nothing to count. The
                # answer returned here is never written (aiohttp drops it quietly).
                answered = False
                return plain(400, text="the connection closed before the body was complete")
            started = time.perf_counter()
            try:
                response = work(data, exchange)
            except BadRequest as err:
                exchange.status = err.status
                response = plain(err.status, text=err.message)
            elapsed = time.perf_counter() - started
            if runtime.shutting_down:
                response.force_close()
            return response
        finally:
            in_flight.leave()
            if answered:
                # The request's own task knows its loop; asyncio.get_running_loop() would
                # ask the kernel for the process id on every call (its check for a fork).
                request.task.get_loop().call_soon(
                    _observe,
                    observers,
                    endpoint,
                    exchange.parsed,
                    exchange.answered,
                    elapsed,
                    exchange.status,
                )

    return handle


def _observe(
    observers: Iterable[Observer],
    endpoint: str,
    parsed: review.Review | None,
    answered: review.Answer | None,
    seconds: float,
    status: int,
) -> None:
    """Tell every observer about one request; one that fails is logged and the others still
    run (after an answer is written, nothing else would report it: the loop's own handler logs
    through asyncio's logger, which ``serve`` silences)."""
    for observer in observers:
        try:
            observer(endpoint, parsed, answered, seconds, status)
        except Exception:
            log.exception("internal error observing a request to /%s", endpoint)


def admission_handler(endpoint: Endpoint, *, runtime: Runtime) -> Handler:
    """The handler answering AdmissionReviews on ``/mutate`` or ``/validate``."""

    def work(data: bytes, exchange: _Exchange) -> web.Response:
        parsed = exchange.parsed = review.parse(data)
        store, defaults = runtime.store, runtime.defaults
        try:
            answered = review.answer(endpoint, parsed, store=store, defaults=defaults)
        except Exception:
            log.exception("internal error answering %s %r", endpoint, parsed.request)
            answered = review.render(
                parsed.request,
                refuse(
                    "stszone hit an internal error on this request; see the webhook's logs",
                    code=500,
                    reason="InternalError",
                ),
            )
        exchange.answered = answered
        # Events are stszone's one side effect, and never a dry run's (sideEffects:
        # NoneOnDryRun): the outbox counts a dry run's and queues nothing.
        runtime.outbox.post(answered.notices, dry_run=parsed.request.dry_run)
        return web.Response(body=review.dumps(review.response(parsed, answered)), content_type=JSON)

    return _served(endpoint, path=f"/{endpoint}", work=work, runtime=runtime)


def extender_handler(verb: extender_wire.Verb, *, runtime: Runtime) -> Handler:
    """The handler answering kube-scheduler's extender ``filter`` or ``prioritize`` verb.

    Bad input is a 4xx with a one-line reason. An internal error in ``filter`` is answered in
    ``ExtenderFilterResult.Error`` (kube-scheduler then reports it on the pod); in
    ``prioritize`` it is a 500, which kube-scheduler ignores, scoring with the other plugins.
    """

    def work(data: bytes, exchange: _Exchange) -> web.Response:
        args = extender_wire.parse_args(data, store=runtime.store)
        store, defaults = runtime.store, runtime.defaults
        pod, nodes = args.pod, args.candidates
        try:
            if verb == "filter":
                filtered = extender.filter_nodes(pod, nodes, store=store, defaults=defaults)
                answer = extender_wire.dumps(extender_wire.filter_result(args, filtered))
            else:
                scores = extender.prioritize(pod, nodes, store=store, defaults=defaults)
                answer = extender_wire.dumps(extender_wire.host_priorities(scores))
        except BadRequest:
            raise
        except Exception:
            log.exception("internal error answering extender/%s", verb)
            message = "stszone hit an internal error on this pod; see the webhook's logs"
            # The observers count it as the error it is, also when the answer is a 200.
            exchange.status = 500
            if verb != "filter":
                return plain(500, text=message)
            failed = extender.Filtered(error=message)
            answer = extender_wire.dumps(extender_wire.filter_result(args, failed))
        return web.Response(body=answer, content_type=JSON)

    return _served(f"extender/{verb}", path=f"/extender/{verb}", work=work, runtime=runtime)


def closing(
    answer: Callable[[web.BaseRequest], web.StreamResponse], *, runtime: Runtime
) -> Handler:
    """A GET handler answering from memory; its answers close the connection once SIGTERM came."""

    async def handle(request: web.BaseRequest) -> web.StreamResponse:
        response = answer(request)
        if runtime.shutting_down:
            response.force_close()
        return response

    return handle


def healthz(request: web.BaseRequest) -> web.Response:
    """Liveness: the event loop answers. Deliberately cheap."""
    return plain(200, text="ok")


def not_ready(runtime: Runtime) -> list[str]:
    """Why ``runtime`` is not ready: failed checks and failed jobs (empty when ready)."""
    failures = [detail for ok, detail in (check() for check in runtime.checks) if not ok]
    return failures + runtime.failed_jobs


def readyz(runtime: Runtime) -> Callable[[web.BaseRequest], web.Response]:
    """Readiness: every check passes and the server is not shutting down."""

    def handle(request: web.BaseRequest) -> web.Response:
        if runtime.shutting_down:
            return plain(503, text="shutting down")
        failures = not_ready(runtime)
        if failures:
            return plain(503, text="not ready: " + "; ".join(failures))
        return plain(200, text="ok")

    return handle
