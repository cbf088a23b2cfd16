"""What the caches' lists and watches fail for, said once per change for all of them.

Every cache of the live view (and the discovery of each optional kind) retries a failed list
or watch after a backoff of 0.8 to 30 s, so while the API server is unreachable, overloaded, or
forbids a resource, each retry of each cache meets the same cause. :class:`Outages` is told of
every failure and of every cache back in sync, and says a cause when it starts, once, with what
to do; while it lasts, a count at most every :data:`~webhook.cluster.refusals.STILL_EVERY`
seconds with the last error; and when every cache that met it is in sync again, how many
failed (counted as :mod:`webhook.cluster.refusals` counts the credentials' causes). A cache
that meets another cause has left the one before, which is said well again only when an
answer of the API server proves it (a connection, TLS or a proxy failing, then any status);
else its last line says the caches fail for another cause now, as an API server answering
503, then unreachable while it restarts, is not well between the two.

A cause is what its cure is the same for:

* the API server unreachable (connection refused or dropped, a timeout), one for every
  cache; a certificate that does not verify, another; a proxy refusing, another;
* an answer of 5xx or 429, one per status, for every cache: an API server restarting or
  overloaded answers every resource alike;
* a 403, one per resource, naming the permission to grant (the caches of StatefulSet pods and
  of Kafka brokers' pods read one resource, pods);
* anything else, one per cache and kind of error.

Credentials that do not load or that the API server refuses (401) are said by
:mod:`webhook.cluster.refusals`; here they only end what their cache met before (the server
answered). Each failure is still a DEBUG line of its cache and its ``last_error``, which
``/readyz`` names.
"""

from __future__ import annotations

import logging
import ssl
from dataclasses import dataclass, field
from typing import Final, Literal

import aiohttp

from webhook.cluster.api import ApiError, ProxyRefused, credentials_refused
from webhook.cluster.refusals import Causes, Streak
from webhook.cluster.resources import Resource

log = logging.getLogger("stszone.watch")

#: What to do about an API server that cannot be reached.
UNREACHABLE_WAY = "check that the API server is up and its address right (`kubectl cluster-info`)"
#: What to do about a proxy refusing the requests (its error says what to check).
PROXY_WAY = "then retry"
#: What to do about an API server whose certificate does not verify.
UNVERIFIED_WAY = "check the server address and the certificate authority the credentials give"
#: What to do about an API server answering 5xx.
UNWELL_WAY = "`kubectl get --raw '/readyz?verbose'` tells whether the API server is well"
#: What to do about an API server answering 429.
THROTTLED_WAY = (
    "the API server's priority and fairness rejects stszone's requests: see its load and "
    "`kubectl get flowschemas,prioritylevelconfigurations`"
)
#: What to do about a 403 whose resource is not known.
FORBIDDEN_WAY = (
    "grant these credentials the read the error names (`kubectl auth can-i --list` shows "
    "what they have)"
)


def described(err: BaseException) -> str:
    """``err`` for a line and ``last_error``: an answer by its status, anything else by its type."""
    if isinstance(err, ApiError):
        return str(err)
    return f"{type(err).__name__}: {err}".rstrip(": ")


def unverified(err: BaseException) -> bool:
    """``err`` is TLS refusing the API server's certificate (or the handshake)."""
    return isinstance(err, aiohttp.ClientSSLError | ssl.SSLError)


def unreachable(err: BaseException) -> bool:
    """``err`` is the connection's: refused, dropped or timed out."""
    return isinstance(
        err, aiohttp.ClientConnectionError | aiohttp.ClientPayloadError | TimeoutError | OSError
    )


def way_on(err: BaseException, *, resource: Resource | None = None) -> str:
    """What to do about a request that failed with ``err`` (the credentials' causes aside);
    a 403 names the permission to grant when ``resource`` is known."""
    if isinstance(err, ApiError) and err.status == 403:
        return FORBIDDEN_WAY if resource is None else _grant(resource)
    if isinstance(err, ProxyRefused):
        return PROXY_WAY
    if unverified(err):
        return UNVERIFIED_WAY
    if unreachable(err):
        return UNREACHABLE_WAY
    if isinstance(err, ApiError) and err.status == 429:
        return THROTTLED_WAY
    return UNWELL_WAY


def _grant(resource: Resource) -> str:
    """The permission a cache needs, as kubectl names the resource (``statefulsets.apps``)."""
    head, _, plural = resource.path.rpartition("/")
    parts = head.strip("/").split("/")  # api/v1, or apis/GROUP/VERSION
    name = f"{plural}.{parts[1]}" if parts[0] == "apis" and len(parts) == 3 else plural
    return (
        f"grant get, list and watch on {name} (the ClusterRole of deploy/base/rbac.yaml, or "
        "the Helm chart's rbac.yaml, grants them)"
    )


#: The causes an answer of the API server (any status, a 401 too) proves over: it was reached.
_ANSWERED_ENDS: Final = frozenset({("proxy",), ("unverified",), ("unreachable",)})


@dataclass(frozen=True, slots=True)
class Cause:
    """One cause and its lines: the first, the prefix of the count, and the last; ``name``
    names it in the last line when another cause takes its place, which proves it over for
    none of its lines but that (an API server answering 503, then unreachable)."""

    key: tuple[str, ...]
    level: int
    first: str
    still: str
    over: str
    name: str


