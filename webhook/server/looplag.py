"""How long the event loop stops: a probe sleeps a few milliseconds and notes how late it wakes.

Exported (prefixed ``stszone_``)::

    event_loop_lag_seconds             histogram  how late each probe woke
    event_loop_lag_max_seconds         gauge      the latest wake since the process started
    event_loop_busy_lag_max_seconds    gauge      the most of one wake's lag the loop's own
                                                  work can explain

Every admission request waits behind whatever holds the loop (a page of a list being folded,
a scrape, a TLS handshake), so this is the wait a request may add on top of its own work. The
probe wakes every :data:`INTERVAL` (5 ms); a stop of the loop of S seconds shows as a lag
between S minus the interval and S.

A wake is also late when the process is not run at all: a container at its CPU limit is
throttled until the next period (100 ms by default), and a busy node runs other processes.
The loop thread's CPU time over the sleep tells the two apart: the loop's own work cannot
have held it for longer than that, so ``min(lag, CPU time)`` bounds the part of a lag that was
stszone's doing (the busy lag); the rest was the process waiting for a core. The probe costs a
timer, a wake-up and two clock reads per interval. On an idle server the wake-up is most of it:
on the project's 2-core VM, 3.2-3.6% of a core at 5 ms (1.1% at 20 ms, uvloop, resource usage
over 5 s); under load the loop is awake anyway and a wake is one more task step.
"""

from __future__ import annotations

import asyncio
import time
from bisect import bisect_left
from collections.abc import Awaitable, Callable, Iterator
from typing import Final

from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

INTERVAL: Final = 0.005
#: Upper bounds of the histogram's buckets, in seconds.
BUCKETS: Final = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class LoopLag(Collector):
    """The probe (:meth:`run`, an app job) and the figures it gathers (a Prometheus collector)."""

    def __init__(
        self,
        *,
        interval: float = INTERVAL,
        clock: Callable[[], float] = time.monotonic,
        cpu: Callable[[], float] = time.thread_time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.interval = interval
        self._clock = clock
        #: CPU time of the thread running the loop (the probe runs on it).
        self._cpu = cpu
        self._sleep = sleep
        #: Wakes per bucket (the last one beyond every bound, not cumulative), their sum.
        self.counts = [0] * (len(BUCKETS) + 1)
        self.total = 0.0
        self.worst = 0.0
        self.worst_busy = 0.0

    def note(self, lag: float, *, busy: float) -> None:
        """Count one wake ``lag`` seconds late, of which at most ``busy`` the loop's own work."""
        self.counts[bisect_left(BUCKETS, lag)] += 1
        self.total += lag
        self.worst = max(self.worst, lag)
        self.worst_busy = max(self.worst_busy, min(lag, busy))

    async def run(self) -> None:
        """Sleep ``interval`` and note how late each wake is, until cancelled."""
        while True:
            asleep, ran = self._clock(), self._cpu()
            await self._sleep(self.interval)
            lag = max(0.0, self._clock() - asleep - self.interval)
            self.note(lag, busy=self._cpu() - ran)

    def collect(self) -> Iterator[Metric]:
        lag = HistogramMetricFamily(
            "stszone_event_loop_lag_seconds",
            f"How late a probe sleeping {self.interval * 1000:g} ms woke: how long the event "
            "loop was held by other work.",
        )
        bounds = [*(repr(float(b)) for b in BUCKETS), "+Inf"]
        cumulative, seen = [], 0
        for bound, n in zip(bounds, self.counts, strict=True):
            seen += n
            cumulative.append((bound, float(seen)))
        lag.add_metric([], cumulative, self.total)
        yield lag
        yield GaugeMetricFamily(
            "stszone_event_loop_lag_max_seconds",
            "The latest a loop-lag probe woke since the process started.",
            value=self.worst,
        )
        yield GaugeMetricFamily(
            "stszone_event_loop_busy_lag_max_seconds",
            "The most of one probe wake's lag that the loop's own work can explain (the loop "
            "thread's CPU time over the sleep); the rest of a lag is the process not running.",
            value=self.worst_busy,
        )
