"""The connection to the Kubernetes API: credentials from ``kubernetes.config``, I/O on aiohttp.

Why not the ``kubernetes`` client for the requests: it is synchronous (urllib3). Six watches
held open for the process's lifetime would need six threads blocked in socket reads that cannot
be cancelled on SIGTERM, every list page would be decoded into generated model classes only to
be thrown away, and its watch helper hides the raw ``ERROR``/``BOOKMARK`` events we must act on.
So the package does what it is best at -- reading the in-cluster service account or a kubeconfig
(client certificates, tokens, exec plugins, auth providers, CA, ``tls-server-name``,
``proxy-url``) into a ``Configuration`` -- and :mod:`webhook.cluster.api` makes plain aiohttp
requests on the event loop: a watch is a byte stream split into lines, cancellation is
immediate, and raw JSON goes straight to the ``state`` extractors. The package ignores a
kubeconfig user's impersonation (``as``, ``as-uid``, ``as-groups``, ``as-user-extra``), which
kubectl and client-go honour, so it is read here and sent as their Impersonate-* headers.

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
import string
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from webhook.errors import ConfigError

#: Where the kubelet mounts the service account (token, ca.crt, namespace).
SERVICE_ACCOUNT: Final = Path("/var/run/secrets/kubernetes.io/serviceaccount")
#: Set by the kubelet in every pod whose service account token is mounted.
IN_CLUSTER_ENV: Final = "KUBERNETES_SERVICE_HOST"
KUBECONFIG_ENV: Final = "KUBECONFIG"


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


class Credentials:
    """Where the cluster is and how to authenticate, refreshed before each request."""

    def __init__(
        self,
        load: Callable[[], Any],
        *,
        source: str,
        token_file: str | None = None,
        impersonation: tuple[tuple[str, str], ...] = (),
    ) -> None:
        #: Human-readable origin, for logs: "in-cluster service account", "kubeconfig PATH".
        self.source = source
        self._load = load
        self._config: Any = None
        #: A kubeconfig user's ``tokenFile``: the loader reads it once, so a change of it (a
        #: rotated token) reloads the configuration, as client-go re-reads the file.
        self._token_file = token_file
        self._impersonation = impersonation
        self._token_stamp: tuple[int, ...] | None = None
        self._tls: tuple[tuple[Any, ...], ssl.SSLContext] | None = None
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
                raise ConfigError(f"cannot load credentials from {self.source}: {err}") from err
            if complaints.messages:
                self._config = None  # loaded without the credentials: load again next time
                said = "; ".join(complaints.messages)
                raise ConfigError(f"cannot load credentials from {self.source}: {said}")
            return connection

    def _target(self) -> Connection:
        if self._token_file is not None and _stamp(self._token_file) != self._token_stamp:
            self._config = None
        if self._config is None:
            if self._token_file is not None:
                self._token_stamp = _stamp(self._token_file)
            self._config = self._load()
        config = self._config
        # get_api_key_with_prefix runs refresh_api_key_hook first: token rotation happens here.
        auth = config.get_api_key_with_prefix("BearerToken", alias="authorization")
        headers = {"Authorization": auth.strip()} if auth else {}
        host = str(config.host).rstrip("/")
        return Connection(
            base=host,
            headers=headers,
            ssl=self._context(config) if host.startswith("https:") else False,
            server_hostname=getattr(config, "tls_server_name", None) or None,
            proxy=getattr(config, "proxy", None) or None,
            impersonation=self._impersonation,
        )

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
                    f"the cluster's certificate-authority {config.ssl_ca_cert} does not load "
                    f"({err}); give the API server's CA certificate as PEM"
                ) from err
            if not config.verify_ssl:  # insecure-skip-tls-verify: true
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            if config.cert_file:
                try:
                    context.load_cert_chain(config.cert_file, config.key_file or None)
                except (ssl.SSLError, OSError) as err:
                    raise ConfigError(
                        f"the user's client-certificate {config.cert_file} and client-key "
                        f"{config.key_file} do not load ({err}); give a PEM certificate and "
                        "its own PEM key"
                    ) from err
            self._tls = (stamp, context)
        return self._tls[1]


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


def _user(path: str, *, context: str | None, kube_config: Any) -> Any:
    """The kubeconfig user ``context`` (else the current one) names, as the loader merges the
    files; None when the files do not read (loading them says why)."""
    try:
        merged = kube_config.kube_config.KubeConfigMerger(path).config
        named = merged["contexts"].get_with_name(context or merged["current-context"])
        return merged["users"].get_with_name(named["context"]["user"])["user"]
    except Exception:  # ConfigException, YAML errors, a shape the loader refuses anyway
        return None


def _token_file(user: Any) -> str | None:
    """The user's ``tokenFile``, resolved as the loader resolves it (relative to its file)."""
    if user is None or not isinstance(user.value, dict) or "tokenFile" not in user.value:
        return None
    base = os.path.dirname(os.path.abspath(str(user.path)))
    return os.path.normpath(os.path.join(base, str(user.value["tokenFile"])))


