"""Check a CA bundle and a serving pair before they are handed to the API server.

With ``failurePolicy: Fail`` a serving certificate the API server rejects (another CA, a key
from an older pair, a name for another namespace, expired) refuses every pod create in every
opted-in namespace, so ``stszone manifests`` says so before anything is applied.

The chain and the name are checked by cryptography's X.509 verifier (``PolicyBuilder``), as a
TLS client would check them, with two allowances that match Go's ``crypto/x509`` (the API
server's client): a CA certificate need not carry keyUsage (``openssl req -x509`` makes such
CAs) and a leaf need not carry an authorityKeyIdentifier.
"""

from __future__ import annotations

import datetime as dt
import shlex
import sys
from pathlib import Path
from typing import Final, NamedTuple

from cryptography import x509
from cryptography.x509.verification import (
    Criticality,
    ExtensionPolicy,
    PolicyBuilder,
    ServerVerifier,
    Store,
    VerificationError,
)

from webhook.config import DEFAULT_NAMESPACE, Settings
from webhook.errors import ConfigError
from webhook.install.issuing import issued_by
from webhook.pem import certificates, key_matches, private_key

#: Where ``stszone certs`` writes without ``--out``.
CERTS_DIR: Final = Settings().certs_dir
#: Warn when the serving certificate has less than this left.
RENEW_WARNING: Final = dt.timedelta(days=30)
_CA_POLICY: Final = ExtensionPolicy.webpki_defaults_ca().may_be_present(
    x509.KeyUsage, Criticality.AGNOSTIC, None
)
_LEAF_POLICY: Final = ExtensionPolicy.webpki_defaults_ee().may_be_present(
    x509.AuthorityKeyIdentifier, Criticality.AGNOSTIC, None
)


class PemFiles(NamedTuple):
    """The three files as refusals name them: what each is, and where it was given."""

    ca: str = "CA file"
    cert: str = "serving certificate file"
    key: str = "serving key"
    #: ``stszone certs``' ``--out DIR`` that re-issues the pair in the directory it was read
    #: from (with its leading space), "" for the default certs/ or a pair `certs` did not write.
    out: str = ""


#: The files named by what they are alone (a pair checked from memory, not from files).
UNNAMED: Final = PemFiles()


def pem_files(
    ca: Path, *, cert: Path | None, key: Path | None, base: Path | None = None
) -> PemFiles:
    """The files as ``stszone manifests`` takes them: --ca, and --cert/--key or the pair's
    files beside --ca, named with their paths (a refusal is acted on in one file).

    A ConfigError when more than one of them (or ``base``, the --base file) is ``-``: standard
    input holds one file, and a second read of it is empty (kubectl refuses two ``-f -``
    alike, "standard input cannot be used for multiple arguments").
    """
    piped = [
        f
        for f, p in (("--ca", ca), ("--cert", cert), ("--key", key), ("--base", base))
        if str(p) == "-"
    ]
    if len(piped) > 1:
        raise ConfigError(
            f"{', '.join(piped[:-1])} and {piped[-1]} each name - (standard input), which holds "
            "only one file; give one of them as - and the others as files"
        )

    def given(path: Path, flag: str) -> str:
        # `-` is read from standard input: no file of that name is involved.
        return f"on standard input ({flag})" if str(path) == "-" else f"{path} ({flag})"

    def where(path: Path | None, flag: str, default: str) -> str:
        return given(path, flag) if path else f"{ca.with_name(default)} ({default} beside --ca)"

    # `stszone certs --out DIR` writes DIR/tls.crt: a hint without DIR re-issues certs/ instead.
    written = cert or ca.with_name("tls.crt")
    folder = written.parent if written.name == "tls.crt" else CERTS_DIR
    return PemFiles(
        ca=f"CA file {given(ca, '--ca')}",
        cert=f"serving certificate file {where(cert, '--cert', 'tls.crt')}",
        key=f"serving key {where(key, '--key', 'tls.key')}",
        out="" if folder == CERTS_DIR else f" --out {shlex.quote(str(folder))}",
    )


def read_named(path: Path, named: str, *, way: str = "") -> bytes:
    """The bytes of ``path`` (``-``: standard input); a :class:`ConfigError` naming it as
    ``named`` (and the ``way`` out, when there is one) when it does not read."""
    try:
        return sys.stdin.buffer.read() if str(path) == "-" else path.read_bytes()
    except OSError as err:
        raise ConfigError(f"cannot read the {named}: {err.strerror}{way}") from None


def read_pair(
    ca: Path, *, cert: Path | None, key: Path | None, files: PemFiles
) -> tuple[bytes, bytes]:
    """The serving pair as ``stszone manifests`` takes it: --cert and --key (``-`` for stdin),
    or the files beside --ca. A file that does not read is named as ``files``
    (:func:`pem_files`) names it; one read beside --ca, a file the user may never have named,
    with the flag that names another."""
    read: list[bytes] = []
    for given, default, flag, named, what in (
        (cert, "tls.crt", "--cert", files.cert, "serving certificate"),
        (key, "tls.key", "--key", files.key, "serving key"),
    ):
        way = (
            ""
            if given
            else f"; that is the default of {flag}: give the {what} with {flag} FILE, or "
            "leave the TLS Secret out with --no-secret"
        )
        read.append(read_named(given or ca.with_name(default), named, way=way))
    return read[0], read[1]


