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

#: What cryptography raises for a certificate whose bytes do not parse, by the part it is in:
#: the version (InvalidVersion), the public key (ValueError, UnsupportedAlgorithm for an
#: unknown curve), the extensions (ValueError, DuplicateExtension); TypeError was seen too
#: when fuzzing.
_UNPARSED = (
    ValueError,
    TypeError,
    UnsupportedAlgorithm,
    x509.InvalidVersion,
    x509.DuplicateExtension,
)


def certificates(pem: bytes, what: str) -> list[x509.Certificate]:
    """Every certificate in ``pem`` (a bundle or a chain, leaf first); ConfigError for none,
    and for one whose public key or extensions do not parse.

    cryptography parses those two only when first asked for them, so a corrupted byte would
    otherwise raise far from here (matching a key, reading BasicConstraints) and not as a
    ConfigError: they are asked for here, once.
    """
    try:
        found = x509.load_pem_x509_certificates(pem)
    except ValueError:
        if _holds(pem, b"PRIVATE KEY"):
            raise ConfigError(
                f"the {what} holds a private key, not a certificate (files swapped?)"
            ) from None
        raise ConfigError(f"the {what} holds no PEM certificate (empty, truncated?)") from None
    except _UNPARSED as err:
        raise ConfigError(f"the {what} holds a certificate that does not parse: {err}") from None
    for cert in found:
        try:
            cert.public_key()
            _ = cert.extensions
        except _UNPARSED as err:
            raise ConfigError(
                f"the {what} holds a certificate that does not parse: {err}"
            ) from None
    return found


def private_key(pem: bytes, what: str) -> PrivateKey:
    """The unencrypted ECDSA or RSA key in ``pem``; ConfigError saying what is wrong."""
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except TypeError:
        raise ConfigError(f"the {what} is encrypted; give an unencrypted PEM key") from None
    except (ValueError, UnsupportedAlgorithm):
        if _holds(pem, b"CERTIFICATE") and not _holds(pem, b"PRIVATE KEY"):
            raise ConfigError(
                f"the {what} holds a certificate, not a private key (files swapped?)"
            ) from None
        raise ConfigError(f"the {what} is not a PEM private key (empty, truncated?)") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise ConfigError(f"the {what} is a {type(key).__name__}; use an ECDSA or RSA key")
    return key


def _holds(pem: bytes, label: bytes) -> bool:
    """Whether ``pem`` has a block whose label ends with ``label`` (``EC PRIVATE KEY``)."""
    return any(
        line.startswith(b"-----BEGIN ") and line.rstrip().endswith(label + b"-----")
        for line in pem.splitlines()
    )


def key_matches(certificate: x509.Certificate, key: PrivateKey) -> bool:
    """Whether ``key`` is the private half of ``certificate``'s public key."""
    return certificate.public_key() == key.public_key()
