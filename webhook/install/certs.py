"""Certificates as PEM bytes: a CA, and a serving certificate it signs for the webhook Service.

The generators (:func:`new_ca`, :func:`new_serving`) are pure: bytes in, bytes out, no files and
no clock other than "now". Writing them into a directory (``stszone certs``, the development
certificates of ``stszone serve``) is :mod:`webhook.install.certfiles`.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Iterable
from typing import Final

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from webhook.errors import ConfigError
from webhook.pem import PrivateKey, private_key

#: Key types ``--key-type`` accepts; ECDSA P-256 is the default (small, fast, accepted everywhere).
KEY_TYPES: Final = ("ecdsa-p256", "ecdsa-p384", "rsa-2048", "rsa-3072", "rsa-4096")
KEY_TYPE: Final = "ecdsa-p256"
#: Validity of a serving certificate and of a new CA, in days.
SERVING_DAYS: Final = 365
CA_DAYS: Final = 3650
CA_CERT, CA_KEY, TLS_CERT, TLS_KEY = "ca.crt", "ca.key", "tls.crt", "tls.key"
#: Certificates start a little in the past, so a client whose clock lags accepts them: five
#: minutes, or a tenth of a short lifetime (a pair of 3 minutes is not mostly backdating).
_BACKDATE: Final = dt.timedelta(minutes=5)

_PEM: Final = serialization.Encoding.PEM


def _new_key(key_type: str) -> PrivateKey:
    if key_type == "ecdsa-p256":
        return ec.generate_private_key(ec.SECP256R1())
    if key_type == "ecdsa-p384":
        return ec.generate_private_key(ec.SECP384R1())
    if key_type in ("rsa-2048", "rsa-3072", "rsa-4096"):
        return rsa.generate_private_key(public_exponent=65537, key_size=int(key_type[4:]))
    raise ConfigError(f"unknown key type {key_type!r}; use one of {', '.join(KEY_TYPES)}")


def _hash_for(key: PrivateKey) -> hashes.SHA256 | hashes.SHA384:
    # P-384 pairs with SHA-384 (RFC 5480); everything else signs with SHA-256.
    if isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.key_size > 256:
        return hashes.SHA384()
    return hashes.SHA256()


def _key_pem(key: PrivateKey) -> bytes:
    # PKCS#8, unencrypted: what Go's tls.X509KeyPair and OpenSSL both load, for EC and RSA.
    return key.private_bytes(_PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def _key_usage(
    *, key_encipherment: bool = False, key_cert_sign: bool = False, crl_sign: bool = False
) -> x509.KeyUsage:
    """digitalSignature plus the given usages; the rest of KeyUsage's nine flags stay off."""
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=key_encipherment,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=key_cert_sign,
        crl_sign=crl_sign,
        encipher_only=False,
        decipher_only=False,
    )


#: The last time a certificate can name: X.509 times, and Python's dates, end with 9999.
LAST: Final = dt.datetime(9999, 12, 31, 23, 59, 59, tzinfo=dt.UTC)


def validity_days(days: int, *, what: str, now: dt.datetime | None = None) -> dt.timedelta:
    """``days`` as a validity from ``now``; ConfigError below 1 or past the year 9999."""
    if days < 1:
        raise ConfigError(f"{what} must be at least 1 day, got {days}")
    most = (LAST - (now or dt.datetime.now(dt.UTC))).days
    if days > most:
        raise ConfigError(f"{what} of {days} days ends after the year 9999; give at most {most}")
    return dt.timedelta(days=days)


def _lifetime(
    days: int, lifetime: dt.timedelta | None, *, what: str, now: dt.datetime
) -> tuple[dt.timedelta, dt.timedelta]:
    """(validity, backdating): ``lifetime`` when given (``--cert-validity 30s``), else days."""
    if lifetime is None:
        return validity_days(days, what=what, now=now), _BACKDATE
    if lifetime <= dt.timedelta(0):
        raise ConfigError(f"{what} must be above 0, got {lifetime}")
    return lifetime, min(_BACKDATE, lifetime / 10)


