"""The outbox: notices on their way to becoming Events, handed from the admission path to the
job that writes them. Pure: no I/O, nothing awaited.

The admission path must never wait on the API server, so posting is synchronous and costs one
append per notice: the writer (:mod:`webhook.cluster.events`) drains the outbox on its own
time, folds repeats into series and filters spam, and writes. The outbox is bounded: when the
writer cannot keep up (the API server is slow or down), what does not fit is dropped and counted
(``stszone_events_dropped_total``), never queued without limit -- the way client-go's event
broadcaster drops what its channel cannot take.

A dry-run request must leave no trace (the webhooks declare ``sideEffects: NoneOnDryRun``):
:meth:`Outbox.post` takes the request's ``dry_run`` flag as a required argument, and a dry run
posts nothing.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import Final

from webhook.model.notices import Notice

#: Notices held before new ones are dropped (client-go's ``maxQueuedEvents``).
CAPACITY: Final = 1000


class Outbox:
    """A bounded FIFO of notices, and what became of those posted."""

    __slots__ = ("_queue", "_wake", "capacity", "dropped", "dry_runs", "posted")

    def __init__(self, *, capacity: int = CAPACITY) -> None:
        self.capacity = capacity
        self._queue: deque[Notice] = deque()
        self._wake: Callable[[], None] | None = None
        #: Notices accepted, dropped because the outbox was full, and left out as dry runs.
        self.posted = 0
        self.dropped = 0
        self.dry_runs = 0

    def post(self, notices: Iterable[Notice], *, dry_run: bool) -> None:
        """Queue ``notices`` of one request for writing, unless it is a dry run; those that do
        not fit are dropped and counted. Never blocks, never raises."""
        if dry_run:
            self.dry_runs += 1
            return
        queue = self._queue
        before = len(queue)
        for notice in notices:
            if len(queue) >= self.capacity:
                self.dropped += 1
            else:
                queue.append(notice)
                self.posted += 1
        if len(queue) != before and self._wake is not None:
            self._wake()

    def drain(self) -> list[Notice]:
        """Everything queued, oldest first; the outbox is empty after."""
        taken = list(self._queue)
        self._queue.clear()
        return taken

    def listen(self, wake: Callable[[], None]) -> None:
        """Call ``wake()`` whenever a post queues something (the writer's ``Event.set``)."""
        self._wake = wake

    def __len__(self) -> int:
        return len(self._queue)
