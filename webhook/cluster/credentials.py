"""The connection to the Kubernetes API: credentials from ``kubernetes.config``, I/O on aiohttp.

Why not the ``kubernetes`` client for the requests: it is synchronous (urllib3). Six watches
held open for the process's lifetime would need six threads blocked in socket reads that cannot
be cancelled on SIGTERM, every list page would be decoded into generated model classes only to
be thrown away, and its watch helper hides the raw ``ERROR``/``BOOKMARK`` events we must act on.
So the package does what it is best at -- reading the in-cluster service account or a kubeconfig
(client certificates, tokens, exec plugins, auth providers, CA, ``tls-server-name``,
``proxy-url``) into a ``Configuration`` -- and :mod:`webhook.cluster.api` makes plain aiohttp
requests on the event loop: a watch is a byte stream split into lines, cancellation is
immediate, and raw JSON goes straight to the ``state`` extractors. What the loader reads
differently from kubectl (the current-context of merged files) or not at all (impersonation) is
read by :mod:`webhook.cluster.kubeconfig` and :mod:`webhook.cluster.kubecontext`; where the
credentials come from (a service account, a kubeconfig) is chosen by
:mod:`webhook.cluster.credsource`.

Credentials expire: bound service-account tokens are rotated by the kubelet (the file changes
under us) and exec plugins hand out short-lived tokens. :meth:`Credentials.target` therefore
runs the configuration's ``refresh_api_key_hook`` before every request (it re-reads the token
file once a minute, or re-runs the exec plugin after the expiry it announced), reloads a
kubeconfig whose user's ``tokenFile`` changed (the loader reads that file only once), and a 401
drops the configuration so the next request reloads it from scratch. That hook may read files or run
a subprocess, so it runs in the default executor: the one place a thread is used, never on the
admission path.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.cluster.kubeconfig import over_tls
from webhook.cluster.refusals import Refusals
from webhook.errors import ConfigError, one_line


@dataclass(frozen=True, slots=True)
class Connection:
    """Everything one request needs: base URL, auth header, TLS settings, proxy."""

    base: str
    headers: Mapping[str, str]
    ssl: ssl.SSLContext | bool
    server_hostname: str | None = None
    proxy: str | None = None
    #: Impersonate-* headers, in order; a group or an extra value may repeat its header.
    impersonation: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Loaded:
    """A load's ``Configuration``, and what the loader does not read that goes with it."""

    configuration: Any
    #: A kubeconfig user's ``tokenFile``: the loader reads it once, so a change of it (a
    #: rotated token) reloads the configuration, as client-go re-reads the file.
    token_file: str | None = None
    impersonation: tuple[tuple[str, str], ...] = ()
    #: The user's fields not sent because the server is not https.
    unsent: tuple[str, ...] = ()
    #: Whether the user has credentials at all: a kubeconfig user may have none.
    identified: bool = True


