"""Requests to the Kubernetes API over aiohttp: paged JSON lists, newline-framed watches, and
the few writes stszone makes (``stszone rebalance``: an Eviction, a claim's deletion;
``--manage-certs``: its Secret, its Lease, a JSON Patch of its webhook configurations).

:class:`Api` asks :class:`~webhook.cluster.credentials.Credentials` for fresh settings before
every request (see :mod:`webhook.cluster.credentials` for why aiohttp and not the ``kubernetes``
client), turns any answer but 200 into an :class:`ApiError` built from the ``Status`` body, and
drops the credentials on a 401 so the next request reloads them.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, Final

import aiohttp
from yarl import URL

from webhook.cluster.credentials import Credentials
from webhook.cluster.refusals import QUIET
from webhook.errors import ConfigError

JSON_MEDIA: Final = "application/json"
#: Largest watch event we buffer; etcd caps objects at 1.5 MiB, JSON may double that.
MAX_EVENT: Final = 16 * 1024 * 1024


class ApiError(Exception):
    """A request to the API server failed with an HTTP status (or a watch ``ERROR`` event).

    Never leaves the I/O layer: reflectors catch it and retry, ``live_store`` turns it into a
    :class:`~webhook.errors.ConfigError` for the CLI.
    """

    def __init__(
        self,
        status: int,
        *,
        message: str,
        reason: str = "",
        retry_after: float = 0.0,
        causes: tuple[str, ...] = (),
        kind: str = "",
        cause_reasons: tuple[str, ...] = (),
    ) -> None:
        super().__init__(f"HTTP {status}{' ' + reason if reason else ''}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.retry_after = retry_after
        #: ``details.causes[].message``: e.g. which PodDisruptionBudget refused an eviction.
        self.causes = causes
        #: ``details.kind``: what was not found, e.g. ``namespaces`` for a write into one gone.
        self.kind = kind
        #: ``details.causes[].reason``, e.g. ``NamespaceTerminating``.
        self.cause_reasons = cause_reasons
        #: On a 401 from :class:`Api`: where the refused credentials come from.
        self.source = ""

    @property
    def namespace_closed(self) -> bool:
        """A write refused because its namespace is being deleted (403 with the cause
        NamespaceTerminating) or is gone (404 naming the namespace, not the object)."""
        if self.status == 404:
            return self.kind == "namespaces"
        return "NamespaceTerminating" in self.cause_reasons

    @property
    def expired(self) -> bool:
        """410 Gone / Expired: the resourceVersion or continue token was compacted; re-list."""
        return self.status == 410 or self.reason in ("Expired", "Gone")


class CredentialsError(aiohttp.ClientError):
    """The credentials could not be loaded for one request (a kubeconfig caught while it is
    rewritten, a client pair of which one half is new): that request failed, as on a lost
    connection, and the next one loads them again. A :class:`ConfigError` here would end the
    jobs that retry only API and connection errors (the Lease campaign, the Secret's watch,
    the Event writer), and with them readiness, for good.

    The :class:`Api` tells the credentials' :class:`~webhook.cluster.refusals.Refusals` of each
    load and each answer, which says the cause once per change; kept per loader, not per file
    (the live view and the certificates each load their own): one loader still serving from
    what it loaded before says nothing of the other.
    """

    def __init__(self, message: str, *, source: str) -> None:
        super().__init__(message)
        #: Where the credentials come from ("kubeconfig PATH", "in-cluster service account").
        self.source = source


class ProxyRefused(aiohttp.ClientError):
    """The kubeconfig's proxy refused to carry a request (407, 403, 502...), as a connection
    error. aiohttp's own error names the proxy by its URL, user and password included, and
    this text reaches the log, stderr and ``/readyz``: this one names it without them."""


def credentials_refused(err: BaseException) -> str:
    """``err`` said short when it is the credentials' (they do not load, or the API server
    refuses them: 401), naming where they come from; "" for any other error. The cause itself
    is said once for every client (:mod:`webhook.cluster.refusals`), so a client's line says
    only what waits on it."""
    if isinstance(err, CredentialsError):
        return f"the credentials from {err.source} do not load"
    if isinstance(err, ApiError) and err.status == 401 and err.source:
        return f"the API server refuses the credentials from {err.source}"
    return ""


def without_userinfo(url: str) -> str:
    """``url`` with any ``user:password@`` left out, to be shown."""
    try:
        return str(URL(url).with_user(None))
    except ValueError:
        return "(a proxy-url that does not parse)"


def api_error(body: Any, *, status: int, retry_after: str | None = None) -> ApiError:
    """An :class:`ApiError` from a ``Status`` object (or whatever else the server sent)."""
    message, reason = "", ""
    causes: tuple[str, ...] = ()
    kind = ""
    cause_reasons: tuple[str, ...] = ()
    if isinstance(body, Mapping):
        message, reason = str(body.get("message", "")), str(body.get("reason", ""))
        code = body.get("code")
        status = code if isinstance(code, int) and not isinstance(code, bool) else status
        details = body.get("details")
        found = details.get("causes") if isinstance(details, Mapping) else None
        if isinstance(found, list):
            causes = tuple(
                str(c["message"]) for c in found if isinstance(c, Mapping) and c.get("message")
            )
            cause_reasons = tuple(
                str(c["reason"]) for c in found if isinstance(c, Mapping) and c.get("reason")
            )
        if isinstance(details, Mapping) and isinstance(details.get("kind"), str):
            kind = details["kind"]
    elif isinstance(body, bytes | str):
        message = (body.decode(errors="replace") if isinstance(body, bytes) else body)[:300]
    try:
        wait = float(retry_after) if retry_after else 0.0
    except ValueError:
        wait = 0.0  # an HTTP-date Retry-After; the backoff will do
    message = message.strip() or "no message"
    return ApiError(
        status,
        message=message,
        reason=reason,
        retry_after=wait,
        causes=causes,
        kind=kind,
        cause_reasons=cause_reasons,
    )


class Api:
    """Requests to one cluster over one aiohttp session: JSON documents, watch streams, writes.

    The session is created on first use, inside the running loop, so an :class:`Api` (and the
    reflectors holding it) can be built before the loop starts serving.
    """

    def __init__(
        self,
        credentials: Credentials,
        *,
        connect_timeout: float = 10.0,
        user_agent: str | None = None,
        quiet: bool = False,
    ) -> None:
        self.credentials = credentials
        #: A one-shot command ends on its first failure and says it: the credentials'
        #: refusals are not logged besides (the live view's and the certificates' are).
        self._quiet = quiet
        self._connect_timeout = connect_timeout
        #: Names this process in the API server's audit log (e.g. the Lease holder's identity).
        self._agent = {"User-Agent": user_agent} if user_agent else {}
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        """Close the session (idempotent)."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> Api:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def get(
        self,
        path: str,
        *,
        params: Mapping[str, str],
        accept: str = JSON_MEDIA,
        read_timeout: float = 60,
    ) -> bytes:
        """GET ``path``; the raw JSON body, or :class:`ApiError` on a non-200 answer."""
        async with self._request(
            "GET", path, params=params, accept=accept, read_timeout=read_timeout
        ) as resp:
            return await resp.read()

    async def call(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Mapping[str, Any] | list[Any] | None = None,
        content_type: str = JSON_MEDIA,
        read_timeout: float = 30,
    ) -> dict[str, Any]:
        """One JSON request (GET an object, POST an Eviction, PUT a Secret, PATCH with
        ``content_type`` ``application/json-patch+json``): the decoded answer, or
        :class:`ApiError` on any status but 200/201/202."""
        async with self._request(
            method,
            path,
            params=params or {},
            read_timeout=read_timeout,
            body=body,
            content_type=content_type,
        ) as resp:
            raw = await resp.read()
        try:
            answer: Any = json.loads(raw)
        except ValueError:
            # A proxy's page, say: an ApiError, like any answer the caller cannot use, which
            # every caller handles; a ValueError would end a job that does not expect one.
            answer = None
        if not isinstance(answer, dict):
            seen = raw[:100].decode(errors="replace").strip() or "an empty body"
            raise ApiError(
                resp.status, message=f"{method} {path} answered with no JSON object: {seen}"
            )
        return answer

    @asynccontextmanager
    async def stream(
        self, path: str, *, params: Mapping[str, str], accept: str = JSON_MEDIA, idle_timeout: float
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        """Open a watch; yields an iterator over its newline-framed JSON events.

        The API server writes one JSON object and a newline per event (``json.Encoder``).
        ``idle_timeout`` bounds the silence between reads, which catches a half-open connection;
        silence between two events ends the iteration with :class:`StreamSilent` (a quiet
        resource gets no BOOKMARKs), silence inside one raises aiohttp's timeout error.
        """
        async with self._request(
            "GET", path, params=params, accept=accept, read_timeout=idle_timeout
        ) as resp:
            yield _lines(resp.content)

    @asynccontextmanager
    async def _request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str],
        read_timeout: float,
        accept: str = JSON_MEDIA,
        body: Mapping[str, Any] | list[Any] | None = None,
        content_type: str = JSON_MEDIA,
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        credentials = self.credentials
        refusals = QUIET if self._quiet else credentials.refusals
        try:
            target = await credentials.target()
        except ConfigError as err:
            refusals.not_loaded(err.message)
            raise CredentialsError(err.message, source=credentials.source) from err
        refusals.loaded()
        if self._session is None:
            self._session = aiohttp.ClientSession(auto_decompress=True)
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=self._connect_timeout, sock_read=read_timeout
        )
        named = {**target.headers, **self._agent, "Accept": accept}
        data = None
        if body is not None:
            named["Content-Type"] = content_type
            data = json.dumps(body).encode()
        # Pairs, not a dict: an impersonated group or extra value repeats its header.
        headers = [*named.items(), *target.impersonation]
        try:
            response = await self._session.request(
                method,
                target.base + path,
                params=params,
                headers=headers,
                data=data,
                ssl=target.ssl,
                server_hostname=target.server_hostname,
                proxy=target.proxy,
                timeout=timeout,
            )
        except aiohttp.ClientHttpProxyError as err:
            shown = without_userinfo(target.proxy or "")
            raise ProxyRefused(
                f"the proxy {shown} refused the request: {err.status} {err.message}; check "
                "the proxy-url of the kubeconfig's cluster (its address and credentials)"
            ) from None
        async with response as resp:
            # An Eviction is created (201); a deletion may be accepted for later (202).
            if resp.status not in (200, 201, 202) or (method == "GET" and resp.status != 200):
                raw = await _head(resp.content, limit=64 * 1024)
                if resp.status == 401:
                    credentials.invalidate()  # rotated token or expired exec credential
                try:
                    status: Any = json.loads(raw)
                except ValueError:
                    status = raw
                retry_after = resp.headers.get("Retry-After")
                error = api_error(status, status=resp.status, retry_after=retry_after)
                if resp.status == 401:
                    error.source = credentials.source
                    refusals.refused(error.message, sent=credentials)
                else:
                    refusals.answered()
                raise error
            refusals.answered()
            yield resp