#: The bytes a header name may hold (RFC 7230 tchar) but ``%``, which client-go escapes too.
_HEADER_KEY: Final = frozenset(string.ascii_letters + string.digits + "!#$&'*+-.^_`|~")


def _impersonation(user: Any, *, source: str) -> tuple[tuple[str, str], ...]:
    """The Impersonate-* headers of the user's ``as`` family, as client-go sends them: only
    when ``as`` names a user; an extra's key %-escaped where a header name may not hold it."""
    fields = user.value if user is not None and isinstance(user.value, dict) else {}
    name = fields.get("as")
    if not name:
        return ()
    groups = fields.get("as-groups") or []
    extra = fields.get("as-user-extra") or {}
    if not (
        isinstance(name, str)
        and isinstance(fields.get("as-uid") or "", str)
        and isinstance(groups, list)
        and all(isinstance(g, str) for g in groups)
        and isinstance(extra, dict)
        and all(isinstance(v, list) and all(isinstance(x, str) for x in v) for v in extra.values())
    ):
        raise ConfigError(
            f"{source}: the user's impersonation is malformed (as and as-uid are strings, "
            "as-groups a list of strings, as-user-extra a map of string lists)"
        )
    headers = [("Impersonate-User", name)]
    if fields.get("as-uid"):
        headers.append(("Impersonate-Uid", fields["as-uid"]))
    headers += [("Impersonate-Group", group) for group in groups]
    for key, values in extra.items():
        escaped = "".join(
            chr(b) if chr(b) in _HEADER_KEY else f"%{b:02X}" for b in str(key).encode()
        )
        headers += [(f"Impersonate-Extra-{escaped}", value) for value in values]
    return tuple(headers)


def _mtime(path: str | None) -> float:
    try:
        return os.stat(path).st_mtime if path else 0.0
    except OSError:
        return 0.0


def require_kubeconfig(path: str, *, named: str) -> None:
    """ConfigError unless a file ``path`` names exists; ``named`` says where ``path`` came from
    (``--kubeconfig``, ``$KUBECONFIG``).

    ``path`` may list several files (``:``-separated): the loader skips the missing ones, as
    kubectl does, and says only "Invalid kube-config file. No configuration found." when none
    exists, which reads like a broken file rather than a wrong path.
    """
    files = [f for f in path.split(os.pathsep) if f]
    if any(Path(f).expanduser().exists() for f in files):
        return
    missing = "not found" if len(files) <= 1 else "none of these files is found"
    raise ConfigError(
        f"{named} {path}: {missing}; give a kubeconfig that exists, or run without a cluster "
        "(--offline, or --cluster FILE)"
    )


def uses_service_account(
    environ: Mapping[str, str], service_account: Path = SERVICE_ACCOUNT
) -> bool:
    """Whether a command given no ``--kubeconfig``/``--context`` talks as the pod's service
    account: in a pod, unless its token is not mounted (automountServiceAccountToken: false)
    and ``$KUBECONFIG`` names another way in. Every pod has ``$KUBERNETES_SERVICE_HOST``;
    client-go deems in-cluster possible only when the token file is there too."""
    if not environ.get(IN_CLUSTER_ENV):
        return False
    return (service_account / "token").is_file() or not environ.get(KUBECONFIG_ENV)