class Credentials:
    """Where the cluster is and how to authenticate, refreshed before each request."""

    def __init__(self, load: Callable[[], Loaded], *, source: str) -> None:
        #: Human-readable origin, for logs: "in-cluster service account", "kubeconfig PATH".
        self.source = source
        #: Every load runs ``load`` whole: a kubeconfig edited since is refused, or taken, as
        #: a fresh start would refuse or take it, never half.
        self._load = load
        self._config: Any = None
        self._loaded = Loaded(None)
        self._token_stamp: tuple[int, ...] | None = None
        self._tls: tuple[tuple[Any, ...], ssl.SSLContext] | None = None
        #: What requests with these credentials meet, said once per change (by the Api).
        self.refusals = Refusals(source)
        # Six reflectors ask at once from executor threads; the loaders are not thread-safe
        # (and an exec plugin should run once, not six times).
        self._lock = threading.Lock()

    async def target(self) -> Connection:
        """Fresh request settings; the refresh hook (file read, exec plugin) runs off the loop."""
        return await asyncio.to_thread(self.target_now)

    def invalidate(self) -> None:
        """Forget the loaded configuration (after a 401): the next request reloads it."""
        self._config = None

    def target_now(self) -> Connection:
        """Blocking form of :meth:`target`; raises :class:`ConfigError` on a broken config."""
        with self._lock, _LoaderErrors() as complaints:
            try:
                connection = self._target()
            except Exception as err:  # ConfigException, OSError, SSLError, a failing exec plugin
                raise ConfigError(
                    f"cannot load credentials from {self.source}: {one_line(err)}"
                ) from err
            if complaints.messages:
                self._config = None  # loaded without the credentials: load again next time
                said = "; ".join(complaints.messages)
                raise ConfigError(f"cannot load credentials from {self.source}: {said}")
            return connection

    def _target(self) -> Connection:
        # Read once: invalidate() runs on the event loop, outside the lock, and may clear
        # self._config at any point of this.
        config = self._config
        token_file = self._loaded.token_file
        if token_file is not None and _stamp(token_file) != self._token_stamp:
            config = None
        if config is None:
            stamp = _stamp(token_file) if token_file is not None else None
            loaded = self._load()
            if loaded.token_file != token_file:
                stamp = _stamp(loaded.token_file) if loaded.token_file is not None else None
            self._loaded, self._token_stamp = loaded, stamp
            config = self._config = loaded.configuration
        # get_api_key_with_prefix runs refresh_api_key_hook first: token rotation happens here.
        auth = config.get_api_key_with_prefix("BearerToken", alias="authorization")
        headers = {"Authorization": auth.strip()} if auth else {}
        host = str(config.host).rstrip("/")
        return Connection(
            base=host,
            headers=headers,
            ssl=self._context(config) if over_tls(host) else False,
            server_hostname=getattr(config, "tls_server_name", None) or None,
            proxy=getattr(config, "proxy", None) or None,
            impersonation=self._loaded.impersonation,
        )

    @property
    def unsent(self) -> tuple[str, ...]:
        """The user's fields the last load left unsent because the server is not https, so
        that a 401 is not blamed on credentials the server never saw."""
        return self._loaded.unsent

    @property
    def anonymous(self) -> bool:
        """Whether the last load found the user without any credentials, so that a 401 is not
        blamed on credentials it has not got."""
        return not self._loaded.identified

    @property
    def plaintext(self) -> bool:
        """Whether the last load's server is not https."""
        return not over_tls(str(getattr(self._loaded.configuration, "host", "")))

    def _context(self, config: Any) -> ssl.SSLContext:
        files = (config.ssl_ca_cert, config.cert_file, config.key_file)
        # Exec plugins may hand out new client certificates (new temp files); the CA may rotate.
        stamp = (*files, bool(config.verify_ssl), *(_mtime(f) for f in files))
        if self._tls is None or self._tls[0] != stamp:
            # OpenSSL's errors name no file ("[SSL] PEM lib"): say which one, and from where.
            # (The loader writes a kubeconfig's *-data fields to temporary files.)
            try:
                context = ssl.create_default_context(cafile=config.ssl_ca_cert or None)
            except (ssl.SSLError, OSError) as err:
                raise ConfigError(
                    f"the cluster's {_field(config.ssl_ca_cert, 'certificate-authority')} does "
                    f"not load ({err}); give the API server's CA certificate as PEM"
                ) from err
            if not config.verify_ssl:  # insecure-skip-tls-verify: true
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            if config.cert_file:
                try:
                    context.load_cert_chain(config.cert_file, config.key_file or None)
                except (ssl.SSLError, OSError) as err:
                    cert = _field(config.cert_file, "client-certificate")
                    key = _field(config.key_file, "client-key")
                    raise ConfigError(
                        f"the user's {cert} and {key} do not load ({err}); give a PEM "
                        "certificate and its own PEM key"
                    ) from err
            self._tls = (stamp, context)
        return self._tls[1]


def _field(path: str | None, name: str) -> str:
    """The kubeconfig field ``name`` with its file, as the user wrote it: a ``*-data`` field
    reaches us as a temporary file the loader wrote (and removes at exit), named by no one."""
    from kubernetes.config import kube_config

    written: Any = getattr(kube_config, "_temp_files", {})
    if path is not None and path in written.values():
        return f"{name}-data"
    return f"{name} {path}"


class _LoaderErrors(logging.Filter):
    """What the ``kubernetes`` loader logs instead of raising, gathered while it runs.

    An exec plugin that exits non-zero, or answers with neither a token nor a client pair, is
    only logged (``logging.error``, on the root logger) and the configuration loads without
    credentials: every request would then be an anonymous 401 that names no cause. Those
    records are taken off the root logger (where a filter sees only records logged on it
    directly) and made the load's error.
    """

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def __enter__(self) -> _LoaderErrors:
        logging.getLogger().addFilter(self)
        return self

    def __exit__(self, *exc: object) -> None:
        logging.getLogger().removeFilter(self)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.ERROR or f"{os.sep}kubernetes{os.sep}" not in record.pathname:
            return True
        self.messages.append(record.getMessage())
        return False


def _stamp(path: str) -> tuple[int, ...] | None:
    # The kubelet swaps in a new file (a new inode); other writers rewrite it in place.
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns)


def _mtime(path: str | None) -> float:
    try:
        return os.stat(path).st_mtime if path else 0.0
    except OSError:
        return 0.0
