"""One Secret, watched through the API: what every ``--manage-certs`` replica serves from.

Watching it (rather than reading a mounted volume) means a renewed pair reaches every replica
within moments of being written, not after the kubelet's volume sync (a minute or more), and
a replica needs no volume that must exist before the pod can start.

It is a list+watch narrowed to the one name (``fieldSelector=metadata.name=NAME``), which RBAC
allows with ``resourceNames`` (the API server takes the name from the selector): the list says
whether the Secret exists and gives the version to watch from; ADDED/MODIFIED hand the new
object over, DELETED hands over None. As the reflectors do, the watch is re-opened from the last
version when it ends, is silent for ``idle_timeout`` (a quiet Secret gets no BOOKMARKs) or
fails, and re-listed on ``410 Gone``. A watch proves itself by an event or by staying open for
``healthy_after``: only that resets the capped, jittered backoff and ends the time counted as
failing (what readiness reads). A watch the API server answers and that then fails, or ends,
before proving itself is retried after the backoff, and the time failing counts on. A failure
is logged once, and again only when it changes, until the watch works again, which is said too.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp

from webhook.cluster.api import Api, ApiError, StreamSilent, api_error, credentials_refused
from webhook.cluster.backoff import Backoff, OpenWatch
from webhook.config import CERTS_LEASE

log = logging.getLogger("stszone.certs")

JSON = dict[str, Any]
#: Called with the Secret as the API holds it (None: there is none) each time it changes.
OnChange = Callable[[JSON | None], None]


def granted_by(kind: str, name: str) -> str:
    """Where an install grants the certificate work, for a 403's hint: ``Role NAME`` in
    deploy/base or the Helm chart. Both name their Role and ClusterRole like the Lease
    (``stszone-certs``; a Helm release's ``FULLNAME-certs``, which it passes as
    ``--certs-lease``), so the Lease's name is the one a replica knows them by."""
    return f"{kind} {name}: deploy/base/certs-rbac.yaml, or the Helm chart's certs-rbac.yaml"


@dataclass(frozen=True, slots=True)
class WatchTiming:
    """Timings of the watch (defaults: the reflectors')."""

    #: Server-side timeout of one watch, drawn from this range (replicas do not reconnect together).
    watch_timeout: tuple[float, float] = (300.0, 600.0)
    idle_timeout: float = 90.0
    request_timeout: float = 30.0
    backoff_initial: float = 0.8
    backoff_cap: float = 30.0
    #: A watch open this long without error is healthy: working though quiet, backoff reset.
    healthy_after: float = 10.0


