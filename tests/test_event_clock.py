"""The Event writer when the wall clock steps (NTP, a VM resumed): retries, series and the spam
filter run on elapsed time, and only what the Events say follows the wall clock."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.fakeapi import Fault, eventually
from tests.retries import in_background
from tests.test_event_writer import REFUSED, setup
from tests.wallclock import SteppedWall

HOUR = 3600.0


async def test_a_retry_is_not_held_back_by_the_wall_clock_stepping_back(tmp_path: Path) -> None:
    """The API server answers 503; while the write waits for its retry (half a second), the
    wall clock steps back an hour. The retry still comes after its backoff, and the Event is
    written (waiting out the step would hold it, and every retry after it, for an hour)."""
    wall = SteppedWall()
    async with setup(tmp_path, wall=wall) as s, in_background(s.writer.run()):
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
    async with setup(tmp_path, wall=wall, tick=0.01) as s, in_background(s.writer.run()):
        s.outbox.post([REFUSED], dry_run=False)
        await eventually(lambda: s.writer.stats().created == 1)
        wall.step(HOUR)
        await asyncio.sleep(0.2)  # many ticks: where a series quiet for 6 minutes ends
        s.outbox.post([REFUSED], dry_run=False)
        await eventually(lambda: len(s.writes()) == 2)
        (event,) = s.events()
        assert event["series"]["count"] == 2
        assert s.writes() == ["create", "patch"]
