"""What a kubeconfig says that the ``kubernetes`` loader reads differently from kubectl, or not
at all, read from the files themselves (``$KUBECONFIG``'s files merged as kubectl merges them).

- The files: the loader splits any path it is given at ``:``, where kubectl reads
  ``--kubeconfig`` as one file; :func:`kubeconfig_files` says which files a setting names
  and :func:`merged_config` merges them without splitting a path again.

- The context: the loader keeps the last file's ``current-context`` where kubectl takes the
  first file's, and calls a missing context an "Invalid kube-config file":
  :mod:`webhook.cluster.kubecontext` names the one kubectl would use.
- The user's ``tokenFile``: the loader reads it once; ``Credentials`` reloads when it changes.
- The user's impersonation (``as``, ``as-uid``, ``as-groups``, ``as-user-extra``), which the
  loader drops: :func:`impersonation_headers` gives the Impersonate-* headers client-go sends.
- A field of the wrong type (``clusters: 5``, a context that is a string), which the loader
  indexes into where kubectl refuses the file: :mod:`webhook.cluster.kubeconfigshape`.
- A cluster with ``insecure-skip-tls-verify`` and a CA, which the loader accepts (and
  verifies nothing) where kubectl refuses it: :func:`refuse_insecure_with_ca`.
- A server that is not https, to which the loader sends the user's token or password in
  clear text where kubectl sends no credentials: :func:`read_as_client_go`.
- A server whose scheme is not in lower case (``HTTPS://host``), to which the loader speaks
  TLS without the cluster's CA, verifying nothing, where kubectl verifies it:
  :func:`read_as_client_go`.
"""

from __future__ import annotations

import os
import string
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

from webhook.cluster.kubeconfigshape import refuse_bad_shape
from webhook.errors import ConfigError

KUBECONFIG_ENV: Final = "KUBECONFIG"


def kubeconfig_files(value: str, *, listed: bool) -> tuple[str, ...]:
    """The files a kubeconfig setting names, as client-go reads them: ``--kubeconfig`` names
    exactly one file (its ExplicitPath, ``:`` and all); only ``$KUBECONFIG`` (``listed``) is a
    ``:``-separated list, whose empty entries name nothing."""
    if not listed:
        return (value,)
    return tuple(f for f in value.split(os.pathsep) if f)


def shown(files: tuple[str, ...]) -> str:
    """``files`` as the user wrote them, for messages."""
    return os.pathsep.join(files)


def not_found(files: tuple[str, ...]) -> str:
    """What is said of ``files`` when none of them exists, at start and at a reload alike."""
    return "not found" if len(files) <= 1 else "none of these files is found"


def require_kubeconfig(files: tuple[str, ...], *, named: str) -> None:
    """ConfigError unless one of ``files`` exists; ``named`` says where they came from
    (``--kubeconfig``, ``$KUBECONFIG``).

    Of several files (``$KUBECONFIG``) the loader skips the missing ones, as kubectl does, and
    says only "Invalid kube-config file. No configuration found." when none exists, which
    reads like a broken file rather than a wrong path.
    """
    if any(Path(f).expanduser().exists() for f in files):
        return
    raise ConfigError(
        f"{named} {shown(files)}: {not_found(files)}; give a kubeconfig that exists, or run "
        "without a cluster (--offline, or --cluster FILE)"
    )


#: The fields naming a file, resolved against the directory of the kubeconfig holding their
#: entry, as client-go's ResolveLocalPaths does (and an exec command holding a ``/``).
_FILE_FIELDS: Final = {
    "clusters": ("cluster", ("certificate-authority",)),
    "users": ("user", ("client-certificate", "client-key", "tokenFile")),
}


