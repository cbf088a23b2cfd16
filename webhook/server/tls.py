"""The server's TLS context, hardened, and the serving pair it hot-swaps.

:class:`TlsContext` owns the listening :class:`ssl.SSLContext`. Every handshake goes through
its ``sni_callback`` (OpenSSL calls it for every ClientHello, with ``server_name=None`` when the
client sends no SNI, as the API server does when it dials an IP), which points the connection
at the *current* pair's context. :meth:`TlsContext.install` builds a fresh context from a pair's
PEM bytes and swaps it in: new handshakes use the new certificate, established connections keep
theirs, the listener is never closed. A pair that does not load (half-written, key not matching
the certificate) is logged and the old one kept.

The bytes come from files (:class:`CertReloader` polls ``--cert``/``--key``: a mounted Secret,
cert-manager's, ``stszone certs``'), or from the API (``--manage-certs``: the Secret is watched
and each new version installed).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import hashlib
import logging
import os
import ssl
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from webhook.errors import ConfigError
from webhook.pem import certificates, key_matches, private_key

log = logging.getLogger("stszone.tls")

#: TLS 1.2 suites: forward secrecy (ECDHE) and AEAD only. TLS 1.3 suites are all AEAD already.
CIPHERS_TLS12: Final = "ECDHE+AESGCM:ECDHE+CHACHA20:!aNULL:!eNULL"
#: After a change is seen, wait this long for the writer to finish (cert and key are two renames).
_SETTLE: Final = 0.1
_SETTLE_TRIES: Final = 10


def hardened_context() -> ssl.SSLContext:
    """A server context: TLS >= 1.2, AEAD ciphers, no compression, no renegotiation."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers(CIPHERS_TLS12)
    ctx.options |= (
        ssl.OP_NO_COMPRESSION  # CRIME
        | ssl.OP_NO_RENEGOTIATION  # client-initiated renegotiation is a CPU-exhaustion lever
        | ssl.OP_CIPHER_SERVER_PREFERENCE
        | ssl.OP_SINGLE_ECDH_USE
    )
    return ctx


@dataclass(frozen=True, slots=True)
class _Pair:
    """A certificate/key pair as read from disk, with what it loaded into."""

    digest: str
    context: ssl.SSLContext
    serial: int
    not_after: dt.datetime


