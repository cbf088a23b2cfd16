"""The Event writer when the wall clock steps (NTP, a VM resumed): retries, series and the spam
filter run on elapsed time, and only what the Events say follows the wall clock."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path

from tests.fakeapi import Fault, eventually
from tests.test_event_writer import REFUSED, Setup, setup

HOUR = 3600.0


class SteppedWall:
    """The wall clock, moved by ``step`` seconds when the test says so."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset

    def step(self, seconds: float) -> None:
        self.offset += seconds


@contextlib.asynccontextmanager
async def running(s: Setup) -> AsyncIterator[None]:
    task = asyncio.create_task(s.writer.run())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_retry_is_not_held_back_by_the_wall_clock_stepping_back(tmp_path: Path) -> None:
    """The API server answers 503; while the write waits for its retry (half a second), the
    wall clock steps back an hour. The retry still comes after its backoff, and the Event is
    written (waiting out the step would hold it, and every retry after it, for an hour)."""
    wall = SteppedWall()
    async with setup(tmp_path, wall=wall) as s, running(s):
        s.fake.inject("events", "create", Fault.status(503))
        s.outbox.post([REFUSED], dry_run=False)
        await eventually(lambda: s.writes() == ["create"])
        wall.step(-HOUR)
        await eventually(lambda: s.writer.stats().created == 1)
        assert [e["reason"] for e in s.events()] == ["ScaleDownRefused"]


async def test_a_wall_clock_step_forward_does_not_end_a_series(tmp_path: Path) -> None:
    """A decision repeated a second later counts in its Event's series, even when the wall
    clock stepped an hour forward in between: the series has not been quiet for six minutes,
    so there is one Event with count 2, not a second Event."""
    wall = SteppedWall()
    async with setup(tmp_path, wall=wall, tick=0.01) as s, running(s):
        s.outbox.post([REFUSED], dry_run=False)
        await eventually(lambda: s.writer.stats().created == 1)
        wall.step(HOUR)
        await asyncio.sleep(0.2)  # many ticks: where a series quiet for 6 minutes ends
        s.outbox.post([REFUSED], dry_run=False)
        await eventually(lambda: len(s.writes()) == 2)
        (event,) = s.events()
        assert event["series"]["count"] == 2
        assert s.writes() == ["create", "patch"]
