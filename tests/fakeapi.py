"""A small fake kube-apiserver (aiohttp): list and watch of the six resources stszone mirrors.

Bound to 127.0.0.1 on a free port (HTTPS when it takes a token or a context, else HTTP), it
serves the shapes recorded from a real API server in ``fixtures/api/`` and honours what
reflectors rely on: ``limit``/``continue`` over a snapshot, ``labelSelector`` (on watches too,
with the DELETED a real server sends when an object stops matching), ``resourceVersion``,
``allowWatchBookmarks``, ``timeoutSeconds``, the metadata-only Accept header, and bearer
tokens. Tests write objects while watches are open and inject faults into the next request of a
resource and verb::

    api.inject("pods", "watch", Fault.expired())      HTTP 200 whose stream is one ERROR 410
    api.inject("pods", "watch", Fault.error_event(500))  HTTP 200, one ERROR event code 500
    api.inject("pods", "list", Fault.status(410))     HTTP 410 (the recorded Status body)
    api.inject("pods", "list", Fault.status(500))     HTTP 500 with a Status body
    api.inject("pods", "list", Fault.drop())          connection cut half-way through the body
    api.inject("statefulsets", "get", Fault.drop())   the same, for one object read by name
    api.inject("pods", "watch", Fault.slow(0.5))      answer delayed
    api.inject("pods", "watch", Fault.stall())        half an event, then silence
    api.inject("pods", "watch", Fault.lines(b"..."))  HTTP 200, these raw lines, then the end
    api.cut("pods")                                   open pods watches cut mid-event
    api.bookmark("pods")                              BOOKMARK on open pods watches
    api.failing["pods"] = Fault.status(503)           every pods list and watch, until removed
    await api.stop() ... await api.start()            down (connections refused), then back

It also serves one object by name, namespaced lists, Evictions and claim deletions
(:mod:`tests.fakeobjects`), for ``stszone rebalance``; ``api.on_evict`` holds the hooks a test
uses to play the StatefulSet controller once an eviction has deleted a pod. For
``--manage-certs`` it serves Secrets, Leases and the two webhook configurations: lists and
watches narrowed by ``fieldSelector=metadata.name=NAME``, and create, update and JSON Patch
with resourceVersion conflicts (:mod:`tests.fakewrites`); ``api.on_write`` holds hooks run
after each write, and every request records its ``User-Agent`` (who wrote what). Events
(``events.k8s.io/v1``) are created and merge-patched, validated as a real server validates
them (:mod:`tests.fakeevents`).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import json
import ssl
import tempfile
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from aiohttp import web

from tests import fakeevents, fakeobjects, fakewrites
from tests.fakeobjects import EvictHook
from tests.fakestate import (
    RESOURCES,
    Change,
    Objects,
    Stored,
    bookmark_line,
    error_line,
    event_line,
    expired_line,
    field_matches,
    http_fixture,
    matches,
    representation,
)
from tests.fakewrites import WriteHook
from tests.hang import HANG_GUARD
from webhook.install.certfiles import DevCerts, ensure_dev_certs

JSON = dict[str, Any]
Verb = Literal["list", "watch", "get", "evict", "delete", "create", "update", "patch"]


@dataclass(frozen=True, slots=True)
class Fault:
    """What goes wrong with one request."""

    what: Literal["status", "expired", "error-event", "drop", "slow", "stall", "lines"]
    code: int = 0
    seconds: float = 0.0
    retry_after: int | None = None
    body: bytes = b""

    @classmethod
    def status(cls, code: int, *, retry_after: int | None = None) -> Fault:
        return cls("status", code=code, retry_after=retry_after)

    @classmethod
    def expired(cls) -> Fault:
        return cls("expired")

    @classmethod
    def error_event(cls, code: int) -> Fault:
        return cls("error-event", code=code)

    @classmethod
    def drop(cls) -> Fault:
        return cls("drop")

    @classmethod
    def slow(cls, seconds: float) -> Fault:
        return cls("slow", seconds=seconds)

    @classmethod
    def stall(cls) -> Fault:
        """A watch that sends half an event, then nothing until the client goes (at most 10 s)."""
        return cls("stall")

    @classmethod
    def lines(cls, body: bytes) -> Fault:
        """A watch whose stream is ``body`` as it is (events no server sends), then ends."""
        return cls("lines", body=body)


@dataclass(frozen=True, slots=True)
class Seen:
    """One request as the fake received it."""

    verb: Verb
    resource: str
    query: dict[str, str]
    accept: str
    metadata: bool
    #: Event-loop time the request arrived.
    at: float
    #: The object named (get, evict, delete) and the request body (evict, delete).
    namespace: str = ""
    name: str = ""
    body: Any = None
    #: The client's User-Agent header.
    agent: str = ""


class FakeApi:
    """The fake API server; ``async with FakeApi() as api:`` serves on ``api.url``.

    One that takes a ``token`` serves https (its CA in ``api.ca``), as kubectl and stszone
    send a kubeconfig user's credentials to https servers only."""

    def __init__(
        self,
        *,
        token: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
        fixtures: bool = True,
    ) -> None:
        self.objects = Objects()
        if fixtures:
            self.objects.load_fixtures()
        self.token = token
        self.url = ""
        self.requests: list[Seen] = []
        self.watching: dict[str, int] = defaultdict(int)
        #: Namespaces whose Events a create is refused in: "Terminating" or "Gone".
        self.namespaces_closed: dict[str, str] = {}
        #: The CA a kubeconfig names for this server, when it serves https with its own pair.
        self.ca: Path | None = None
        if ssl_context is None and token is not None:
            certs = _dev_certs()
            ssl_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ssl_context.load_cert_chain(certs.cert, certs.key)
            self.ca = certs.ca
        self._ssl = ssl_context
        self._faults: dict[tuple[str, Verb], list[Fault]] = defaultdict(list)
        self._snapshots: dict[str, tuple[int, list[Stored]]] = {}
        self._signals: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # bookmarks, cuts
        self._changed = asyncio.Event()
        self._runner: web.AppRunner | None = None
        #: Called with (namespace, pod) after an eviction deleted the pod.
        self.on_evict: list[EvictHook] = []
        #: Called with (resource, verb, object) after a create, update or patch landed.
        self.on_write: list[WriteHook] = []
        #: The fault of every list and watch of a resource while it is here (after the queued).
        self.failing: dict[str, Fault] = {}
        self._site: web.TCPSite | None = None

    async def __aenter__(self) -> FakeApi:
        app = web.Application()
        app.router.add_get("/{tail:.*}", self._handle)
        app.router.add_post("/{tail:.*}", self._write)
        app.router.add_delete("/{tail:.*}", self._write)
        app.router.add_put("/{tail:.*}", self._write)
        app.router.add_patch("/{tail:.*}", self._write)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.2)
        await self._runner.setup()
        await self.start()
        return self

    async def start(self) -> None:
        """Listen (again: on the port of the first start)."""
        assert self._runner is not None
        port = int(self.url.rpartition(":")[2]) if self.url else 0
        self._site = web.TCPSite(self._runner, "127.0.0.1", port, ssl_context=self._ssl)
        await self._site.start()
        scheme = "https" if self._ssl else "http"
        self.url = f"{scheme}://127.0.0.1:{self._runner.addresses[0][1]}"

    async def stop(self) -> None:
        """The API server goes down: open connections are closed, new ones refused."""
        assert self._runner is not None and self._site is not None
        await self._site.stop()
        self._site = None
        assert self._runner.server is not None
        await self._runner.server.shutdown(0.1)  # watches and idle keep-alive connections

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    # --- what tests do ------------------------------------------------------------------------

    def put(self, resource: str, obj: JSON) -> None:
        """Create or update an object (ADDED or MODIFIED on open watches)."""
        self.objects.write(resource, obj)
        self._notify()

    def delete(self, resource: str, name: str, *, namespace: str = "") -> None:
        """Delete an object (DELETED on open watches)."""
        self.objects.write(resource, None, key=(namespace, name))
        self._notify()

    def compact(self) -> None:
        """etcd compaction: older resourceVersions and continue tokens now answer 410."""
        self.objects.compact()
        self._snapshots.clear()

    def inject(self, resource: str, verb: Verb, *faults: Fault) -> None:
        """Queue faults for the next requests of ``resource``/``verb``, one per request."""
        self._faults[(resource, verb)].extend(faults)

    def clear(self, resource: str, verb: Verb) -> None:
        """Drop the faults still queued for ``resource``/``verb``."""
        self._faults[(resource, verb)].clear()

    def bookmark(self, resource: str) -> None:
        """Send a BOOKMARK at the current resourceVersion on open watches that asked for them."""
        self._signals[resource][0] += 1
        self._notify()

    def cut(self, resource: str) -> None:
        """Drop the open watches of ``resource`` in the middle of an event."""
        self._signals[resource][1] += 1
        self._notify()

    def seen(self, resource: str, verb: Verb) -> list[Seen]:
        """Requests received for ``resource``/``verb``, oldest first."""
        return [s for s in self.requests if s.resource == resource and s.verb == verb]

    async def wait_watching(self, resource: str, *, count: int = 1) -> None:
        """Wait until ``count`` watches of ``resource`` are open."""
        await eventually(lambda: self.watching[resource] >= count)

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    # --- HTTP ---------------------------------------------------------------------------------

    def _refused(self, request: web.Request) -> web.Response | None:
        auth = request.headers.get("Authorization", "")
        if self.token is not None and auth.partition(" ")[::2] not in {
            ("Bearer", self.token),
            ("bearer", self.token),
        }:
            return fakeobjects.status(401, "Unauthorized", "Unauthorized")
        return None

    def record(
        self, verb: Verb, where: fakeobjects.Route, request: web.Request, body: Any = None
    ) -> Fault | None:
        """Note a request to one object; the fault queued for it, if any."""
        now = asyncio.get_running_loop().time()
        accept = request.headers.get("Accept", "")
        seen = Seen(verb, where.resource, dict(request.query), accept, False, now)
        agent = request.headers.get("User-Agent", "")
        self.requests.append(
            replace(seen, namespace=where.namespace, name=where.name, body=body, agent=agent)
        )
        queued = self._faults[(where.resource, verb)]
        return queued.pop(0) if queued else None

    async def _write(self, request: web.Request) -> web.StreamResponse:
        refused = self._refused(request)
        if refused is not None:
            return refused
        where = fakeobjects.route(request.path)
        if where is not None and where.resource == "events":
            return await fakeevents.write(self, request, where)
        if where is not None and where.resource in fakewrites.WRITABLE:
            return await fakewrites.write(self, request, where)
        return await fakeobjects.write(self, request)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        where = fakeobjects.route(request.path)
        if where is None or where.subresource:
            return fakeobjects.status(
                404, "NotFound", "the server could not find the requested resource"
            )
        refused = self._refused(request)
        if refused is not None:
            return refused
        if where.name:
            fault = self.record("get", where, request)
            if fault is not None and fault.what == "status":
                return _failure(fault, "get", resource=where.resource)
            found = fakeobjects.get_object(self.objects, where)
            dropped = fault is not None and fault.what == "drop" and found.status == 200
            if dropped and isinstance(found.body, bytes):
                return await _cut_short(request, found.body)
            return found
        resource = where.resource
        query = dict(request.query)
        if where.namespace:
            query["namespace"] = where.namespace
        verb: Verb = "watch" if query.get("watch") in ("1", "true") else "list"
        form = representation(request.headers.get("Accept", ""), watch=verb == "watch")
        if form is None:
            return fakeobjects.status(
                406, "NotAcceptable", "only JSON representations are served here"
            )
        accept, now = request.headers.get("Accept", ""), asyncio.get_running_loop().time()
        agent = request.headers.get("User-Agent", "")
        seen = Seen(verb, resource, query, accept, form, now, where.namespace, agent=agent)
        self.requests.append(seen)
        queued = self._faults[(resource, verb)]
        fault = queued.pop(0) if queued else self.failing.get(resource)
        if fault is not None and fault.what == "slow":
            await asyncio.sleep(fault.seconds)
        if fault is not None and fault.what == "status":
            return _failure(fault, verb, resource=resource)
        if verb == "watch":
            return await self._watch(request, resource, query, metadata=form, fault=fault)
        return await self._list(request, resource, query, metadata=form, fault=fault)

    async def _list(
        self,
        request: web.Request,
        resource: str,
        query: dict[str, str],
        *,
        metadata: bool,
        fault: Fault | None,
    ) -> web.StreamResponse:
        _, kind, api_version, _ = RESOURCES[resource]
        limit = int(query.get("limit") or 0)
        token = query.get("continue")
        if token:
            sid, _, offset_text = base64.urlsafe_b64decode(token).decode().partition(":")
            offset = int(offset_text)
            if sid not in self._snapshots:
                _, body = http_fixture("sts-pods-list-expired")
                return web.Response(status=410, body=body, content_type="application/json")
        else:
            selector, namespace = query.get("labelSelector", ""), query.get("namespace")
            fields = query.get("fieldSelector", "")
            table = self.objects.tables[resource].values()
            snapshot = sorted(
                (
                    s
                    for s in table
                    if matches(selector, s.labels)
                    and field_matches(fields, s)
                    and namespace in (None, s.key[0])
                ),
                key=lambda s: s.key,
            )
            sid, offset = f"{self.objects.rv}-{len(self._snapshots)}-{id(snapshot)}", 0
            self._snapshots[sid] = (self.objects.rv, snapshot)
        rv, snapshot = self._snapshots[sid]
        page = snapshot[offset : offset + limit] if limit else snapshot[offset:]
        meta: JSON = {"resourceVersion": str(rv)}
        rest = len(snapshot) - offset - len(page)
        if rest:
            next_token = f"{sid}:{offset + len(page)}".encode()
            meta["continue"] = base64.urlsafe_b64encode(next_token).decode()
            meta["remainingItemCount"] = rest
        else:
            del self._snapshots[sid]
        head = {"kind": f"{kind}List", "apiVersion": api_version, "metadata": meta}
        if metadata:
            head.update(kind="PartialObjectMetadataList", apiVersion="meta.k8s.io/v1")
        items = b",".join(s.metadata_only() if metadata else s.body for s in page)
        body = json.dumps(head)[:-1].encode() + b',"items":[' + items + b"]}"
        if fault is not None and fault.what == "drop":
            return await _cut_short(request, body)
        return web.Response(body=body, content_type="application/json")

    async def _watch(
        self,
        request: web.Request,
        resource: str,
        query: dict[str, str],
        *,
        metadata: bool,
        fault: Fault | None,
    ) -> web.StreamResponse:
        _, kind, api_version, _ = RESOURCES[resource]
        text = query.get("resourceVersion", "")
        rv = int(text) if text.isdigit() and text != "0" else self.objects.rv
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        if (fault is not None and fault.what == "expired") or rv < self.objects.compacted:
            # What a real server does: HTTP 200, then one ERROR event with a 410 Status, then EOF.
            await response.write(expired_line(rv, self.objects.compacted or self.objects.rv))
            return response
        if fault is not None and fault.what == "error-event":
            await response.write(error_line(fault.code))
            return response
        if fault is not None and fault.what == "drop":
            return _abort(request, response)
        if fault is not None and fault.what == "lines":
            await response.write(fault.body)
            return response
        if fault is not None and fault.what == "stall":
            await response.write(b'{"type":"MODIFIED","object":{"kind":"' + kind.encode())
            for _ in range(200):
                if request.transport is None or request.transport.is_closing():
                    break
                await asyncio.sleep(0.05)
            return response
        selector, fields = query.get("labelSelector", ""), query.get("fieldSelector", "")
        namespace = query.get("namespace")
        bookmarks = query.get("allowWatchBookmarks") in ("1", "true")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + float(query.get("timeoutSeconds") or 1800)
        signals = self._signals[resource]
        seen_bookmarks, seen_cuts = signals
        self.watching[resource] += 1
        try:
            while True:
                if (
                    signals[1] != seen_cuts
                ):  # before sending changes: they must wait for the reconnect
                    await response.write(b'{"type":"MODIFIED","object":{"kind":"' + kind.encode())
                    return _abort(request, response)
                for change in self.objects.since(resource, rv):
                    rv = change.rv
                    line = event_line(
                        kind, api_version, change, selector, metadata=metadata, fields=fields
                    )
                    if line is not None and namespace in (None, _namespace_of(change)):
                        await response.write(line)
                if signals[0] != seen_bookmarks:
                    seen_bookmarks = signals[0]
                    if bookmarks:
                        await response.write(
                            bookmark_line(kind, api_version, self.objects.rv, metadata)
                        )
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return response  # timeoutSeconds reached: the server ends the stream cleanly
                changed = self._changed
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), remaining)
        finally:
            self.watching[resource] -= 1


