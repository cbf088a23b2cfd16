"""Zone-risk gauges per opted-in StatefulSet, and the background job that keeps them current.

Exported (all prefixed ``stszone_``, labels ``namespace`` and ``statefulset``)::

    statefulset_replicas                    gauge  spec.replicas
    statefulset_zones                       gauge  zones the set lists (stszone.io/zones, else
                                                   the server's zone list)
    statefulset_zones_held                  gauge  listed zones some ordinal holds now
    statefulset_misplaced_pods              gauge  pods outside their expected zone (or node)
    statefulset_unknown_zone_ordinals       gauge  ordinals whose zone the guard cannot tell
    statefulset_lowest_safe_replicas        gauge  lowest replica count keeping every zone held
    zone_risk_last_pass_timestamp_seconds   gauge  when every set was last refreshed (no labels)

A set whose annotations are malformed exports ``replicas`` alone (``stszone audit`` names the
problem; its pods are denied, which the denial counter shows).

The figures come from :class:`webhook.rules.risk.RiskScan`, refreshed by :func:`refresh_zone_risk`
every ``interval`` seconds (``Settings.zone_risk_interval``, 30 s: a misplaced pod shows within
that plus the scrape interval) while the view is ready (a view still listing would report every set
as empty). Never on the request path: a scrape reads the last figures, and a set that is
deleted loses its series at the next refresh. The cost of a refresh is bounded by the scan's
ordinal budget (see :mod:`webhook.rules.risk`), and it runs in slices a millisecond apart.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from typing import Final, TypeVar

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from webhook.rules.risk import RiskScan, SetRisk

PREFIX: Final = "stszone"
#: Seconds between readiness checks while the view is not ready.
READY_POLL: Final = 1.0
#: Seconds the refresh waits at each pause of a sweep: the loop is free that long between two
#: slices, so requests that arrive during a refresh are answered between them.
PAUSE: Final = 0.001
LABELS: Final = ("namespace", "statefulset", "kind")
#: The ``kind`` label of each workload group.
KINDS: Final = {"": "StatefulSet", "apps.kruise.io": "AdvancedStatefulSet"}

#: (metric suffix, help, value of one set or None to leave its sample out)
GAUGES: Final[tuple[tuple[str, str, Callable[[SetRisk], int | None]], ...]] = (
    ("replicas", "spec.replicas of the StatefulSet.", lambda r: r.replicas),
    (
        "zones",
        "Zones the StatefulSet lists (stszone.io/zones, else the server's zone list).",
        lambda r: None if r.problem else r.zones,
    ),
    (
        "zones_held",
        "Listed zones some ordinal holds now (its pod, else its volume, else the rule).",
        lambda r: None if r.problem else r.held,
    ),
    (
        "misplaced_pods",
        "Pods running outside the zone (or node) stszone expects for their ordinal.",
        lambda r: None if r.problem else r.misplaced,
    ),
    (
        "unknown_zone_ordinals",
        "Ordinals whose zone the scale-down guard cannot tell.",
        lambda r: None if r.problem else r.unknown,
    ),
    (
        "lowest_safe_replicas",
        "Lowest replica count that keeps every zone the StatefulSet holds now.",
        lambda r: r.lowest,
    ),
)


Row = TypeVar("Row")
#: (metric suffix, help, value of one row or None to leave its sample out)
Gauges = Sequence[tuple[str, str, Callable[[Row], float | None]]]


def gauge_families(
    prefix: str,
    gauges: Gauges[Row],
    rows: Iterable[Row],
    *,
    labels: Sequence[str],
    label_values: Callable[[Row], list[str]],
) -> Iterator[Metric]:
    """One gauge family per entry of ``gauges``, a sample per row that has a value."""
    rows = list(rows)
    for suffix, text, read in gauges:
        family = GaugeMetricFamily(f"{prefix}_{suffix}", text, labels=list(labels))
        for row in rows:
            value = read(row)
            if value is not None:
                family.add_metric(label_values(row), value)
        yield family


class ZoneRiskCollector(Collector):
    """The gauges of the scan's latest figures, read at scrape time."""

    def __init__(self, scan: RiskScan, *, last_pass: Callable[[], float | None]) -> None:
        self._scan = scan
        self._last_pass = last_pass

    def collect(self) -> Iterator[Metric]:
        yield from gauge_families(
            f"{PREFIX}_statefulset",
            GAUGES,
            self._scan.sets.values(),
            labels=LABELS,
            label_values=lambda r: [r.namespace, r.name, KINDS.get(r.group, r.group)],
        )
        last = self._last_pass()
        if last is not None:
            yield GaugeMetricFamily(
                f"{PREFIX}_zone_risk_last_pass_timestamp_seconds",
                "Unix time every opted-in StatefulSet had last been refreshed.",
                value=last,
            )


class ZoneRisk:
    """A scan, its collector, and the job refreshing it (attach :meth:`run` to the runtime)."""

    def __init__(
        self,
        scan: RiskScan,
        *,
        ready: Callable[[], bool],
        interval: float,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.time,
        pause: float = PAUSE,
    ) -> None:
        self.scan = scan
        self.collector = ZoneRiskCollector(scan, last_pass=lambda: self.last_pass)
        self.last_pass: float | None = None
        self._ready = ready
        self._interval = interval
        self._sleep = sleep
        self._clock = clock
        self._pause = pause

    async def refresh(self) -> None:
        """One refresh cycle, waiting ``pause`` seconds at each of the sweep's pauses (every few
        ordinals of a set's audit, and after each set).

        A wait rather than a bare yield: the loop is then free between two slices, so a request
        that arrives during a refresh waits for the rest of one slice at most, instead of
        taking turns with the sweep at every step of its handling.
        """
        passes = self.scan.passes
        for _ in self.scan.sweep():
            await asyncio.sleep(self._pause)
        if self.scan.passes != passes:
            self.last_pass = self._clock()

    async def run(self) -> None:
        """Refresh every ``interval`` seconds while the view is ready, until cancelled.

        While it is not ready, readiness is asked again every second, so the first figures
        appear about a second after the caches sync rather than a whole interval later. While
        sets wait for their first figures (more than one refresh's budget of them, after a
        start on a big cluster), the next refresh comes a second later too: every set has its
        gauges within seconds of the caches syncing, not after several intervals.
        """
        while True:
            if self._ready():
                await self.refresh()
                await self._sleep(READY_POLL if self.scan.catching_up else self._interval)
            else:
                await self._sleep(READY_POLL)
