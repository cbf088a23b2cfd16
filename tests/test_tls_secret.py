"""Serving a pair handed over as bytes (``--manage-certs``): the placeholder before it, the
readiness it gates, the swap on an open listener, a bad pair refused; and the rotation metrics.

The real app (``tests.served``) runs over a :class:`TlsContext` started on a placeholder, with
the readiness check ``--manage-certs`` attaches; clients verify the way the API server does.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator

import pytest
from cryptography import x509

from tests.certcluster import handshake
from tests.certsim import CORRUPTIONS, corrupted
from tests.served import Served, served
from webhook.cluster.certkeeper import Outcome
from webhook.cluster.view import offline_store
from webhook.config import Settings
from webhook.errors import ConfigError
from webhook.install.certs import new_ca, new_serving
from webhook.server.app import install_metrics
from webhook.server.certmetrics import RotationCollector
from webhook.server.metrics import Metrics
from webhook.server.runtime import Runtime
from webhook.server.tls import TlsContext

HOST = "stszone.certs-ns.svc"


def _issue() -> tuple[bytes, bytes, bytes]:
    """(CA PEM, serving cert PEM, serving key PEM) for HOST."""
    ca, ca_key = new_ca()
    cert, key = new_serving(ca_cert_pem=ca, ca_key_pem=ca_key, dns_names=[HOST])
    return ca, cert, key


def _placeholder() -> TlsContext:
    cert, key = new_ca(common_name="stszone placeholder")
    return TlsContext(cert, key_pem=key, source="Secret certs-ns/stszone-tls", placeholder=True)


@pytest.fixture
async def app() -> AsyncIterator[tuple[Served, TlsContext]]:
    settings = Settings(zones=("a", "b", "c"), offline=True)
    runtime = Runtime(
        store=offline_store(settings), defaults=settings.defaults(), settings=settings
    )
    tls = _placeholder()
    runtime.checks.append(tls.ready)
    install_metrics(runtime, certificate=tls.expiry)
    async with served(runtime, tls=tls, client=ssl.create_default_context()) as running:
        yield running, tls


async def _get(app: Served, path: str, ca: bytes) -> tuple[int, str, int]:
    """(status, body) of a GET verified against ``ca`` for HOST, and the serial a new
    handshake verified that way gets."""
    context = ssl.create_default_context(cadata=ca.decode())
    async with app.session.get(app.url + path, ssl=context, server_hostname=HOST) as resp:
        status, body = resp.status, await resp.text()
    return status, body, await handshake(app.port, ca, host=HOST)


async def test_the_placeholder_answers_probes_but_is_not_ready(
    app: tuple[Served, TlsContext],
) -> None:
    """Before a pair: /healthz answers (the kubelet verifies nothing), /readyz says why not,
    no expiry gauge; a verifying client refuses the placeholder."""
    running, tls = app
    insecure = ssl.create_default_context()
    insecure.check_hostname, insecure.verify_mode = False, ssl.CERT_NONE
    async with running.session.get(running.url + "/healthz", ssl=insecure) as resp:
        assert resp.status == 200
    async with running.session.get(running.url + "/readyz", ssl=insecure) as resp:
        assert resp.status == 503
        assert "no serving certificate yet" in await resp.text()
    async with running.session.get(running.url + "/metrics", ssl=insecure) as resp:
        assert "stszone_certificate_expiry_timestamp_seconds" not in await resp.text()
    ca, _, _ = _issue()
    with pytest.raises(Exception, match=r"CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
        await _get(running, "/healthz", ca)
    assert tls.expiry() is None


async def test_an_installed_pair_reaches_new_handshakes_on_the_same_listener(
    app: tuple[Served, TlsContext],
) -> None:
    """install(bytes): ready, the gauge appears, the next pair replaces it on the same port."""
    running, tls = app
    ca, cert, key = _issue()
    assert tls.install(cert, key_pem=key) is True
    status, _, serial = await _get(running, "/readyz", ca)
    assert (status, serial) == (200, x509.load_pem_x509_certificate(cert).serial_number)
    metrics = await _get(running, "/metrics", ca)
    assert "stszone_certificate_expiry_timestamp_seconds" in metrics[1]
    assert tls.install(cert, key_pem=key) is False  # the same pair: nothing to do
    ca2, cert2, key2 = _issue()
    assert tls.install(cert2, key_pem=key2) is True
    assert (await _get(running, "/readyz", ca2))[2] == x509.load_pem_x509_certificate(
        cert2
    ).serial_number


async def test_a_bad_pair_is_refused_and_the_served_one_kept(
    app: tuple[Served, TlsContext], caplog: pytest.LogCaptureFixture
) -> None:
    """A key of another pair: logged once however often it is offered; the old pair stays."""
    running, tls = app
    ca, cert, key = _issue()
    tls.install(cert, key_pem=key)
    _, other_cert, _ = _issue()
    for _ in range(3):
        assert tls.install(other_cert, key_pem=key) is False
    assert [r.getMessage() for r in caplog.records if "not used" in r.getMessage()] == [
        f"new certificate in Secret certs-ns/stszone-tls not used, still serving serial "
        f"{tls.serial:x}: the key does not match the certificate"
    ]
    assert (await _get(running, "/readyz", ca))[0] == 200


@pytest.mark.parametrize("how", CORRUPTIONS)
def test_a_pair_whose_certificate_does_not_parse_is_refused(
    how: str, caplog: pytest.LogCaptureFixture
) -> None:
    """One corrupted byte in the certificate (each a different exception from cryptography):
    refused with a reason, the served pair kept."""
    tls = _placeholder()
    _, cert, key = _issue()
    tls.install(cert, key_pem=key)
    _, other_cert, other_key = _issue()
    assert tls.install(corrupted(other_cert, how), key_pem=other_key) is False
    assert tls.serial == x509.load_pem_x509_certificate(cert).serial_number
    lines = [r.getMessage() for r in caplog.records if "not used" in r.getMessage()]
    assert len(lines) == 1 and "a certificate that does not parse: " in lines[0], lines


def test_a_first_pair_that_does_not_load_is_a_config_error() -> None:
    """Constructed from bytes that are not a pair: a ConfigError naming the source."""
    with pytest.raises(ConfigError, match=r"cannot serve TLS with Secret x: .*no PEM certificate"):
        TlsContext(b"junk", key_pem=b"junk", source="Secret x")


def test_reject_keeps_the_placeholder_and_says_why_in_readiness() -> None:
    tls = _placeholder()
    tls.reject("holds no usable serving pair (tls.crt is not base64); fix it")
    ready, why = tls.ready()
    assert not ready
    assert why == (
        "no serving certificate yet: Secret certs-ns/stszone-tls holds no usable serving pair "
        "(tls.crt is not base64); fix it"
    )


@pytest.mark.parametrize(
    ("outcome", "leading", "expected", "absent"),
    [
        (
            Outcome(last_success=1796000000.5, failures=3),
            True,
            [
                "stszone_certificate_rotation_last_success_timestamp_seconds 1.7960000005e+09",
                "stszone_certificate_rotation_failures_total 3.0",
                "stszone_certificate_leader 1.0",
            ],
            [],
        ),
        (
            Outcome(),
            False,
            ["stszone_certificate_rotation_failures_total 0.0", "stszone_certificate_leader 0.0"],
            ["stszone_certificate_rotation_last_success_timestamp_seconds "],
        ),
    ],
)
def test_rotation_metrics(
    outcome: Outcome, leading: bool, expected: list[str], absent: list[str]
) -> None:
    """The leader's outcome as the exposition shows it; no success sample before one."""
    metrics = Metrics()
    metrics.registry.register(RotationCollector(outcome, leading=lambda: leading))
    text = metrics.exposition().decode()
    for line in expected:
        assert line in text.splitlines(), line
    for prefix in absent:
        assert not any(line.startswith(prefix) for line in text.splitlines())