def merged_config(files: tuple[str, ...]) -> Any:
    """The existing ``files`` merged as the loader merges a ``$KUBECONFIG`` list (the first
    file's entry winning per name), each read as one path; None when none exists or holds
    anything. An empty file (or one of comments) is skipped, as client-go reads it as an empty
    configuration: the loader refuses it ("file is empty") and with it the whole list.

    Relative paths are made absolute against each entry's own file: the loader resolves a
    user's client certificate, key and exec command against its cluster's file instead. An
    empty one names no file, as in client-go.

    Each file is read twice (its YAML here, then the loader's copy): one removed after it was
    found, before either read, is skipped as one not there is, never a raw FileNotFoundError.
    """
    import yaml
    from kubernetes import config

    kube_config: Any = config
    merger = kube_config.kube_config.KubeConfigMerger("")
    for file in files:
        path = os.path.expanduser(file)
        try:
            loaded = yaml.safe_load(Path(path).read_text()) if os.path.exists(path) else None
            if loaded is not None:
                refuse_bad_shape(path, loaded)
                _refuse_duplicates(path, loaded)
                merger.load_config(path)
        except FileNotFoundError:  # only the file itself is opened here
            continue
    merged = merger.config
    for kind, (key, names) in _FILE_FIELDS.items() if merged is not None else ():
        for entry in merged.value[kind]:
            fields = entry.value.get(key) if isinstance(entry.value, dict) else None
            if not isinstance(fields, dict):
                continue
            base = os.path.dirname(os.path.abspath(str(entry.path)))
            for name in names:
                if fields.get(name) == "":  # unset to client-go; the loader reads the directory
                    del fields[name]
                elif isinstance(fields.get(name), str):
                    fields[name] = os.path.join(base, fields[name])
            run = fields.get("exec")
            if isinstance(run, dict) and os.sep in str(run.get("command") or ""):
                run["command"] = os.path.join(base, str(run["command"]))
    return merged


