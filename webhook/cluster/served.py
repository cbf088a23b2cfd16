"""A cache of a custom resource that may not be served: list+watch only while its API is.

OpenKruise's Advanced StatefulSets exist only where their CRD is installed. A cluster without
them must cost nothing (no failing lists, no readiness problem), and a CRD installed after
stszone started must be picked up without a restart. So the cache asks API discovery for the
group version every ``poll`` seconds: while the resource is not served, its table is empty and
counts as listed; once it is, an ordinary :class:`Reflector` lists and watches it; when the CRD
goes away again, that reflector is stopped and the table emptied. A collection served at several
versions over a CRD's releases (:attr:`Resource.paths`) is read at the first one discovery
lists, and at another once that one is no longer served (an upgrade that removes a version).
A failed discovery is told to the view's :class:`~webhook.cluster.outages.Outages`, like the
caches' failures: an API server down is said once for all of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import time
from typing import Final

from webhook.cluster.api import Api, ApiError
from webhook.cluster.outages import Outages, described
from webhook.cluster.reflector import CacheStatus, Reflector, Tuning
from webhook.cluster.resources import Resource
from webhook.model.store import Store

log = logging.getLogger("stszone.served")

#: Seconds between discovery checks.
POLL: Final = 60.0


async def served(api: Api, resource: Resource) -> bool:
    """Whether API discovery lists the resource's plural under its group version."""
    group_version, _, plural = resource.path.rpartition("/")
    try:
        body = await api.get(group_version, params={}, read_timeout=30)
    except ApiError as err:
        if err.status == 404:
            return False
        raise
    found = json.loads(body)
    listed = found.get("resources") if isinstance(found, dict) else None
    return isinstance(listed, list) and any(
        isinstance(r, dict) and r.get("name") == plural for r in listed
    )


async def serving(api: Api, resource: Resource) -> Resource | None:
    """The resource at the first of its paths that discovery lists; None when none is."""
    for path in resource.paths:
        at = dataclasses.replace(resource, path=path, older=())
        if await served(api, at):
            return at
    return None


class ServedReflector(Reflector):
    """A :class:`Reflector` of a resource that exists only where its CRD is installed."""

    def __init__(
        self,
        resource: Resource,
        *,
        api: Api,
        store: Store,
        tuning: Tuning | None = None,
        folding: asyncio.Lock | None = None,
        outages: Outages | None = None,
        poll: float = POLL,
    ) -> None:
        super().__init__(
            resource, api=api, store=store, tuning=tuning, folding=folding, outages=outages
        )
        self._args = (api, store, tuning, folding)
        self._poll = poll
        self._inner: Reflector | None = None
        self._empty = asyncio.Event()
        #: Set once the table is either empty-and-listed or has a reflector of its own.
        self._decided = asyncio.Event()

    def _absent(self) -> None:
        """Not served: an empty table, listed (nothing of this kind exists)."""
        self._store.replace(self.resource.table, [])
        self._empty.set()
        self._decided.set()

    def status(self) -> CacheStatus:
        inner = self._inner
        if inner is not None and (inner.status().synced or not self._empty.is_set()):
            return inner.status()
        return CacheStatus(
            table=self.resource.table,
            synced=self._empty.is_set(),
            objects=0,
            restarts=0,
            relists=0,
            last_sync=time.time() if self._empty.is_set() else None,
            unsynced_for=0.0,
            last_error="",
            bad_objects=0,
        )

    async def wait_synced(self) -> None:
        await self._decided.wait()
        if self._inner is not None:
            await self._inner.wait_synced()

    def _fresh(self, resource: Resource) -> Reflector:
        api, store, tuning, folding = self._args
        fresh = Reflector(
            resource, api=api, store=store, tuning=tuning, folding=folding, outages=self._outages
        )
        self._decided.set()
        return fresh

    async def list(self) -> None:
        """One list when served, else an empty table (for the one-shot commands)."""
        found = await serving(self._api, self.resource)
        if found is not None:
            self._inner = self._fresh(found)
            await self._inner.list()
        else:
            self._absent()

    async def run(self) -> None:
        """Check discovery every ``poll`` seconds; run a reflector while the API is served."""
        task: asyncio.Task[None] | None = None
        running: Resource | None = None
        discovery = f"discovery of {self.resource.path}"
        try:
            while True:
                try:
                    # What runs is kept while its version is served.
                    if running is not None and await served(self._api, running):
                        now: Resource | None = running
                    else:
                        now = await serving(self._api, self.resource)
                    self._outages.worked(discovery)
                except asyncio.CancelledError:
                    raise
                except Exception as err:  # unknown: keep what runs, ask again later
                    failure = described(err)
                    log.debug("%s failed: %s", discovery, failure)
                    self._outages.failed(discovery, err, said=failure)
                    if task is None and not self._empty.is_set():
                        self._absent()  # an optional kind never holds readiness back
                    await asyncio.sleep(self._poll)
                    continue
                if task is not None and running is not None and now != running:
                    gone = "" if now is not None else ": its cache is emptied"
                    log.info("%s is no longer served%s", running.path, gone)
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
                    self._outages.stopped(self._what)
                    task, running, self._inner = None, None, None
                    if now is None:
                        self._absent()
                if now is not None and task is None:
                    log.info("%s is served: watching it", now.path)
                    self._inner = self._fresh(now)
                    running = now
                    task = asyncio.create_task(self._inner.run())
                elif now is None and not self._empty.is_set():
                    self._absent()
                await asyncio.sleep(self._poll)
        finally:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
