"""A kubeconfig's fields of the wrong type, named as kubectl would refuse them.

client-go decodes a kubeconfig into typed structs (clientcmd/api/v1 Config, NamedCluster,
Cluster, ...) and refuses a file with a field of another type; the ``kubernetes`` loader indexes
into whatever it finds. :func:`refuse_bad_shape` says which field of which file is wrong and
what it should be, before the loader reads it.
"""

from __future__ import annotations

from typing import Any, Final

#: Each list of a kubeconfig: its entries' inner mapping, and the fields of that mapping that
#: are strings and booleans (client-go's clientcmd/api/v1 Cluster, Context and AuthInfo).
_SHAPES: Final = {
    "clusters": (
        "cluster",
        ("server", "certificate-authority", "certificate-authority-data", "tls-server-name"),
        ("insecure-skip-tls-verify", "disable-compression"),
    ),
    "contexts": ("context", ("cluster", "user", "namespace"), ()),
    "users": (
        "user",
        ("client-certificate", "client-key", "token", "tokenFile", "as", "as-uid", "username"),
        (),
    ),
}


def _shape(value: Any) -> str:
    """``value`` as a kubeconfig's reader would call it, for messages."""
    if isinstance(value, bool):
        return f"{str(value).lower()} (a boolean)"
    if isinstance(value, int | float):
        return f"{value} (a number)"
    if isinstance(value, str):
        return f"{value!r} (a string)"
    return "a list" if isinstance(value, list) else "a mapping"


def refuse_bad_shape(path: str, loaded: Any) -> None:
    """ValueError naming the first field of ``path`` whose type is wrong, and what it should be.

    client-go decodes a kubeconfig into typed structs and refuses a field of another type
    (``clusters: 5``: "cannot unmarshal number into Go struct field Config.clusters"); the
    loader indexes into what it finds and fails in Python's words, or reads a ``cluster:`` that
    is a string as no cluster at all and talks to localhost."""
    found = _wrong_field(loaded)
    if found:
        field, value, want = found
        where = f"{path}: {field}" if field else path
        raise ValueError(
            f"{where} is {_shape(value)} where a kubeconfig has {want}, so kubectl refuses the "
            "file too (cannot unmarshal)"
        )


def _wrong_field(loaded: Any) -> tuple[str, Any, str] | None:
    """The first field of a kubeconfig of the wrong type: (where, its value, what it should be)."""
    if not isinstance(loaded, dict):
        return "", loaded, "a mapping of clusters, contexts and users"
    if not isinstance(loaded.get("current-context") or "", str):
        return "current-context", loaded["current-context"], "a string"
    for kind, (key, strings, booleans) in _SHAPES.items():
        entries = loaded.get(kind)
        if entries is not None and not isinstance(entries, list):
            return kind, entries, f"a list of entries, each with a name and a {key}"
        for index, entry in enumerate(entries or ()):
            where = f"{kind}[{index}]"
            if not isinstance(entry, dict):
                return where, entry, f"a mapping with a name and a {key}"
            if not isinstance(entry.get("name", ""), str):
                return f"{where}.name", entry["name"], "a string"
            fields = entry.get(key)
            if fields is not None and not isinstance(fields, dict):
                return f"{where}.{key}", fields, f"a mapping of the {key}'s fields"
            for name, value in (fields or {}).items():
                if value is None:
                    continue
                if name in strings and not isinstance(value, str):
                    return f"{where}.{key}.{name}", value, "a string"
                if name in booleans and not isinstance(value, bool):
                    return f"{where}.{key}.{name}", value, "true or false"
    return None
