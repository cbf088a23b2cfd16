"""The live cluster view: a Store kept current by one reflector per resource.

``stszone serve`` builds a :class:`LiveView` with :func:`start_live` and attaches it to the
server's :class:`~webhook.server.app.Runtime`: the reflectors run as a background job, and
:meth:`LiveView.ready` is a readiness check. The server listens from the start (the kubelet's
probes and the API server get answers, not refused connections) but ``/readyz`` fails until every
cache has completed its first list, and again while a cache has been unable to re-sync for longer
than ``--max-unsynced`` -- a replica whose view is going stale leaves the Service instead of
admitting pods from old data. One-shot commands (``audit``) use :func:`live_store`: one list of
every resource, no watch.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence

import aiohttp

from webhook.cluster.api import Api, ApiError
from webhook.cluster.credentials import Credentials
from webhook.cluster.credsource import load_credentials
from webhook.cluster.outages import UNREACHABLE_WAY, Outages, way_on
from webhook.cluster.reflector import CacheStatus, Reflector, Tuning
from webhook.cluster.refusals import unauthorized_way
from webhook.cluster.resources import Resource, resources, turned_off
from webhook.cluster.served import ServedReflector
from webhook.cluster.view import zone_source
from webhook.config import Settings
from webhook.errors import ConfigError
from webhook.model.store import Store

log = logging.getLogger("stszone.live")


class LiveView:
    """One store, the reflectors feeding it, and their combined readiness."""

    def __init__(
        self, settings: Settings, *, credentials: Credentials, tuning: Tuning | None = None
    ) -> None:
        self.settings = settings
        self.credentials = credentials
        self.store = Store(
            zones=settings.zones, live=True, kruise_start_ordinal=settings.kruise_start_ordinal
        )
        self.api = Api(credentials)
        folding = asyncio.Lock()  # the pages of all lists fold one at a time
        #: What the caches' lists and watches fail for, said once for all of them.
        self.outages = Outages(credentials.source)
        self.reflectors = tuple(
            reflector_for(
                resource,
                api=self.api,
                store=self.store,
                tuning=tuning,
                folding=folding,
                outages=self.outages,
            )
            for resource in resources(settings)
        )
        self._stopped: str | None = None
        # A kind turned off is never listed: its empty table counts as listed.
        for table in turned_off(settings):
            self.store.replace(table, ())

    def statuses(self) -> tuple[CacheStatus, ...]:
        """Health of every cache (what ``/readyz`` and the ``stszone_cache_*`` gauges report)."""
        return tuple(reflector.status() for reflector in self.reflectors)

    def ready(self) -> tuple[bool, str]:
        """The readiness check: every cache listed, none unsynced for over ``max_unsynced``."""
        if self._stopped is not None:
            return False, f"live view stopped: {self._stopped}"
        problems = [problem for status in self.statuses() if (problem := self._problem(status))]
        return (not problems), "; ".join(problems) or "caches synced"

    def _problem(self, status: CacheStatus) -> str:
        error = f" (last error: {status.last_error})" if status.last_error else ""
        if not status.synced:
            return f"{status.table} cache not listed yet{error}"
        limit = self.settings.max_unsynced
        if status.unsynced_for > limit:
            return (
                f"{status.table} cache unable to re-sync for {status.unsynced_for:.0f}s "
                f"(over --max-unsynced {limit:g}s){error}"
            )
        return ""

    async def run(self) -> None:
        """Run every reflector until cancelled; log the zone source once all are synced."""
        started = time.monotonic()
        try:
            async with asyncio.TaskGroup() as group:
                for reflector in self.reflectors:
                    group.create_task(reflector.run(), name=f"watch-{reflector.resource.table}")
                await asyncio.gather(*(r.wait_synced() for r in self.reflectors))
                counts = ", ".join(f"{s.table} {s.objects}" for s in self.statuses())
                log.info(
                    "live view synced in %.1fs (%s); zone source: %s",
                    time.monotonic() - started,
                    counts,
                    zone_source(self.settings, self.store),
                )
        except BaseException as err:
            # Reflectors never return; getting here means cancellation (shutdown) or a bug.
            # Either way the view stops changing, so readiness must stop claiming it is fresh.
            self._stopped = type(err).__name__ if not str(err) else str(err)
            raise
        finally:
            await self.api.close()


def reflector_for(
    resource: Resource,
    *,
    api: Api,
    store: Store,
    tuning: Tuning | None = None,
    folding: asyncio.Lock | None = None,
    outages: Outages | None = None,
) -> Reflector:
    """The reflector of one collection: a :class:`ServedReflector` for a CRD's."""
    kind = ServedReflector if resource.optional else Reflector
    return kind(resource, api=api, store=store, tuning=tuning, folding=folding, outages=outages)


async def start_live(settings: Settings, *, tuning: Tuning | None = None) -> LiveView:
    """Load credentials (off the loop: an exec plugin may run) and build the live view."""
    credentials = await asyncio.to_thread(
        load_credentials, settings.kubeconfig, context=settings.context
    )
    log.info("live view from %s", credentials.source)
    return LiveView(settings, credentials=credentials, tuning=tuning)


async def live_store(
    settings: Settings,
    *,
    credentials: Credentials | None = None,
    tuning: Tuning | None = None,
) -> Store:
    """A store filled by one paginated list of every resource, without watching (for ``audit``).

    Raises :class:`ConfigError` when the cluster cannot be reached or refuses a list.
    """
    if credentials is None:
        credentials = await asyncio.to_thread(
            load_credentials, settings.kubeconfig, context=settings.context
        )
    store = Store(zones=settings.zones, kruise_start_ordinal=settings.kruise_start_ordinal)
    for table in turned_off(settings):
        store.replace(table, [])
    async with Api(credentials, quiet=True) as api:
        reflectors: Sequence[Reflector] = [
            reflector_for(resource, api=api, store=store, tuning=tuning)
            for resource in resources(settings)
        ]
        lists = [asyncio.ensure_future(reflector.list()) for reflector in reflectors]
        try:
            await asyncio.gather(*lists)
        except (ApiError, aiohttp.ClientError, OSError, ValueError) as err:
            way = _way_on(err, credentials)
            raise ConfigError(
                f"cannot list the cluster via {credentials.source}: {err}; {way}"
            ) from err
        finally:
            # gather leaves the other lists running when one fails: stopped here, none goes on
            # paging against the client closed below (it would open a session nothing closes).
            for listing in lists:
                listing.cancel()
            await asyncio.gather(*lists, return_exceptions=True)
    return store


def _way_on(err: Exception, credentials: Credentials) -> str:
    """What to do about a list that failed with ``err``."""
    if isinstance(err, ApiError) and err.status == 401:
        return unauthorized_way(credentials)
    way = way_on(err)
    if way == UNREACHABLE_WAY:
        return f"{way}, or run without a cluster (--cluster FILE)"
    return way
