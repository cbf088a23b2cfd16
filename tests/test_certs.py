"""Certificates: the extensions the API server needs, CA reuse, file modes, refusals, dev certs."""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import threading
from pathlib import Path
from typing import TypeVar

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError

from webhook.errors import ConfigError
from webhook.install import certfiles, certs

NAMES = certs.service_dns_names("stszone", "stszone-system")


def load(pem: bytes) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem)


T = TypeVar("T", bound=x509.ExtensionType)


def ext(cert: x509.Certificate, kind: type[T]) -> x509.Extension[T]:
    return cert.extensions.get_extension_for_class(kind)


def verify(leaf_pem: bytes, ca_pem: bytes, name: x509.DNSName | x509.IPAddress) -> None:
    """Path validation as a TLS client does it (webpki rules): raises VerificationError."""
    verifier = PolicyBuilder().store(Store([load(ca_pem)])).build_server_verifier(name)
    verifier.verify(load(leaf_pem), [])


@pytest.fixture(scope="module")
def ca() -> tuple[bytes, bytes]:
    return certs.new_ca()


def test_service_dns_names() -> None:
    """The four names the API server may dial for a Service."""
    assert certs.service_dns_names("wh", "ns") == [
        "wh",
        "wh.ns",
        "wh.ns.svc",
        "wh.ns.svc.cluster.local",
    ]


def test_ca_extensions(ca: tuple[bytes, bytes]) -> None:
    """The CA may sign certificates (and only leaves), and is self-signed."""
    cert = load(ca[0])
    basic = ext(cert, x509.BasicConstraints)
    assert basic.critical and basic.value.ca and basic.value.path_length == 0
    usage = ext(cert, x509.KeyUsage)
    assert usage.critical and usage.value.key_cert_sign and usage.value.crl_sign
    ski = ext(cert, x509.SubjectKeyIdentifier).value
    assert ext(cert, x509.AuthorityKeyIdentifier).value.key_identifier == ski.digest
    cert.verify_directly_issued_by(cert)
    lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
    assert dt.timedelta(days=3650) <= lifetime <= dt.timedelta(days=3650, minutes=10)


def test_serving_extensions(ca: tuple[bytes, bytes]) -> None:
    """SAN holds exactly the names, serverAuth only, not a CA, AKI points at the CA's SKI."""
    pem, _ = certs.new_serving(
        ca_cert_pem=ca[0], ca_key_pem=ca[1], dns_names=NAMES, ips=["127.0.0.1", "::1"]
    )
    cert = load(pem)
    san = ext(cert, x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == NAMES
    assert san.get_values_for_type(x509.IPAddress) == [
        ipaddress.ip_address("127.0.0.1"),
        ipaddress.ip_address("::1"),
    ]
    assert list(ext(cert, x509.ExtendedKeyUsage).value) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert ext(cert, x509.BasicConstraints).value.ca is False
    usage = ext(cert, x509.KeyUsage)
    assert usage.critical and usage.value.digital_signature and not usage.value.key_cert_sign
    ca_ski = ext(load(ca[0]), x509.SubjectKeyIdentifier).value.digest
    assert ext(cert, x509.AuthorityKeyIdentifier).value.key_identifier == ca_ski
    assert ext(cert, x509.SubjectKeyIdentifier).value.digest != ca_ski
    assert cert.issuer == load(ca[0]).subject
    lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
    assert dt.timedelta(days=365) <= lifetime <= dt.timedelta(days=365, minutes=10)


def test_serials_are_random_and_large(ca: tuple[bytes, bytes]) -> None:
    """Two certificates never share a serial; serials carry >= 64 random bits (CA/B rules)."""
    serials = {
        load(
            certs.new_serving(ca_cert_pem=ca[0], ca_key_pem=ca[1], dns_names=["x"])[0]
        ).serial_number
        for _ in range(5)
    }
    assert len(serials) == 5
    assert all(serial.bit_length() > 64 for serial in serials)


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        (x509.DNSName("stszone.stszone-system.svc"), True),
        (x509.DNSName("stszone.stszone-system.svc.cluster.local"), True),
        (x509.IPAddress(ipaddress.ip_address("127.0.0.1")), True),
        (x509.DNSName("other.stszone-system.svc"), False),
        (x509.IPAddress(ipaddress.ip_address("10.0.0.1")), False),
    ],
)
def test_chain_verifies_for_its_names_only(
    ca: tuple[bytes, bytes], name: x509.DNSName | x509.IPAddress, ok: bool
) -> None:
    """A client that trusts ca.crt accepts the serving cert for its SANs and nothing else."""
    pem, _ = certs.new_serving(
        ca_cert_pem=ca[0], ca_key_pem=ca[1], dns_names=NAMES, ips=["127.0.0.1"]
    )
    if ok:
        verify(pem, ca[0], name)
    else:
        with pytest.raises(VerificationError):
            verify(pem, ca[0], name)


