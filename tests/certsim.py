"""A cluster on paper for the certificate planner: a Secret, two webhook configurations, a clock.

:class:`Paper` applies each :class:`~webhook.install.rotationstep.Decision` as the API server
would (a version per write) and checks, at every write, the two rules a rotation must keep
(:func:`check_write`): a Secret write never serves a pair from a CA the configurations have not
trusted for the settling time (unless they trusted nothing yet: a fresh install), and a
configuration write never drops a CA the Secret's pair comes from. The checks read only the
objects, never the planner's memory, so they hold the planner to account.
"""

from __future__ import annotations

import base64
import copy
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from webhook.install import cabundle, tlssecret
from webhook.install.issuing import Policy
from webhook.install.rotation import Rotation
from webhook.install.rotationstep import Decision

JSON = dict[str, Any]
START = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)
NAMES = (
    "stszone",
    "stszone.certs-ns",
    "stszone.certs-ns.svc",
    "stszone.certs-ns.svc.cluster.local",
)


def policy(*, validity: float = 180.0, settle: float = 18.0) -> Policy:
    return Policy(
        validity=dt.timedelta(seconds=validity),
        dns_names=NAMES,
        settle=dt.timedelta(seconds=settle),
    )


def config(kind: str, bundle: bytes = b"") -> JSON:
    """A webhook configuration of one webhook, as the API server holds it."""
    client: JSON = {"service": {"name": "stszone", "namespace": "certs-ns", "port": 443}}
    if bundle:
        client["caBundle"] = base64.b64encode(bundle).decode()
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": "stszone", "resourceVersion": "1"},
        "webhooks": [{"name": f"{kind[:4].lower()}.stszone.io", "clientConfig": client}],
    }


#: One corrupted byte of an ECDSA P-256 certificate, each a different exception from
#: cryptography (which parses the version on load, the public key and the extensions only when
#: first asked for): ValueError, UnsupportedAlgorithm, InvalidVersion, DuplicateExtension.
CORRUPTIONS: Final = (
    "a flipped bit in its public key",
    "an unknown curve",
    "X.509 version 66",
    "its subjectKeyIdentifier twice",
)


def corrupted(cert_pem: bytes, how: str) -> bytes:
    """``cert_pem`` with one byte changed as :data:`CORRUPTIONS` names it (its signature no
    longer verifies either)."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    der = cert.public_bytes(serialization.Encoding.DER)
    if how == "a flipped bit in its public key":
        point = cert.public_key().public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )
        at = der.index(point) + 10
        der = der[:at] + bytes([der[at] ^ 1]) + der[at + 1 :]
    else:
        was, becomes = {
            "an unknown curve": ("06082a8648ce3d030107", "06082a8648ce3d030106"),  # prime256v1
            "X.509 version 66": ("a003020102", "a003020142"),  # v3 is encoded as 2
            "its subjectKeyIdentifier twice": ("0603551d23", "0603551d0e"),  # AKI's OID
        }[how]
        assert bytes.fromhex(was) in der
        der = der.replace(bytes.fromhex(was), bytes.fromhex(becomes), 1)
    body = base64.encodebytes(der).decode()
    return f"-----BEGIN CERTIFICATE-----\n{body}-----END CERTIFICATE-----\n".encode()


def issuer_of(secret: JSON) -> x509.Certificate | None:
    """The CA in the Secret's bundle that signed its serving pair."""
    contents = tlssecret.read(secret)
    if contents.serving is None:
        return None
    for ca in contents.bundle:
        try:
            contents.serving.cert.verify_directly_issued_by(ca)
        except Exception:
            continue
        return ca
    return None


