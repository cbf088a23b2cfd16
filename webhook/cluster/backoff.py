"""Capped exponential backoff with jitter, for reconnecting watches, and when a watch has proven
itself healthy (:class:`OpenWatch`), which resets it. Pure.

The delays grow ``initial * factor**n`` up to ``cap``, and each is drawn uniformly from the
upper half of that bound ("equal jitter"): never longer than ``cap``, never zero, and spread so
that several webhook replicas restarting together do not hit the API server in lock-step.
client-go's reflector uses the same shape (800 ms initial, 30 s cap, factor 2), reset after a
healthy stretch; :meth:`Backoff.reset` is that reset.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(slots=True)
class Backoff:
    """Successive retry delays: ``next()`` after each failure, ``reset()`` once healthy again."""

    initial: float = 0.8
    cap: float = 30.0
    factor: float = 2.0
    #: Source of randomness in [0, 1); injectable so tests can pin the jitter.
    rand: Callable[[], float] = field(default=random.random, repr=False)
    attempts: int = 0

    def bound(self) -> float:
        """The upper bound of the next delay (before jitter)."""
        # min() before the power would overflow a float after ~1000 failures; clamp the exponent.
        return min(self.cap, self.initial * self.factor ** min(self.attempts, 64))

    def next(self, *, at_least: float = 0.0) -> float:
        """The delay before the next attempt, in seconds.

        ``at_least`` honours a server's ``Retry-After`` (429, or 503 during API server
        overload), itself capped so that a bogus header cannot park a watch for hours.
        """
        upper = self.bound()
        self.attempts += 1
        delay = upper / 2 + self.rand() * upper / 2
        return max(delay, min(at_least, self.cap))

    def reset(self) -> None:
        """Start again from ``initial`` (the connection was healthy)."""
        self.attempts = 0


@dataclass(slots=True)
class OpenWatch:
    """Whether the watch open now has proven itself by staying open ``healthy_after``: the one
    proof a watch of a quiet resource can give (it gets no events, and Kubernetes sends it no
    BOOKMARKs). Being answered proves nothing: the stream may fail at once. Read when asked,
    so no timer runs."""

    healthy_after: float
    clock: Callable[[], float]
    #: ``clock()`` when the open watch was answered; None between watches.
    opened: float | None = None

    def open(self) -> None:
        """The watch was answered: from now on, staying open counts."""
        self.opened = self.clock()

    def healthy(self) -> bool:
        """Whether a watch is open and has been for ``healthy_after``."""
        opened = self.opened
        return opened is not None and self.clock() - opened >= self.healthy_after

    def close(self) -> bool:
        """The watch ended, however it ended: whether it had been healthy until then."""
        healthy = self.healthy()
        self.opened = None
        return healthy
