"""Zone-risk gauges per opted-in StatefulSet, and the background job that keeps them current.

Exported (all prefixed ``stszone_``, labels ``namespace``, ``statefulset`` and ``kind``)::

    statefulset_replicas                    gauge  spec.replicas
    statefulset_zones                       gauge  zones the set lists (stszone.io/zones, else
                                                   the server's zone list)
    statefulset_zones_held                  gauge  listed zones some ordinal holds now (none
                                                   if its template binds it to a missing node)
    statefulset_misplaced_pods              gauge  pods outside their expected zone (or node)
    statefulset_unknown_zone_ordinals       gauge  ordinals whose zone the guard cannot tell
    statefulset_lowest_safe_replicas        gauge  lowest replica count keeping every zone held
    zone_risk_last_pass_timestamp_seconds   gauge  when every set was last refreshed (no labels)

A set whose annotations are malformed exports ``replicas`` alone (``stszone audit`` names the
problem; its pods are denied, which the denial counter shows).
A set whose pod template is labelled ``stszone.io/skip=true`` exports no ``zones`` and no
``zones_held``: stszone places none of its pods, so the zones they hold are not stszone's to
alert on (``StszoneStatefulSetLostZone`` compares the two), and none of them is misplaced.
A set being deleted exports ``replicas`` alone: its pods go with it and nothing moves or
replaces them, so neither zone alert is stszone's to raise, and no scale-down of it is judged,
so no count is safe and no ordinal's zone decides one.

The figures come from :class:`webhook.rules.risk.RiskScan`, refreshed by :meth:`ZoneRisk.refresh`
every ``interval`` seconds (``Settings.zone_risk_interval``, 30 s: a misplaced pod shows within
that plus the scrape interval) while the view is ready (a view still listing would report every set
as empty). Never on the request path, nor on a scrape's: each refresh ends by writing the
exposition text of the sets whose figures changed, :data:`RENDER_SLICE` sets at a time, and a
scrape serves the text as it is (six lines per set, over a megabyte at 2,000 sets, would
otherwise hold the event loop, and every admission waiting on it, for a tenth of a second per
scrape). A set that is deleted loses its series at the next refresh. The cost of a refresh is
bounded by the scan's ordinal budget (see :mod:`webhook.rules.risk`), and it runs in slices a
millisecond apart.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from typing import Final, TypeVar

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector

from webhook.model import setkinds
from webhook.rules.risk import Key, RiskScan, SetRisk

PREFIX: Final = "stszone"
#: Seconds between readiness checks while the view is not ready.
READY_POLL: Final = 1.0
#: Seconds the refresh waits at each pause of a sweep: the loop is free that long between two
#: slices, so requests that arrive during a refresh are answered between them.
PAUSE: Final = 0.001
#: Sets whose sample lines a refresh writes between two pauses (about 3 ms of work).
RENDER_SLICE: Final = 25
LABELS: Final = ("namespace", "statefulset", "kind")
#: The ``kind`` label of each workload group (``setkinds.KINDS``' metrics label).
KIND_LABELS: Final = {group: kind.label for group, kind in setkinds.KINDS.items()}

#: (metric suffix, help, value of one set or None to leave its sample out)
GAUGES: Final[tuple[tuple[str, str, Callable[[SetRisk], int | None]], ...]] = (
    ("replicas", "spec.replicas of the StatefulSet.", lambda r: r.replicas),
    (
        "zones",
        "Zones the StatefulSet lists (stszone.io/zones, else the server's zone list).",
        lambda r: None if r.problem or r.skipped or r.deleting else r.zones,
    ),
    (
        "zones_held",
        "Listed zones some ordinal holds now (its pod, else its volume, else the rule; "
        "none if bound to a missing node).",
        lambda r: None if r.problem or r.skipped or r.deleting else r.held,
    ),
    (
        "misplaced_pods",
        "Pods running outside the zone (or node) stszone expects for their ordinal.",
        lambda r: None if r.problem or r.deleting else r.misplaced,
    ),
    (
        "unknown_zone_ordinals",
        "Ordinals whose zone the scale-down guard cannot tell.",
        lambda r: None if r.problem or r.deleting else r.unknown,
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


class _Families(Collector):
    """Metric families as a collector: what ``generate_latest`` writes out."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterable[Metric]:
        return self._families