def load_credentials(
    kubeconfig: str | None = None,
    *,
    context: str | None = None,
    environ: Mapping[str, str] = os.environ,
    service_account: Path = SERVICE_ACCOUNT,
) -> Credentials:
    """``--kubeconfig`` if given, else the pod's service account, else ``$KUBECONFIG``.

    ``context`` picks a kubeconfig context other than its current-context (and so rules out
    the service account).

    Loads once right away (blocking: call it off the loop) so that a broken kubeconfig stops
    ``stszone serve`` at start-up with a :class:`ConfigError` instead of failing every watch.
    """
    from kubernetes import client, config

    # The package is only partly annotated; treat it as Any rather than sprinkle ignores.
    kube_client: Any = client
    kube_config: Any = config
    if kubeconfig is None and context is None and uses_service_account(environ, service_account):
        loader = kube_config.incluster_config.InClusterConfigLoader(
            token_filename=str(service_account / "token"),
            cert_filename=str(service_account / "ca.crt"),
            environ=environ,
        )

        def in_cluster() -> Any:
            configuration = kube_client.Configuration()
            loader.load_and_set(configuration)
            return configuration

        credentials = Credentials(in_cluster, source="in-cluster service account")
    else:
        # $KUBECONFIG may list several files (":"-separated); the loader merges them like kubectl.
        path = kubeconfig or environ.get(KUBECONFIG_ENV)
        if not path:
            raise ConfigError(
                "no cluster to talk to: not in a pod (no KUBERNETES_SERVICE_HOST), no --kubeconfig "
                "and no $KUBECONFIG; give one, or run offline with --zones or --cluster FILE"
            )
        require_kubeconfig(path, named="--kubeconfig" if kubeconfig else f"${KUBECONFIG_ENV}")
        # The loader calls a missing context an "Invalid kube-config file"; say what kubectl
        # says. A file with no contexts, or whose contexts do not read, is broken: the loader
        # says how.
        try:
            contexts, current = _contexts(path)
        except Exception:  # ConfigException, OSError, YAML errors
            contexts, current = [], None
        # The loader takes the last file's current-context; kubectl the first one's: name it.
        chosen = context
        if contexts:
            chosen = _pick_context(path, context, contexts=contexts, current=current).name

        def from_file() -> Any:
            configuration = kube_client.Configuration()
            kube_config.load_kube_config(
                config_file=path,
                context=chosen,
                client_configuration=configuration,
                persist_config=False,
            )
            return configuration

        named = f" (context {context})" if context else ""
        source = f"kubeconfig {path}{named}"
        user = _user(path, context=chosen, kube_config=kube_config)
        credentials = Credentials(
            from_file,
            source=source,
            token_file=_token_file(user),
            impersonation=_impersonation(user, source=source),
        )
    credentials.target_now()
    return credentials


@dataclass(frozen=True, slots=True)
class KubeContext:
    """A kubeconfig context as kubectl resolves it: its name and its namespace (if it sets one)."""

    name: str
    namespace: str | None


def kubeconfig_context(kubeconfig: str, context: str | None = None) -> KubeContext:
    """The context kubectl would use from ``kubeconfig`` (``":"``-separated files are merged,
    first file wins): ``context`` when given, else the current-context."""
    try:
        contexts, current = _contexts(kubeconfig)
    except Exception as err:  # ConfigException, OSError, YAML errors
        raise ConfigError(f"cannot read the kubeconfig {kubeconfig}: {err}") from err
    return _pick_context(kubeconfig, context, contexts=contexts, current=current)


def _contexts(kubeconfig: str) -> tuple[list[Any], str | None]:
    """The contexts of ``kubeconfig`` (files merged as the loader merges them, the first file
    winning per name) and its current-context as kubectl reads it, read without the loader: it
    refuses a current-context that names no context as an "Invalid kube-config file", even
    when another context is asked for."""
    from kubernetes import config

    kube_config: Any = config
    merged = kube_config.kube_config.KubeConfigMerger(kubeconfig).config
    raw = getattr(merged, "value", merged)
    if not isinstance(raw, dict):
        raise ValueError("it holds no kubeconfig")
    entries = raw.get("contexts") or []
    contexts = [getattr(entry, "value", entry) for entry in entries]
    return [c for c in contexts if isinstance(c, dict)], _current_context(kubeconfig)


def _current_context(kubeconfig: str) -> str | None:
    """The current-context of the first of the ``kubeconfig`` files that sets one, as
    client-go merges them (plain values merged last file first, each non-empty one
    overriding); the ``kubernetes`` loader keeps the last file's instead."""
    import yaml

    for name in kubeconfig.split(os.pathsep):
        file = Path(name).expanduser()
        if not name or not file.exists():
            continue
        loaded = yaml.safe_load(file.read_text())
        current = loaded.get("current-context") if isinstance(loaded, dict) else None
        if current:
            return str(current)
    return None


def _pick_context(
    kubeconfig: str, context: str | None, *, contexts: list[Any], current: str | None
) -> KubeContext:
    wanted = context or current
    if not wanted:
        raise ConfigError(
            f"the kubeconfig {kubeconfig} sets no current-context; pass --context NAME or run "
            "`kubectl config use-context NAME`"
        )
    for entry in contexts or ():
        if entry.get("name") == wanted:
            namespace = (entry.get("context") or {}).get("namespace") or None
            return KubeContext(name=wanted, namespace=namespace)
    raise ConfigError(
        f"context {wanted!r} is not in the kubeconfig {kubeconfig}; "
        "`kubectl config get-contexts` lists the contexts it has"
    )
