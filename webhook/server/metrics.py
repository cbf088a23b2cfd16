"""Prometheus metrics: one registry per app, filled by a server observer and read-time collectors.

Exported (all prefixed ``stszone_``)::

    requests_total{endpoint,kind,result}        counter   answered requests; result is
                                                          allowed|patched|denied|error
    request_duration_seconds{endpoint}          histogram handler time, complete body to answer
    denials_total{endpoint,kind,reason}         counter   denials by reviewed kind and Status
                                                          reason (kinds stszone is not
                                                          registered for count as "other")
    in_flight_requests                          gauge     requests being received or answered now
    ready                                       gauge     1 when /readyz would answer 200
    cache_objects{resource}                     gauge     records in the cluster view
    cache_synced{resource}                      gauge     1 once listed (0 before / when lost)
    cache_last_sync_timestamp_seconds{resource} gauge     Unix time the cache was last current
    cache_unsynced_seconds{resource}            gauge     how long it has been out of sync
    watch_restarts_total{resource}              counter   lists/watches that ended and retried
    cache_relists_total{resource}               counter   full re-lists after the first (410)
    cache_bad_objects{resource}                 gauge     objects skipped as unreadable
    certificate_expiry_timestamp_seconds        gauge     notAfter of the serving certificate
    certificate_rotation_last_success_timestamp_seconds
                                                gauge     --manage-certs: when the leader last
                                                          found or left the Secret and both
                                                          caBundles in order
    certificate_rotation_failures_total         counter   --manage-certs: steps that failed
    certificate_leader                          gauge     --manage-certs: 1 on the replica
                                                          holding the Lease
    statefulset_*{namespace,statefulset}        gauge     zone risk per opted-in StatefulSet
                                                          (:mod:`webhook.server.riskmetrics`)
    event_loop_lag_seconds, _max_seconds        histogram how long the event loop is held
                                                          (:mod:`webhook.server.looplag`)

``result`` of an AdmissionReview: ``patched`` (allowed with a non-empty patch), ``allowed``,
``denied`` (``allowed: false``: a rule or a malformed object), ``error`` (a 4xx for a request
that is not a readable AdmissionReview, or stszone's own internal error). ``kind`` is the
reviewed object's kind (``""`` when the body could not be read). The extender endpoints count
with kind ``ExtenderArgs`` and result ``allowed`` or ``error``.

The hot path costs a few dictionary updates per request: requests are counted in plain Python
numbers (every observer runs on the event loop thread, so prometheus-client's per-sample locks
buy nothing; with them the observer took 3% of the loop under load) and turned into metric
families when scraped. Cache and certificate figures are read when scraped too, from callables
the app hands in (the live view's reflector statuses, or the offline store's tables), so they
are always current and cost nothing between scrapes.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Final, Protocol

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector

from webhook.model.records import TABLES
from webhook.model.store import Store
from webhook.wire import review

PREFIX: Final = "stszone"
#: Kinds the webhooks are registered for; a denial of anything else is counted as "other".
DENIED_KINDS: Final = frozenset({"Pod", "PersistentVolumeClaim", "StatefulSet", "Scale"})
#: Admission answers take well under a millisecond to a few; the API server gives up at 30 s.
BUCKETS: Final = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    10.0,
)


class CacheLike(Protocol):
    """What the metrics read of one cache (``webhook.cluster.reflector.CacheStatus`` fits)."""

    @property
    def table(self) -> str: ...
    @property
    def synced(self) -> bool: ...
    @property
    def objects(self) -> int: ...
    @property
    def restarts(self) -> int: ...
    @property
    def relists(self) -> int: ...
    @property
    def last_sync(self) -> float | None: ...
    @property
    def unsynced_for(self) -> float: ...
    @property
    def bad_objects(self) -> int: ...


@dataclass(frozen=True, slots=True)
class StoreCache:
    """Cache status of an offline view (a ``--cluster`` file or ``--zones``): loaded once."""

    table: str
    synced: bool
    objects: int
    restarts: int = 0
    relists: int = 0
    last_sync: float | None = None
    unsynced_for: float = 0.0
    bad_objects: int = 0


def store_caches(store: Store, *, loaded_at: float | None = None) -> Callable[[], list[StoreCache]]:
    """A cache-status source for an offline store: its tables' sizes, synced when loaded."""

    def read() -> list[StoreCache]:
        return [
            StoreCache(
                table=table,
                synced=table in store.loaded,
                objects=len(store.table(table)),
                last_sync=loaded_at if table in store.loaded else None,
            )
            for table in TABLES
        ]

    return read


class RotationLike(Protocol):
    """What the metrics read of the certificate work (``webhook.cluster.certkeeper.Outcome``)."""

    @property
    def last_success(self) -> float | None: ...
    @property
    def failures(self) -> int: ...


