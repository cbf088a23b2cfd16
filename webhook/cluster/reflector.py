"""List+watch reflectors: one per resource, each keeping one table of the Store current.

Each :class:`Reflector` follows client-go's reflector contract:

1. List in pages (``limit`` + ``continue``). Without ``resourceVersion`` the list is a consistent
   read the API server can paginate (``resourceVersion=0`` is served whole from its watch cache,
   which is what paging is meant to avoid), and each page is folded into compact records before
   the next is fetched, so 100k pods never sit in memory as JSON. Pages are decoded to the
   fields the records read and no more (:mod:`webhook.cluster.pages`), sized to about a megabyte,
   and folded in chunks with a yield to the event loop in between, so a list never stops
   admission requests for long. The reflectors of one view fold their pages one at a time (a
   shared lock), so a request waits behind one step of one page, never behind a step of every
   list at once. The records go into a staging table that is swapped into the store at once:
   readers never see half a re-list.
2. Watch from the list's resourceVersion with ``allowWatchBookmarks=true`` and a random
   ``timeoutSeconds`` of 5-10 minutes (client-go's spread, so replicas do not reconnect together).
3. ADDED/MODIFIED upsert, DELETED removes (a label-selector watch also sends DELETED when an
   object stops matching), BOOKMARK only advances the resourceVersion, and ERROR carries a
   ``Status``: code 410 (``Expired``) means that version was compacted, so re-list.
4. Whenever the stream ends -- server timeout, silence for ``idle_timeout`` (a quiet resource
   gets no BOOKMARKs, and a half-open connection is silent too; neither is counted as a
   failure), dropped connection, error -- reconnect from the last resourceVersion seen, after a
   capped, jittered backoff (:mod:`webhook.cluster.backoff`). As client-go's, it resets only
   after a healthy stretch: once a watch has stayed open for ``healthy_after``, however it ends.
   A completed list is no such proof (a watch answering 410 right after every list would
   otherwise re-list in a loop at the initial delay), nor is an event (a watch delivering a few
   events and then a 410, under churn, would do the same). A 410 on the list itself (an expired
   ``continue`` token, or the HTTP 410 shape of an expired version) restarts the list from
   scratch.
5. The cache is in sync (what ``/readyz`` reads) after a list, and again once a new watch has
   proven itself: it delivered an event or a BOOKMARK, or stayed open for ``healthy_after``
   without failing. An answer of 200 proves nothing: a watch that opens and then fails before
   delivering anything (an ERROR event, a reset stream) on every attempt leaves the cache stale,
   and the time out of sync keeps counting across such attempts. A quiet resource sends nothing,
   so staying open is the proof there.

Objects the extractors cannot read are logged once each and skipped; their old record is dropped,
since it would be silently stale. ``bad_objects`` counts the objects skipped now: one deleted, or
modified into a readable shape, stops counting, and a re-list counts what it skipped itself (an
object deleted while no watch was open is never seen deleted). Other oddities of a stream (an
event without an object, an unknown event type) are logged once each and not counted: they are
no object of the collection. Nothing an API server sends makes :meth:`Reflector.run` return.
A failed list or watch is a DEBUG line at each retry, and ``last_error``: every cache would say
the same at each retry, so the reflectors of a view tell one
:class:`~webhook.cluster.outages.Outages` of each failure and of each return to sync, and it
says each cause once per change (credentials that do not load or that the API server refuses,
401, are said by :mod:`webhook.cluster.refusals`).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from webhook.cluster import pages
from webhook.cluster.api import Api, ApiError, StreamSilent, api_error
from webhook.cluster.backoff import Backoff, OpenWatch
from webhook.cluster.outages import Outages, described
from webhook.cluster.resources import Resource, describe, object_key
from webhook.errors import BadObject
from webhook.model.records import Info, PodInfo
from webhook.model.store import Store
from webhook.model.tables import EXTRACTORS, Table
from webhook.wire import codec

log = logging.getLogger("stszone.watch")


@dataclass(frozen=True, slots=True)
class Tuning:
    """Timings and sizes of a reflector; the defaults are for production, tests shrink them."""

    page_size: int = 500
    #: Pages after the first are sized to about this many bytes: a page is decoded in one call.
    page_bytes: int = 1 << 20
    #: Records folded between two yields to the event loop.
    fold_chunk: int = 100
    watch_timeout: tuple[float, float] = (300.0, 600.0)
    #: Silence after which a watch is re-opened: the connection may be half-open. Not an error:
    #: a watch of a quiet resource gets no BOOKMARKs (seen on Kubernetes 1.36), so is silent.
    idle_timeout: float = 90.0
    request_timeout: float = 60.0
    backoff_initial: float = 0.8
    backoff_cap: float = 30.0
    #: A watch open this long without error counts as healthy: in sync though quiet (a watch of
    #: a quiet resource delivers nothing), and the backoff resets (nothing else resets it).
    healthy_after: float = 10.0


@dataclass(frozen=True, slots=True)
class CacheStatus:
    """Health of one cache, for ``/readyz`` and the ``stszone_cache_*`` gauges."""

    table: Table
    #: The first list has completed.
    synced: bool
    objects: int
    #: Lists and watches that failed (error, dropped connection, 410) and were retried.
    restarts: int
    #: Full lists after the first one (410 Gone).
    relists: int
    #: Unix time the cache was last known current (list done, event received, or the end of a
    #: watch that had stayed open ``healthy_after``).
    last_sync: float | None
    #: Seconds since the cache lost its watch without a new one proving itself (by an event, or
    #: by staying open ``healthy_after``); 0 while in sync.
    unsynced_for: float
    last_error: str
    #: Objects skipped now because they cannot be read (not those deleted or fixed since).
    bad_objects: int


class Reflector:
    """Keeps the store table of one :class:`Resource` in step with the API server."""

    def __init__(
        self,
        resource: Resource,
        *,
        api: Api,
        store: Store,
        tuning: Tuning | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        folding: asyncio.Lock | None = None,
        outages: Outages | None = None,
    ) -> None:
        self.resource = resource
        self._api = api
        #: Shared by the reflectors of one view: says what their lists and watches fail for.
        self._outages = outages if outages is not None else Outages(api.credentials.source)
        #: What this cache is to :class:`Outages` and in its lines.
        self._what = f"{resource.table} list/watch"
        self._store = store
        #: Shared by the reflectors of one view: their pages fold one at a time.
        self._folding = folding or asyncio.Lock()
        self._tuning = tuning or Tuning()
        self._clock = clock
        #: Waits out each retry's backoff; injectable, like the clock, so tests count no seconds.
        self._sleep = sleep
        self._backoff = Backoff(initial=self._tuning.backoff_initial, cap=self._tuning.backoff_cap)
        self._rv: str | None = None
        self._synced = asyncio.Event()
        self._lists = 0
        self._restarts = 0
        self._last_sync: float | None = None
        self._unsynced_since: float | None = clock()
        self._open = OpenWatch(self._tuning.healthy_after, clock)
        self._last_error = ""
        #: What describes each object skipped now: counted in the status, and logged only once.
        self._bad: set[str] = set()
        #: Oddities of the stream that are no object (an unknown event type): logged once each.
        self._noted: set[str] = set()

    def status(self) -> CacheStatus:
        """A snapshot of this cache's health."""
        since = None if self._open.healthy() else self._unsynced_since
        return CacheStatus(
            table=self.resource.table,
            synced=self._synced.is_set(),
            objects=len(self._store.table(self.resource.table)),
            restarts=self._restarts,
            relists=max(0, self._lists - 1),
            last_sync=self._last_sync,
            unsynced_for=0.0 if since is None else max(0.0, self._clock() - since),
            last_error=self._last_error,
            bad_objects=len(self._bad),
        )

    async def wait_synced(self) -> None:
        """Return once the first list has completed."""
        await self._synced.wait()

    async def list(self) -> None:
        """List the whole collection page by page and swap it into the store."""
        res, tuning = self.resource, self._tuning
        # A small first page tells what the objects weigh; later ones are sized from it.
        limit = max(1, tuning.page_size // 10)
        params = {"limit": str(limit)}
        if res.label_selector:
            params["labelSelector"] = res.label_selector
        accept = res.accept(watch=False)
        started = self._clock()
        staged = self._store.staging(res.table)
        skipped: set[str] = set()  # once swapped in, what this list skipped is all that is skipped
        while True:
            body = await self._api.get(
                res.path, params=params, accept=accept, read_timeout=tuning.request_timeout
            )
            # Decoding is one call that cannot yield: the next page is sized to about
            # page_bytes (never more than page_size objects) so that no decode stops the loop
            # for long, whatever the objects weigh (a pod with its managedFields: 5-20 KB).
            limit = max(1, min(tuning.page_size, limit * tuning.page_bytes // max(1, len(body))))
            async with self._folding:  # decoded, folded into records and freed in here
                items, meta = pages.read_page(body, table=res.table)
                del body
                for start in range(0, len(items), tuning.fold_chunk):
                    if start:
                        await asyncio.sleep(0)  # requests and the other lists run in between
                    chunk = items[start : start + tuning.fold_chunk]
                    staged.add(
                        r
                        for item in chunk
                        if (r := self._record(item, skipped=skipped)) is not None
                    )
                    del chunk
                token, version = meta.get("continue"), meta.get("resourceVersion")
                del items, meta
            if not token:
                break
            params["continue"], params["limit"] = str(token), str(limit)
        if not isinstance(version, str) or not version:
            raise ValueError(f"{res.table} list has no metadata.resourceVersion to watch from")
        self._store.swap(staged)
        self._bad = skipped
        self._rv = version
        self._lists += 1
        self._in_sync()
        verb = "re-listed" if self._synced.is_set() else "synced"
        log.info(
            "%s cache %s: %d objects in %.1fs (resourceVersion %s)",
            res.table,
            verb,
            len(staged),
            self._clock() - started,
            version,
        )
        self._synced.set()

    async def run(self) -> None:
        """List, then watch, forever; every failure is logged and retried, never raised."""
        while True:
            failure: str | None = None
            retry_after = 0.0
            try:
                if self._rv is None:
                    await self.list()
                await self._watch()  # returns when the server ends the stream (timeoutSeconds)
            except asyncio.CancelledError:
                raise
            except ApiError as err:
                retry_after, failure = err.retry_after, described(err)
                if err.expired:
                    self._rv = None  # compacted: events were lost, only a fresh list is safe
                    log.info("%s: %s; re-listing", self.resource.table, err)
                else:
                    self._failed(err, failure)
            except Exception as err:  # connection errors, timeouts, garbage: retry, never die
                failure = described(err)
                self._failed(err, failure)
            self._lost_sync(failure)
            if failure is not None:
                self._restarts += 1
            await self._sleep(self._backoff.next(at_least=retry_after))

    async def _watch(self) -> None:
        res, tuning = self.resource, self._tuning
        assert self._rv is not None
        params = {
            "watch": "1",
            "resourceVersion": self._rv,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(int(random.uniform(*tuning.watch_timeout))),
        }
        if res.label_selector:
            params["labelSelector"] = res.label_selector
        accept = res.accept(watch=True)
        async with self._api.stream(
            res.path, params=params, accept=accept, idle_timeout=tuning.idle_timeout
        ) as lines:
            # An event proves the watch (_apply), and so does staying open (OpenWatch).
            self._open.open()
            try:
                async for line in lines:
                    # An unparseable frame is a broken stream, not a bad object: reconnecting
                    # from the last resourceVersion replays it instead of losing the event.
                    self._apply(codec.loads(line))
            except StreamSilent:
                # A quiet resource (no events, so no BOOKMARKs either) or a half-open
                # connection: re-open, as at the end of timeoutSeconds; not a failure.
                log.debug(
                    "%s watch silent for %gs; re-opening it from resourceVersion %s",
                    res.table,
                    tuning.idle_timeout,
                    self._rv,
                )
            finally:
                if self._open.close():  # however the watch ended, it was healthy until then
                    self._in_sync()
                    self._backoff.reset()

    def _apply(self, event: Any) -> None:
        table = self.resource.table
        obj = event.get("object") if isinstance(event, dict) else None
        if not isinstance(obj, dict):
            self._note(f"event {str(event)[:80]}", problem="watch event without an object")
            return
        kind_of_event = event.get("type")
        if kind_of_event == "ERROR":
            raise api_error(obj, status=500)  # the Status carries the real code
        if kind_of_event in ("ADDED", "MODIFIED"):
            record = self._record(obj)
            key = record.key if record is not None else object_key(obj, table=table)
            if record is not None:
                self._store.put(table, record)
            elif key is not None:
                self._store.delete(table, key)
        elif kind_of_event == "DELETED":
            self._bad.discard(describe(obj))  # gone: no longer skipped
            key = object_key(obj, table=table)
            if key is not None:
                self._store.delete(table, key)
        elif kind_of_event != "BOOKMARK":
            self._note(f"event type {kind_of_event!r}", problem="unknown watch event type; ignored")
        meta = obj.get("metadata")
        version = meta.get("resourceVersion") if isinstance(meta, dict) else None
        if isinstance(version, str) and version:
            self._rv = version
        self._in_sync()  # an event or BOOKMARK proves the watch works

    def _record(self, obj: Any, *, skipped: set[str] | None = None) -> Info | None:
        """The store record of ``obj``, or None when it is skipped (logged once per object).

        A skipped object is added to ``skipped`` (a list's own set), else to the ones skipped now.
        """
        try:
            record: Info = EXTRACTORS[self.resource.table](obj)
        except Exception as err:  # BadObject, or a shape the extractor did not foresee
            problem = err.message if isinstance(err, BadObject) else f"{type(err).__name__}: {err}"
            ident = describe(obj)
            if ident not in self._bad:  # a re-list meeting it again says nothing new
                log.warning("skipping %s %s: %s", self.resource.table, ident, problem)
            (self._bad if skipped is None else skipped).add(ident)
            return None
        if self._bad:
            self._bad.discard(describe(obj))  # readable again: report it if it breaks again
        if isinstance(record, PodInfo) and record.owner is None:
            return None  # carries the pod-name label but no StatefulSet owns it (orphaned)
        return record

    def _note(self, ident: str, *, problem: str) -> None:
        # Skipped objects need no bound (the collection bounds them); these could be anything.
        if ident in self._noted:
            return
        if len(self._noted) >= 10_000:
            self._noted.clear()  # bound the memory; at worst an oddity is logged twice
        self._noted.add(ident)
        log.warning("skipping %s %s: %s", self.resource.table, ident, problem)

    def _failed(self, err: Exception, failure: str) -> None:
        log.debug("%s failed: %s", self._what, failure)
        self._outages.failed(self._what, err, said=failure, resource=self.resource)

    def _in_sync(self) -> None:
        self._unsynced_since = None
        self._last_sync = time.time()
        self._outages.worked(self._what)

    def _lost_sync(self, error: str | None) -> None:
        if self._unsynced_since is None:
            self._unsynced_since = self._clock()
        if error is not None:
            self._last_error = error
