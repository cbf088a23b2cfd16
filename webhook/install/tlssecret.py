"""The TLS Secret ``stszone serve --manage-certs`` keeps: what it holds, how it reads, whose it is.

It is a ``kubernetes.io/tls`` Secret, so anything that reads TLS Secrets finds the serving pair
where it expects it; the rest is what a leader needs to renew and rotate without a memory of
its own (the next leader reads the same Secret)::

    tls.crt, tls.key            the serving pair every replica serves
    ca.crt, ca.key              the CA that signed it (and signs its renewals)
    ca-bundle.crt               every CA the webhook configurations must trust: ca.crt, a staged
                                next CA, a CA being retired
    next-ca.crt, next-ca.key    a CA staged for rotation: trusted first, signing later

stszone marks the Secrets it creates with ``app.kubernetes.io/managed-by: stszone`` and never
writes one without that label: a Secret someone else put under the same name (cert-manager's,
one made by ``stszone manifests``) is read, served when its pair is usable, and left alone.

Reading is tolerant: each part is read on its own, so a Secret with a broken serving pair still
gives its CA (the renewal reuses it) and a broken CA still gives its pair (served meanwhile).
"""

from __future__ import annotations

import base64
import binascii
import copy
import datetime as dt
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from webhook.errors import ConfigError
from webhook.pem import certificates, key_matches, private_key

JSON = dict[str, Any]

MANAGED_BY: Final = "app.kubernetes.io/managed-by"
MANAGER: Final = "stszone"
TLS_CERT, TLS_KEY = "tls.crt", "tls.key"
CA_CERT, CA_KEY = "ca.crt", "ca.key"
BUNDLE: Final = "ca-bundle.crt"
NEXT_CERT, NEXT_KEY = "next-ca.crt", "next-ca.key"


def fingerprint(cert: x509.Certificate) -> str:
    """SHA-256 of the DER certificate, hex: how CAs are told apart in bundles and logs."""
    return hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).hexdigest()


@dataclass(frozen=True, slots=True)
class Keyed:
    """A certificate with its private key, both as PEM, the certificate parsed."""

    cert_pem: bytes
    key_pem: bytes
    cert: x509.Certificate

    @property
    def serial(self) -> int:
        return self.cert.serial_number

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.cert)

    def renew_at(self) -> dt.datetime:
        """Two thirds into its life: when a certificate is replaced."""
        start, end = self.cert.not_valid_before_utc, self.cert.not_valid_after_utc
        return start + (end - start) * 2 / 3


@dataclass(frozen=True, slots=True)
class Contents:
    """What a Secret holds, part by part; a part that does not read is None, with a reason."""

    ca: Keyed | None = None
    serving: Keyed | None = None
    bundle: tuple[x509.Certificate, ...] = ()
    next_ca: Keyed | None = None
    problems: tuple[str, ...] = ()


def is_managed(secret: Mapping[str, Any]) -> bool:
    """Whether stszone created this Secret (and so may write it)."""
    labels = (secret.get("metadata") or {}).get("labels") or {}
    return isinstance(labels, Mapping) and labels.get(MANAGED_BY) == MANAGER


def _data(secret: Mapping[str, Any], *, key: str) -> bytes | None:
    value = (secret.get("data") or {}).get(key)
    if not isinstance(value, str) or not value:
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ConfigError(f"{key} is not base64") from None


def _keyed(secret: Mapping[str, Any], *, cert_key: str, key_key: str) -> Keyed | None:
    cert_pem, key_pem = _data(secret, key=cert_key), _data(secret, key=key_key)
    if cert_pem is None and key_pem is None:
        return None
    if cert_pem is None or key_pem is None:
        raise ConfigError(f"{cert_key} and {key_key} go together; one is missing")
    cert = certificates(cert_pem, cert_key)[0]
    if not key_matches(cert, private_key(key_pem, key_key)):
        raise ConfigError(f"{key_key} does not belong to {cert_key}")
    return Keyed(cert_pem, key_pem, cert)


def read(secret: Mapping[str, Any]) -> Contents:
    """The parts of a Secret; each unreadable part is None and named in ``problems``."""
    problems: list[str] = []
    parts: dict[str, Keyed | None] = {}
    for name, (cert_key, key_key) in {
        "serving": (TLS_CERT, TLS_KEY),
        "ca": (CA_CERT, CA_KEY),
        "next_ca": (NEXT_CERT, NEXT_KEY),
    }.items():
        try:
            parts[name] = _keyed(secret, cert_key=cert_key, key_key=key_key)
        except ConfigError as err:
            problems.append(err.message)
            parts[name] = None
    bundle: tuple[x509.Certificate, ...] = ()
    try:
        raw = _data(secret, key=BUNDLE)
        bundle = tuple(certificates(raw, BUNDLE)) if raw is not None else ()
    except ConfigError as err:
        problems.append(err.message)
    return Contents(
        ca=parts["ca"],
        serving=parts["serving"],
        bundle=bundle,
        next_ca=parts["next_ca"],
        problems=tuple(problems),
    )


def serving_pair(secret: Mapping[str, Any]) -> tuple[bytes, bytes]:
    """``tls.crt`` and ``tls.key`` as PEM, for serving; ConfigError saying what is missing."""
    cert_pem, key_pem = _data(secret, key=TLS_CERT), _data(secret, key=TLS_KEY)
    missing = [key for key, value in ((TLS_CERT, cert_pem), (TLS_KEY, key_pem)) if not value]
    if cert_pem is None or key_pem is None:
        raise ConfigError(f"it holds no {' and no '.join(missing)}")
    return cert_pem, key_pem


def pem_bundle(certs: Iterable[x509.Certificate]) -> bytes:
    """Certificates as one PEM bundle, in order, each once."""
    seen: dict[str, bytes] = {}
    for cert in certs:
        seen.setdefault(fingerprint(cert), cert.public_bytes(serialization.Encoding.PEM))
    return b"".join(seen.values())


def build(
    contents: Contents,
    *,
    name: str,
    namespace: str,
    resource_version: str | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> JSON:
    """The Secret holding ``contents``, marked as stszone's; an update when it has a version.

    ``metadata`` is the Secret's as read: an update (PUT) replaces the whole object, so what
    others put there (labels, annotations, ownerReferences, finalizers: a replicator's, a backup
    tool's) goes back as it was; only stszone's label is set.
    """
    data: dict[str, bytes] = {}
    for keyed, cert_key, key_key in (
        (contents.serving, TLS_CERT, TLS_KEY),
        (contents.ca, CA_CERT, CA_KEY),
        (contents.next_ca, NEXT_CERT, NEXT_KEY),
    ):
        if keyed is not None:
            data[cert_key], data[key_key] = keyed.cert_pem, keyed.key_pem
    data[BUNDLE] = pem_bundle(contents.bundle)
    kept: JSON = copy.deepcopy(dict(metadata or {}))
    labels = kept.get("labels")
    kept.update(
        name=name,
        namespace=namespace,
        labels={**(labels if isinstance(labels, Mapping) else {}), MANAGED_BY: MANAGER},
    )
    kept.pop("resourceVersion", None)
    if resource_version is not None:
        kept["resourceVersion"] = resource_version
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": kept,
        "data": {key: base64.b64encode(value).decode() for key, value in data.items()},
    }