class RotationCollector(Collector):
    """The outcome of ``--manage-certs``, read at scrape time: register it on the registry."""

    def __init__(self, outcome: RotationLike, *, leading: Callable[[], bool]) -> None:
        self._outcome = outcome
        self._leading = leading

    def collect(self) -> Iterator[Metric]:
        outcome = self._outcome
        if outcome.last_success is not None:
            yield GaugeMetricFamily(
                f"{PREFIX}_certificate_rotation_last_success_timestamp_seconds",
                "Unix time the certificate leader last found, or left, the Secret and both "
                "caBundles in order.",
                value=outcome.last_success,
            )
        yield CounterMetricFamily(
            f"{PREFIX}_certificate_rotation_failures",
            "Certificate steps that failed: API errors other than conflicts, a missing webhook "
            "configuration, a Secret stszone did not create.",
            value=outcome.failures,
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_certificate_leader",
            "1 on the replica holding the certificate Lease (the one that writes), else 0.",
            value=1.0 if self._leading() else 0.0,
        )


class _StateCollector(Collector):
    """Cache and certificate figures, read at scrape time."""

    def __init__(
        self,
        *,
        caches: Callable[[], Iterable[CacheLike]] | None,
        certificate: Callable[[], dt.datetime | None] | None,
        in_flight: Callable[[], int] | None,
        ready: Callable[[], bool] | None,
    ) -> None:
        self._caches = caches
        self._certificate = certificate
        self._in_flight = in_flight
        self._ready = ready

    def collect(self) -> Iterator[Metric]:
        if self._ready is not None:
            yield GaugeMetricFamily(
                f"{PREFIX}_ready",
                "1 when /readyz would answer 200 (view synced, not shutting down), else 0.",
                value=1.0 if self._ready() else 0.0,
            )
        if self._in_flight is not None:
            yield GaugeMetricFamily(
                f"{PREFIX}_in_flight_requests",
                "Requests with a body (reviews, extender calls) being received or answered now.",
                value=self._in_flight(),
            )
        expiry = self._certificate() if self._certificate is not None else None
        if expiry is not None:  # None: no serving certificate yet (--manage-certs, starting)
            yield GaugeMetricFamily(
                f"{PREFIX}_certificate_expiry_timestamp_seconds",
                "Expiry (notAfter, Unix time) of the certificate new TLS handshakes get.",
                value=expiry.timestamp(),
            )
        if self._caches is None:
            return
        statuses = list(self._caches())
        families: dict[str, GaugeMetricFamily | CounterMetricFamily] = {
            "objects": GaugeMetricFamily(
                f"{PREFIX}_cache_objects", "Records in the cluster view.", labels=["resource"]
            ),
            "synced": GaugeMetricFamily(
                f"{PREFIX}_cache_synced",
                "1 when the cache has been listed, 0 before.",
                labels=["resource"],
            ),
            "last_sync": GaugeMetricFamily(
                f"{PREFIX}_cache_last_sync_timestamp_seconds",
                "Unix time the cache was last known current (list, watch opened, event).",
                labels=["resource"],
            ),
            "unsynced": GaugeMetricFamily(
                f"{PREFIX}_cache_unsynced_seconds",
                "Seconds the cache has been without a working watch (0 while in sync).",
                labels=["resource"],
            ),
            "bad": GaugeMetricFamily(
                f"{PREFIX}_cache_bad_objects",
                "Objects skipped because they could not be read.",
                labels=["resource"],
            ),
            "restarts": CounterMetricFamily(
                f"{PREFIX}_watch_restarts",
                "Lists and watches that ended (error or closed stream) and were retried.",
                labels=["resource"],
            ),
            "relists": CounterMetricFamily(
                f"{PREFIX}_cache_relists",
                "Full re-lists after the first one (watch expired: 410 Gone).",
                labels=["resource"],
            ),
        }
        for status in statuses:
            labels = [status.table]
            families["objects"].add_metric(labels, status.objects)
            families["synced"].add_metric(labels, 1.0 if status.synced else 0.0)
            if status.last_sync is not None:
                families["last_sync"].add_metric(labels, status.last_sync)
            families["unsynced"].add_metric(labels, status.unsynced_for)
            families["bad"].add_metric(labels, status.bad_objects)
            families["restarts"].add_metric(labels, status.restarts)
            families["relists"].add_metric(labels, status.relists)
        yield from families.values()