def check_ca_bundle(pem: bytes, *, files: PemFiles = UNNAMED) -> None:
    """Raise ConfigError unless ``pem`` holds at least one certificate (the caBundle)."""
    certificates(pem, files.ca)


def _verifier(roots: list[x509.Certificate], host: str, at: dt.datetime) -> ServerVerifier:
    return (
        PolicyBuilder()
        .store(Store(roots))
        .time(at)
        .extension_policies(ca_policy=_CA_POLICY, ee_policy=_LEAF_POLICY)
        .build_server_verifier(x509.DNSName(host))
    )


def _dns_names(cert: x509.Certificate) -> list[str]:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return []
    return san.value.get_values_for_type(x509.DNSName)


def _verifies(
    chain: list[x509.Certificate], roots: list[x509.Certificate], host: str, at: dt.datetime
) -> bool:
    try:
        _verifier(roots, host, at).verify(chain[0], chain[1:])
    except (VerificationError, ValueError):
        return False
    return True


def _when(cert: x509.Certificate, at: dt.datetime) -> str:
    """How ``cert`` is out of date at ``at``, or "" while it is valid then."""
    if at >= cert.not_valid_after_utc:
        return f"expired on {cert.not_valid_after_utc:%Y-%m-%d %H:%M}Z"
    if at < cert.not_valid_before_utc:
        return f"is valid only from {cert.not_valid_before_utc:%Y-%m-%d %H:%M}Z"
    return ""


def _out_of_date(
    chain: list[x509.Certificate], roots: list[x509.Certificate], at: dt.datetime
) -> str:
    """Why the chain fails by date alone: an intermediate, or every --ca certificate that signed
    the chain's top, outside its validity at ``at`` ("" when none is). The verifier only says
    that no path was found, which for a CA that signed the pair reads as a foreign CA."""
    for cert in chain[1:]:
        when = _when(cert, at)
        if when:
            name = cert.subject.rfc4514_string()
            return f"the intermediate CA {name} in the serving certificate file {when}"
    signers = [root for root in roots if issued_by(chain[-1], ca=root)]
    whens = [_when(root, at) for root in signers]
    if signers and all(whens):
        return f"the CA given with --ca ({signers[0].subject.rfc4514_string()}) {whens[0]}"
    return ""


def check_serving_pair(
    *,
    ca_pem: bytes,
    cert_pem: bytes,
    key_pem: bytes,
    host: str,
    now: dt.datetime | None = None,
    files: PemFiles = UNNAMED,
    namespace: str = "",
) -> list[str]:
    """Raise ConfigError when the API server would refuse the pair; return warnings otherwise.
    ``namespace``: the one the pair is installed in, which the `stszone certs` a refusal gives
    re-issues it for ("" when unknown: the command says ``NS``)."""
    # `stszone certs` issues for stszone-system unless told: a pair for another namespace is
    # re-issued for it, or the next check refuses it as another namespace's.
    given = f" --namespace {shlex.quote(namespace)}" if namespace else ""
    keep = "" if namespace == DEFAULT_NAMESPACE else given
    roots = certificates(ca_pem, files.ca)
    chain = certificates(cert_pem, files.cert)
    leaf = chain[0]
    if not key_matches(leaf, private_key(key_pem, files.key)):
        raise ConfigError(f"the {files.key} does not belong to the {files.cert}")
    now = now or dt.datetime.now(dt.UTC)
    if leaf.not_valid_after_utc <= now:
        raise ConfigError(
            f"the serving certificate expired on {leaf.not_valid_after_utc:%Y-%m-%d}; "
            f"re-issue it with `stszone certs{keep}{files.out} --force`"
        )
    # Verified as of a moment the leaf is valid: not-yet-valid is a warning below, not a refusal.
    at = max(now, leaf.not_valid_before_utc)
    if not _verifies(chain, roots, host, at):
        names = _dns_names(leaf)
        if not any(_verifies(chain, roots, name.replace("*", "x", 1), at) for name in names):
            dated = _out_of_date(chain, roots, at)
            if dated:
                raise ConfigError(
                    f"{dated}, so the API server would refuse the serving certificate; issue a "
                    "new CA and pair into an empty directory with `stszone certs --out DIR`"
                )
            raise ConfigError(
                "the serving certificate is not signed by the CA given with --ca, so the API "
                "server would refuse it; issue both with `stszone certs --out DIR`"
            )
        raise ConfigError(
            f"the serving certificate names {', '.join(names) or 'no DNS name'}, but the API "
            f"server dials {host}; re-issue it for this namespace with "
            f"`stszone certs{given or ' --namespace NS'}{files.out} --force`"
        )
    warnings = []
    if leaf.not_valid_before_utc > now:
        warnings.append(f"the serving certificate is valid only from {leaf.not_valid_before_utc}")
    if leaf.not_valid_after_utc - now < RENEW_WARNING:
        warnings.append(
            f"the serving certificate expires on {leaf.not_valid_after_utc:%Y-%m-%d}; "
            f"re-issue it soon with `stszone certs{keep}{files.out} --force`"
        )
    return warnings
