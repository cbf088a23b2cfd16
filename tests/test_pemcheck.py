"""``pemcheck``: certificates made by other tools, as the API server (Go's crypto/x509) sees them.

The pairs here are built by hand with cryptography, the way ``openssl req -x509`` and a
two-level PKI make them, not by stszone's own generators.
"""

from __future__ import annotations

import datetime as dt
import re

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from webhook.errors import ConfigError
from webhook.install.pemcheck import check_serving_pair

HOST = "stszone.stszone-system.svc"
NOW = dt.datetime.now(dt.UTC)
PEM = serialization.Encoding.PEM


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _cert(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    *,
    issuer: tuple[str, ec.EllipticCurvePrivateKey] | None = None,
    ca: bool = False,
    key_usage: bool = True,
    dns: tuple[str, ...] = (),
    valid: tuple[dt.timedelta, dt.timedelta] = (dt.timedelta(hours=-1), dt.timedelta(days=60)),
) -> x509.Certificate:
    issuer_name, signer = issuer if issuer is not None else (subject, key)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(_name(issuer_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(NOW + valid[0])
        .not_valid_after(NOW + valid[1])
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
        )
        if key_usage:
            builder = builder.add_extension(
                x509.KeyUsage(True, False, False, False, False, True, True, False, False),
                critical=True,
            )
    if issuer is not None:
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(signer.public_key()), critical=False
        )
    if dns:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName(d) for d in dns]), critical=False
        )
    return builder.sign(signer, hashes.SHA256())


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem(*certs: x509.Certificate) -> bytes:
    return b"".join(c.public_bytes(PEM) for c in certs)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def test_an_openssl_style_ca_without_key_usage_is_accepted() -> None:
    """``openssl req -x509`` writes a CA with basicConstraints but no keyUsage; Go accepts it,
    so stszone must not refuse it."""
    ca_key, leaf_key = _key(), _key()
    ca = _cert("my-ca", ca_key, ca=True, key_usage=False)
    leaf = _cert("stszone", leaf_key, issuer=("my-ca", ca_key), dns=(HOST,))
    assert (
        check_serving_pair(
            ca_pem=_pem(ca), cert_pem=_pem(leaf), key_pem=_key_pem(leaf_key), host=HOST
        )
        == []
    )


def test_a_chain_through_an_intermediate_is_accepted_and_a_foreign_leaf_is_not() -> None:
    """tls.crt holding leaf + intermediate chains to the root in --ca; a leaf of another CA
    does not, and the message says so (not a name problem)."""
    root_key, mid_key, leaf_key, other_key = _key(), _key(), _key(), _key()
    root = _cert("root", root_key, ca=True)
    mid = _cert("intermediate", mid_key, issuer=("root", root_key), ca=True)
    leaf = _cert("stszone", leaf_key, issuer=("intermediate", mid_key), dns=(HOST,))
    assert (
        check_serving_pair(
            ca_pem=_pem(root), cert_pem=_pem(leaf, mid), key_pem=_key_pem(leaf_key), host=HOST
        )
        == []
    )
    with pytest.raises(ConfigError, match="not signed by the CA"):
        check_serving_pair(  # the intermediate missing from tls.crt: no path to the root
            ca_pem=_pem(root), cert_pem=_pem(leaf), key_pem=_key_pem(leaf_key), host=HOST
        )
    other = _cert("other-ca", other_key, ca=True)
    with pytest.raises(ConfigError, match="not signed by the CA"):
        check_serving_pair(
            ca_pem=_pem(other), cert_pem=_pem(leaf, mid), key_pem=_key_pem(leaf_key), host=HOST
        )


def test_a_leaf_for_another_name_is_a_name_problem() -> None:
    """Signed by the right CA for the wrong Service name: the message names both."""
    ca_key, leaf_key = _key(), _key()
    ca = _cert("my-ca", ca_key, ca=True)
    leaf = _cert("x", leaf_key, issuer=("my-ca", ca_key), dns=("stszone.other.svc",))
    with pytest.raises(ConfigError, match=r"names stszone\.other\.svc, but the API server dials"):
        check_serving_pair(
            ca_pem=_pem(ca), cert_pem=_pem(leaf), key_pem=_key_pem(leaf_key), host=HOST
        )


DAY = dt.timedelta(days=1)


@pytest.mark.parametrize(
    ("valid", "said"),
    [
        ((-400 * DAY, -DAY), r"expired on (\d|-)+ "),
        ((DAY, 400 * DAY), r"is valid only from (\d|-)+ "),  # made where the clock ran ahead
    ],
)
def test_a_ca_out_of_date_is_named_not_called_foreign(
    valid: tuple[dt.timedelta, dt.timedelta], said: str
) -> None:
    """The CA did sign the pair; the API server refuses it for the CA's dates, and the message
    says so rather than sending the user after another CA."""
    ca_key, leaf_key = _key(), _key()
    ca = _cert("my-ca", ca_key, ca=True, valid=valid)
    leaf = _cert("stszone", leaf_key, issuer=("my-ca", ca_key), dns=(HOST,))
    with pytest.raises(ConfigError) as caught:
        check_serving_pair(
            ca_pem=_pem(ca), cert_pem=_pem(leaf), key_pem=_key_pem(leaf_key), host=HOST
        )
    assert "not signed" not in caught.value.message
    assert re.search(f"the CA given with --ca \\(CN=my-ca\\) {said}", caught.value.message)


def test_an_expired_intermediate_is_named() -> None:
    root_key, mid_key, leaf_key = _key(), _key(), _key()
    root = _cert("root", root_key, ca=True)
    mid = _cert("intermediate", mid_key, issuer=("root", root_key), ca=True, valid=(-9 * DAY, -DAY))
    leaf = _cert("stszone", leaf_key, issuer=("intermediate", mid_key), dns=(HOST,))
    with pytest.raises(ConfigError, match=r"the intermediate CA CN=intermediate .* expired on"):
        check_serving_pair(
            ca_pem=_pem(root), cert_pem=_pem(leaf, mid), key_pem=_key_pem(leaf_key), host=HOST
        )