class _RequestCollector(Collector):
    """Requests, their durations and denials, counted on the event loop thread."""

    #: Label sets of ``requests_total`` kept apart; kinds come from requests, so a client
    #: inventing kinds is folded into ``kind="other"`` beyond this many.
    MAX_SERIES: Final = 256

    def __init__(self) -> None:
        self.requests: dict[tuple[str, str, str], int] = {}
        #: endpoint -> [count per bucket (the last one +Inf, not cumulative)], and sums.
        self.buckets: dict[str, list[int]] = {}
        self.sums: dict[str, float] = {}
        self.denials: dict[tuple[str, str, str], int] = {}

    def count(self, key: tuple[str, str, str]) -> None:
        requests = self.requests
        if key not in requests:
            if len(requests) >= self.MAX_SERIES:
                key = (key[0], "other", key[2])
            requests.setdefault(key, 0)
        requests[key] += 1

    def time(self, endpoint: str, seconds: float) -> None:
        counts = self.buckets.get(endpoint)
        if counts is None:
            counts = self.buckets[endpoint] = [0] * (len(BUCKETS) + 1)
            self.sums[endpoint] = 0.0
        counts[bisect_left(BUCKETS, seconds)] += 1  # "le": a value on a bound counts there
        self.sums[endpoint] += seconds

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            f"{PREFIX}_requests",
            "Requests answered, by endpoint, reviewed kind and result.",
            labels=["endpoint", "kind", "result"],
        )
        for key, n in self.requests.items():
            requests.add_metric(list(key), n)
        yield requests
        duration = HistogramMetricFamily(
            f"{PREFIX}_request_duration_seconds",
            "Time to answer a request, from its complete body to the answer being built.",
            labels=["endpoint"],
        )
        bounds = [*(repr(float(b)) for b in BUCKETS), "+Inf"]  # "0.0005", "1.0": as Go prints
        for endpoint, counts in self.buckets.items():
            cumulative, total = [], 0
            for bound, n in zip(bounds, counts, strict=True):
                total += n
                cumulative.append((bound, float(total)))
            duration.add_metric([endpoint], cumulative, self.sums[endpoint])
        yield duration
        denials = CounterMetricFamily(
            f"{PREFIX}_denials",
            "Requests denied, by endpoint, reviewed kind and Status reason.",
            labels=["endpoint", "kind", "reason"],
        )
        for key, n in self.denials.items():
            denials.add_metric(list(key), n)
        yield denials


class Metrics:
    """The registry of one app, and the observer the server calls after every request."""

    def __init__(
        self,
        *,
        registry: CollectorRegistry | None = None,
        caches: Callable[[], Iterable[CacheLike]] | None = None,
        certificate: Callable[[], dt.datetime | None] | None = None,
        in_flight: Callable[[], int] | None = None,
        ready: Callable[[], bool] | None = None,
        collectors: Iterable[Collector] = (),
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self._counted = _RequestCollector()
        self.registry.register(self._counted)
        self.registry.register(
            _StateCollector(
                caches=caches, certificate=certificate, in_flight=in_flight, ready=ready
            )
        )
        for collector in collectors:
            self.registry.register(collector)

    def observe(
        self,
        endpoint: str,
        parsed: review.Review | None,
        answered: review.Answer | None,
        seconds: float,
        status: int,
    ) -> None:
        """The server observer: count the request, its result and its duration."""
        if parsed is not None:
            kind = parsed.request.kind
            result = answered.result if answered is not None and status == 200 else "error"
        else:  # a 4xx before the review was read, or an extender request
            kind = "" if endpoint in ("mutate", "validate") else "ExtenderArgs"
            result = "error" if status != 200 else "allowed"
        counted = self._counted
        counted.count((endpoint, kind, result))
        counted.time(endpoint, seconds)
        if result == "denied" and answered is not None:
            denied = (
                endpoint,
                kind if kind in DENIED_KINDS else "other",
                answered.decision.reason or "Forbidden",
            )
            counted.denials[denied] = counted.denials.get(denied, 0) + 1

    def exposition(self) -> bytes:
        """The text exposition format of everything in the registry."""
        return generate_latest(self.registry)

    def handler(self, request: web.BaseRequest) -> web.Response:
        """``GET /metrics``: the exposition, read now."""
        response = web.Response(body=self.exposition())
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response

    def app(self) -> web.Application:
        """A plain-HTTP app serving only ``/metrics`` (for ``--metrics-port``)."""

        async def metrics(request: web.Request) -> web.Response:
            return self.handler(request)

        app = web.Application()
        app.router.add_get("/metrics", metrics)
        return app


async def serve_metrics(metrics: Metrics, *, host: str, port: int) -> None:
    """Serve ``/metrics`` over plain HTTP on ``host:port`` until cancelled (an app job)."""
    runner = web.AppRunner(metrics.app(), access_log=None, handle_signals=False)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port, reuse_address=True).start()
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
