"""``stszone manifests --base FILE``: a rendered overlay (``kubectl kustomize``'s output) read
and filled in with the caBundle, instead of the built-in base.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import yaml

from webhook.errors import ConfigError, one_line
from webhook.install.deploybase import NAME, Obj
from webhook.install.pemcheck import read_named


def read_base(base: Path, *, ca: Path) -> tuple[list[Obj], str]:
    """The objects of ``--base`` (``-``: standard input) and how refusals name it; a
    ConfigError naming the flag, and the way to render an overlay, when it does not read (a
    missing file, or the overlay's directory given where its rendering belongs)."""
    stdin = str(base) == "-"
    source = f"{base} (standard input)" if stdin else str(base)
    overlay = shlex.quote(str(base)) if not stdin and base.is_dir() else "DIR"
    # Standard input holds the rendered overlay in the example: the CA must come from a file.
    given = "CA" if str(ca) == "-" else shlex.quote(str(ca))
    way = (
        f"; --base takes an overlay rendered to one file: `kubectl kustomize {overlay} | "
        f"stszone manifests --ca {given} --base -`"
    )
    objects = load_objects(read_named(base, f"--base file {base}", way=way), source=source)
    refuse_managed(objects, source=source)
    return objects, source


def load_objects(text: bytes, *, source: str) -> list[Obj]:
    """The objects of a YAML stream such as ``kubectl kustomize`` prints (``List``s unpacked).

    Each must be a mapping with a kind and a metadata mapping, and a spec, when it has one, a
    mapping too (``metadata:`` or ``spec:`` with nothing after it is YAML's null): else a
    ConfigError, never a traceback from reading it later.
    """
    try:
        docs = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.YAMLError as err:
        raise ConfigError(f"{source} is not YAML: {one_line(err)}") from None
    except RecursionError:  # PyYAML composes nested collections by recursion
        raise ConfigError(
            f"{source} nests lists or mappings too deeply to be a rendered overlay"
        ) from None
    objects: list[Obj] = []
    for doc in docs:
        listed = isinstance(doc, dict) and doc.get("kind") == "List"
        items = doc.get("items", []) if listed else [doc]
        if not isinstance(items, list) or not all(_is_object(item) for item in items):
            raise ConfigError(f"{source} holds something that is not a Kubernetes object")
        objects += items
    return objects


def _is_object(item: Any) -> bool:
    """A mapping with a kind, a metadata mapping, and no spec or a spec mapping."""
    return (
        isinstance(item, dict)
        and "kind" in item
        and isinstance(item.get("metadata"), dict)
        and isinstance(item.get("spec", {}), dict)
    )


def _dig(value: Any, *path: str) -> Any:
    """``value[path[0]][path[1]]...``, or None where a step is not a mapping."""
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _items(value: Any) -> list[Any]:
    """``value`` if it is a list, else none: a malformed field below an object's spec reads as
    absent here, and the API server refuses it when the output is applied."""
    return value if isinstance(value, list) else []


def fill_ca_bundle(objects: list[Obj], *, ca_bundle: str, source: str) -> str:
    """Set caBundle on every webhook that calls Service ``stszone``; return its namespace."""
    namespaces: set[str] = {
        str(obj["metadata"].get("namespace", "default"))
        for obj in objects
        if obj["kind"] == "Service" and obj["metadata"].get("name") == NAME
    }
    if len(namespaces) != 1:
        raise ConfigError(f"{source} must hold exactly one Service named {NAME}")
    namespace = namespaces.pop()
    ours = {"name": NAME, "namespace": namespace}
    filled = 0
    for obj in objects:
        if obj["kind"] in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            for webhook in _items(obj.get("webhooks")):
                service = _dig(webhook, "clientConfig", "service")
                if isinstance(service, dict) and {key: service.get(key) for key in ours} == ours:
                    webhook["clientConfig"]["caBundle"] = ca_bundle
                    filled += 1
    if not filled:
        raise ConfigError(f"no webhook in {source} calls Service {NAME}.{namespace}")
    return namespace


def refuse_managed(objects: list[Obj], *, source: str) -> None:
    """ConfigError when the file's Deployment runs ``--manage-certs``: it would serve its own
    certificates, not the pair whose CA is being filled in."""
    for obj in objects:
        containers = _items(_dig(obj, "spec", "template", "spec", "containers"))
        if obj["kind"] == "Deployment" and any(
            "--manage-certs" in _items(_dig(c, "args")) for c in containers
        ):
            raise ConfigError(
                f"{source} runs `stszone serve --manage-certs`, which makes its own certificates "
                "and would not serve the one given with --ca; add the component "
                "deploy/components/provided-certs to the overlay, or drop --ca to apply it as is"
            )
