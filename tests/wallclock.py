"""A wall clock a test can step, as NTP steps a real one."""

from __future__ import annotations

import time


class SteppedWall:
    """The wall clock, moved by ``step`` seconds when the test says so."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset

    def step(self, seconds: float) -> None:
        self.offset += seconds
