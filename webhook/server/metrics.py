"""Prometheus metrics: one registry per app, filled by the server observer and read-time collectors.

Exported here (all prefixed ``stszone_``)::

    requests_total{endpoint,kind,result}        counter   answered requests; result is
                                                          allowed|patched|denied|error
    request_duration_seconds{endpoint}          histogram handler time, complete body to answer
    denials_total{endpoint,kind,reason}         counter   denials by reviewed kind and Status
                                                          reason (kinds stszone is not
                                                          registered for count as "other");
                                                          a pod create's reasons start at 0
    in_flight_requests                          gauge     requests being received or answered now
    ready                                       gauge     1 when /readyz would answer 200

and, registered on the same registry: the cluster view's caches
(:mod:`webhook.server.cachemetrics`), the serving certificate and its rotation
(:mod:`webhook.server.certmetrics`), the zone risk per opted-in StatefulSet
(:mod:`webhook.server.riskmetrics`) and the event loop's lag (:mod:`webhook.server.looplag`).
``--metrics-port`` serves them on a port of their own (:mod:`webhook.server.listeners`).

``result`` of an AdmissionReview: ``patched`` (allowed with a non-empty patch), ``allowed``,
``denied`` (``allowed: false``: a rule or a malformed object), ``error`` (a 4xx for a request
that is not a readable AdmissionReview, or stszone's own internal error). ``kind`` is the
reviewed object's kind (``""`` when the body could not be read). The extender endpoints count
with kind ``ExtenderArgs`` and result ``allowed`` or ``error``. :meth:`Metrics.observe` is the
one place a request becomes these labels.

The hot path costs a few dictionary updates per request: requests are counted in plain Python
numbers (every observer runs on the event loop thread, so prometheus-client's per-sample locks
buy nothing; with them the observer took 3% of the loop under load) and turned into metric
families when scraped. Everything else is read when scraped, from callables the app hands in,
so it is always current and costs nothing between scrapes, except the zone-risk gauges: their
text, six lines per opted-in set, is written by the refresh that makes their figures
(:mod:`webhook.server.riskmetrics`) and a scrape appends it as it is.
"""

from __future__ import annotations

import datetime as dt
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from typing import Final

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

from webhook.server.cachemetrics import CacheCollector, CacheLike
from webhook.server.certmetrics import ExpiryCollector
from webhook.wire import review

PREFIX: Final = "stszone"
#: Kinds the webhooks are registered for; a denial of anything else is counted as "other".
DENIED_KINDS: Final = frozenset(
    {"Pod", "PersistentVolumeClaim", "StatefulSet", "Scale", "KafkaNodePool"}
)
#: Status reasons a pod create can be refused with. Their ``denials_total`` series are
#: exported at 0 from the start: increase() sees nothing in a series that first appears at 1,
#: so without them the first refusal of a reason (StszonePodCreatesDenied) would never alert.
POD_DENIAL_REASONS: Final = (
    "ZoneConflict",
    "NodeConflict",
    "NodeNameConflict",
    "VolumeZoneConflict",
    "NoZones",
    "Invalid",
    "NoOrdinal",
    "BadRequest",
    "ZoneRequirementMissing",
    "NodeRequirementMissing",
    "SchedulerRequirementMissing",
    "StatefulSetNotYetSeen",
    "ViewNotSynced",
)
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


class _ServerCollector(Collector):
    """Readiness and requests in flight, read at scrape time."""

    def __init__(
        self, *, in_flight: Callable[[], int] | None, ready: Callable[[], bool] | None
    ) -> None:
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
        self.denials: dict[tuple[str, str, str], int] = {
            (endpoint, "Pod", reason): 0
            for endpoint in ("mutate", "validate")
            for reason in POD_DENIAL_REASONS
        }

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
        rendered: Iterable[Callable[[], bytes]] = (),
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        #: Exposition text written ahead of the scrape (the zone-risk gauges), served as is.
        self._rendered = list(rendered)
        self._counted = _RequestCollector()
        self.registry.register(self._counted)
        self.registry.register(_ServerCollector(in_flight=in_flight, ready=ready))
        if certificate is not None:
            self.registry.register(ExpiryCollector(certificate))
        if caches is not None:
            self.registry.register(CacheCollector(caches))
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
        """The text exposition format of everything in the registry, and the text written
        ahead of the scrape."""
        return b"".join([generate_latest(self.registry), *(text() for text in self._rendered)])

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