def _text(family: Metric) -> str:
    """``family`` in the text exposition format, as a scrape writes it."""
    return generate_latest(_Families([family])).decode()


def _families(risks: Iterable[SetRisk]) -> Iterator[Metric]:
    return gauge_families(
        f"{PREFIX}_statefulset",
        GAUGES,
        risks,
        labels=LABELS,
        label_values=lambda r: [r.namespace, r.name, KIND_LABELS.get(r.group, r.group)],
    )


#: Each gauge's ``# HELP`` and ``# TYPE`` lines: the text of its family with no sample.
_HEADERS: Final = tuple(_text(family) for family in _families(()))


def _samples(risk: SetRisk) -> list[str]:
    """The sample lines of one set, a text per gauge ("" for a gauge it has no value of): each
    family's text less its header."""
    return [
        _text(family).removeprefix(header)
        for family, header in zip(_families([risk]), _HEADERS, strict=True)
    ]


def _last_pass(seconds: float) -> str:
    return _text(
        GaugeMetricFamily(
            f"{PREFIX}_zone_risk_last_pass_timestamp_seconds",
            "Unix time every opted-in StatefulSet had last been refreshed.",
            value=seconds,
        )
    )


class ZoneRisk:
    """A scan, the text of its gauges, and the job refreshing both (attach :meth:`run` to the
    runtime, :meth:`exposition` to the metrics)."""

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
        self.last_pass: float | None = None
        #: Each set's figures and the sample lines they were written to, one text per gauge.
        self._lines: dict[Key, tuple[SetRisk, list[str]]] = {}
        #: The gauges' exposition as of the last refresh (no sample before the first).
        self._text = "".join(_HEADERS).encode()
        self._ready = ready
        self._interval = interval
        self._sleep = sleep
        self._clock = clock
        self._pause = pause

    async def refresh(self) -> None:
        """One refresh cycle, waiting ``pause`` seconds at each of the sweep's pauses (every few
        ordinals of a set's audit, and after each set), then the text of the gauges of every
        set whose figures changed, :data:`RENDER_SLICE` sets at a time with the same wait
        between slices.

        A wait rather than a bare yield: the loop is then free between two slices, so a request
        that arrives during a refresh waits for the rest of one slice at most, instead of
        taking turns with the sweep at every step of its handling.
        """
        passes = self.scan.passes
        for _ in self.scan.sweep():
            await asyncio.sleep(self._pause)
        if self.scan.passes != passes:
            self.last_pass = self._clock()
        # The sweep is over: these are the figures until the next refresh.
        written = 0
        lines: dict[Key, tuple[SetRisk, list[str]]] = {}
        for key, risk in list(self.scan.sets.items()):
            kept = self._lines.get(key)
            if kept is None or kept[0] != risk:
                if written and written % RENDER_SLICE == 0:
                    await asyncio.sleep(self._pause)
                kept = (risk, _samples(risk))
                written += 1
            lines[key] = kept
        if written or len(lines) != len(self._lines):
            self._lines = lines
            self._text = "".join(
                header + "".join(texts[gauge] for _, texts in lines.values())
                for gauge, header in enumerate(_HEADERS)
            ).encode()

    def exposition(self) -> bytes:
        """The gauges' text as the last refresh wrote it, and the line of when the last pass
        ended (the one line a scrape writes here)."""
        if self.last_pass is None:
            return self._text
        return self._text + _last_pass(self.last_pass).encode()

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
