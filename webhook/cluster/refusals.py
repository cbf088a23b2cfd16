"""What stszone's credentials meet, said once per change: they do not load, or the API server
refuses them (401).

Every client of one :class:`~webhook.cluster.credentials.Credentials` (each cache's list and
watch, the Lease, the Secret's watch, the certificate writer, the Event writer) retries every few
seconds, and each retry meets the same cause. :class:`Refusals` is told of every request
(:class:`~webhook.cluster.api.Api` does it) and says the cause when it starts, once, with what
to do; while it lasts, a count at most every :data:`STILL_EVERY` seconds; and when requests go
through again, how many failed. The clients say only what waits on it, naming where the
credentials come from (:func:`~webhook.cluster.api.credentials_refused`), not the cause again.
A 403 is not such a cause: the server accepted the credentials and refuses one request, which
its client names with the permission to grant. How a cause is counted while it lasts
(:class:`Streak`) and how often the count is said (:class:`Causes`) are shared with what the
caches' lists and watches meet (:mod:`webhook.cluster.outages`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Protocol

log = logging.getLogger("stszone.credentials")

#: Seconds between two "still" lines about one cause.
STILL_EVERY: Final = 600.0


@dataclass(slots=True)
class Streak:
    """Failures of one cause, from the first until requests go through again: how many, since
    when, and when a line last said so (another is due :data:`STILL_EVERY` seconds later)."""

    since: float
    said_at: float
    failed: int = 0

    def still_due(self, now: float, *, every: float) -> bool:
        """Whether a "still" line is due at ``now``; if so, it counts as said."""
        if now - self.said_at < every:
            return False
        self.said_at = now
        return True

    def counted(self, now: float) -> str:
        """The count, for the "still" line and the last one."""
        plural = "" if self.failed == 1 else "s"
        return f"{self.failed} request{plural} failed in {now - self.since:.0f}s"


class Sent(Protocol):
    """What the last load of the credentials sent, for the hint of a 401."""

    @property
    def unsent(self) -> tuple[str, ...]: ...
    @property
    def anonymous(self) -> bool: ...
    @property
    def plaintext(self) -> bool: ...


def unauthorized_way(sent: Sent) -> str:
    """What to do about a 401: the credentials the server did not get, else renew them."""
    if sent.unsent:
        return (
            f"no credentials were sent (the user's {', '.join(sent.unsent)}): the "
            "server is not https, and kubectl sends a user's credentials only over https; "
            "give the kubeconfig's cluster its https address"
        )
    if sent.anonymous:
        https = (
            " and give the kubeconfig's cluster its https address, as kubectl sends a user's "
            "credentials only over https"
            if sent.plaintext
            else ""
        )
        return (
            "no credentials were sent: the kubeconfig's user has none (a token, a client "
            "certificate, an exec plugin...); give it credentials the cluster accepts "
            f"(`kubectl config set-credentials`){https}"
        )
    return "the cluster refused these credentials: renew them (`kubectl auth whoami` tests them)"


@dataclass(eq=False)
class Causes:
    """What says causes once per change: where the credentials come from (which names the API
    server), its clock, and the pace of the "still" lines."""

    source: str
    clock: Callable[[], float] = field(default=time.monotonic, kw_only=True)
    still_every: float = field(default=STILL_EVERY, kw_only=True)

    def _still_count(self, streak: Streak) -> str:
        """The count of ``streak`` when a "still" line is due now, else ""."""
        now = self.clock()
        return streak.counted(now) if streak.still_due(now, every=self.still_every) else ""


@dataclass(eq=False)
class Refusals(Causes):
    """The cause requests with one set of credentials fail for, logged on each change."""

    #: ("load" or "401", what was met); None while requests go through.
    _cause: tuple[str, str] | None = field(default=None, init=False)
    #: Counted from the first failure until requests go through, whatever the causes between.
    _streak: Streak | None = field(default=None, init=False)

    @property
    def _not_loading(self) -> str:
        """Why the credentials last failed to load; "" when they load."""
        cause = self._cause
        return cause[1] if cause is not None and cause[0] == "load" else ""

    def not_loaded(self, message: str) -> None:
        """A load failed with ``message`` (which names the source)."""
        if self._meet(("load", message)):
            log.error("%s; requests to the API server fail until it loads", message)
        else:
            self._still(f"the credentials from {self.source} still do not load")

    def loaded(self) -> None:
        """A load succeeded: the end of a cause that was a load's, not of a 401."""
        if self._not_loading:
            log.info("credentials from %s load again%s", self.source, self._end())

    def refused(self, message: str, *, sent: Sent) -> None:
        """The API server answered 401 with ``message``."""
        if self._meet(("401", message)):
            log.error(
                "the API server refuses the credentials from %s (HTTP 401: %s); requests to it "
                "fail until it accepts them: %s",
                self.source,
                message,
                unauthorized_way(sent),
            )
        else:
            self._still(f"the API server still refuses the credentials from {self.source}")

    def answered(self) -> None:
        """The API server answered anything but 401: it accepts the credentials."""
        cause = self._cause
        if cause is not None and cause[0] == "401":
            log.info(
                "the API server accepts the credentials from %s again%s", self.source, self._end()
            )

    def _meet(self, cause: tuple[str, str]) -> bool:
        """Count one failure; True when its cause is new (to be said)."""
        now = self.clock()
        streak = self._streak
        if streak is None:
            streak = self._streak = Streak(since=now, said_at=now)
        streak.failed += 1
        if cause == self._cause:
            return False
        self._cause, streak.said_at = cause, now
        return True

    def _still(self, what: str) -> None:
        streak = self._streak
        count = "" if streak is None else self._still_count(streak)
        if count:
            log.warning("%s: %s", what, count)

    def _end(self) -> str:
        streak, self._cause, self._streak = self._streak, None, None
        return f" ({streak.counted(self.clock())})" if streak is not None else ""


class _Quiet(Refusals):
    """Refusals told of nothing: for a one-shot command, which says its failure itself."""

    def not_loaded(self, message: str) -> None:
        pass

    def loaded(self) -> None:
        pass

    def refused(self, message: str, *, sent: Sent) -> None:
        pass

    def answered(self) -> None:
        pass


QUIET: Final = _Quiet("")
