"""Leader election on a ``coordination.k8s.io/v1`` Lease, with client-go's semantics.

client-go's ``leaderelection`` package defines the three durations used here, with its defaults:

- ``lease_duration`` (15 s): what a holder writes as the Lease's ``leaseDurationSeconds``: how
  long a candidate waits, after it last *saw the record change*, before it takes over. A
  candidate waits the duration in the record, not its own (client-go's ``isLeaseValid``), so
  replicas configured differently, or another client, agree on when a Lease expires; a record
  without a positive duration has expired (client-go reads a missing one as 0). The wait is
  measured on the candidate's own monotonic clock from the moment it observed the change, never
  against the ``renewTime`` in the record, so clocks that disagree between nodes do not matter.
  A leader that dies is replaced within this long (plus one retry).
- ``renew_deadline`` (10 s): how long a leader keeps trying to renew before it stops acting as
  leader. Shorter than ``lease_duration``: a leader that cannot renew stops writing before a
  candidate may take over.
- ``retry_period`` (2 s): the time between attempts (candidates jitter it by up to 1.2x, so
  replicas do not ask in lock-step).

Every write is an update carrying the Lease's ``resourceVersion`` (or a create, when there is
none): when two candidates try at once, the API server accepts one and answers the other
``409 Conflict``, which simply means someone else won. A leader stopped on purpose (SIGTERM)
releases the Lease -- empty holder, one-second duration, as client-go's ``ReleaseOnCancel`` --
so that a successor need not wait out the lease duration. Work that ends by itself while the
Lease is held (a crash) is started again a retry period later, never at once.

The Lease is stszone's, in its own namespace: ``create`` on leases there, ``get``/``update``
on this one name (``deploy/base``'s Role).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import random
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Final

import aiohttp

from webhook.cluster.api import Api, ApiError, credentials_refused
from webhook.cluster.secretwatch import granted_by

log = logging.getLogger("stszone.lease")

JSON = dict[str, Any]
#: Candidates wait ``retry_period`` times 1 to 1 + this (client-go's JitterFactor).
JITTER: Final = 1.2
_LEASES: Final = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"

Lead = Callable[[], Coroutine[Any, Any, None]]


@dataclass(frozen=True, slots=True)
class Timing:
    """client-go's three durations, in seconds (defaults: client-go's)."""

    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if not 0 < self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError(
                "lease timing must satisfy 0 < retry_period < renew_deadline < lease_duration"
            )


def _micro_time(wall: float) -> str:
    # metav1.MicroTime: RFC 3339 with microseconds, UTC.
    return dt.datetime.fromtimestamp(wall, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _holder(lease: JSON) -> str:
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


def _duration(spec: JSON) -> float:
    """The record's ``leaseDurationSeconds``; 0 (expired) when missing or not a positive count."""
    value = spec.get("leaseDurationSeconds")
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return 0.0
    return float(value)


