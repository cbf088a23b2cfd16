"""Zone-risk gauges of Strimzi KafkaNodePools: the figures of ``stszone audit`` for pools.

Computed when scraped, from the view the zone-risk scan reads: a cluster holds few pools and
brokers (tens to hundreds), and each broker is a few dictionary lookups
(:func:`webhook.rules.poolaudit.audit_pools`), so no background refresh is needed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Final

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from webhook.rules.poolaudit import PoolReport, audit_pools
from webhook.rules.risk import RiskScan
from webhook.server.riskmetrics import PREFIX, gauge_families

LABELS: Final = ("namespace", "kafkanodepool")
GAUGES: Final[tuple[tuple[str, str, Callable[[PoolReport], float | None]], ...]] = (
    ("replicas", "spec.replicas of the KafkaNodePool.", lambda r: r.replicas),
    ("zones", "Zones the pool lists.", lambda r: None if r.problem else len(r.zones)),
    (
        "zones_held",
        "Listed zones some broker of the pool holds now.",
        lambda r: None if r.problem else sum(1 for _, n in r.counts if n),
    ),
    (
        "misplaced_brokers",
        "Brokers running outside the zone of their data.",
        lambda r: None if r.problem else r.misplaced,
    ),
    (
        "zone_imbalance",
        "Largest minus smallest count of the pool's brokers over its listed zones.",
        lambda r: None if r.problem else r.imbalance,
    ),
    (
        "lowest_safe_replicas",
        "Lowest replica count at which the operator's removal order keeps every zone held now "
        "(what the guard allows).",
        lambda r: r.lowest,
    ),
)


class PoolRiskCollector(Collector):
    """``stszone_kafkanodepool_*`` gauges, worked out at scrape time."""

    def __init__(self, scan: RiskScan) -> None:
        self._scan = scan

    def collect(self) -> Iterator[Metric]:
        yield from gauge_families(
            f"{PREFIX}_kafkanodepool",
            GAUGES,
            audit_pools(self._scan.store, excluded=self._scan.excluded),
            labels=LABELS,
            label_values=lambda r: [r.namespace, r.name],
        )
