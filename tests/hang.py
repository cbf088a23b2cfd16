"""Hang guards: how long a test waits for what must happen before it fails instead of hanging.

A hang guard is never a timing assertion: it is far longer than anything it guards needs even
on a loaded shared machine, and a test that meets it has found something that did not happen
at all (a server that never closes, a certificate never reloaded), not something slow. Tests
assert on what happened and in which order, on counts of work, or on an injected clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable

#: Seconds a test waits for something that must happen before it fails.
HANG_GUARD = 30.0


def until(done: Callable[[], bool], *, what: str, poll: float = 0.02) -> None:
    """Block until ``done()`` holds; fail with ``what`` after :data:`HANG_GUARD` seconds."""
    deadline = time.monotonic() + HANG_GUARD
    while not done():
        assert time.monotonic() < deadline, f"{what} (hang guard: {HANG_GUARD:g}s)"
        time.sleep(poll)
