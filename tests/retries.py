"""Driving a retrying job in a test: run it in the background, park its injected sleep, and
check the waits it asked for against the backoff's bounds."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine, Sequence
from typing import Any


@contextlib.asynccontextmanager
async def in_background(job: Coroutine[Any, Any, None]) -> AsyncIterator[None]:
    """``job`` running as a task for the block; cancelled, and awaited, after it."""
    task = asyncio.create_task(job)
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def parked() -> None:
    """What an injected sleep awaits once a test has seen enough retries: until cancelled."""
    await asyncio.Event().wait()


def assert_doubling(delays: Sequence[float], *, initial: float, cap: float) -> None:
    """Each wait in the upper half of its bound, the bounds doubling from ``initial`` to
    ``cap``: the pace of a backoff never reset in between (jitter: half to all of the bound)."""
    for n, delay in enumerate(delays):
        bound = min(cap, initial * 2**n)
        assert bound / 2 <= delay <= bound, (n, delay, bound)
