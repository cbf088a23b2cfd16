"""The event-loop lag probe: how late it wakes, counted as Prometheus reads it.

The probe runs with an injected clock and sleep: each sleep moves the clock on by the interval
plus a scripted lag, the stop of the loop the probe would have seen, so no test waits or times.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.conftest import ServeFactory
from tests.test_metrics import parse, runtime_with_metrics, scrape, value
from webhook.model.store import Store
from webhook.server import metrics
from webhook.server.looplag import LoopLag


class ScriptedLoop:
    """A clock, a CPU clock, and a sleep that holds the loop ``lags[i]`` seconds beyond the
    i-th interval, of which the loop thread ran ``ran[i]`` seconds."""

    def __init__(self, lags: list[float], ran: list[float] | None = None) -> None:
        self.now, self.used = 100.0, 3.0
        self.lags = list(lags)
        self.ran = list(ran) if ran is not None else list(lags)
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def cpu(self) -> float:
        return self.used

    async def sleep(self, seconds: float) -> None:
        if not self.lags:
            raise asyncio.CancelledError  # the script is over: the app cancels its jobs
        self.slept.append(seconds)
        self.now += seconds + self.lags.pop(0)
        self.used += self.ran.pop(0)


async def test_the_probe_notes_how_late_each_wake_is() -> None:
    """Every wake is counted in its bucket, summed, and the worst kept."""
    lags = [0.0, 0.0004, 0.0009, 0.019, 0.031, 0.0, 3.0]
    loop = ScriptedLoop(lags)
    probe = LoopLag(interval=0.005, clock=loop.clock, cpu=loop.cpu, sleep=loop.sleep)
    with pytest.raises(asyncio.CancelledError):
        await probe.run()
    assert loop.slept == [0.005] * len(lags)
    samples = parse(metrics.Metrics(collectors=[probe]).exposition().decode())
    bucket = "stszone_event_loop_lag_seconds_bucket"
    expected = {"0.001": 4, "0.002": 4, "0.02": 5, "0.05": 6, "2.5": 6, "+Inf": 7}
    for le, count in expected.items():
        assert value(samples, bucket, le=le) == count, le
    assert value(samples, "stszone_event_loop_lag_seconds_count") == len(lags)
    assert value(samples, "stszone_event_loop_lag_seconds_sum") == pytest.approx(sum(lags))
    assert value(samples, "stszone_event_loop_lag_max_seconds") == pytest.approx(3.0)


async def test_a_lag_the_loop_did_not_run_through_is_not_its_own() -> None:
    """The busy lag is capped by the loop thread's CPU time: a wake 40 ms late after 2 ms of
    work was the process waiting for a core (a CPU limit), not 40 ms of stszone's work."""
    loop = ScriptedLoop(lags=[0.040, 0.012, 0.001], ran=[0.002, 0.015, 0.006])
    probe = LoopLag(interval=0.005, clock=loop.clock, cpu=loop.cpu, sleep=loop.sleep)
    with pytest.raises(asyncio.CancelledError):
        await probe.run()
    samples = parse(metrics.Metrics(collectors=[probe]).exposition().decode())
    assert value(samples, "stszone_event_loop_lag_max_seconds") == pytest.approx(0.040)
    # Each wake's own share is min(lag, CPU time): 0.002, 0.012 (all of it), 0.001.
    assert value(samples, "stszone_event_loop_busy_lag_max_seconds") == pytest.approx(0.012)


async def test_the_served_app_runs_the_probe(serve: ServeFactory) -> None:
    """/metrics of a served app carries the probe's figures, and its wakes are being counted."""
    served = await serve(runtime=runtime_with_metrics(Store(zones=("a", "b", "c"))))
    for _ in range(200):  # the probe wakes every 5 ms; give it up to a few seconds
        samples = await scrape(served)
        if value(samples, "stszone_event_loop_lag_seconds_count") >= 2:
            break
        await asyncio.sleep(0.02)
    assert value(samples, "stszone_event_loop_lag_seconds_count") >= 2
    assert ("stszone_event_loop_lag_max_seconds", frozenset()) in samples
