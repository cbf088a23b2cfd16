"""The job that turns posted notices into ``events.k8s.io/v1`` Events, off the admission path.

It wakes when the :class:`~webhook.model.outbox.Outbox` gets something (and every ``tick``
seconds for the series' timed writes), runs what is queued through the
:class:`~webhook.cluster.correlator.Correlator`, and writes what that asks for, one write at a
time, to a :class:`Sink`: the API server (:class:`ApiSink`: ``POST`` to
``/apis/events.k8s.io/v1/namespaces/{ns}/events``, a JSON merge patch of ``series`` for
repeats) or, with no cluster, the log (:class:`LogSink`).

Writes that fail for a reason that may pass (a transport error, credentials that cannot be
loaded, 429, 5xx) are tried again later with backoff, at most ``max_tries`` times (and at most
:data:`MAX_HELD` writes wait so), while new notices keep being drained; any other refusal (403:
RBAC; 422: invalid) is counted as failed and logged, at most once a minute. A series patch that
finds its Event gone (404: its TTL passed) creates it again with its series, as client-go does.
A write into a namespace being deleted or already gone is dropped, neither failed nor logged
above debug: the namespace's Events go with it.
Nothing here ever blocks a request: posting is the outbox's synchronous append, and what the job
cannot keep up with is dropped there and counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple, Protocol

import aiohttp

from webhook.cluster.api import Api, ApiError, credentials_refused
from webhook.cluster.backoff import Backoff
from webhook.cluster.correlator import Correlator, Create, Patch, Write
from webhook.model.outbox import Outbox

log = logging.getLogger("stszone.events")

JSON = dict[str, Any]
MERGE_PATCH: Final = "application/merge-patch+json"
#: Seconds between two looks at the series' timed writes.
TICK: Final = 10.0
#: Attempts at one write before it counts as failed.
MAX_TRIES: Final = 5
#: Writes held for a retry at most (the API server down for long): beyond, a write fails.
MAX_HELD: Final = 1000
#: Seconds between two log lines about failed writes (the count says how many in between).
COMPLAIN_EVERY: Final = 60.0


def collection(namespace: str) -> str:
    """The path of the Events of ``namespace``."""
    return f"/apis/events.k8s.io/v1/namespaces/{namespace}/events"


class Sink(Protocol):
    """Where Events go."""

    async def create(self, namespace: str, event: JSON) -> None: ...
    async def patch(self, namespace: str, name: str, series: JSON) -> None: ...


class ApiSink:
    """The API server: create with ``POST``, update a series with a JSON merge patch."""

    def __init__(self, api: Api) -> None:
        self.api = api

    async def create(self, namespace: str, event: JSON) -> None:
        await self.api.call("POST", collection(namespace), body=event, read_timeout=10)

    async def patch(self, namespace: str, name: str, series: JSON) -> None:
        path = f"{collection(namespace)}/{name}"
        await self.api.call("PATCH", path, body=series, content_type=MERGE_PATCH, read_timeout=10)


class LogSink:
    """No cluster: each Event is a log line (the series' counts too), and goes no further."""

    async def create(self, namespace: str, event: JSON) -> None:
        regarding = event["regarding"]
        log.info(
            "event (no cluster to write it to): %s %s on %s %s/%s: %s",
            event["type"],
            event["reason"],
            regarding["kind"],
            namespace,
            regarding["name"],
            event["note"],
        )

    async def patch(self, namespace: str, name: str, series: JSON) -> None:
        log.info("event %s/%s seen %d times", namespace, name, series["series"]["count"])


class EventStats(NamedTuple):
    """What the job did, for ``/metrics`` (:mod:`webhook.server.eventmetrics`)."""

    created: int
    patched: int
    failed: int
    dropped: int
    queued: int
    series: int
    aggregated: int
    filtered: int


@dataclass(slots=True)
class _Retry:
    due: float
    tries: int
    write: Write


@dataclass(slots=True)
class _Written:
    created: int = 0
    patched: int = 0
    failed: int = 0
    retries: list[_Retry] = field(default_factory=list)


class EventWriter:
    """Drains an outbox through a correlator into a sink (see the module docstring)."""

    def __init__(
        self,
        outbox: Outbox,
        *,
        sink: Sink,
        correlator: Correlator,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        tick: float = TICK,
        max_tries: int = MAX_TRIES,
        backoff: Backoff | None = None,
    ) -> None:
        self.outbox = outbox
        self.sink = sink
        self.correlator = correlator
        self._clock = clock
        self._wall = wall
        self._tick = tick
        self._max_tries = max_tries
        self._backoff = backoff if backoff is not None else Backoff(initial=1.0, cap=30.0)
        self._written = _Written()
        self._complained = float("-inf")
        self._unsaid = 0

    def stats(self) -> EventStats:
        """The figures so far."""
        written, counts = self._written, self.correlator.counts
        return EventStats(
            created=written.created,
            patched=written.patched,
            failed=written.failed,
            dropped=self.outbox.dropped,
            queued=len(self.outbox),
            series=counts.series,
            aggregated=counts.aggregated,
            filtered=counts.filtered,
        )

    async def run(self) -> None:
        """Write what is posted, until cancelled (a job of the server)."""
        wake = asyncio.Event()
        self.outbox.listen(wake.set)
        next_tick = self._clock() + self._tick
        while True:
            retries = [r.due for r in self._written.retries]
            delay = min([next_tick, *retries]) - self._clock()
            if delay > 0 and not len(self.outbox):
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await wake.wait()
            wake.clear()
            now = self._clock()
            ticking = now >= next_tick
            if ticking:
                next_tick = now + self._tick
            await self.round(now=now, wall=self._wall(), tick=ticking)

    async def round(self, *, now: float, wall: float | None = None, tick: bool = False) -> None:
        """One pass: the writes due for a retry, what is queued, and (``tick``) the timed
        series writes. ``now`` is the elapsed clock (retries, series, spam filter), ``wall``
        the time the Events say (``now`` when not given)."""
        written = self._written
        due = [r for r in written.retries if r.due <= now]
        written.retries = [r for r in written.retries if r.due > now]
        for retry in due:
            await self._attempt(retry.write, tries=retry.tries, now=now)
        correlator = self.correlator
        writes = [
            w for n in self.outbox.drain() if (w := correlator.observe(n, now=now, wall=wall))
        ]
        if tick:
            writes += correlator.tick(now=now)
        for write in writes:
            await self._attempt(write, tries=0, now=now)

    async def _attempt(self, write: Write, *, tries: int, now: float) -> None:
        try:
            if isinstance(write, Create):
                await self._create(write.namespace, write.body)
            else:
                await self._patch(write)
        except ApiError as err:
            if err.namespace_closed:
                # Its namespace is being deleted or gone, and its Events with it: nowhere to
                # write, and nothing for anyone to fix (Kubernetes' controllers skip these too).
                log.debug("Event in namespace %s not written: %s", write.namespace, err)
                return
            if err.status != 429 and err.status < 500:
                self._fail(write, credentials_refused(err) or f"refused: {err}", now=now)
                return
            self._later(write, tries=tries, now=now, why=str(err), at_least=err.retry_after)
        except (aiohttp.ClientError, OSError, TimeoutError) as err:
            # ClientError includes credentials that could not be loaded for this attempt (a
            # kubeconfig being rewritten, an exec plugin failing once): the next loads them.
            # Those are named by where they come from: their cause is said once for every
            # client (webhook.cluster.refusals).
            why = credentials_refused(err) or str(err) or type(err).__name__
            self._later(write, tries=tries, now=now, why=why)
        else:
            self._backoff.reset()

    async def _create(self, namespace: str, event: JSON) -> None:
        try:
            await self.sink.create(namespace, event)
        except ApiError as err:
            if err.status != 409:
                raise
            # AlreadyExists: an earlier attempt landed although its answer was lost (Event
            # names are unique to this process), so the Event is there.
        self._written.created += 1

    async def _patch(self, write: Patch) -> None:
        try:
            await self.sink.patch(write.namespace, write.name, write.series)
        except ApiError as err:
            if err.status != 404:
                raise
            # The Event is gone (its TTL passed, or someone deleted it): create it again with
            # its series, as client-go's recorder does.
            await self._create(write.namespace, write.event)
        else:
            self._written.patched += 1

    def _later(
        self, write: Write, *, tries: int, now: float, why: str, at_least: float = 0.0
    ) -> None:
        if tries + 1 >= self._max_tries:
            self._fail(write, f"gave up after {tries + 1} attempts: {why}", now=now)
            return
        if len(self._written.retries) >= MAX_HELD:
            self._fail(write, f"{MAX_HELD} writes already wait for a retry: {why}", now=now)
            return
        delay = self._backoff.next(at_least=at_least)
        self._written.retries.append(_Retry(now + delay, tries + 1, write))

    def _fail(self, write: Write, why: str, *, now: float) -> None:
        self._written.failed += 1
        if now - self._complained < COMPLAIN_EVERY:
            self._unsaid += 1
            return
        body = write.body if isinstance(write, Create) else write.event
        more = f" ({self._unsaid} more since the last one)" if self._unsaid else ""
        log.warning(
            "cannot write Event %s %s on %s %s/%s: %s%s",
            body["type"],
            body["reason"],
            body["regarding"]["kind"],
            write.namespace,
            body["regarding"]["name"],
            why,
            more,
        )
        self._complained, self._unsaid = now, 0
