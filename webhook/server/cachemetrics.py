"""The cluster view's caches as metrics, read at scrape time.

Exported (all per ``resource``, the view's table)::

    cache_objects                      gauge     records in the cluster view
    cache_synced                       gauge     1 once listed (0 before / when lost)
    cache_last_sync_timestamp_seconds  gauge     Unix time the cache was last current
    cache_unsynced_seconds             gauge     how long it has been out of sync
    watch_restarts_total               counter   lists/watches that ended and retried
    cache_relists_total                counter   full re-lists after the first (410)
    cache_bad_objects                  gauge     objects skipped now as unreadable

The figures come from a callable the app hands in: the live view's reflector statuses, or
:func:`store_caches` for an offline view (a ``--cluster`` file or ``--zones``), so they are
always current and cost nothing between scrapes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Final, Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from webhook.model.store import Store
from webhook.model.tables import TABLES

PREFIX: Final = "stszone"


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


class CacheCollector(Collector):
    """The cache families of every status ``caches`` returns when scraped."""

    def __init__(self, caches: Callable[[], Iterable[CacheLike]]) -> None:
        self._caches = caches

    def collect(self) -> Iterator[Metric]:
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
                "Unix time the cache was last known current (list, event, healthy watch).",
                labels=["resource"],
            ),
            "unsynced": GaugeMetricFamily(
                f"{PREFIX}_cache_unsynced_seconds",
                "Seconds the cache has been without a working watch (0 while in sync).",
                labels=["resource"],
            ),
            "bad": GaugeMetricFamily(
                f"{PREFIX}_cache_bad_objects",
                "Objects skipped now because they cannot be read (not those deleted or fixed).",
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
