"""What the server runs on: the view, the engine's defaults, readiness checks, background jobs.

A :class:`Runtime` is assembled by ``stszone serve`` (or a test) and handed to
:func:`~webhook.server.app.make_app`. Whatever feeds the view (the live reflectors, a
certificate watcher, a metrics port) is attached as a job, and its health as a check, so this
package never imports the cluster layer. Extra endpoints (``/metrics``) are :class:`Route` s.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from aiohttp import web

from webhook.config import Defaults, Settings
from webhook.model.outbox import Outbox
from webhook.model.store import Store
from webhook.wire import review

#: A readiness check: returns (ready, detail).
Check = Callable[[], tuple[bool, str]]
#: A background job run for the app's lifetime (cancelled on shutdown).
Job = Callable[[], Coroutine[Any, Any, None]]
#: Called with (endpoint, review or None, answer or None, seconds, http status) after each request.
Observer = Callable[[str, "review.Review | None", "review.Answer | None", float, int], None]
#: What answers one endpoint: an aiohttp request handler.
Handler = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]


class Route(NamedTuple):
    """The method an endpoint answers and its handler (``GET`` routes answer ``HEAD`` too)."""

    method: str
    handler: Handler


def _idle_event() -> asyncio.Event:
    idle = asyncio.Event()
    idle.set()
    return idle


@dataclass(slots=True)
class InFlight:
    """Requests being answered, counted by the handlers themselves for graceful shutdown.

    aiohttp calls a handler once the request's headers are in, so a request counts from its
    headers to its answer, one whose body is still uploading too. aiohttp's cleanup closes
    every connection and drops what arrives on them after, so ``serve()`` stops the listener,
    waits until :meth:`drained` (bounded), and only then cleans up. Counting in the handlers
    rather than in a middleware keeps aiohttp's request path free of middlewares.
    """

    count: int = 0
    idle: asyncio.Event = field(default_factory=_idle_event)
    #: ``time.monotonic()`` when the last request started.
    last_started: float = 0.0

    def enter(self) -> None:
        if not self.count:
            self.idle.clear()
        self.count += 1
        self.last_started = time.monotonic()

    async def drained(self, linger: float) -> None:
        """Return once nothing is in flight and ``linger`` s have passed since this call and
        since the last request started."""
        since = time.monotonic()
        while True:
            await self.idle.wait()
            quiet = time.monotonic() - max(since, self.last_started)
            if quiet >= linger:
                return
            await asyncio.sleep(linger - quiet)

    def leave(self) -> None:
        self.count -= 1
        if not self.count:
            self.idle.set()


@dataclass(slots=True)
class Runtime:
    """Everything the app serves from: the view, the engine's defaults, checks and jobs."""

    store: Store
    defaults: Defaults
    settings: Settings = field(default_factory=Settings)
    checks: list[Check] = field(default_factory=list)
    jobs: list[Job] = field(default_factory=list)
    observers: list[Observer] = field(default_factory=list)
    #: Endpoints beyond the webhook's own, by path (``/metrics`` unless ``--metrics-port``).
    extra_routes: dict[str, Route] = field(default_factory=dict)
    #: Set when SIGTERM arrives: /readyz fails so the Service stops routing here.
    shutting_down: bool = False
    #: Background jobs that ended with an error (each fails readiness, with its reason).
    failed_jobs: list[str] = field(default_factory=list)
    in_flight: InFlight = field(default_factory=InFlight)
    #: Notices of decisions, posted by the handlers and written as Events by a job
    #: (:func:`webhook.cli.recorder.attach_recorder`); a dry run posts nothing.
    outbox: Outbox = field(default_factory=Outbox)

    def attach(self, job: Job, *, check: Check | None = None) -> None:
        """Run ``job`` for the app's lifetime; gate readiness on ``check`` when given."""
        self.jobs.append(job)
        if check is not None:
            self.checks.append(check)
