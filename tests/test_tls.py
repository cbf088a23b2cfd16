"""TLS: protocol and cipher floor, certificate loading, and hot reload under continuous load.

The real app (``make_app`` + :class:`CertReloader`, wired as ``webhook/app.py`` does) runs on
127.0.0.1 in a thread with its own event loop, so the clients here are plain blocking ``ssl``
and ``http.client`` connections that can read the certificate the server really presented.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import logging
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web
from cryptography import x509

from webhook.cluster.view import offline_store
from webhook.config import Settings
from webhook.errors import ConfigError
from webhook.install import certfiles, certs
from webhook.server.app import make_app
from webhook.server.runtime import Runtime
from webhook.server.serve import make_runner
from webhook.server.tls import CertReloader, hardened_context

FIXTURE = Path(__file__).parent / "fixtures" / "admission" / "003-Pod-CREATE.json"
BODY = FIXTURE.read_bytes()
UID = json.loads(BODY)["request"]["uid"]


class Server:
    """The webhook app on 127.0.0.1:<free port>, in a thread; stops when the block ends."""

    def __init__(self, reloader: CertReloader) -> None:
        self.reloader = reloader
        self.port = 0
        self._ready = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None

    async def _main(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        settings = Settings(zones=("a", "b", "c"), offline=True)
        runtime = Runtime(
            store=offline_store(settings), defaults=settings.defaults(), settings=settings
        )
        runtime.jobs.append(self.reloader.run)
        runner = make_runner(make_app(runtime), settings)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=self.reloader.context)
        await site.start()
        self.port = runner.addresses[0][1]
        self._ready.set()
        await self._stop.wait()
        await runner.cleanup()

    def __enter__(self) -> Server:
        self._thread.start()
        assert self._ready.wait(10), "server did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None and self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)


def client_context(ca: Path, *, version: ssl.TLSVersion | None = None) -> ssl.SSLContext:
    """A verifying client, as the API server is: trusts only ca.crt, checks the name."""
    ctx = ssl.create_default_context(cafile=str(ca))
    if version is not None:
        ctx.minimum_version = ctx.maximum_version = version
    return ctx


def served_serial(sock: ssl.SSLSocket) -> int:
    der = sock.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def handshake(
    port: int, ctx: ssl.SSLContext, *, host: str | None = "127.0.0.1"
) -> tuple[str | None, str, int]:
    """(TLS version, cipher, served serial) of one new connection; raises ssl.SSLError if refused.

    ``host`` is checked against the certificate; Python sends it as SNI only when it is a
    DNS name (never an IP address, nor None).
    """
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        ctx.wrap_socket(raw, server_hostname=host) as tls,
    ):
        cipher = tls.cipher()
        assert cipher is not None
        return tls.version(), cipher[0], served_serial(tls)


def post(conn: http.client.HTTPSConnection) -> int:
    """One POST /mutate of a recorded Pod CREATE; returns the serial of the connection's cert."""
    conn.request("POST", "/mutate", body=BODY, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    payload = response.read()
    assert response.status == 200, payload[:200]
    answer = json.loads(payload)["response"]
    assert answer["uid"] == UID and answer["allowed"] is True and answer["patchType"] == "JSONPatch"
    assert isinstance(conn.sock, ssl.SSLSocket)
    return served_serial(conn.sock)


@pytest.fixture
def issued(tmp_path: Path) -> certfiles.Issued:
    return certfiles.issue(
        tmp_path, service="stszone", namespace="stszone-system", ips=["127.0.0.1"]
    )


@pytest.fixture
def server(issued: certfiles.Issued) -> Iterator[Server]:
    with Server(CertReloader(issued.cert, issued.key, interval=0.2)) as running:
        yield running


class Permissive:
    """A bare TLS server accepting anything from TLS 1.0 up (SECLEVEL=0): the control group.

    It shows the old-protocol clients below really can connect, so their refusal by the
    webhook comes from its hardening and not from the client's own OpenSSL policy.
    """

    def __init__(self, issued: certfiles.Issued) -> None:
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.minimum_version = ssl.TLSVersion.TLSv1
        self.ctx.set_ciphers("ALL:@SECLEVEL=0")
        self.ctx.load_cert_chain(issued.cert, issued.key)
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            try:
                with self.ctx.wrap_socket(conn, server_side=True) as tls:
                    tls.recv(1)
            except (ssl.SSLError, OSError):
                pass


def legacy_client(ca: Path, version: ssl.TLSVersion, ciphers: str) -> ssl.SSLContext:
    ctx = client_context(ca)
    ctx.minimum_version = ctx.maximum_version = version
    ctx.set_ciphers(ciphers)  # @SECLEVEL=0 lets OpenSSL 3 offer TLS 1.0/1.1 and SHA-1 suites
    return ctx


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1:DeprecationWarning")
@pytest.mark.parametrize(
    ("version", "ciphers"),
    [
        (ssl.TLSVersion.TLSv1, "ALL:@SECLEVEL=0"),
        (ssl.TLSVersion.TLSv1_1, "ALL:@SECLEVEL=0"),
        (ssl.TLSVersion.TLSv1_2, "ECDHE-ECDSA-AES128-SHA256:ECDHE-ECDSA-AES256-SHA:@SECLEVEL=0"),
    ],
    ids=["tls1.0", "tls1.1", "tls1.2-cbc-only"],
)
def test_weak_clients_refused(
    server: Server, issued: certfiles.Issued, version: ssl.TLSVersion, ciphers: str
) -> None:
    """TLS 1.0/1.1, and TLS 1.2 with only CBC (non-AEAD) suites, fail the handshake."""
    ctx = legacy_client(issued.ca, version, ciphers)
    control = Permissive(issued)
    try:
        assert handshake(control.port, ctx)[0] == {"TLSv1": "TLSv1", "TLSv1_1": "TLSv1.1"}.get(
            version.name, "TLSv1.2"
        )
    finally:
        control.sock.close()
    with pytest.raises(ssl.SSLError):
        handshake(server.port, ctx)


@pytest.mark.parametrize(
    ("version", "expected"),
    [(ssl.TLSVersion.TLSv1_2, "TLSv1.2"), (ssl.TLSVersion.TLSv1_3, "TLSv1.3")],
)
def test_modern_clients_served(
    server: Server, issued: certfiles.Issued, version: ssl.TLSVersion, expected: str
) -> None:
    """TLS 1.2 and 1.3 work; TLS 1.2 negotiates ECDHE with an AEAD cipher; no compression."""
    got, cipher, serial = handshake(server.port, client_context(issued.ca, version=version))
    assert got == expected and serial == issued.serial
    if expected == "TLSv1.2":
        assert cipher.startswith("ECDHE-") and ("GCM" in cipher or "CHACHA20" in cipher)
    with (
        socket.create_connection(("127.0.0.1", server.port)) as raw,
        client_context(issued.ca).wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        assert tls.compression() is None


def test_hardened_context_options() -> None:
    """No compression, no renegotiation, TLS 1.2 floor, and only ECDHE+AEAD suites for 1.2."""
    ctx = hardened_context()
    assert ctx.options & ssl.OP_NO_COMPRESSION and ctx.options & ssl.OP_NO_RENEGOTIATION
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2
    tls12 = [c["name"] for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.2"]
    assert tls12 and all(
        c["aead"] and c["kea"] == "kx-ecdhe"
        for c in ctx.get_ciphers()
        if c["protocol"] == "TLSv1.2"
    )


def test_initial_pair_must_load(tmp_path: Path, issued: certfiles.Issued) -> None:
    """A broken pair at start-up is a ConfigError naming the files and the reason."""
    other = certfiles.issue(tmp_path / "other", service="x", namespace="y")
    with pytest.raises(ConfigError, match="key does not match the certificate"):
        CertReloader(issued.cert, other.key)
    with pytest.raises(ConfigError, match="cannot read"):
        CertReloader(issued.cert, tmp_path / "missing.key")


def rotate(tmp: Path, issued: certfiles.Issued) -> int:
    """Re-issue the serving pair from the same CA, as ``stszone certs --force`` does."""
    return certfiles.issue(
        tmp, service="stszone", namespace="stszone-system", ips=["127.0.0.1"], force=True
    ).serial


def test_reload_keeps_old_pair_when_broken(
    tmp_path: Path, issued: certfiles.Issued, caplog: pytest.LogCaptureFixture
) -> None:
    """reload(): unchanged -> False; broken -> False, logged once, old kept; fixed -> True."""
    caplog.set_level(logging.INFO, logger="stszone.tls")
    reloader = CertReloader(issued.cert, issued.key)
    assert reloader.reload() is False
    good_cert, good_key = issued.cert.read_bytes(), issued.key.read_bytes()
    broken = {
        "mismatch": (good_cert, certs.new_ca()[1]),
        "half-written": (good_cert[: len(good_cert) // 2], good_key),
        "empty key": (good_cert, b""),
    }
    for name, (cert_pem, key_pem) in broken.items():
        caplog.clear()
        certfiles.write_atomic([(issued.cert, cert_pem, 0o644), (issued.key, key_pem, 0o600)])
        assert reloader.reload() is False, name
        assert reloader.reload() is False, name
        errors = [r for r in caplog.records if r.levelno == logging.ERROR]
        assert len(errors) == 1, name
        assert f"still serving serial {issued.serial:x}" in errors[0].getMessage()
        assert "PRIVATE KEY" not in caplog.text
        assert reloader.serial == issued.serial
    issued.key.unlink()
    assert reloader.reload() is False
    assert "No such file" in caplog.text
    serial = rotate(tmp_path, issued)
    assert reloader.reload() is True
    assert reloader.serial == serial
    assert f"serving certificate reloaded: serial {serial:x}" in caplog.text
    assert (
        reloader.not_after
        == x509.load_pem_x509_certificate(issued.cert.read_bytes()).not_valid_after_utc
    )


def test_swap_reaches_handshakes_without_sni(
    server: Server, tmp_path: Path, issued: certfiles.Issued
) -> None:
    """After a reload, new handshakes get the new certificate with and without SNI, 1.2 and 1.3."""
    new = rotate(tmp_path, issued)
    assert server.reloader.reload() is True
    for version in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
        ctx = client_context(issued.ca, version=version)
        assert handshake(server.port, ctx, host="stszone.stszone-system.svc")[2] == new  # SNI
        assert handshake(server.port, ctx)[2] == new  # IP address: no SNI sent
        blind = client_context(issued.ca, version=version)
        blind.check_hostname = False
        assert handshake(server.port, blind, host=None)[2] == new  # certainly no SNI


def test_rotation_under_load(
    server: Server, tmp_path: Path, issued: certfiles.Issued, caplog: pytest.LogCaptureFixture
) -> None:
    """Four rotations under continuous requests: each new serial is served within seconds,
    no request fails, and keep-alive connections survive on their original certificate."""
    caplog.set_level(logging.INFO, logger="stszone.tls")
    ctx = client_context(issued.ca)
    failures: list[str] = []
    seen: list[tuple[float, int]] = []  # (when, serial) of each fresh-connection request
    keepalive: list[tuple[int, int]] = []  # (id of the socket, serial) per keep-alive request
    stop = threading.Event()

    def fresh() -> None:
        while not stop.is_set():
            conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=ctx, timeout=10)
            try:
                seen.append((time.monotonic(), post(conn)))
            except Exception as err:  # recorded, the test fails on any
                failures.append(f"fresh: {err!r}")
            finally:
                conn.close()

    def kept() -> None:
        conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=ctx, timeout=10)
        while not stop.is_set():
            try:
                serial = post(conn)
                keepalive.append((id(conn.sock), serial))
            except Exception as err:
                failures.append(f"keep-alive: {err!r}")
        conn.close()

    workers = [threading.Thread(target=fresh) for _ in range(3)] + [
        threading.Thread(target=kept) for _ in range(2)
    ]
    for worker in workers:
        worker.start()
    delays: list[float] = []
    try:
        for _ in range(4):
            time.sleep(0.5)
            serial = rotate(tmp_path, issued)
            rotated = time.monotonic()
            while not any(s == serial and t > rotated for t, s in seen[-50:]):
                assert time.monotonic() - rotated < 5, f"serial {serial:x} not served after 5 s"
                time.sleep(0.02)
            delays.append(time.monotonic() - rotated)
    finally:
        stop.set()
        for worker in workers:
            worker.join(15)
    assert failures == []
    assert len(seen) > 40 and len(keepalive) > 40
    assert len({serial for _, serial in seen}) == 5  # the original and four rotations
    # Each keep-alive client used one connection throughout, on the certificate it started with.
    assert len({sock for sock, _ in keepalive}) == 2
    assert {serial for _, serial in keepalive} == {issued.serial}
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    print(
        f"rotation to served: max {max(delays):.2f}s; {len(seen)} fresh + {len(keepalive)} keep-alive requests, 0 failed"
    )


def test_broken_pair_under_load_keeps_old_serial(
    server: Server, tmp_path: Path, issued: certfiles.Issued, caplog: pytest.LogCaptureFixture
) -> None:
    """A mismatched key on disk is rejected (one error log); the old serial keeps being
    served; the next good pair is picked up."""
    caplog.set_level(logging.INFO, logger="stszone.tls")
    ctx = client_context(issued.ca)
    other = certs.new_ca()[1]
    certfiles.write_atomic([(issued.key, other, 0o600)])
    deadline = time.monotonic() + 1.5  # several polls at 0.2 s
    while time.monotonic() < deadline:
        conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=ctx, timeout=10)
        assert post(conn) == issued.serial
        conn.close()
        time.sleep(0.05)
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "does not match" in errors[0].getMessage()
    assert server.reloader.serial == issued.serial
    serial = rotate(tmp_path, issued)
    deadline = time.monotonic() + 5
    while True:
        conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=ctx, timeout=10)
        got = post(conn)
        conn.close()
        if got == serial:
            break
        assert time.monotonic() < deadline, "good pair after a broken one was not picked up"
        time.sleep(0.05)


def test_secret_volume_swap(tmp_path: Path, issued: certfiles.Issued) -> None:
    """A Secret volume update (kubelet swaps the ``..data`` symlink) is picked up by the poller."""
    mount = tmp_path / "mount"
    mount.mkdir()

    def publish(version: str) -> None:
        payload = mount / version
        payload.mkdir()
        for name in ("tls.crt", "tls.key"):
            (payload / name).write_bytes((tmp_path / name).read_bytes())
        (mount / "..tmp").symlink_to(version)
        (mount / "..tmp").replace(mount / "..data")  # rename(2) over the old link: atomic

    publish("..v1")
    for name in ("tls.crt", "tls.key"):
        (mount / name).symlink_to(f"..data/{name}")
    ctx = client_context(issued.ca)
    with Server(CertReloader(mount / "tls.crt", mount / "tls.key", interval=0.2)) as server:
        assert handshake(server.port, ctx)[2] == issued.serial
        serial = rotate(tmp_path, issued)
        publish("..v2")
        deadline = time.monotonic() + 5
        while handshake(server.port, ctx)[2] != serial:
            assert time.monotonic() < deadline, "swapped Secret volume not picked up"
            time.sleep(0.05)
