"""The Mutating/ValidatingWebhookConfigurations: which requests the API server sends to stszone.

Shared by the installed manifests (clientConfig names the Service) and the end-to-end tests
(clientConfig names a URL), so both register exactly the same rules and selectors.

The safety choices, each one a lesson from admission webhooks that took clusters down:

- ``namespaceSelector``: only namespaces labelled ``stszone.io/enabled=true``, and never
  kube-system or stszone's own namespace, whatever their labels say; so a broken stszone can
  neither block the control plane nor its own recovery.
- ``objectSelector``: anything labelled ``stszone.io/skip=true`` is never sent.
- ``matchConditions`` (CEL): of the pods, only those a StatefulSet controls are sent. Without
  it, while no replica answers, ``failurePolicy: Fail`` refuses every pod create in an opted-in
  namespace -- Deployment and Job pods that stszone never changes included. The API server
  evaluates the condition itself, so it holds while stszone is down. It needs Kubernetes 1.28
  (beta, on by default; GA in 1.30); older clusters install with ``match_conditions=False``
  (``stszone manifests --no-match-conditions``, or the ``deploy/components/no-match-conditions``
  kustomize component), which sends every pod of an opted-in namespace.
- ``failurePolicy: Fail``: a pod admitted without its zone is the failure stszone exists to
  prevent; the blast radius is kept small by the selectors above and a short timeout instead.
- ``sideEffects: NoneOnDryRun``: dry-run requests are answered like real ones and leave no trace;
  a real request may leave one, an Event on the workload (written later, off the admission
  path). The API server sends a dry run only to webhooks that declare ``None`` or
  ``NoneOnDryRun``, so ``kubectl apply --dry-run=server`` still shows stszone's answer.
- ``statefulsets/scale``: ``kubectl scale`` and the HPA go through the subresource and would
  bypass a webhook registered on ``statefulsets`` alone; the same holds for OpenKruise's
  ``apps.kruise.io`` StatefulSets, registered with their ``/scale`` unless turned off
  (``kruise=False``). Where their CRD is not installed the API server sends nothing for them.
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


#: The one condition both webhooks carry. A request for anything but a pod passes (claims and
#: StatefulSets are sent as the rules say); a pod passes when one of its ownerReferences is a
#: controller of kind StatefulSet in group apps -- exactly what ``statefulset_owner`` in
#: ``webhook.model.records`` accepts, so no pod the engine would place is left out. ``has()``
#: guards each optional field: a missing field is an evaluation error, and with
#: ``failurePolicy: Fail`` an error refuses the request instead of skipping the webhook.
STATEFULSET_PODS_ONLY: Final = {
    "name": "statefulset-pods-only",
    "expression": (
        'request.resource.group != "" || request.resource.resource != "pods" || '
        "(has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(ref, "
        'has(ref.controller) && ref.controller && ref.kind == "StatefulSet" && '
        'ref.apiVersion.startsWith("apps/")))'
    ),
}
#: The same, with the pods of OpenKruise Advanced StatefulSets (owner ``apps.kruise.io/...``,
#: kind StatefulSet) sent too.
WORKLOAD_PODS_ONLY: Final = {
    "name": "statefulset-pods-only",
    "expression": (
        'request.resource.group != "" || request.resource.resource != "pods" || '
        "(has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(ref, "
        'has(ref.controller) && ref.controller && ref.kind == "StatefulSet" && '
        '(ref.apiVersion.startsWith("apps/") || ref.apiVersion.startsWith("apps.kruise.io/"))))'
    ),
}


def _rule(group: str, resources: list[str], operations: list[str]) -> Obj:
    return {
        "apiGroups": [group],
        "apiVersions": ["v1"],
        "operations": operations,
        "resources": resources,
        "scope": "Namespaced",
    }


#: OpenKruise Advanced StatefulSets, both served versions (v1alpha1 requests arrive as sent).
KRUISE_GROUP: Final = "apps.kruise.io"
KRUISE_VERSIONS: Final = ["v1beta1", "v1alpha1"]


def _kruise_rule(resources: list[str], operations: list[str]) -> Obj:
    return {**_rule(KRUISE_GROUP, resources, operations), "apiVersions": list(KRUISE_VERSIONS)}


#: Advanced StatefulSets get their zone list on CREATE; their changes and /scale are guarded.
KRUISE_MUTATE_RULES: Final = (_kruise_rule(["statefulsets"], ["CREATE"]),)
KRUISE_VALIDATE_RULES: Final = (
    _kruise_rule(["statefulsets"], ["CREATE", "UPDATE"]),
    _kruise_rule(["statefulsets/scale"], ["UPDATE"]),
)

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


def _webhook(
    name: str,
    *,
    rules: tuple[Obj, ...],
    client: Obj,
    namespaces: Obj,
    match_conditions: bool,
    kruise: bool = True,
) -> Obj:
    webhook: Obj = {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "clientConfig": client,
        "rules": [dict(rule) for rule in rules],
        "failurePolicy": "Fail",
        "matchPolicy": "Equivalent",
        "namespaceSelector": namespaces,
        "objectSelector": object_selector(),
        "sideEffects": "NoneOnDryRun",
        "timeoutSeconds": TIMEOUT_SECONDS,
    }
    if match_conditions:
        webhook["matchConditions"] = [dict(WORKLOAD_PODS_ONLY if kruise else STATEFULSET_PODS_ONLY)]
    return webhook


def mutating(
    name: str,
    *,
    client: Obj,
    namespaces: Obj,
    labels: dict[str, str],
    match_conditions: bool = True,
    kruise: bool = True,
) -> Obj:
    """The MutatingWebhookConfiguration; reinvoked when a later webhook changes the pod.

    ``match_conditions=False`` leaves out the CEL condition, for clusters older than 1.28.
    """
    webhook = _webhook(
        MUTATE_NAME,
        rules=MUTATE_RULES + (KRUISE_MUTATE_RULES if kruise else ()),
        client=client,
        namespaces=namespaces,
        match_conditions=match_conditions,
        kruise=kruise,
    )
    # Another mutating webhook may add affinity after us; IfNeeded gives us the last word.
    webhook["reinvocationPolicy"] = "IfNeeded"
    return {
        "apiVersion": API_VERSION,
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name, "labels": dict(labels)},
        "webhooks": [webhook],
    }


def validating(
    name: str,
    *,
    client: Obj,
    namespaces: Obj,
    labels: dict[str, str],
    match_conditions: bool = True,
    kruise: bool = True,
) -> Obj:
    """The ValidatingWebhookConfiguration: annotations, the scale-down guard, final pods."""
    webhook = _webhook(
        VALIDATE_NAME,
        rules=VALIDATE_RULES + (KRUISE_VALIDATE_RULES if kruise else ()),
        client=client,
        namespaces=namespaces,
        match_conditions=match_conditions,
        kruise=kruise,
    )
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name, "labels": dict(labels)},
        "webhooks": [webhook],
    }