@contextlib.contextmanager
def _as_file(data: bytes) -> Iterator[str]:
    """A path holding ``data``: ``load_cert_chain`` reads paths, not bytes.

    Loading from a private copy means the bytes hashed are the bytes loaded, even when the
    files change in between. memfd needs no writable directory (read-only root filesystem).
    """
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("stszone-tls", os.MFD_CLOEXEC)
        try:
            os.write(fd, data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    with tempfile.NamedTemporaryFile(prefix="stszone-tls-") as tmp:  # pragma: no cover
        tmp.write(data)
        tmp.flush()
        yield tmp.name


def _no_password() -> bytes:
    # Without a callback, OpenSSL prompts on the terminal for an encrypted key.
    raise ConfigError("the key is encrypted; give an unencrypted PEM key")


class TlsContext:
    """The listening TLS context, and the pair it points handshakes at, replaced from bytes.

    ``placeholder=True`` starts on a pair that is not the webhook's (a throw-away self-signed
    certificate, made by the caller): the listener can open, the kubelet's probes (which do not
    verify certificates) get answers, and :meth:`ready` says no until :meth:`install` has put a
    real pair in place. ``waiting`` says what the placeholder waits for.
    """

    def __init__(
        self, cert_pem: bytes, *, key_pem: bytes, source: str, placeholder: bool = False
    ) -> None:
        self.source = source
        try:
            self._pair = self._load(cert_pem, key_pem)
        except (OSError, ValueError, ConfigError) as err:
            raise ConfigError(f"cannot serve TLS with {source}: {_reason(err)}") from None
        self._rejected: str | None = None
        self.placeholder = placeholder
        #: Why there is no real pair yet (shown by :meth:`ready` while on the placeholder).
        self.waiting = f"waiting for {source}"
        #: The context handed to the listening site; it only routes handshakes to the current one.
        self.context = hardened_context()
        with _as_file(cert_pem) as cert_file, _as_file(key_pem) as key_file:
            self.context.load_cert_chain(cert_file, key_file, password=_no_password)
        self.context.sni_callback = self._route
        if placeholder:
            log.info("no serving certificate yet (%s): handshakes get a placeholder", source)
        else:
            log.info("serving certificate serial %x, expires %s", self.serial, self.not_after)

    @property
    def serial(self) -> int:
        """Serial number of the certificate new handshakes get."""
        return self._pair.serial

    @property
    def not_after(self) -> dt.datetime:
        """Expiry (UTC) of the certificate new handshakes get."""
        return self._pair.not_after

    def expiry(self) -> dt.datetime | None:
        """Expiry of the served pair; None while on the placeholder (it is not the webhook's)."""
        return None if self.placeholder else self._pair.not_after

    def ready(self) -> tuple[bool, str]:
        """A readiness check: a real pair is served and has not expired."""
        if self.placeholder:
            return False, f"no serving certificate yet: {self.waiting}"
        if self._pair.not_after <= dt.datetime.now(dt.UTC):
            return (
                False,
                f"the serving certificate (serial {self.serial:x}) expired {self.not_after}",
            )
        return True, f"serving certificate serial {self.serial:x}"

    def _route(self, conn: ssl.SSLObject, server_name: str | None, ctx: ssl.SSLContext) -> None:
        # Swapping the context per connection changes its certificate; the protocol and cipher
        # limits stay those of the listening context, which is hardened the same way.
        conn.context = self._pair.context

    @staticmethod
    def _load(cert_pem: bytes, key_pem: bytes) -> _Pair:
        # cryptography first, for messages a user can act on; then OpenSSL, which must agree.
        leaf = certificates(cert_pem, "certificate")[0]
        if not key_matches(leaf, private_key(key_pem, "key")):
            raise ConfigError("the key does not match the certificate")
        ctx = hardened_context()
        with _as_file(cert_pem) as cert_file, _as_file(key_pem) as key_file:
            ctx.load_cert_chain(cert_file, key_file, password=_no_password)
        return _Pair(_digest(cert_pem, key_pem), ctx, leaf.serial_number, leaf.not_valid_after_utc)

    def install(self, cert_pem: bytes, *, key_pem: bytes, source: str | None = None) -> bool:
        """Serve this pair to new handshakes; True when it replaced another.

        False when it is the pair already served, or broken (logged once per content; the old
        pair stays).
        """
        source = source or self.source
        digest = _digest(cert_pem, key_pem)
        if digest == self._rejected or (digest == self._pair.digest and not self.placeholder):
            return False
        try:
            pair = self._load(cert_pem, key_pem)
        except (OSError, ValueError, ConfigError) as err:  # OSError covers ssl.SSLError
            return self._reject(_reason(err), digest=digest, source=source)
        old, self._pair, self._rejected = self._pair, pair, None
        if self.placeholder:
            self.placeholder = False
            log.info("serving certificate serial %x, expires %s", pair.serial, pair.not_after)
        else:
            log.info(
                "serving certificate reloaded: serial %x, expires %s (was %x)",
                pair.serial,
                pair.not_after,
                old.serial,
            )
        if pair.not_after <= dt.datetime.now(dt.UTC):
            log.warning(
                "the new serving certificate expired on %s; clients will refuse it", pair.not_after
            )
        return True

    def reject(self, reason: str, *, source: str | None = None) -> None:
        """Note that ``source`` holds no usable pair (logged once per reason)."""
        self.waiting = f"{source or self.source} {reason}"
        self._reject(reason, digest=f"unusable: {reason}", source=source or self.source)

    def _reject(self, reason: str, *, digest: str, source: str) -> bool:
        if digest != self._rejected:
            if self.placeholder:
                log.error("%s cannot be served: %s", source, reason)
            else:
                log.error(
                    "new certificate in %s not used, still serving serial %x: %s",
                    source,
                    self.serial,
                    reason,
                )
        self._rejected = digest
        return False


class CertReloader(TlsContext):
    """The listening TLS context for ``cert``/``key``, reloaded when the files change."""

    def __init__(
        self, cert: str | Path, key: str | Path, *, interval: float = 2.0, flags: bool = False
    ) -> None:
        self.cert_path = Path(cert)
        self.key_path = Path(key)
        self.interval = interval
        #: Whether the user named the files with --cert and --key, which a refusal then names.
        self.flags = flags
        cert_pem, key_pem = self._read()
        super().__init__(cert_pem, key_pem=key_pem, source=f"{self.cert_path} and {self.key_path}")

    def _read(self) -> tuple[bytes, bytes]:
        read: list[bytes] = []
        for path, what, flag in (
            (self.cert_path, "serving certificate file", "--cert"),
            (self.key_path, "serving key", "--key"),
        ):
            try:
                read.append(path.read_bytes())
            except OSError as err:
                given = f" ({flag})" if self.flags else ""
                raise ConfigError(f"cannot read the {what} {path}{given}: {err.strerror}") from None
        return read[0], read[1]

    def reload(self) -> bool:
        """Load the files now; True when a new certificate was installed.

        False when they are unchanged, or broken (logged once per content; the old pair stays).
        """
        try:
            cert_pem, key_pem = self._read()
        except ConfigError as err:
            # Same message, same "content": logged once, not every poll, until it changes.
            return self._reject(
                err.message, digest=f"unreadable: {err.message}", source=self._files
            )
        return self.install(cert_pem, key_pem=key_pem, source=self._files)

    @property
    def _files(self) -> str:
        return f"{self.cert_path} / {self.key_path}"

    def _fingerprint(self) -> tuple[tuple[int, int, int, int], ...] | None:
        try:
            stats = [os.stat(path) for path in (self.cert_path, self.key_path)]
        except OSError:
            return None
        return tuple((st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns) for st in stats)

    async def run(self) -> None:
        """Poll the files every ``interval`` seconds and reload on change (an app job)."""
        seen = self._fingerprint()
        while True:
            await asyncio.sleep(self.interval)
            # A writer replaces cert and key one after the other: when the files moved, wait
            # (a little, a bounded number of times) until they hold still before loading.
            for _ in range(_SETTLE_TRIES):
                now = self._fingerprint()
                if now == seen:
                    break
                seen = now
                await asyncio.sleep(_SETTLE)
            # The content hash decides, read every tick: it also catches in-place rewrites
            # that keep the size and land within the filesystem's timestamp granularity.
            try:
                self.reload()
            except Exception:  # the watcher must outlive any one bad poll
                log.exception("certificate reload check failed; retrying in %.1fs", self.interval)


def _digest(cert_pem: bytes, key_pem: bytes) -> str:
    return hashlib.sha256(hashlib.sha256(cert_pem).digest() + key_pem).hexdigest()


def _reason(err: Exception) -> str:
    if isinstance(err, ConfigError):
        return err.message
    if isinstance(err, ssl.SSLError) and err.reason:  # e.g. KEY_VALUES_MISMATCH
        return f"{err.reason.lower().replace('_', ' ')} ({err.library or 'ssl'})"
    return str(err) or type(err).__name__
