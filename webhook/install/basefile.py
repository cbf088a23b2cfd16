"""``stszone manifests --base FILE``: a rendered overlay (``kubectl kustomize``'s output) read
and filled in with the caBundle, instead of the built-in base.
"""

from __future__ import annotations

import yaml

from webhook.errors import ConfigError
from webhook.install.deploybase import NAME, Obj


def load_objects(text: bytes, *, source: str) -> list[Obj]:
    """The objects of a YAML stream such as ``kubectl kustomize`` prints (``List``s unpacked)."""
    try:
        docs = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.YAMLError as err:
        raise ConfigError(f"{source} is not YAML: {err}") from None
    objects: list[Obj] = []
    for doc in docs:
        items = (
            doc.get("items", []) if isinstance(doc, dict) and doc.get("kind") == "List" else [doc]
        )
        for item in items:
            if not (isinstance(item, dict) and "kind" in item and "metadata" in item):
                raise ConfigError(f"{source} holds something that is not a Kubernetes object")
            objects.append(item)
    return objects


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
            for webhook in obj.get("webhooks") or []:
                client = webhook.get("clientConfig") or {}
                service = client.get("service") or {}
                if {key: service.get(key) for key in ours} == ours:
                    client["caBundle"] = ca_bundle
                    filled += 1
    if not filled:
        raise ConfigError(f"no webhook in {source} calls Service {NAME}.{namespace}")
    return namespace


def refuse_managed(objects: list[Obj], *, source: str) -> None:
    """ConfigError when the file's Deployment runs ``--manage-certs``: it would serve its own
    certificates, not the pair whose CA is being filled in."""
    for obj in objects:
        containers = obj.get("spec", {}).get("template", {}).get("spec", {}).get("containers")
        if obj["kind"] == "Deployment" and any(
            "--manage-certs" in (c.get("args") or []) for c in containers or []
        ):
            raise ConfigError(
                f"{source} runs `stszone serve --manage-certs`, which makes its own certificates "
                "and would not serve the one given with --ca; add the component "
                "deploy/components/provided-certs to the overlay, or drop --ca to apply it as is"
            )