async def eventually(check: Callable[[], bool], *, within: float = HANG_GUARD) -> None:
    """Wait until ``check()`` holds: caches and watches change asynchronously. ``within`` is a
    hang guard (``tests.hang``), never a timing assertion."""
    async with asyncio.timeout(within):
        while True:
            if check():
                return
            await asyncio.sleep(0.01)


def _namespace_of(change: Change) -> str:
    stored = change.after or change.before
    return stored.key[0] if stored is not None else ""


def _failure(fault: Fault, verb: Verb, *, resource: str) -> web.Response:
    if fault.code == 410 and verb != "watch":
        _, body = http_fixture("sts-pods-list-expired")
        return web.Response(status=410, body=body, content_type="application/json")
    reason = {
        403: "Forbidden",
        500: "InternalError",
        429: "TooManyRequests",
        503: "ServiceUnavailable",
    }
    message = f"injected failure {fault.code}"
    if fault.code == 403:  # as RBAC words it
        group = RESOURCES[resource][2].rpartition("/")[0]
        message = (
            f'{resource} is forbidden: User "system:serviceaccount:stszone-system:stszone" '
            f'cannot {verb} resource "{resource}" in API group "{group}" at the cluster scope'
        )
    return fakeobjects.status(
        fault.code, reason.get(fault.code, "Failure"), message, retry_after=fault.retry_after
    )


async def _cut_short(request: web.Request, body: bytes) -> web.StreamResponse:
    """A 200 announcing all of ``body`` whose connection is cut half-way through it: the
    client has its answer begun, so it cannot retry the request as one never sent."""
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    response.content_length = len(body)
    await response.prepare(request)
    await response.write(body[: len(body) // 2])
    return _abort(request, response)


def _abort(request: web.Request, response: web.StreamResponse) -> web.StreamResponse:
    if request.transport is not None:
        request.transport.abort()
    return response


@functools.cache
def _dev_certs() -> DevCerts:
    """One serving pair for 127.0.0.1 per test process, removed at exit."""
    directory = tempfile.TemporaryDirectory(prefix="stszone-fakeapi-")
    _KEPT.append(directory)
    return ensure_dev_certs(Path(directory.name))


_KEPT: list[tempfile.TemporaryDirectory[str]] = []
