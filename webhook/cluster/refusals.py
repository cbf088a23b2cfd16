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
its client names with the permission to grant.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Final, Protocol

log = logging.getLogger("stszone.credentials")

#: Seconds between two "still" lines about one cause.
STILL_EVERY: Final = 600.0


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


class Refusals:
    """The cause requests with one set of credentials fail for, logged on each change."""

    def __init__(
        self,
        source: str,
        *,
        clock: Callable[[], float] = time.monotonic,
        still_every: float = STILL_EVERY,
    ) -> None:
        self.source = source
        self.still_every = still_every
        self._clock = clock
        #: ("load" or "401", what was met); None while requests go through.
        self._cause: tuple[str, str] | None = None
        self._since = 0.0
        self._said_at = 0.0
        self._failed = 0

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
        """Count one failure; True when its cause is new (to be said). The count and the time
        run from the first failure until requests go through, whatever the causes between."""
        now = self._clock()
        if self._cause is None:
            self._since, self._failed = now, 0
        self._failed += 1
        if cause == self._cause:
            return False
        self._cause, self._said_at = cause, now
        return True

    def _still(self, what: str) -> None:
        now = self._clock()
        if now - self._said_at >= self.still_every:
            self._said_at = now
            log.warning("%s: %d requests failed in %.0fs", what, self._failed, now - self._since)

    def _end(self) -> str:
        failed, lasted = self._failed, self._clock() - self._since
        self._cause = None
        return f" ({failed} requests failed in {lasted:.0f}s)"


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