def _refuse_duplicates(path: str, loaded: Any) -> None:
    """client-go refuses a file naming two clusters, contexts or users alike ("duplicate
    name in list"); the loader would take the first and talk to a cluster kubectl never
    would."""
    for kind in ("clusters", "contexts", "users") if isinstance(loaded, dict) else ():
        names = [e.get("name") for e in loaded.get(kind) or () if isinstance(e, dict)]
        twice = sorted({str(n) for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(
                f"{path} has two {kind} named {twice[0]!r}, which kubectl refuses (duplicate "
                "name in list); rename or remove one"
            )


def _named_context(merged: Any, context: str | None) -> Any:
    return merged["contexts"].get_with_name(context or merged["current-context"])["context"]


def user_entry(merged: Any, *, context: str | None) -> Any:
    """The user ``context`` (else the current one) names in the ``merged`` kubeconfig, as the
    loader reads it; None when it names none that reads (loading it says why)."""
    try:
        named = _named_context(merged, context)
        return merged["users"].get_with_name(named["user"])["user"]
    except Exception:  # ConfigException, a shape the loader refuses anyway
        return None


def cluster_entry(merged: Any, *, context: str | None) -> tuple[str, Any] | None:
    """The name and fields of the cluster ``context`` (else the current one) names in the
    ``merged`` kubeconfig, as the loader reads it; None when it names none that reads (loading
    it says why)."""
    try:
        named = _named_context(merged, context)
        name = str(named["cluster"])
        return name, merged["clusters"].get_with_name(name)["cluster"].value
    except Exception:  # ConfigException, a shape the loader refuses anyway
        return None


def refuse_insecure_with_ca(cluster: tuple[str, Any] | None) -> None:
    """ValueError when an https cluster skips TLS verification and names a CA too, which
    client-go refuses ("specifying a root certificates file with the insecure flag is not
    allowed", transport.TLSConfigFor: a CA file or data with Insecure); the loader would
    quietly verify nothing, so the CA the user gave would check nothing."""
    if cluster is None or not isinstance(cluster[1], dict):
        return
    name, fields = cluster
    cas = [f for f in ("certificate-authority", "certificate-authority-data") if fields.get(f)]
    if fields.get("insecure-skip-tls-verify") is True and cas and over_tls(fields.get("server")):
        given = " and ".join(cas)
        raise ValueError(
            f"cluster {name!r} sets both insecure-skip-tls-verify: true and {given}, "
            "which kubectl refuses (specifying a root certificates file with the insecure flag "
            "is not allowed); remove insecure-skip-tls-verify to verify the server with that "
            f"CA, or remove {given} to skip verification"
        )


#: The user fields that say who the user is; client-go reads none of them unless the server
#: is https (clientcmd's ClientConfig merges getUserIdentificationPartialConfig only when
#: rest.IsConfigTransportTLS), so over http kubectl sends no credential and runs no plugin.
_IDENTIFICATION: Final = (
    "token",
    "tokenFile",
    "username",
    "password",
    "client-certificate",
    "client-certificate-data",
    "client-key",
    "client-key-data",
    "exec",
    "auth-provider",
)


def over_tls(server: object) -> bool:
    """Whether client-go speaks TLS to ``server`` as clientcmd asks it, before the cluster's CA
    is merged (rest.DefaultServerUrlFor): an https URL; a bare ``host:port`` is http."""
    parts = urlsplit(str(server or ""))
    return parts.scheme.lower() == "https" and bool(parts.netloc)


def read_as_client_go(merged: Any, context: str | None) -> None:
    """Rewrite, in the ``merged`` configuration, the cluster and user the context ``context``
    (else the current one) names where the loader reads them unlike client-go:

    - an https scheme in any case (``HTTPS://host``) is written in lower case, as Go's
      url.Parse reads it: the loader takes the cluster's CA and the user's client pair only for
      a server starting with ``https``, so it would speak TLS verifying nothing and send the
      token without its client certificate;
    - to a server that is not https the user is emptied, as client-go leaves the user's
      identification out: the loader would send its token or password in clear text. The
      user's impersonation, which client-go sends to any server, is read apart from the
      loader (:func:`impersonation_headers`).
    """
    try:
        named = _named_context(merged, context)
        cluster = merged["clusters"].get_with_name(named["cluster"])["cluster"]
    except Exception:  # a file the loader refuses (and says why)
        return
    server = cluster.safe_get("server")
    if over_tls(server):
        if isinstance(cluster.value, dict):
            cluster.value["server"] = "https" + str(server)[len("https") :]
        return
    try:
        user = merged["users"].get_with_name(named["user"])
    except Exception:  # no user
        return
    if isinstance(user.value, dict):
        user.value["user"] = {}


def unsent_credentials(cluster: tuple[str, Any] | None, user: Any) -> tuple[str, ...]:
    """The fields of the user's identification that are not sent because the ``cluster``'s
    server is not https (:func:`read_as_client_go`), by name."""
    if cluster is None or not isinstance(cluster[1], dict) or over_tls(cluster[1].get("server")):
        return ()
    return user_credentials(user)


def user_credentials(user: Any) -> tuple[str, ...]:
    """The fields of the user's identification that it sets, by name: none for a user that
    asks anonymously."""
    fields = user.value if user is not None and isinstance(user.value, dict) else {}
    return tuple(f for f in _IDENTIFICATION if fields.get(f))


def user_token_file(user: Any) -> str | None:
    """The user's ``tokenFile``, resolved as the loader resolves it (relative to its file)."""
    if user is None or not isinstance(user.value, dict) or "tokenFile" not in user.value:
        return None
    base = os.path.dirname(os.path.abspath(str(user.path)))
    return os.path.normpath(os.path.join(base, str(user.value["tokenFile"])))


#: The bytes a header name may hold (RFC 7230 tchar) but ``%``, which client-go escapes too.
_HEADER_KEY: Final = frozenset(string.ascii_letters + string.digits + "!#$&'*+-.^_`|~")


def impersonation_headers(user: Any) -> tuple[tuple[str, str], ...]:
    """The Impersonate-* headers of the user's ``as`` family, as client-go sends them: only
    when ``as`` names a user; an extra's key %-escaped where a header name may not hold it.
    The others without ``as`` are refused, as client-go's validation refuses them."""
    fields = user.value if user is not None and isinstance(user.value, dict) else {}
    name = fields.get("as")
    if not name:
        others = [f for f in ("as-uid", "as-groups", "as-user-extra") if fields.get(f)]
        if others:
            raise ValueError(
                f"the user sets {', '.join(others)} without impersonating a user; "
                "add as: USER (the user to act as), or remove them"
            )
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
        raise ValueError(
            "the user's impersonation is malformed (as and as-uid are strings, "
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