class Elector:
    """Campaigns for one Lease and runs ``lead`` while it holds it (see the module doc)."""

    def __init__(
        self,
        *,
        api: Api,
        namespace: str,
        name: str,
        identity: str,
        timing: Timing | None = None,
        release_on_cancel: bool = True,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.api = api
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.timing = timing or Timing()
        self.release_on_cancel = release_on_cancel
        self._clock = clock
        self._wall = wall
        self._collection = _LEASES.format(namespace=namespace)
        self._path = f"{self._collection}/{name}"
        #: The holder last seen in the record, and when (our clock) the record last changed.
        self.holder = ""
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self._lease: JSON | None = None
        self._renewed_at: float | None = None
        self._said = ""
        #: Reads and writes of the Lease that failed (a conflict, someone else winning, is not).
        self.failures = 0

    @property
    def leading(self) -> bool:
        """True while the last renewal is younger than the renew deadline: safe to write."""
        renewed = self._renewed_at
        return renewed is not None and self._clock() - renewed < self.timing.renew_deadline

    async def run(self, lead: Lead) -> None:
        """Campaign forever; while leading, run ``lead`` (cancelled when leadership ends)."""
        try:
            while True:
                await self._acquire()
                log.info(
                    "leading: Lease %s/%s held by %s", self.namespace, self.name, self.identity
                )
                task = asyncio.create_task(lead(), name=f"lead-{self.name}")
                try:
                    ended = await self._keep(task)
                finally:
                    self._renewed_at = None
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await task
                if ended:
                    # Work that fails at once, re-run at once, would spin: Lease updates and
                    # reads of the cluster in a tight loop. It is re-run a retry period later,
                    # the pace of every other retry here. Nothing is written meanwhile
                    # (``leading`` is False), and the Lease, renewed a retry period before, is
                    # normally still ours when the campaign renews it.
                    await asyncio.sleep(self.timing.retry_period)
        finally:
            if self._lease is not None and self.holder == self.identity and self.release_on_cancel:
                await asyncio.shield(self._release())

    async def _acquire(self) -> None:
        while True:
            if await self._try():
                return
            await asyncio.sleep(self.timing.retry_period * (1 + random.random() * JITTER))

    async def _keep(self, task: asyncio.Task[None]) -> bool:
        """Renew every retry period; return when someone else holds the Lease, when renewing
        has failed for the renew deadline (False), or when ``lead`` ended by itself (True)."""
        while True:
            await asyncio.wait({task}, timeout=self.timing.retry_period)
            if task.done():
                error = None if task.cancelled() else task.exception()
                log.error(
                    "the leader's work ended (%s); campaigning again in %gs",
                    error or "cancelled",
                    self.timing.retry_period,
                )
                return True
            renewed = self._renewed_at if self._renewed_at is not None else self._clock()
            left = self.timing.renew_deadline - (self._clock() - renewed)
            held = False
            if left > 0:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(left):
                        held = await self._try()
            if held:
                continue
            where = f"Lease {self.namespace}/{self.name}"
            if self.holder and self.holder != self.identity:
                log.warning("stopped leading: %s is now held by %s", where, self.holder)
                return False
            if not self.leading:
                log.warning(
                    "stopped leading: %s not renewed for %gs", where, self.timing.renew_deadline
                )
                return False

    async def _try(self) -> bool:
        """One acquire-or-renew: True when we hold the Lease afterwards."""
        try:
            return await self._attempt()
        except (ApiError, aiohttp.ClientError, OSError, ValueError) as err:
            self.failures += 1
            where = f"Lease {self.namespace}/{self.name}"
            self._say(f"cannot read or write {where}: {self._met(err)}", err=err)
            return False

    async def _attempt(self) -> bool:
        now, wall = self._clock(), self._wall()
        try:
            lease = await self.api.call("GET", self._path)
        except ApiError as err:
            if err.status != 404:
                raise
            return await self._write("POST", body=self._record(None, wall=wall), now=now)
        spec = lease.get("spec") or {}
        record = tuple(
            spec.get(key)
            for key in ("holderIdentity", "leaseDurationSeconds", "renewTime", "leaseTransitions")
        )
        if record != self._observed:
            # Seen when the answer came back, not when the read was sent (client-go's
            # observedTime): a renewal that landed while a slow read waited still counts whole.
            self._observed, self._observed_at = record, self._clock()
        self.holder = _holder(lease)
        self._lease = lease
        if (
            self.holder
            and self.holder != self.identity
            and now < self._observed_at + _duration(spec)
        ):
            return False
        return await self._write("PUT", body=self._record(lease, wall=wall), now=now)

    def _record(self, lease: JSON | None, *, wall: float) -> JSON:
        spec = (lease or {}).get("spec") or {}
        ours = spec.get("holderIdentity") == self.identity
        transitions = int(spec.get("leaseTransitions") or 0)
        stamp = _micro_time(wall)
        metadata = (lease or {}).get("metadata") or {"name": self.name, "namespace": self.namespace}
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": max(1, round(self.timing.lease_duration)),
                "acquireTime": spec.get("acquireTime") if ours else stamp,
                "renewTime": stamp,
                "leaseTransitions": transitions if ours or lease is None else transitions + 1,
            },
        }

    async def _write(self, method: str, *, body: JSON, now: float) -> bool:
        path = self._collection if method == "POST" else self._path
        try:
            written = await self.api.call(method, path, body=body)
        except ApiError as err:
            if err.status == 409:  # someone else created or renewed it first
                return False
            raise
        self._lease, self.holder = written, self.identity
        self._observed = None
        self._renewed_at = now
        self._said = ""
        return True

    async def _release(self) -> None:
        """Hand the Lease back: empty holder, 1 s duration (client-go's ReleaseOnCancel), within
        the renew deadline (client-go's bound too)."""
        where = f"{self.namespace}/{self.name}"
        try:
            async with asyncio.timeout(self.timing.renew_deadline):
                holder = await self._hand_back()
        except TimeoutError:
            log.warning(
                "could not release Lease %s: no answer within %gs",
                where,
                self.timing.renew_deadline,
            )
        except (ApiError, aiohttp.ClientError, OSError, ValueError) as err:
            log.warning("could not release Lease %s: %s", where, self._met(err))
        else:
            if holder == self.identity:
                log.info("released Lease %s", where)
            else:
                log.info(
                    "Lease %s is no longer ours to release (held by %s)", where, holder or "nobody"
                )

    async def _hand_back(self) -> str:
        """Write the release; the holder found (ours when it was released).

        A renewal cancelled in flight may have landed after the Lease was last read, and then
        the write meets 409 Conflict: the Lease is read again and released if it still names
        us."""
        assert self._lease is not None
        try:
            await self.api.call("PUT", self._path, body=self._released(self._lease))
            return self.identity
        except ApiError as err:
            if err.status != 409:
                raise
        lease = await self.api.call("GET", self._path)
        holder = _holder(lease)
        if holder == self.identity:
            await self.api.call("PUT", self._path, body=self._released(lease))
        return holder

    def _released(self, lease: JSON) -> JSON:
        body = self._record(lease, wall=self._wall())
        body["spec"].update(holderIdentity="", leaseDurationSeconds=1)
        return body

    def _met(self, err: Exception) -> str:
        """What a read or write of the Lease met, for its log line. Credentials that do not load
        or that the API server refuses (401) are named by their source only: their cause is said
        once for every client (stszone.credentials), and the Lease's line adds which Lease
        waits, not the cause again."""
        return credentials_refused(err) or str(err)

    def _say(self, message: str, *, err: Exception) -> None:
        if message == self._said:
            return
        self._said = message
        if isinstance(err, ApiError) and err.status == 403:
            log.error(
                "%s; grant the ServiceAccount create on leases and get/update on Lease %s in "
                "namespace %s (%s)",
                message,
                self.name,
                self.namespace,
                granted_by("Role", self.name),
            )
        else:
            log.warning("%s; retrying every %gs", message, self.timing.retry_period)
