"""Certificate files: ``stszone certs`` and the development certificates of ``stszone serve``.

The rules users rely on:

- an existing ``ca.crt``/``ca.key`` is reused, so re-issuing only replaces the serving pair and
  every client that trusts the CA (the webhook configurations' caBundle) keeps trusting it;
- keys are written 0600, every file atomically (temp file + rename) so that the certificate
  watcher in :mod:`webhook.server.tls` never reads half a file.

The certificates themselves come from the pure generators in :mod:`webhook.install.certs`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from cryptography import x509
from cryptography.exceptions import InvalidSignature

from webhook.config import DEFAULT_NAMESPACE
from webhook.errors import ConfigError
from webhook.install.certs import (
    CA_CERT,
    CA_DAYS,
    CA_KEY,
    KEY_TYPE,
    SERVING_DAYS,
    TLS_CERT,
    TLS_KEY,
    new_ca,
    new_serving,
    service_dns_names,
    subject_alt_names,
    validity_days,
)
from webhook.pem import certificates, key_matches, private_key

#: ``ensure_dev_certs`` replaces certificates that expire sooner than this.
_MIN_REMAINING: Final = dt.timedelta(days=1)


@dataclass(frozen=True, slots=True)
class Issued:
    """What :func:`issue` wrote: the four paths, whether the CA is new, and the serving cert."""

    ca: Path
    ca_key: Path
    cert: Path
    key: Path
    ca_created: bool
    serial: int
    not_after: dt.datetime
    names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DevCerts:
    """Development certificates for ``stszone serve``; ``created`` is False when reused."""

    ca: Path
    cert: Path
    key: Path
    created: bool


def write_atomic(files: Iterable[tuple[Path, bytes, int]]) -> None:
    """Write each ``(path, data, mode)`` via a temp file in its directory, then rename them all.

    A reader sees an old file or a new one, never a prefix; the mode is set before any byte is
    written, whatever the umask. All temp files are complete (and fsynced) before the first
    rename, so a watcher sees the files change within microseconds of each other, in order.
    """
    staged: list[tuple[str, Path]] = []
    try:
        for path, data, mode in files:
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            staged.append((tmp, path))
            with os.fdopen(fd, "wb") as out:
                os.fchmod(out.fileno(), mode)
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
        for tmp, path in staged:
            os.replace(tmp, path)
    finally:
        for tmp, _ in staged:
            Path(tmp).unlink(missing_ok=True)


@contextlib.contextmanager
def _writable(out_dir: Path, *, hint: str) -> Iterator[None]:
    """Turn a failed write (read-only filesystem, permissions) into a ConfigError with a hint."""
    try:
        yield
    except OSError as err:
        raise ConfigError(
            f"cannot write {err.filename or out_dir}: {err.strerror}; {hint}"
        ) from None


def _existing_ca(out_dir: Path) -> tuple[bytes, bytes] | None:
    """The CA pair in ``out_dir`` if both files are there; ConfigError if it cannot be used."""
    cert_path, key_path = out_dir / CA_CERT, out_dir / CA_KEY
    if not cert_path.exists() and not key_path.exists():
        return None
    if not (cert_path.exists() and key_path.exists()):
        have, missing = (cert_path, key_path) if cert_path.exists() else (key_path, cert_path)
        raise ConfigError(
            f"found {have} but not {missing}: restore it, or remove {have} to create a new CA "
            "(clients must then trust the new ca.crt)"
        )
    try:
        cert_pem, key_pem = cert_path.read_bytes(), key_path.read_bytes()
        cert = certificates(cert_pem, f"CA certificate {cert_path}")[0]
        key = private_key(key_pem, f"CA key {key_path}")
    except OSError as err:
        raise ConfigError(f"cannot use the CA in {out_dir}: {err}") from None
    except ConfigError as err:
        raise ConfigError(f"cannot use the CA in {out_dir}: {err.message}") from None
    if not key_matches(cert, key):
        raise ConfigError(f"{key_path} is not the key of {cert_path}; restore the matching pair")
    try:
        is_ca = cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        is_ca = False
    if not is_ca:
        raise ConfigError(f"{cert_path} is not a CA certificate (basicConstraints ca=false)")
    if cert.not_valid_after_utc - dt.datetime.now(dt.UTC) < _MIN_REMAINING:
        raise ConfigError(
            f"the CA in {cert_path} expires {cert.not_valid_after_utc:%Y-%m-%d %H:%M}Z; remove "
            f"{cert_path} and {key_path} to create a new one, then update the caBundle"
        )
    return cert_pem, key_pem


def issue(
    out_dir: Path,
    *,
    service: str,
    namespace: str,
    dns: Iterable[str] = (),
    ips: Iterable[str] = (),
    days: int = SERVING_DAYS,
    ca_days: int = CA_DAYS,
    key_type: str = KEY_TYPE,
    force: bool = False,
) -> Issued:
    """Write ca.crt/ca.key (reused when present) and a serving tls.crt/tls.key into ``out_dir``."""
    cert_path, key_path = out_dir / TLS_CERT, out_dir / TLS_KEY
    with _writable(out_dir, hint="choose another --out"):  # a directory we may not even look in
        existing = [str(path) for path in (cert_path, key_path) if path.exists()]
    if existing and not force:
        raise ConfigError(
            f"{' and '.join(existing)} already exist{'s' if len(existing) == 1 else ''}; pass "
            f"--force to replace the serving pair (the CA in {out_dir} is kept), or choose "
            "another --out"
        )
    names = [*service_dns_names(service, namespace), *dns]
    ips = list(ips)
    subject_alt_names(names, ips)  # refuse a bad --ip before anything is written
    validity_days(days, what="serving certificate validity")  # and a bad --days or --ca-days
    validity_days(ca_days, what="CA validity")
    with _writable(out_dir, hint="choose another --out"):
        out_dir.mkdir(parents=True, exist_ok=True)
        ca = _existing_ca(out_dir)
        ca_created = ca is None
        if ca is None:
            ca = _write_new_ca(out_dir, days=ca_days, key_type=key_type)
        cert = _write_serving(out_dir, ca=ca, names=names, ips=ips, days=days, key_type=key_type)
    return Issued(
        ca=out_dir / CA_CERT,
        ca_key=out_dir / CA_KEY,
        cert=cert_path,
        key=key_path,
        ca_created=ca_created,
        serial=cert.serial_number,
        not_after=cert.not_valid_after_utc,
        names=(*dict.fromkeys(names), *dict.fromkeys(ips)),
    )


def _write_new_ca(out_dir: Path, *, days: int, key_type: str) -> tuple[bytes, bytes]:
    ca = new_ca(days=days, key_type=key_type)
    write_atomic([(out_dir / CA_KEY, ca[1], 0o600), (out_dir / CA_CERT, ca[0], 0o644)])
    return ca


def _write_serving(
    out_dir: Path,
    *,
    ca: tuple[bytes, bytes],
    names: list[str],
    ips: list[str],
    days: int,
    key_type: str,
) -> x509.Certificate:
    cert_pem, key_pem = new_serving(
        ca_cert_pem=ca[0], ca_key_pem=ca[1], dns_names=names, ips=ips, days=days, key_type=key_type
    )
    # Key first: a watcher that sees the new certificate finds its key already in place.
    write_atomic([(out_dir / TLS_KEY, key_pem, 0o600), (out_dir / TLS_CERT, cert_pem, 0o644)])
    return x509.load_pem_x509_certificate(cert_pem)


def _still_valid(dev: DevCerts) -> bool:
    """True when the serving pair loads, matches, is signed by the CA there, and lasts > 1 day."""
    try:
        ca = x509.load_pem_x509_certificate(dev.ca.read_bytes())
        cert = x509.load_pem_x509_certificate(dev.cert.read_bytes())
        key = private_key(dev.key.read_bytes(), "development key")
        # A serving cert from another CA would fail every client that trusts this ca.crt.
        cert.verify_directly_issued_by(ca)
    except (OSError, ValueError, TypeError, ConfigError, InvalidSignature):
        return False
    remaining = cert.not_valid_after_utc - dt.datetime.now(dt.UTC)
    return key_matches(cert, key) and remaining > _MIN_REMAINING


def ensure_dev_certs(out_dir: Path) -> DevCerts:
    """Development certificates in ``out_dir`` for localhost and the default Service names.

    A pair already there (from an earlier run or ``stszone certs``) is reused while it is valid
    for more than a day; otherwise a serving pair is (re)issued, from the CA there when usable.
    """
    dev = DevCerts(
        ca=out_dir / CA_CERT, cert=out_dir / TLS_CERT, key=out_dir / TLS_KEY, created=False
    )
    if _still_valid(dev):
        return dev
    names = ["localhost", *service_dns_names("stszone", DEFAULT_NAMESPACE)]
    with _writable(out_dir, hint="give --cert and --key, or a writable --certs-dir"):
        out_dir.mkdir(parents=True, exist_ok=True)
        try:
            ca = _existing_ca(out_dir)
        except ConfigError:
            ca = None  # a broken or expiring development CA is simply replaced
        if ca is None:
            ca = _write_new_ca(out_dir, days=CA_DAYS, key_type=KEY_TYPE)
        _write_serving(
            out_dir,
            ca=ca,
            names=names,
            ips=["127.0.0.1", "::1"],
            days=SERVING_DAYS,
            key_type=KEY_TYPE,
        )
    return DevCerts(ca=dev.ca, cert=dev.cert, key=dev.key, created=True)