def cause_of(
    err: BaseException, *, what: str, said: str, source: str, resource: Resource | None
) -> Cause | None:
    """The cause ``err`` is, met by ``what`` ("nodes list/watch"); None for the credentials'.
    ``said`` is ``err`` as the cache names it."""
    if credentials_refused(err):
        return None
    server = f"the API server ({source})"
    serving = "the caches serve what they hold and retry"
    if isinstance(err, ProxyRefused):  # it names the proxy and what to check
        return Cause(
            ("proxy",),
            logging.ERROR,
            f"{said}; {serving}",
            "the proxy still refuses the caches' requests",
            "the proxy carries the caches' requests again",
            "the proxy's refusals",
        )
    if unverified(err):
        return Cause(
            ("unverified",),
            logging.ERROR,
            f"{server} fails TLS verification: {said}; {serving}: {UNVERIFIED_WAY}",
            f"{server} still fails TLS verification",
            f"{server} passes TLS verification again",
            f"the TLS failures of {server}",
        )
    if unreachable(err):
        return Cause(
            ("unreachable",),
            logging.WARNING,
            f"the connection to {server} fails: {said}; {serving}, and /readyz fails once one "
            f"has been out of sync for --max-unsynced; if it lasts, {UNREACHABLE_WAY}",
            f"{server} is still unreachable",
            f"the caches reach {server} again",
            f"the failed connections to {server}",
        )
    status = err.status if isinstance(err, ApiError) else 0
    if status == 429 or status >= 500:
        way = THROTTLED_WAY if status == 429 else UNWELL_WAY
        return Cause(
            ("status", str(status)),
            logging.WARNING,
            f"{server} answers lists and watches with {said}; {serving}: {way}",
            f"{server} still answers HTTP {status}",
            f"{server} answers lists and watches again",
            f"HTTP {status} from {server}",
        )
    if status == 403 and resource is not None:
        return Cause(
            ("forbidden", resource.path),  # one permission, whichever caches read the resource
            logging.ERROR,
            f"{server} forbids the {what}: {said}; its cache serves what it holds until "
            f"allowed: {_grant(resource)}",
            f"{server} still forbids the {what}",
            f"{server} allows the {what} again",
            f"{server} forbidding the {what}",
        )
    kind = str(status) if status else type(err).__name__
    return Cause(
        ("failed", what, kind),
        logging.WARNING,
        f"{what} failed: {said}; retrying: {way_on(err, resource=resource)}",
        f"{what} still fails",
        f"{what} works again",
        f"the {what}'s failures ({kind})",
    )


@dataclass(slots=True)
class _Open:
    """A cause that lasts: its lines, its count, and who meets it now."""

    cause: Cause
    streak: Streak
    members: set[str] = field(default_factory=set)


@dataclass(eq=False)
class Outages(Causes):
    """What the caches of one API server fail for, logged on each change."""

    #: The key of the cause each failing member (a cache, a discovery) meets now.
    _held: dict[str, tuple[str, ...]] = field(default_factory=dict, init=False)
    _open: dict[tuple[str, ...], _Open] = field(default_factory=dict, init=False)

    def failed(
        self, what: str, err: BaseException, *, said: str, resource: Resource | None = None
    ) -> None:
        """``what`` failed with ``err`` (``said``: as its cache names it); ``resource``, a
        cache's, to name what a 403 wants granted."""
        cause = cause_of(err, what=what, said=said, source=self.source, resource=resource)
        held = self._held.get(what)
        if held is not None and (cause is None or held != cause.key):
            # Another cause: the one before is past for it; over only if an answer proves it.
            answered = isinstance(err, ApiError) and held in _ANSWERED_ENDS
            self._leave(what, held, end="over" if answered else "other")
        if cause is None:
            return
        key, now = cause.key, self.clock()
        found = self._open.get(key)
        if found is None:
            found = self._open[key] = _Open(cause, Streak(since=now, said_at=now))
            log.log(cause.level, "%s", cause.first)
        found.streak.failed += 1
        found.members.add(what)
        self._held[what] = key
        count = self._still_count(found.streak)
        if count:
            log.warning("%s: %s (last: %s)", found.cause.still, count, said)

    def worked(self, what: str) -> None:
        """``what`` is in sync again: what it met is over for it. Cheap when it met nothing
        (called for every watch event)."""
        if self._held:
            held = self._held.get(what)
            if held is not None:
                self._leave(what, held, end="over")

    def stopped(self, what: str) -> None:
        """``what`` stopped (its resource is no longer served): it meets nothing now, and a
        cause it alone met ends unsaid, as nothing proved it over."""
        held = self._held.get(what)
        if held is not None:
            self._leave(what, held, end="unsaid")

    def _leave(
        self, what: str, key: tuple[str, ...], *, end: Literal["over", "other", "unsaid"]
    ) -> None:
        del self._held[what]
        found = self._open[key]
        found.members.discard(what)
        if not found.members:
            del self._open[key]
            counted = found.streak.counted(self.clock())
            if end == "over":
                log.info("%s (%s)", found.cause.over, counted)
            elif end == "other":
                log.info(
                    "%s: over, but the caches fail for another cause now (%s)",
                    found.cause.name,
                    counted,
                )
