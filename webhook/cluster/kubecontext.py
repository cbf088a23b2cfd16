"""The context kubectl would use from a kubeconfig, read as kubectl reads it.

The ``kubernetes`` loader keeps the last file's ``current-context`` where kubectl takes the
first file's that sets one, and calls a missing context an "Invalid kube-config file" even when
another context is asked for; :func:`pick_context` names the one kubectl would use, or says
what is wrong as kubectl does. The files are merged as :mod:`webhook.cluster.kubeconfig`
merges them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from webhook.cluster.kubeconfig import merged_config, shown
from webhook.errors import ConfigError, one_line


@dataclass(frozen=True, slots=True)
class KubeContext:
    """A kubeconfig context as kubectl resolves it: its name and its namespace (if it sets one)."""

    name: str
    namespace: str | None


def kubeconfig_context(files: tuple[str, ...], context: str | None = None) -> KubeContext:
    """The context kubectl would use from the kubeconfig ``files`` (merged, first file wins):
    ``context`` when given, else the current-context."""
    try:
        contexts, current = read_contexts(files)
    except Exception as err:  # ConfigException, OSError, YAML errors
        raise ConfigError(f"cannot read the kubeconfig {shown(files)}: {one_line(err)}") from err
    return pick_context(shown(files), context, contexts=contexts, current=current)


def read_contexts(files: tuple[str, ...]) -> tuple[list[Any], str | None]:
    """The contexts of the kubeconfig ``files`` (merged as the loader merges them, the first
    file winning per name) and its current-context as kubectl reads it, read without the
    loader: it refuses a current-context that names no context as an "Invalid kube-config
    file", even when another context is asked for."""
    merged = merged_config(files)
    raw = getattr(merged, "value", merged)
    if not isinstance(raw, dict):
        raise ValueError("it holds no kubeconfig")
    entries = raw.get("contexts") or []
    contexts = [getattr(entry, "value", entry) for entry in entries]
    return [c for c in contexts if isinstance(c, dict)], current_context(files)


def current_context(files: tuple[str, ...]) -> str | None:
    """The current-context of the first of the kubeconfig ``files`` that sets one, as
    client-go merges them (plain values merged last file first, each non-empty one
    overriding); the ``kubernetes`` loader keeps the last file's instead."""
    import yaml

    for name in files:
        file = Path(name).expanduser()
        if not file.exists():
            continue
        loaded = yaml.safe_load(file.read_text())
        current = loaded.get("current-context") if isinstance(loaded, dict) else None
        if current:
            return str(current)
    return None


def pick_context(
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


def chosen_context(files: tuple[str, ...], context: str | None) -> str | None:
    """The context to load: ``context``, else the current-context kubectl would use; a
    :class:`ConfigError` as kubectl words it when that context is not there. None when the
    files hold no context that reads (the loader then says what is wrong with them)."""
    try:
        found, current = read_contexts(files)
    except Exception:  # ConfigException, OSError, YAML errors
        return context
    if not found:
        return context
    return pick_context(shown(files), context, contexts=found, current=current).name
