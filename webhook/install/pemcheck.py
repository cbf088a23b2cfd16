"""Check a CA bundle and a serving pair before they are handed to the API server.

With ``failurePolicy: Fail`` a serving certificate the API server rejects (another CA, a key
from an older pair, a name for another namespace, expired) refuses every pod create in every
opted-in namespace, so ``stszone manifests`` says so before anything is applied.
"""

from __future__ import annotations

import datetime as dt
from typing import Final

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization

from webhook.errors import ConfigError

#: Warn when the serving certificate has less than this left.
RENEW_WARNING: Final = dt.timedelta(days=30)


def _certificates(pem: bytes, what: str) -> list[x509.Certificate]:
    try:
        return x509.load_pem_x509_certificates(pem)
    except ValueError:
        raise ConfigError(f"the {what} holds no PEM certificate") from None


def check_ca_bundle(pem: bytes) -> None:
    """Raise ConfigError unless ``pem`` holds at least one certificate (the caBundle)."""
    _certificates(pem, "CA file")


def _issued_by(child: x509.Certificate, parent: x509.Certificate) -> bool:
    try:
        child.verify_directly_issued_by(parent)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _chains_to(
    leaf: x509.Certificate, *, intermediates: list[x509.Certificate], roots: list[x509.Certificate]
) -> bool:
    """True when ``leaf`` reaches one of ``roots``, through ``intermediates`` if need be."""
    current = leaf
    for _ in range(len(intermediates) + 1):
        if any(_issued_by(current, root) for root in roots):
            return True
        parent = next((cert for cert in intermediates if _issued_by(current, cert)), None)
        if parent is None:
            return False
        current = parent
    return False


def _dns_names(cert: x509.Certificate) -> list[str]:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return []
    return san.value.get_values_for_type(x509.DNSName)


def _matches(pattern: str, host: str) -> bool:
    # A wildcard stands for exactly one leftmost label (RFC 6125), as Go's TLS client checks.
    if pattern.startswith("*."):
        return host.partition(".")[2] == pattern[2:] and "." in host
    return pattern.lower() == host.lower()


def check_serving_pair(
    *, ca_pem: bytes, cert_pem: bytes, key_pem: bytes, host: str, now: dt.datetime | None = None
) -> list[str]:
    """Raise ConfigError when the API server would refuse the pair; return warnings otherwise."""
    roots = _certificates(ca_pem, "CA file")
    chain = _certificates(cert_pem, "serving certificate file")
    leaf = chain[0]
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError):
        raise ConfigError("the serving key is not an unencrypted PEM private key") from None
    der = serialization.Encoding.DER
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    if key.public_key().public_bytes(der, spki) != leaf.public_key().public_bytes(der, spki):
        raise ConfigError("the serving key does not belong to the serving certificate")
    if not _chains_to(leaf, intermediates=chain[1:], roots=roots):
        raise ConfigError(
            "the serving certificate is not signed by the CA given with --ca, so the API server "
            "would refuse it; issue both with `stszone certs --out DIR`"
        )
    names = _dns_names(leaf)
    if not any(_matches(name, host) for name in names):
        raise ConfigError(
            f"the serving certificate names {', '.join(names) or 'no DNS name'}, but the API "
            f"server dials {host}; re-issue it for this namespace with "
            "`stszone certs --namespace NS --force`"
        )
    now = now or dt.datetime.now(dt.UTC)
    if leaf.not_valid_after_utc <= now:
        raise ConfigError(
            f"the serving certificate expired on {leaf.not_valid_after_utc:%Y-%m-%d}; "
            "re-issue it with `stszone certs --force`"
        )
    warnings = []
    if leaf.not_valid_before_utc > now:
        warnings.append(f"the serving certificate is valid only from {leaf.not_valid_before_utc}")
    if leaf.not_valid_after_utc - now < RENEW_WARNING:
        warnings.append(
            f"the serving certificate expires on {leaf.not_valid_after_utc:%Y-%m-%d}; "
            "re-issue it soon with `stszone certs --force`"
        )
    return warnings