@dataclass
class Paper:
    """The objects, the clock, and a record of every write with the time it landed."""

    plan: Policy
    secret: JSON | None = None
    configs: list[JSON] = field(
        default_factory=lambda: [
            config("MutatingWebhookConfiguration"),
            config("ValidatingWebhookConfiguration"),
        ]
    )
    now: dt.datetime = START
    version: int = 1
    #: (time, "secret" | kind, the object written)
    writes: list[tuple[dt.datetime, str, JSON]] = field(default_factory=list)
    #: fingerprint -> when every configuration first held it (from the writes, not the planner).
    trusted_since: dict[str, dt.datetime] = field(default_factory=dict)
    #: CA fingerprint -> when the Secret's pair last stopped coming from it.
    served_until: dict[str, dt.datetime] = field(default_factory=dict)

    def rotation(self) -> Rotation:
        return Rotation(self.plan, name="stszone-tls", namespace="certs-ns")

    def apply(self, decision: Decision) -> None:
        """Land the decision's writes as the API server would, each with a new version."""
        self.version += 1
        if decision.secret is not None:
            written = copy.deepcopy(decision.secret)
            written["metadata"]["resourceVersion"] = str(self.version)
            self.land("secret", written)
        for planned in decision.configs:
            written = copy.deepcopy(planned)
            written["metadata"]["resourceVersion"] = str(self.version)
            self.land(written["kind"], written)

    def land(self, what: str, written: JSON) -> None:
        """One write that reached the API (``what``: "secret" or a configuration's kind), checked
        against both rules first."""
        if what == "secret":
            check_write(self, written)
            before = issuer_of(self.secret) if self.secret is not None else None
            if before is not None and before != issuer_of(written):
                self.served_until[tlssecret.fingerprint(before)] = self.now
            self.secret = written
        else:
            check_config(self, written)
            self.configs = [written if c["kind"] == what else c for c in self.configs]
        self.writes.append((self.now, what, written))
        trusted = cabundle.trusted(self.configs)
        self.trusted_since = {fp: self.trusted_since.get(fp, self.now) for fp in trusted}

    def run(
        self,
        rotation: Rotation,
        *,
        until: dt.datetime,
        tick: float = 1.0,
        stop: Callable[[Paper], bool] = lambda paper: False,
    ) -> None:
        """Ask and apply until ``until`` (or ``stop``), moving the clock when there is nothing to do."""
        while self.now < until and not stop(self):
            decision = rotation.decide(self.secret, configs=self.configs, now=self.now)
            assert not decision.problem, decision.problem
            if decision.secret is None and not decision.configs:
                self.now += dt.timedelta(seconds=max(min(decision.wait, tick), 0.001))
            else:
                self.apply(decision)

    def writes_of(self, what: str) -> list[JSON]:
        return [obj for _, kind, obj in self.writes if kind == what]


def check_write(paper: Paper, secret: JSON) -> None:
    """A pair is served only from a CA trusted for ``settle`` (or when nothing was trusted)."""
    issuer = issuer_of(secret)
    assert issuer is not None, "the written Secret's pair is not signed by a CA of its bundle"
    if not cabundle.carried(paper.configs, now=paper.now):
        return  # nothing verified against the configurations: nothing to break
    before = issuer_of(paper.secret) if paper.secret is not None else None
    if before is not None and tlssecret.fingerprint(before) == tlssecret.fingerprint(issuer):
        assert tlssecret.fingerprint(issuer) in paper.trusted_since
        return  # the CA the Secret already used, which the configurations trust
    since = paper.trusted_since.get(tlssecret.fingerprint(issuer))
    assert since is not None, f"serial {issuer.serial_number:x} served before it was trusted"
    assert paper.now - since >= paper.plan.settle, "served before the trust could settle"


def check_config(paper: Paper, written: JSON) -> None:
    """A configuration never stops trusting the CA the Secret's pair comes from, nor one it
    came from less than ``settle`` ago (a replica may not have switched yet)."""
    if paper.secret is None:
        return
    issuer = issuer_of(paper.secret)
    if issuer is None:
        return
    for fps in cabundle.held(written):
        assert tlssecret.fingerprint(issuer) in fps, "the serving CA left the caBundle"
    old = next(c for c in paper.configs if c["kind"] == written["kind"])
    dropped = {fp for fps in cabundle.held(old) for fp in fps} - {
        fp for fps in cabundle.held(written) for fp in fps
    }
    for fp in dropped:
        until = paper.served_until.get(fp)
        if until is not None:
            assert paper.now - until >= paper.plan.settle, "a CA left while replicas may serve it"


def replay(plan: Policy, writes: list[tuple[dt.datetime, str, JSON]]) -> Paper:
    """Check writes recorded from a real run (time, "secret" or kind, object) against both
    rules, from no Secret and configurations with an empty caBundle."""
    paper = Paper(plan)
    for at, what, obj in writes:
        paper.now = at
        paper.land(what, obj)
    return paper
