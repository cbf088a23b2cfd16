"""Prometheus figures of the Events stszone writes, read at scrape time.

Exported (all prefixed ``stszone_``)::

    events_written_total{write}            counter  Events created (write="create") and series
                                                    counts patched (write="patch")
    events_failed_total                    counter  writes given up: refused (403, 422, ...)
                                                    or still failing after their retries
    events_dropped_total                   counter  notices dropped because the outbox was full
                                                    (the API server slow or unreachable)
    events_correlated_total{outcome}       counter  notices that caused no write of their own:
                                                    "series" (a repeat, counted in its Event's
                                                    series), "aggregated" (folded into a
                                                    combined Event), "filtered" (held back by
                                                    the per-object spam filter)
    events_queued                          gauge    notices waiting in the outbox now

``rate(stszone_events_written_total[1m])`` is the write rate the API server sees from one
replica. The figures come from a callable the caller hands in (``EventWriter.stats`` of
:mod:`webhook.cluster.events` fits :class:`EventsLike`), so this module never imports the
cluster layer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Final, Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

PREFIX: Final = "stszone"


class EventsLike(Protocol):
    """What the collector reads (``webhook.cluster.events.EventStats`` fits)."""

    @property
    def created(self) -> int: ...
    @property
    def patched(self) -> int: ...
    @property
    def failed(self) -> int: ...
    @property
    def dropped(self) -> int: ...
    @property
    def queued(self) -> int: ...
    @property
    def series(self) -> int: ...
    @property
    def aggregated(self) -> int: ...
    @property
    def filtered(self) -> int: ...


class EventCollector(Collector):
    """The Event figures of one writer: register it on the app's registry."""

    def __init__(self, stats: Callable[[], EventsLike]) -> None:
        self._stats = stats

    def collect(self) -> Iterator[Metric]:
        stats = self._stats()
        written = CounterMetricFamily(
            f"{PREFIX}_events_written",
            "Event writes the API server accepted: creates, and patches of a series' count.",
            labels=["write"],
        )
        written.add_metric(["create"], stats.created)
        written.add_metric(["patch"], stats.patched)
        yield written
        yield CounterMetricFamily(
            f"{PREFIX}_events_failed",
            "Event writes given up: refused by the API server, or failing after every retry.",
            value=stats.failed,
        )
        yield CounterMetricFamily(
            f"{PREFIX}_events_dropped",
            "Notices dropped because the outbox was full (the writer could not keep up).",
            value=stats.dropped,
        )
        correlated = CounterMetricFamily(
            f"{PREFIX}_events_correlated",
            "Notices that caused no write of their own: counted in a series, folded into a "
            "combined Event, or held back by the spam filter.",
            labels=["outcome"],
        )
        correlated.add_metric(["series"], stats.series)
        correlated.add_metric(["aggregated"], stats.aggregated)
        correlated.add_metric(["filtered"], stats.filtered)
        yield correlated
        yield GaugeMetricFamily(
            f"{PREFIX}_events_queued",
            "Notices waiting in the outbox to be written.",
            value=stats.queued,
        )
