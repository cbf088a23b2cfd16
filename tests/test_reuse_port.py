"""``--reuse-port``: several stszone processes listening on one address (SO_REUSEPORT).

On a cluster without kube-proxy (the lab), two replicas stand in for one Service address by
binding both to it; the kernel spreads new connections over the listeners, and a listener that
closes (SIGTERM, after the shutdown delay) drops out, as an endpoint that turns unready does.
Which server answered a connection is told by the certificate it presented.
"""

from __future__ import annotations

import asyncio
import http.client
import signal
import socket
import ssl
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography import x509

from tests.hang import HANG_GUARD, until
from tests.kubeconfig import write_kubeconfig
from tests.process import clean_environ, free_port, listening, start_serve
from tests.served import served
from webhook.config import Settings
from webhook.install.certfiles import DevCerts, ensure_dev_certs
from webhook.model.store import Store
from webhook.server.runtime import Runtime
from webhook.server.tls import CertReloader

#: Fresh connections tried before concluding that one of the listeners never gets any.
TRIES = 200


def serial_of(cert: Path) -> int:
    return x509.load_pem_x509_certificate(cert.read_bytes()).serial_number


def trusting(*cas: Path) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(cas[0]))
    for ca in cas[1:]:
        ctx.load_verify_locations(cafile=str(ca))
    return ctx


def answered_by(port: int, ctx: ssl.SSLContext) -> int | None:
    """A fresh connection's GET /healthz: the serial of the certificate of the server that
    answered it 200 (None when the connection failed, as one racing a closing listener may)."""
    try:
        with (
            socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
            ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
        ):
            tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            answer = b""
            while chunk := tls.recv(4096):
                answer += chunk
            if not answer.startswith(b"HTTP/1.1 200"):
                return None
            der = tls.getpeercert(binary_form=True)
    except (OSError, ssl.SSLError):
        return None
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def both_answer(port: int, ctx: ssl.SSLContext, serials: set[int]) -> set[int]:
    """The serials seen over fresh connections, once every one of ``serials`` answered."""
    seen: set[int] = set()
    for _ in range(TRIES):
        if (serial := answered_by(port, ctx)) is not None:
            seen.add(serial)
        if seen >= serials:
            break
    return seen


def only(port: int, ctx: ssl.SSLContext, serial: int, *, times: int = 30) -> Callable[[], bool]:
    return lambda: all(answered_by(port, ctx) == serial for _ in range(times))


async def test_two_apps_share_a_port_and_one_stopping_leaves_the_other(
    tmp_path: Path, dev_certs: DevCerts
) -> None:
    """In-process: both apps answer on one port; once one stops, the other answers all (the
    apps serve on this test's event loop, the blocking client runs in a thread beside them)."""
    other = ensure_dev_certs(tmp_path / "other")
    ctx = trusting(dev_certs.ca, other.ca)
    port = free_port()
    settings = Settings(host="127.0.0.1", port=port, reuse_port=True)

    def runtime() -> Runtime:
        return Runtime(store=Store(zones=("a",)), defaults=settings.defaults(), settings=settings)

    first, second = serial_of(dev_certs.cert), serial_of(other.cert)
    tls = CertReloader(dev_certs.cert, dev_certs.key)
    async with served(runtime(), tls=tls, client=ctx, port=port):
        async with served(
            runtime(), tls=CertReloader(other.cert, other.key), client=ctx, port=port
        ):
            seen = await asyncio.to_thread(both_answer, port, ctx, {first, second})
            assert seen == {first, second}
        assert await asyncio.to_thread(only(port, ctx, first))


async def test_without_reuse_port_a_second_listener_is_refused(dev_certs: DevCerts) -> None:
    """The default: one listener per address; a second one fails to bind."""
    port = free_port()
    settings = Settings(host="127.0.0.1", port=port)
    tls = CertReloader(dev_certs.cert, dev_certs.key)
    ctx = trusting(dev_certs.ca)

    def runtime() -> Runtime:
        return Runtime(store=Store(), defaults=settings.defaults(), settings=settings)

    async with served(runtime(), tls=tls, client=ctx, port=port):
        with pytest.raises(OSError, match="in use"):
            async with served(runtime(), tls=tls, client=ctx, port=port):
                pass