def new_ca(
    *,
    common_name: str = "stszone-ca",
    days: int = CA_DAYS,
    lifetime: dt.timedelta | None = None,
    key_type: str = KEY_TYPE,
    now: dt.datetime | None = None,
) -> tuple[bytes, bytes]:
    """A self-signed CA that may sign serving certificates only: (cert PEM, key PEM).

    Valid for ``lifetime`` when given, else ``days``; from ``now`` (default: the clock).
    """
    key = _new_key(key_type)
    now = now or dt.datetime.now(dt.UTC)
    valid, backdate = _lifetime(days, lifetime, what="CA validity", now=now)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - backdate)
        .not_valid_after(now + valid)
        # path_length=0: this CA signs leaves, never intermediate CAs.
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(key_cert_sign=True, crl_sign=True), critical=True)
        .add_extension(ski, critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False
        )
        .sign(key, _hash_for(key))
    )
    return cert.public_bytes(_PEM), _key_pem(key)


def _dns_name(name: str) -> x509.DNSName:
    """A DNS subjectAltName; ConfigError for a Unicode name (certificates hold A-labels)."""
    try:
        return x509.DNSName(name)
    except ValueError:
        try:
            hint = f"; give its A-label, --dns {name.encode('idna').decode('ascii')}"
        except UnicodeError:
            hint = ""
        raise ConfigError(f"{name!r} is not an ASCII DNS name{hint}") from None


def subject_alt_names(dns_names: Iterable[str], ips: Iterable[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = [_dns_name(name) for name in dict.fromkeys(dns_names)]
    for text in dict.fromkeys(ips):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(text)))
        except ValueError:
            raise ConfigError(f"{text!r} is not an IP address; give --ip 10.0.0.1 or ::1") from None
    if not names:
        raise ConfigError("a serving certificate needs at least one DNS name or IP address")
    return names


def new_serving(
    *,
    ca_cert_pem: bytes,
    ca_key_pem: bytes,
    dns_names: Iterable[str],
    ips: Iterable[str] = (),
    days: int = SERVING_DAYS,
    lifetime: dt.timedelta | None = None,
    key_type: str = KEY_TYPE,
    now: dt.datetime | None = None,
) -> tuple[bytes, bytes]:
    """A serving certificate signed by the CA, for the given names: (cert PEM, key PEM).

    The API server (Go) checks the subjectAltName only, so every name goes there; the first
    one is also the common name, for humans reading ``openssl x509 -text``. Valid for
    ``lifetime`` when given, else ``days``, from ``now`` (default: the clock).
    """
    ca_cert = x509.load_pem_x509_certificate(ca_cert_pem)
    ca_key = private_key(ca_key_pem, "CA key")
    names = subject_alt_names(dns_names, ips)
    key = _new_key(key_type)
    now = now or dt.datetime.now(dt.UTC)
    valid, backdate = _lifetime(days, lifetime, what="serving certificate validity", now=now)
    # A leaf that outlives its CA stops verifying when the CA expires: do not promise more.
    not_after = min(now + valid, ca_cert.not_valid_after_utc)
    try:
        aki = x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(
            ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
        )
    except x509.ExtensionNotFound:  # a CA brought by the user may lack a SKI
        aki = x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(
            x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, str(names[0].value)[:64])])
        )
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - backdate)
        .not_valid_after(not_after)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        # Only RSA keys can encipher; harmless with ECDHE, expected by older clients.
        .add_extension(
            _key_usage(key_encipherment=isinstance(key, rsa.RSAPrivateKey)), critical=True
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(aki, critical=False)
        .sign(ca_key, _hash_for(ca_key))
    )
    return cert.public_bytes(_PEM), _key_pem(key)


def service_dns_names(service: str, namespace: str) -> list[str]:
    """The names the API server may dial for a Service: short, namespaced, svc, and full."""
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]