@pytest.mark.parametrize(
    ("key_type", "kind", "size"),
    [
        ("ecdsa-p256", ec.EllipticCurvePublicKey, 256),
        ("ecdsa-p384", ec.EllipticCurvePublicKey, 384),
        ("rsa-2048", rsa.RSAPublicKey, 2048),
        ("rsa-3072", rsa.RSAPublicKey, 3072),
        ("rsa-4096", rsa.RSAPublicKey, 4096),
    ],
)
def test_every_key_type(key_type: str, kind: type, size: int) -> None:
    """Each --key-type gives that key, for the CA and the leaf, and the chain verifies."""
    assert key_type in certs.KEY_TYPES
    ca_pem, ca_key = certs.new_ca(key_type=key_type)
    pem, key_pem = certs.new_serving(
        ca_cert_pem=ca_pem, ca_key_pem=ca_key, dns_names=NAMES, key_type=key_type
    )
    for cert in (load(ca_pem), load(pem)):
        public = cert.public_key()
        assert isinstance(public, kind)
        assert isinstance(public, ec.EllipticCurvePublicKey | rsa.RSAPublicKey)
        assert public.key_size == size
    assert b"BEGIN PRIVATE KEY" in key_pem  # PKCS#8, unencrypted: what Go and OpenSSL load
    verify(pem, ca_pem, x509.DNSName("stszone.stszone-system.svc"))
    rsa_leaf = key_type.startswith("rsa")
    assert ext(load(pem), x509.KeyUsage).value.key_encipherment is rsa_leaf


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"key_type": "dsa-1024"}, "unknown key type"),
        ({"days": 0}, "at least 1 day"),
        ({"ips": ["not-an-ip"]}, "not an IP address"),
        ({"dns_names": [], "ips": []}, "at least one DNS name"),
    ],
)
def test_bad_arguments(ca: tuple[bytes, bytes], kwargs: dict[str, object], message: str) -> None:
    """Unusable arguments are a ConfigError saying which, never a traceback."""
    args: dict[str, object] = {
        "ca_cert_pem": ca[0],
        "ca_key_pem": ca[1],
        "dns_names": ["x"],
        **kwargs,
    }
    with pytest.raises(ConfigError, match=message):
        certs.new_serving(**args)  # type: ignore[arg-type]


def test_leaf_never_outlives_its_ca() -> None:
    """A 365-day leaf from a CA with 10 days left expires with the CA."""
    ca_pem, ca_key = certs.new_ca(days=10)
    pem, _ = certs.new_serving(ca_cert_pem=ca_pem, ca_key_pem=ca_key, dns_names=["x"], days=365)
    assert load(pem).not_valid_after_utc == load(ca_pem).not_valid_after_utc


def test_issue_writes_four_files_with_modes(tmp_path: Path) -> None:
    """Keys 0600 and certificates 0644 even under a permissive umask; no temp file left."""
    old = os.umask(0)
    try:
        issued = certfiles.issue(
            tmp_path / "out", service="wh", namespace="ns", dns=["wh.example.com"], ips=["10.1.2.3"]
        )
    finally:
        os.umask(old)
    modes = {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / "out").iterdir()}
    assert modes == {"ca.crt": 0o644, "ca.key": 0o600, "tls.crt": 0o644, "tls.key": 0o600}
    assert issued.ca_created
    leaf = load(issued.cert.read_bytes())
    assert issued.serial == leaf.serial_number
    san = ext(leaf, x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == [
        *certs.service_dns_names("wh", "ns"),
        "wh.example.com",
    ]
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("10.1.2.3")]
    verify(issued.cert.read_bytes(), issued.ca.read_bytes(), x509.DNSName("wh.ns.svc"))