async def _head(content: aiohttp.StreamReader, *, limit: int) -> bytes:
    """Up to ``limit`` bytes of an error body (a Status is small, a proxy's page may not be)."""
    raw = b""
    while len(raw) < limit:
        chunk = await content.read(limit - len(raw))
        if not chunk:
            break
        raw += chunk
    return raw


class StreamCut(aiohttp.ClientPayloadError):
    """The watch stream ended in the middle of an event (the connection was dropped)."""


class StreamSilent(Exception):
    """The watch stream sent nothing for its idle timeout, between two events.

    Not a failure in itself: Kubernetes sends no BOOKMARK while a watched resource is quiet
    (a watch of StatefulSets in a quiet cluster stays silent for minutes), and a half-open
    connection looks the same. Either way the answer is a new watch from the last version.
    """


async def _lines(content: aiohttp.StreamReader) -> AsyncIterator[bytes]:
    pending = b""
    try:
        async for chunk in content.iter_any():
            data = pending + chunk if pending else chunk
            *complete, pending = data.split(b"\n")
            if len(pending) > MAX_EVENT:
                raise StreamCut(f"watch event larger than {MAX_EVENT} bytes")
            for line in complete:
                if line.strip():
                    yield line
    except aiohttp.ServerTimeoutError:
        if pending.strip():
            raise  # silent in the middle of an event: a broken stream
        raise StreamSilent from None
    if pending.strip():
        raise StreamCut("watch stream ended in the middle of an event")
