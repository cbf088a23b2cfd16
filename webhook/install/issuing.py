"""The certificates of ``--manage-certs``: what a :class:`Policy` asks for, issuing them, and the
facts the planner (:mod:`webhook.install.rotation`) judges a Secret's certificates by. Pure.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from cryptography import x509
from cryptography.exceptions import InvalidSignature

from webhook.install.certs import KEY_TYPE, new_ca, new_serving
from webhook.install.tlssecret import Keyed

#: The CA lives three serving lifetimes: it is rotated two thirds in, with one full serving
#: lifetime left for staging, switching and retiring before the old one would expire.
CA_LIFETIMES: Final = 3

#: Why a serving pair that is otherwise fine is re-issued.
DUE: Final = "two thirds of its life were over"


@dataclass(frozen=True, slots=True)
class Policy:
    """What the certificates must be."""

    #: Lifetime of a serving pair (``--cert-validity``); the CA's is three times it.
    validity: dt.timedelta
    #: Names the API server dials (the Service's); the serving pair must carry all of them.
    dns_names: tuple[str, ...]
    #: How long a change needs to reach every API server and replica (see rotation.py).
    settle: dt.timedelta
    key_type: str = KEY_TYPE

    @property
    def ca_validity(self) -> dt.timedelta:
        return self.validity * CA_LIFETIMES


def usable_ca(keyed: Keyed | None, *, now: dt.datetime) -> Keyed | None:
    """``keyed`` when it is a CA certificate (with its key) valid at ``now``, else None.

    Not valid yet counts as unusable: API servers refuse it until their clocks reach its
    notBefore. Only a leader whose clock ran ahead of this one by more than the backdating
    (see :mod:`webhook.install.certs`) makes such a CA.
    """
    if keyed is None or not keyed.cert.not_valid_before_utc <= now < keyed.cert.not_valid_after_utc:
        return None
    try:
        constraints = keyed.cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        return None
    return keyed if constraints.ca else None


def issued_by(leaf: x509.Certificate, *, ca: x509.Certificate) -> bool:
    """Whether ``ca`` signed ``leaf``."""
    try:
        leaf.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def dns_names(cert: x509.Certificate) -> set[str]:
    """The DNS names of a certificate's subjectAltName."""
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set()
    return set(san.get_values_for_type(x509.DNSName))


def serials(certs: Sequence[x509.Certificate]) -> str:
    """Serials in hex, for log lines."""
    return ", ".join(f"{cert.serial_number:x}" for cert in certs) or "none"


def authority(policy: Policy, *, namespace: str, now: dt.datetime) -> Keyed:
    """A new CA for ``policy``, valid from ``now``."""
    cert_pem, key_pem = new_ca(
        # A common name has at most 64 characters, a namespace name 63: the name only says whose.
        common_name=f"stszone-ca {namespace}"[:64],
        lifetime=policy.ca_validity,
        key_type=policy.key_type,
        now=now,
    )
    return Keyed(cert_pem, key_pem, x509.load_pem_x509_certificate(cert_pem))


def serving_pair(policy: Policy, ca: Keyed, *, now: dt.datetime) -> Keyed:
    """A serving pair signed by ``ca`` for the names of ``policy``, valid from ``now``."""
    cert_pem, key_pem = new_serving(
        ca_cert_pem=ca.cert_pem,
        ca_key_pem=ca.key_pem,
        dns_names=policy.dns_names,
        lifetime=policy.validity,
        key_type=policy.key_type,
        now=now,
    )
    return Keyed(cert_pem, key_pem, x509.load_pem_x509_certificate(cert_pem))


def renewal_reason(
    ca: Keyed, *, serving: Keyed | None, policy: Policy, now: dt.datetime, waits: list[float]
) -> str:
    """Why the serving pair must be re-issued from ``ca`` now, or "" when it need not be (then
    ``waits`` gets the seconds until it is :data:`DUE`)."""
    if serving is None:
        return "the Secret held no usable serving pair"
    start = serving.cert.not_valid_before_utc
    if start > now:
        # Written by a leader whose clock ran ahead of this one by more than the backdating
        # (certs.py): API servers refuse it until then. The new pair starts in the past
        # for every clock ahead of this one, so its writer does not re-issue it in turn.
        return f"the pair was not valid until {start:%Y-%m-%d %H:%M:%S} (a clock ahead)"
    if not issued_by(serving.cert, ca=ca.cert):
        return "the pair was not signed by the Secret's CA"
    missing = sorted(set(policy.dns_names) - dns_names(serving.cert))
    if missing:
        return f"the pair did not name {', '.join(missing)}"
    due = serving.renew_at()
    if now >= due:
        return DUE
    waits.append((due - now).total_seconds())
    return ""
