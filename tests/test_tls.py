"""TLS: protocol and cipher floor, certificate loading, and hot reload under continuous load.

The real app (``tests.served``: ``make_app`` on ``Server`` over :class:`CertReloader`, its
poller attached as ``stszone serve`` does) runs on 127.0.0.1 in a thread with its own event
loop, so the clients here are plain blocking ``ssl`` and ``http.client`` connections that can
read the certificate the server really presented. Nothing is timed: the tests wait (under a
hang guard) for what must happen, and count the poller's looks rather than seconds.
"""

from __future__ import annotations

import functools
import http.client
import json
import logging
import operator
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from tests.hang import HANG_GUARD, until
from tests.served import InThread
from webhook.cluster.view import offline_store
from webhook.config import Settings
from webhook.errors import ConfigError
from webhook.install import certfiles, certs
from webhook.server.runtime import Runtime
from webhook.server.tls import CertReloader, hardened_context

FIXTURE = Path(__file__).parent / "fixtures" / "admission" / "003-Pod-CREATE.json"
BODY = FIXTURE.read_bytes()
UID = json.loads(BODY)["request"]["uid"]


def serving(reloader: CertReloader, *, ca: Path) -> InThread:
    """The offline app served over ``reloader``, its poller attached as ``stszone serve`` does."""
    settings = Settings(zones=("a", "b", "c"), offline=True)
    runtime = Runtime(
        store=offline_store(settings), defaults=settings.defaults(), settings=settings
    )
    runtime.attach(reloader.run)
    return InThread(runtime, tls=reloader, client=client_context(ca))


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
def server(issued: certfiles.Issued) -> Iterator[InThread]:
    with serving(CertReloader(issued.cert, issued.key, interval=0.2), ca=issued.ca) as running:
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
    server: InThread, issued: certfiles.Issued, version: ssl.TLSVersion, ciphers: str
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
    server: InThread, issued: certfiles.Issued, version: ssl.TLSVersion, expected: str
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
    server: InThread, tmp_path: Path, issued: certfiles.Issued
) -> None:
    """After a reload, new handshakes get the new certificate with and without SNI, 1.2 and 1.3."""
    new = rotate(tmp_path, issued)
    server.tls.reload()  # False only if the poller, running too, got there first
    assert server.tls.serial == new
    for version in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
        ctx = client_context(issued.ca, version=version)
        assert handshake(server.port, ctx, host="stszone.stszone-system.svc")[2] == new  # SNI
        assert handshake(server.port, ctx)[2] == new  # IP address: no SNI sent
        blind = client_context(issued.ca, version=version)
        blind.check_hostname = False
        assert handshake(server.port, blind, host=None)[2] == new  # certainly no SNI


def grown(*logs: list[Any], by: int) -> Callable[[], bool]:
    """A check that each of ``logs`` has ``by`` more entries than it has now."""
    targets = [len(log) + by for log in logs]
    return lambda: all(len(log) >= target for log, target in zip(logs, targets, strict=True))


class Polls:
    """Counts the poller's looks at the files: its calls of ``reload()``, each passed on.

    The poller's ticks, not seconds, say how long a broken pair has been on disk.
    """

    def __init__(self, reloader: CertReloader) -> None:
        self.count = 0
        real = reloader.reload

        def counted() -> bool:
            self.count += 1
            return real()

        reloader.reload = counted  # type: ignore[method-assign]


#: Requests of each kind made on each certificate before the next rotation.
PER_CERTIFICATE = 10


def test_rotation_under_load(
    server: InThread, tmp_path: Path, issued: certfiles.Issued, caplog: pytest.LogCaptureFixture
) -> None:
    """Four rotations under continuous requests: each new serial is served, no request fails,
    and keep-alive connections survive on their original certificate."""
    caplog.set_level(logging.INFO, logger="stszone.tls")
    ctx = client_context(issued.ca)
    failures: list[str] = []
    seen: list[int] = []  # serial of each fresh-connection request
    keepalive: list[tuple[int, int]] = []  # (id of the socket, serial) per keep-alive request
    stop = threading.Event()

    def fresh() -> None:
        while not stop.is_set():
            conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=ctx, timeout=10)
            try:
                seen.append(post(conn))
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
    try:
        for _ in range(4):
            until(grown(seen, keepalive, by=PER_CERTIFICATE), what="requests stopped")
            serial = rotate(tmp_path, issued)
            until(functools.partial(operator.contains, seen, serial), what=f"{serial:x} unseen")
    finally:
        stop.set()
        for worker in workers:
            worker.join(HANG_GUARD)
    assert failures == []
    assert len(set(seen)) == 5  # the original and four rotations
    # Each keep-alive client used one connection throughout, on the certificate it started with.
    assert len({sock for sock, _ in keepalive}) == 2
    assert {serial for _, serial in keepalive} == {issued.serial}
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    print(f"{len(seen)} fresh + {len(keepalive)} keep-alive requests over 4 rotations, 0 failed")


def test_broken_pair_under_load_keeps_old_serial(
    server: InThread, tmp_path: Path, issued: certfiles.Issued, caplog: pytest.LogCaptureFixture
) -> None:
    """A mismatched key on disk is rejected (one error log, however often the poller looks);
    the old serial keeps being served; the next good pair is picked up."""
    caplog.set_level(logging.INFO, logger="stszone.tls")
    ctx = client_context(issued.ca)
    polls = Polls(server.tls)

    def errors() -> list[logging.LogRecord]:
        return [r for r in caplog.records if r.levelno == logging.ERROR]

    def serve_old_serial() -> bool:
        conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=ctx, timeout=10)
        assert post(conn) == issued.serial
        conn.close()
        return True

    certfiles.write_atomic([(issued.key, certs.new_ca()[1], 0o600)])
    until(lambda: serve_old_serial() and bool(errors()), what="the broken pair was not seen")
    looked = polls.count
    until(lambda: serve_old_serial() and polls.count >= looked + 3, what="the poller stopped")
    assert len(errors()) == 1 and "does not match" in errors()[0].getMessage()
    assert server.tls.serial == issued.serial
    serial = rotate(tmp_path, issued)

    def served_new_serial() -> bool:
        conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=ctx, timeout=10)
        got = post(conn)
        conn.close()
        return got == serial

    until(served_new_serial, what="good pair after a broken one was not picked up")


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
    reloader = CertReloader(mount / "tls.crt", mount / "tls.key", interval=0.2)
    with serving(reloader, ca=issued.ca) as server:
        assert handshake(server.port, ctx)[2] == issued.serial
        serial = rotate(tmp_path, issued)
        publish("..v2")
        until(
            lambda: handshake(server.port, ctx)[2] == serial,
            what="swapped Secret volume not picked up",
        )