def test_issue_refuses_to_overwrite(tmp_path: Path) -> None:
    """Without force an existing serving pair is kept and the error says what to do."""
    certfiles.issue(tmp_path, service="wh", namespace="ns")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(ConfigError, match=r"tls\.crt and .*tls\.key already exist; pass --force"):
        certfiles.issue(tmp_path, service="wh", namespace="ns")
    (tmp_path / "tls.crt").unlink()
    with pytest.raises(ConfigError, match=r"tls\.key already exist"):
        certfiles.issue(tmp_path, service="wh", namespace="ns")
    assert (tmp_path / "tls.key").read_bytes() == before["tls.key"]


def test_force_reissues_from_the_same_ca(tmp_path: Path) -> None:
    """--force replaces only the serving pair; the new leaf verifies against the old ca.crt."""
    first = certfiles.issue(tmp_path, service="wh", namespace="ns")
    ca_before = (tmp_path / "ca.crt").read_bytes(), (tmp_path / "ca.key").read_bytes()
    leaf_before = (tmp_path / "tls.crt").read_bytes(), (tmp_path / "tls.key").read_bytes()
    second = certfiles.issue(
        tmp_path, service="wh", namespace="ns", force=True, key_type="rsa-2048"
    )
    assert not second.ca_created
    assert ((tmp_path / "ca.crt").read_bytes(), (tmp_path / "ca.key").read_bytes()) == ca_before
    assert (tmp_path / "tls.crt").read_bytes() != leaf_before[0]
    assert (tmp_path / "tls.key").read_bytes() != leaf_before[1]
    assert second.serial != first.serial
    verify(
        (tmp_path / "tls.crt").read_bytes(), ca_before[0], x509.DNSName("wh.ns.svc.cluster.local")
    )


def test_bad_ip_writes_nothing(tmp_path: Path) -> None:
    """A typo in --ip is refused before a CA is created."""
    with pytest.raises(ConfigError, match="not an IP address"):
        certfiles.issue(tmp_path / "out", service="wh", namespace="ns", ips=["10.0.0.300"])
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("drop-ca-key", "found .*ca.crt but not .*ca.key"),
        ("drop-ca-cert", "found .*ca.key but not .*ca.crt"),
        ("swap-ca-key", "is not the key of"),
        ("leaf-as-ca", "is not a CA certificate"),
        ("garbage", "cannot use the CA"),
    ],
)
def test_unusable_ca_is_refused(tmp_path: Path, damage: str, message: str) -> None:
    """A CA pair that cannot sign is an error, never silently replaced (clients trust it)."""
    certfiles.issue(tmp_path, service="wh", namespace="ns")
    ca_crt, ca_key = tmp_path / "ca.crt", tmp_path / "ca.key"
    if damage == "drop-ca-key":
        ca_key.unlink()
    elif damage == "drop-ca-cert":
        ca_crt.unlink()
    elif damage == "swap-ca-key":
        ca_key.write_bytes(certs.new_ca()[1])
    elif damage == "leaf-as-ca":
        ca_crt.write_bytes((tmp_path / "tls.crt").read_bytes())
        ca_key.write_bytes((tmp_path / "tls.key").read_bytes())
    else:
        ca_crt.write_bytes(b"-----BEGIN CERTIFICATE-----\nnope\n")
    with pytest.raises(ConfigError, match=message):
        certfiles.issue(tmp_path, service="wh", namespace="ns", force=True)


