"""The Mutating/ValidatingWebhookConfigurations: which requests the API server sends to stszone.

Shared by the installed manifests (clientConfig names the Service) and the end-to-end tests
(clientConfig names a URL), so both register exactly the same rules and selectors.

The safety choices, each one a lesson from admission webhooks that took clusters down:

- ``namespaceSelector``: only namespaces labelled ``stszone.io/enabled=true``, and never
  kube-system or stszone's own namespace, whatever their labels say; so a broken stszone can
  neither block the control plane nor its own recovery.
- ``objectSelector``: anything labelled ``stszone.io/skip=true`` is never sent.
- ``failurePolicy: Fail``: a pod admitted without its zone is the failure stszone exists to
  prevent; the blast radius is kept small by the selectors above and a short timeout instead.
- ``sideEffects: None``: dry-run requests are answered like real ones.
- ``statefulsets/scale``: ``kubectl scale`` and the HPA go through the subresource and would
  bypass a webhook registered on ``statefulsets`` alone.
"""

from __future__ import annotations

from typing import Any, Final

from webhook.model.annotations import ENABLED, SKIP

Obj = dict[str, Any]

MUTATE_NAME: Final = "mutate.stszone.io"
VALIDATE_NAME: Final = "validate.stszone.io"
API_VERSION: Final = "admissionregistration.k8s.io/v1"
TIMEOUT_SECONDS: Final = 5
#: The label the API server sets on every namespace (1.21+), used to exclude by name.
NAMESPACE_NAME_LABEL: Final = "kubernetes.io/metadata.name"


def _rule(group: str, resources: list[str], operations: list[str]) -> Obj:
    return {
        "apiGroups": [group],
        "apiVersions": ["v1"],
        "operations": operations,
        "resources": resources,
        "scope": "Namespaced",
    }


#: Pods and claims get their zone; StatefulSets get their zone list written down.
MUTATE_RULES: Final = (
    _rule("", ["pods", "persistentvolumeclaims"], ["CREATE"]),
    _rule("apps", ["statefulsets"], ["CREATE"]),
)
#: Annotations are checked on create/update; scale-downs through either path are guarded;
#: pods are checked after every mutating webhook has run.
VALIDATE_RULES: Final = (
    _rule("apps", ["statefulsets"], ["CREATE", "UPDATE"]),
    _rule("apps", ["statefulsets/scale"], ["UPDATE"]),
    _rule("", ["pods"], ["CREATE"]),
)


def namespace_selector(own_namespace: str, *, only: str | None = None) -> Obj:
    """Opted-in namespaces, minus kube-system and our own; ``only`` narrows to one (tests)."""
    selector: Obj = {
        "matchLabels": {ENABLED: "true"},
        "matchExpressions": [
            {
                "key": NAMESPACE_NAME_LABEL,
                "operator": "NotIn",
                "values": sorted({"kube-system", own_namespace}),
            }
        ],
    }
    if only is not None:
        selector["matchLabels"][NAMESPACE_NAME_LABEL] = only
    return selector


def object_selector() -> Obj:
    """Everything but objects labelled ``stszone.io/skip=true`` (an absent label matches)."""
    return {"matchExpressions": [{"key": SKIP, "operator": "NotIn", "values": ["true"]}]}


def service_client(*, namespace: str, path: str, ca_bundle: str | None) -> Obj:
    """clientConfig for the in-cluster Service ``stszone.<namespace>.svc:443``."""
    client: Obj = {
        "service": {"name": "stszone", "namespace": namespace, "path": path, "port": 443}
    }
    if ca_bundle is not None:
        client["caBundle"] = ca_bundle
    return client


def _webhook(name: str, *, rules: tuple[Obj, ...], client: Obj, namespaces: Obj) -> Obj:
    return {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "clientConfig": client,
        "rules": [dict(rule) for rule in rules],
        "failurePolicy": "Fail",
        "matchPolicy": "Equivalent",
        "namespaceSelector": namespaces,
        "objectSelector": object_selector(),
        "sideEffects": "None",
        "timeoutSeconds": TIMEOUT_SECONDS,
    }


def mutating(name: str, *, client: Obj, namespaces: Obj, labels: dict[str, str]) -> Obj:
    """The MutatingWebhookConfiguration; reinvoked when a later webhook changes the pod."""
    webhook = _webhook(MUTATE_NAME, rules=MUTATE_RULES, client=client, namespaces=namespaces)
    # Another mutating webhook may add affinity after us; IfNeeded gives us the last word.
    webhook["reinvocationPolicy"] = "IfNeeded"
    return {
        "apiVersion": API_VERSION,
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name, "labels": dict(labels)},
        "webhooks": [webhook],
    }


def validating(name: str, *, client: Obj, namespaces: Obj, labels: dict[str, str]) -> Obj:
    """The ValidatingWebhookConfiguration: annotations, the scale-down guard, final pods."""
    webhook = _webhook(VALIDATE_NAME, rules=VALIDATE_RULES, client=client, namespaces=namespaces)
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name, "labels": dict(labels)},
        "webhooks": [webhook],
    }