class SecretWatch:
    """Keeps :attr:`current` equal to the Secret ``namespace/name`` and calls ``on_change``."""

    def __init__(
        self,
        *,
        api: Api,
        namespace: str,
        name: str,
        on_change: OnChange,
        role: str = CERTS_LEASE,
        timing: WatchTiming | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.api = api
        self.namespace = namespace
        self.name = name
        #: The name of the Role (and ClusterRole) granting the certificate work, for hints.
        self.role = role
        self.on_change = on_change
        self.timing = timing or WatchTiming()
        self._clock = clock
        self._sleep = sleep
        self._path = f"/api/v1/namespaces/{namespace}/secrets"
        self._selector = f"metadata.name={name}"
        self.current: JSON | None = None
        #: The first list has completed.
        self.synced = False
        self.last_error = ""
        #: The failure last logged, until the watch works again ("" then).
        self._said = ""
        #: ``clock()`` since the watch has been failing (None while it works).
        self._failing_since: float | None = None
        self._open = OpenWatch(self.timing.healthy_after, clock)
        self._rv = ""
        self._changed = asyncio.Event()

    def unsynced_for(self) -> float:
        """Seconds the watch has been failing (0 while it works)."""
        since = self._failing_since
        return 0.0 if since is None or self._open.healthy() else self._clock() - since

    async def changed(self, within: float) -> bool:
        """Wait up to ``within`` s for the Secret to change; True when it did."""
        try:
            async with asyncio.timeout(within):
                await self._changed.wait()
        except TimeoutError:
            return False
        self._changed.clear()
        return True

    def _set(self, secret: JSON | None) -> None:
        self.current = secret
        self._changed.set()
        try:
            self.on_change(secret)
        except Exception:  # the watch must outlive a bad handler
            log.exception("handling a change of Secret %s/%s failed", self.namespace, self.name)

    async def run(self) -> None:
        """List, then watch, forever (a background job)."""
        backoff = Backoff(initial=self.timing.backoff_initial, cap=self.timing.backoff_cap)
        while True:
            try:
                if not self._rv:
                    await self._list()
                if await self._watch(backoff):
                    continue  # ended after a healthy stretch (its timeout): watch again at once
                # Ended before proving itself (a proxy cutting it, say): paced, never a loop.
                self.last_error = f"the watch ended within {self.timing.healthy_after:g}s"
                wait = backoff.next()
            except StreamSilent:
                continue  # silent for idle_timeout (healthy): watch again from the same version
            except ApiError as err:
                if err.expired:
                    self._rv = ""  # compacted: list again, paced like any retry
                    wait = backoff.next()
                else:
                    wait = self._failed(err, backoff=backoff)
            except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as err:
                wait = self._failed(err, backoff=backoff)
            await self._sleep(wait)

    def _ok(self) -> None:
        self._failing_since = None
        self.last_error = ""
        if self._said:
            log.info("watch of Secret %s/%s works again", self.namespace, self.name)
            self._said = ""

    def _failed(self, err: Exception, *, backoff: Backoff) -> float:
        message = str(err) or type(err).__name__
        # Credentials that do not load or are refused (401) are said once for every client
        # (webhook.cluster.refusals): this line names only them, not the refusal again.
        said = credentials_refused(err) or message
        if said != self._said:
            hint = ""
            if isinstance(err, ApiError) and err.status == 403:
                hint = (
                    f"; grant the ServiceAccount get/list/watch on Secret {self.name} in "
                    f"namespace {self.namespace} ({granted_by('Role', self.role)})"
                )
            log.warning("watch of Secret %s/%s failed: %s%s", self.namespace, self.name, said, hint)
            self._said = said
        self.last_error = message
        if self._failing_since is None:
            self._failing_since = self._clock()
        wait = err.retry_after if isinstance(err, ApiError) else 0.0
        return backoff.next(at_least=wait)

    async def _list(self) -> None:
        answer = await self.api.call(
            "GET",
            self._path,
            params={"fieldSelector": self._selector},
            read_timeout=self.timing.request_timeout,
        )
        items = [item for item in answer.get("items") or [] if isinstance(item, dict)]
        self._rv = str((answer.get("metadata") or {}).get("resourceVersion") or "")
        self.synced = True
        self._ok()
        secret = items[0] if items else None
        if secret is not None:
            secret = {"kind": "Secret", "apiVersion": "v1", **secret}
        self._set(secret)

    async def _watch(self, backoff: Backoff) -> bool:
        """Follow one watch until it ends; True when it had stayed open ``healthy_after``."""
        low, high = self.timing.watch_timeout
        params = {
            "watch": "1",
            "fieldSelector": self._selector,
            "resourceVersion": self._rv,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(int(random.uniform(low, high))),
        }
        async with self.api.stream(
            self._path, params=params, idle_timeout=self.timing.idle_timeout
        ) as lines:
            # An event proves the watch, and so does staying open (OpenWatch).
            self._open.open()
            try:
                async for line in lines:
                    event = json.loads(line)
                    kind, obj = event.get("type"), event.get("object") or {}
                    if kind == "ERROR":
                        raise api_error(obj, status=int(obj.get("code") or 500))
                    version = (obj.get("metadata") or {}).get("resourceVersion")
                    if version:
                        self._rv = str(version)
                    if kind in ("ADDED", "MODIFIED"):
                        self._set(obj)
                    elif kind == "DELETED":
                        self._set(None)
                    self._ok()
            finally:
                healthy = self._open.close()  # however it ended, it was healthy until then
                if healthy:
                    self._ok()
                    backoff.reset()
                elif self._failing_since is None:
                    self._failing_since = self._clock()
        return healthy