def test_readers_never_see_half_a_file(tmp_path: Path) -> None:
    """While files are rewritten over and over, a reader only ever sees complete contents."""
    target = tmp_path / "tls.crt"
    versions = [bytes([65 + i]) * 1_000_000 for i in range(4)]
    certfiles.write_atomic([(target, versions[0], 0o644)])
    torn: list[int] = []
    done = threading.Event()

    def reader() -> None:
        while not done.is_set():
            data = target.read_bytes()
            if data not in versions:
                torn.append(len(data))

    thread = threading.Thread(target=reader)
    thread.start()
    for i in range(40):
        certfiles.write_atomic([(target, versions[i % 4], 0o644)])
    done.set()
    thread.join()
    assert torn == []
    assert [p.name for p in tmp_path.iterdir()] == ["tls.crt"]


def test_dev_certs_created_then_reused(tmp_path: Path) -> None:
    """First call creates a localhost pair; the second reuses the same files untouched."""
    first = certfiles.ensure_dev_certs(tmp_path / "certs")
    assert first.created
    assert (first.ca, first.cert, first.key) == tuple(
        tmp_path / "certs" / n for n in ("ca.crt", "tls.crt", "tls.key")
    )
    pem = first.cert.read_bytes()
    san = ext(load(pem), x509.SubjectAlternativeName).value
    assert {"localhost", *NAMES} <= set(san.get_values_for_type(x509.DNSName))
    assert set(san.get_values_for_type(x509.IPAddress)) == {
        ipaddress.ip_address("127.0.0.1"),
        ipaddress.ip_address("::1"),
    }
    assert first.key.stat().st_mode & 0o777 == 0o600
    verify(pem, first.ca.read_bytes(), x509.IPAddress(ipaddress.ip_address("::1")))
    second = certfiles.ensure_dev_certs(tmp_path / "certs")
    assert not second.created
    assert second.cert.read_bytes() == pem


@pytest.mark.parametrize("damage", ["expiring", "other-key", "other-ca", "missing-key"])
def test_dev_certs_replaced_when_unusable(tmp_path: Path, damage: str) -> None:
    """A serving pair that expires within a day, mismatches or has another issuer is re-issued."""
    dev = certfiles.ensure_dev_certs(tmp_path)
    ca_pem, ca_key = dev.ca.read_bytes(), (tmp_path / "ca.key").read_bytes()
    if damage == "expiring":
        pem, key = certs.new_serving(
            ca_cert_pem=ca_pem, ca_key_pem=ca_key, dns_names=["localhost"], days=1
        )
        certfiles.write_atomic([(dev.cert, pem, 0o644), (dev.key, key, 0o600)])
    elif damage == "other-key":
        dev.key.write_bytes(certs.new_ca()[1])
    elif damage == "other-ca":
        other = certs.new_ca()
        pem, key = certs.new_serving(
            ca_cert_pem=other[0], ca_key_pem=other[1], dns_names=["localhost"]
        )
        certfiles.write_atomic([(dev.cert, pem, 0o644), (dev.key, key, 0o600)])
    else:
        dev.key.unlink()
    again = certfiles.ensure_dev_certs(tmp_path)
    assert again.created
    assert dev.ca.read_bytes() == ca_pem  # the CA clients trust is kept
    verify(again.cert.read_bytes(), ca_pem, x509.DNSName("localhost"))
    assert load(again.cert.read_bytes()).not_valid_after_utc > dt.datetime.now(
        dt.UTC
    ) + dt.timedelta(days=300)


def test_dev_certs_replace_a_broken_ca(tmp_path: Path) -> None:
    """In the development directory only, an unusable CA is replaced rather than refused."""
    dev = certfiles.ensure_dev_certs(tmp_path)
    (tmp_path / "ca.key").unlink()
    dev.key.unlink()
    again = certfiles.ensure_dev_certs(tmp_path)
    assert again.created
    verify(again.cert.read_bytes(), again.ca.read_bytes(), x509.DNSName("localhost"))


def test_unwritable_directory_is_a_config_error(tmp_path: Path) -> None:
    """A directory that cannot be created (read-only filesystem, a file in the way) is a
    ConfigError with a hint, for both ``certs`` and ``serve``'s development certificates."""
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(ConfigError, match=r"cannot write .*file/certs.*choose another --out"):
        certfiles.issue(blocker / "certs", service="wh", namespace="ns")
    with pytest.raises(ConfigError, match=r"cannot write .*--certs-dir"):
        certfiles.ensure_dev_certs(blocker / "certs")
