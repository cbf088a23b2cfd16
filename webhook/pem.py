"""PEM certificates and keys: loaded with errors a user can act on, and matched once.

Shared by every place that reads a certificate file: the server's TLS reloader, the
certificate files of ``stszone certs`` and the checks of ``stszone manifests``.
"""

from __future__ import annotations

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from webhook.errors import ConfigError

PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


def certificates(pem: bytes, what: str) -> list[x509.Certificate]:
    """Every certificate in ``pem`` (a bundle or a chain, leaf first); ConfigError for none."""
    try:
        return x509.load_pem_x509_certificates(pem)
    except ValueError:
        raise ConfigError(f"the {what} holds no PEM certificate (empty, truncated?)") from None


def private_key(pem: bytes, what: str) -> PrivateKey:
    """The unencrypted ECDSA or RSA key in ``pem``; ConfigError saying what is wrong."""
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except TypeError:
        raise ConfigError(f"the {what} is encrypted; give an unencrypted PEM key") from None
    except (ValueError, UnsupportedAlgorithm):
        raise ConfigError(f"the {what} is not a PEM private key (empty, truncated?)") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise ConfigError(f"the {what} is a {type(key).__name__}; use an ECDSA or RSA key")
    return key


def key_matches(certificate: x509.Certificate, key: PrivateKey) -> bool:
    """Whether ``key`` is the private half of ``certificate``'s public key."""
    return certificate.public_key() == key.public_key()