def test_two_processes_on_one_port_and_sigterm_drops_one(
    tmp_path: Path, stopper: list[subprocess.Popen[bytes]]
) -> None:
    """Two ``stszone serve --reuse-port`` on one port both answer; after SIGTERM, once the
    first one's listener closes, every new connection goes to the second, which stays up."""
    port = free_port()
    args = ("--offline", "--zones", "a,b,c", "--reuse-port")
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    first = start_serve(tmp_path / "a", *args, port=port)
    stopper.append(first.proc)
    second = start_serve(tmp_path / "b", *args, port=port)
    stopper.append(second.proc)
    ctx = trusting(tmp_path / "a" / "certs" / "ca.crt", tmp_path / "b" / "certs" / "ca.crt")
    serials = {name: serial_of(tmp_path / name / "certs" / "tls.crt") for name in ("a", "b")}
    assert both_answer(port, ctx, set(serials.values())) == set(serials.values())

    first.terminate()
    until(only(port, ctx, serials["b"]), what="new connections kept reaching the stopped server")
    assert first.proc.wait(timeout=HANG_GUARD) == 0, first.log.read_text()
    assert answered_by(port, ctx) == serials["b"]
    second.stop(grace=HANG_GUARD)
    assert second.proc.returncode == 0, second.log.read_text()


def _readyz(port: int, ca: Path) -> tuple[int, str]:
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=trusting(ca), timeout=5)
    try:
        conn.request("GET", "/readyz")
        response = conn.getresponse()
        return response.status, response.read().decode()
    finally:
        conn.close()


@pytest.mark.parametrize("reuse_port", [True, False])
def test_a_shared_listener_opens_only_once_ready(
    tmp_path: Path, stopper: list[subprocess.Popen[bytes]], reuse_port: bool
) -> None:
    """A live view that cannot list (its API server refuses connections) is never Ready. On a
    shared address (``--reuse-port``) its listener stays closed, so the kernel sends every
    connection to the listeners of Ready processes, as a Service routes only to ready
    endpoints; without it the port opens at once (probes and the Service's readiness gate).

    Other tests on the machine may take any port this test does not hold, so what listens is
    read from the process's own sockets (:func:`~tests.process.listening`), not from whether
    a connection to some port is accepted, and the server listens on a port the kernel picks.
    The API server's address is a socket bound and never listening: connections to it are
    refused, and no other process can take it.
    """
    with socket.socket() as api:
        api.bind(("127.0.0.1", 0))
        unreachable = write_kubeconfig(
            tmp_path / "kubeconfig", server=f"https://127.0.0.1:{api.getsockname()[1]}", token="t"
        )
        cmd = [
            sys.executable, "-m", "webhook", "serve", "--kubeconfig", str(unreachable),
            "--zones", "a,b,c", "--certs-dir", str(tmp_path / "certs"), "--port", "0",
            *(["--reuse-port"] if reuse_port else []),
        ]  # fmt: skip
        log = tmp_path / "serve.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=clean_environ())
        stopper.append(proc)

        if reuse_port:
            # Logged when the first look at readiness fails, after anything opened before it.
            until(
                lambda: "not listening until Ready" in log.read_text(),
                what="the server to say it waits for Ready",
            )
            assert listening(proc.pid) == set(), "an unready process listens on the shared address"
        else:
            until(lambda: bool(listening(proc.pid)), what="the listener to open")
            (port,) = listening(proc.pid)
            status, text = _readyz(port, tmp_path / "certs" / "ca.crt")
            assert status == 503, text
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=HANG_GUARD) == 0, log.read_text()
    if reuse_port:
        assert "stopped before Ready" in log.read_text()
