"""Replicas of ``stszone serve --manage-certs`` in-process against the fake API server.

A :class:`Replica` is what ``stszone serve`` builds (:func:`webhook.cli.managedcerts.start`):
the Secret's watch, the Lease campaign and the planner, plus a TLS listener on 127.0.0.1 that
serves ``managed.tls.context`` (the context ``stszone serve`` hands its listener).
:func:`handshake` connects as the API server does: trusting only the caBundle of a webhook
configuration as the fake holds it, checking the Service's DNS name.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import json
import ssl
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography import x509

from tests.fakeapi import FakeApi
from tests.kubeconfig import write_kubeconfig
from webhook.cli import managedcerts
from webhook.config import Settings

JSON = dict[str, Any]
TOKEN = "certs-token"
NS = "certs-ns"
HOST = f"stszone.{NS}.svc"
KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")


def configuration(kind: str) -> JSON:
    """A webhook configuration named stszone calling Service stszone.certs-ns, no caBundle."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": "stszone"},
        "webhooks": [
            {
                "name": f"{'mutate' if kind.startswith('M') else 'validate'}.stszone.io",
                "clientConfig": {"service": {"name": "stszone", "namespace": NS, "port": 443}},
            }
        ],
    }


def settings(kubeconfig: Path, identity: str, **changes: Any) -> Settings:
    """``--manage-certs`` settings with lease timings a test can wait out."""
    values: dict[str, Any] = {
        "kubeconfig": str(kubeconfig),
        "namespace": NS,
        "manage_certs": True,
        "cert_validity": 120.0,
        "lease_duration": 0.6,
        "renew_deadline": 0.4,
        "retry_period": 0.05,
        "identity": identity,
    }
    values.update(changes)
    return Settings(**values)


def stored(fake: FakeApi, resource: str, name: str, namespace: str = "") -> JSON | None:
    found = fake.objects.tables[resource].get((namespace, name))
    return None if found is None else dict(json.loads(found.body))


def bundle_pem(fake: FakeApi, kind: str) -> bytes:
    """The caBundle of the first webhook of configuration ``kind`` (b"" when unset)."""
    plural = kind.lower() + "s"
    config = stored(fake, plural, "stszone")
    assert config is not None
    encoded = config["webhooks"][0]["clientConfig"].get("caBundle", "")
    return base64.b64decode(encoded)


async def handshake(port: int, ca_bundle: bytes, *, host: str = HOST) -> int:
    """The serial of the certificate a client trusting ``ca_bundle`` verifies for ``host``."""
    context = ssl.create_default_context(cadata=ca_bundle.decode())
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname=host)
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        return x509.load_der_x509_certificate(der).serial_number
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            await writer.wait_closed()


@dataclass
class Replica:
    """One replica's pieces, their tasks and its TLS listener."""

    managed: managedcerts.Managed
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    server: asyncio.Server | None = None
    port: int = 0

    @property
    def identity(self) -> str:
        return self.managed.elector.identity

    async def start(self) -> None:
        async def close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.close()

        self.server = await asyncio.start_server(
            close, "127.0.0.1", 0, ssl=self.managed.tls.context
        )
        self.port = self.server.sockets[0].getsockname()[1]
        self.tasks = [
            asyncio.create_task(self.managed.watch.run()),
            asyncio.create_task(self.managed.campaign()),
        ]

    async def stop(self, *, crash: bool = False) -> None:
        """Stop it: released Lease, as on SIGTERM; or ``crash``: nothing more is sent."""
        if crash:
            self.managed.elector.release_on_cancel = False
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.tasks = []
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
            self.server = None


@contextlib.asynccontextmanager
async def cluster(
    tmp_path: Path, *, configs: tuple[str, ...] = KINDS
) -> AsyncIterator[tuple[FakeApi, Callable[..., Any]]]:
    """The fake API server holding ``configs``, and ``start(identity, **settings)`` for
    replicas (all stopped at the end)."""
    replicas: list[Replica] = []
    async with FakeApi(token=TOKEN, fixtures=False) as fake:
        for kind in configs:
            fake.put(kind.lower() + "s", configuration(kind))
        kubeconfig = write_kubeconfig(
            tmp_path / "kubeconfig", server=fake.url, token=TOKEN, ca=fake.ca
        )

        async def start(
            identity: str, *, wall: Callable[[], float] = time.time, **changes: Any
        ) -> Replica:
            chosen = settings(kubeconfig, identity, **changes)
            managed = await managedcerts.start(chosen, wall=wall)
            replica = Replica(managed)
            await replica.start()
            replicas.append(replica)
            return replica

        try:
            yield fake, start
        finally:
            for replica in replicas:
                await replica.stop()


def writes_by(fake: FakeApi) -> dict[str, set[str]]:
    """Who (User-Agent) sent each kind of write that the certificate work makes."""
    found: dict[str, set[str]] = {}
    for seen in fake.requests:
        if seen.verb in ("create", "update", "patch") and seen.resource != "leases":
            found.setdefault(seen.resource, set()).add(seen.agent)
    return found


def now_utc() -> dt.datetime:
    return dt.datetime.now(dt.UTC)
