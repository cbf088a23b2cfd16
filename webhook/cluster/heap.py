"""Keeping Python's cycle collector off the cluster view while lists load.

Two costs the collector would add to a list of 300k objects, both stops of the event loop:

* a decoded page (500 pods with their managedFields: ~150k dicts and lists) that survives a
  collection is traversed by it, then again by the next generation's, for nothing: parsed JSON
  holds no reference cycles, so reference counting frees it. :func:`paused` switches the
  collector off from the decode until the page is freed, across the page's ``await``\\ s, for
  as long as any reflector is inside one (a count: views, in tests, may overlap);
* the records pile up in the oldest generation, and each full collection walks all of them:
  hundreds of milliseconds at 300k records. :func:`settle` moves what is tracked now into the
  permanent generation (``gc.freeze``) after every page, so full collections only ever see what
  changed since. Frozen objects are still freed by reference counting when a record is replaced;
  only a reference cycle that is garbage at the instant of a freeze would stay, so the young
  generations are collected first (cheap: they hold one page's records) when no page is held.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import AsyncIterator, Iterator


class _Pauses:
    """How many pages hold the collector off, and whether it was on before the first."""

    depth = 0
    resume = False


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """Hold the collector off while the block runs (nested and interleaved holds counted)."""
    if _Pauses.depth == 0:
        _Pauses.resume = gc.isenabled()
        gc.disable()
    _Pauses.depth += 1
    try:
        yield
    finally:
        _Pauses.depth -= 1
        if _Pauses.depth == 0 and _Pauses.resume:
            gc.enable()


class Folding:
    """One page folds at a time, with the collector held off, and is settled after.

    The reflectors of one view fetch their pages concurrently but fold them one after the
    other: an admission request then waits behind one step of one page (a decode of about a
    megabyte, or a chunk of records), never behind a step of every list at once.
    """

    def __init__(self) -> None:
        self._lock = asyncio.Lock()

    @contextlib.asynccontextmanager
    async def page(self) -> AsyncIterator[None]:
        """Fold a page inside this block; its records are settled when it ends."""
        async with self._lock:
            with paused():
                yield
            settle()


def settle() -> None:
    """Move every object tracked now out of the collector's sight (``gc.freeze``)."""
    if _Pauses.depth == 0:
        gc.collect(1)
    gc.freeze()


def collect_and_freeze() -> None:
    """Collect every generation, then freeze what is left: when every cache is listed, and
    again when the zone-risk job's first pass has built every set's figures.

    The records were frozen page by page, so this walks only what else start-up left. The
    first pass's figures would otherwise be walked by every later full collection: 10-16 ms a
    collection at 100,000 pods on the project's machine, under 1 ms once frozen.
    """
    gc.collect()
    gc.freeze()
