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
  bypass a webhook registered on ``statefulsets`` alone; ``kafkanodepools/scale`` and the
  ``/scale`` of OpenKruise's ``apps.kruise.io`` StatefulSets likewise.
- Strimzi KafkaNodePools (``kafka.strimzi.io`` ``v1`` and ``v1beta2``): their zone list on
  CREATE, the balanced ``remove-node-ids`` on UPDATE (mutating); the scale-down guard on
  UPDATE and ``/scale`` (validating). Their brokers' pods (controlled by a StrimziPodSet of
  ``core.strimzi.io``) pass the pod condition; their claims pass as every claim does.
- OpenKruise Advanced StatefulSets (``v1beta1`` and ``v1alpha1``): their zone list on CREATE,
  the guard on UPDATE and ``/scale``. Each kind beyond apps/v1 can be turned off (:class:`Kinds`).
  Where a kind's CRD is not installed the API server sends nothing for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from webhook.model import kruise, nodepools
from webhook.model.annotations import ENABLED, SKIP

Obj = dict[str, Any]

MUTATE_NAME: Final = "mutate.stszone.io"
VALIDATE_NAME: Final = "validate.stszone.io"
API_VERSION: Final = "admissionregistration.k8s.io/v1"
TIMEOUT_SECONDS: Final = 5
#: The label the API server sets on every namespace (1.21+), used to exclude by name.
NAMESPACE_NAME_LABEL: Final = "kubernetes.io/metadata.name"


#: The one condition both webhooks carry. A request for anything but a pod passes (claims,
#: StatefulSets and KafkaNodePools are sent as the rules say); a pod passes when one of its
#: ownerReferences is a controller of kind StatefulSet in group apps (or apps.kruise.io, an
#: Advanced StatefulSet, unless that kind is off) -- exactly the owners ``webhook.model.records``
#: accepts, so no pod the engine would place is left out -- or of kind StrimziPodSet in group
#: core.strimzi.io (a Kafka node pool's broker). ``has()`` guards each optional field: a
#: missing field is an evaluation error, and with ``failurePolicy: Fail`` an error refuses the
#: request instead of skipping the webhook.
@dataclass(frozen=True, slots=True)
class Kinds:
    """The ordinal-workload kinds beyond apps/v1 StatefulSets that are registered, read and
    judged; each can be turned off (``serve --no-kafka-node-pools``, ``--no-kruise``)."""

    kafka_node_pools: bool = True
    kruise: bool = True


#: Every kind on: the default.
ALL_KINDS: Final = Kinds()


def pods_condition(kinds: Kinds = ALL_KINDS) -> Obj:
    """The ``matchConditions`` entry that sends only the pods of ordinal workloads."""
    set_groups = 'ref.apiVersion.startsWith("apps/")'
    if kinds.kruise:
        set_groups = f'({set_groups} || ref.apiVersion.startsWith("{kruise.GROUP}/"))'
    owners = f'(ref.kind == "StatefulSet" && {set_groups})'
    if kinds.kafka_node_pools:
        owners += (
            ' || (ref.kind == "StrimziPodSet" && '
            f'ref.apiVersion.startsWith("{nodepools.PODSET_GROUP}/"))'
        )
    return {
        "name": "statefulset-pods-only",
        "expression": (
            'request.resource.group != "" || request.resource.resource != "pods" || '
            "(has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists("
            f"ref, has(ref.controller) && ref.controller && ({owners})))"
        ),
    }


def _rule(
    group: str, resources: list[str], operations: list[str], *, versions: tuple[str, ...] = ("v1",)
) -> Obj:
    return {
        "apiGroups": [group],
        "apiVersions": list(versions),
        "operations": operations,
        "resources": resources,
        "scope": "Namespaced",
    }


#: Pods and claims get their zone; StatefulSets get their zone list written down.
MUTATE_RULES: Final = (
    _rule("", ["pods", "persistentvolumeclaims"], ["CREATE"]),
    _rule("apps", ["statefulsets"], ["CREATE"]),
)
#: Strimzi KafkaNodePools, both served versions (matchPolicy Equivalent converts the others).
KAFKA_VERSIONS: Final = nodepools.VERSIONS
#: A pool's zone list on create; the brokers that leave on a scale-down (remove-node-ids).
KAFKA_MUTATE_RULES: Final = (
    _rule(nodepools.GROUP, ["kafkanodepools"], ["CREATE", "UPDATE"], versions=KAFKA_VERSIONS),
)
#: A pool's annotations on create/update; its scale-downs through either path.
KAFKA_VALIDATE_RULES: Final = (
    _rule(nodepools.GROUP, ["kafkanodepools"], ["CREATE", "UPDATE"], versions=KAFKA_VERSIONS),
    _rule(nodepools.GROUP, ["kafkanodepools/scale"], ["UPDATE"], versions=KAFKA_VERSIONS),
)
#: OpenKruise Advanced StatefulSets, both served versions (v1alpha1 requests arrive as sent).
KRUISE_GROUP: Final = kruise.GROUP
KRUISE_VERSIONS: Final = kruise.VERSIONS
#: Advanced StatefulSets get their zone list on CREATE; their changes and /scale are guarded.
KRUISE_MUTATE_RULES: Final = (
    _rule(KRUISE_GROUP, ["statefulsets"], ["CREATE"], versions=KRUISE_VERSIONS),
)
KRUISE_VALIDATE_RULES: Final = (
    _rule(KRUISE_GROUP, ["statefulsets"], ["CREATE", "UPDATE"], versions=KRUISE_VERSIONS),
    _rule(KRUISE_GROUP, ["statefulsets/scale"], ["UPDATE"], versions=KRUISE_VERSIONS),
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
    kinds: Kinds = ALL_KINDS,
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
        webhook["matchConditions"] = [pods_condition(kinds)]
    return webhook


def mutating(
    name: str,
    *,
    client: Obj,
    namespaces: Obj,
    labels: dict[str, str],
    match_conditions: bool = True,
    kinds: Kinds = ALL_KINDS,
) -> Obj:
    """The MutatingWebhookConfiguration; reinvoked when a later webhook changes the pod.

    ``match_conditions=False`` leaves out the CEL condition, for clusters older than 1.28.
    """
    webhook = _webhook(
        MUTATE_NAME,
        rules=MUTATE_RULES
        + (KAFKA_MUTATE_RULES if kinds.kafka_node_pools else ())
        + (KRUISE_MUTATE_RULES if kinds.kruise else ()),
        client=client,
        namespaces=namespaces,
        match_conditions=match_conditions,
        kinds=kinds,
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
    kinds: Kinds = ALL_KINDS,
) -> Obj:
    """The ValidatingWebhookConfiguration: annotations, the scale-down guard, final pods."""
    webhook = _webhook(
        VALIDATE_NAME,
        rules=VALIDATE_RULES
        + (KAFKA_VALIDATE_RULES if kinds.kafka_node_pools else ())
        + (KRUISE_VALIDATE_RULES if kinds.kruise else ()),
        client=client,
        namespaces=namespaces,
        match_conditions=match_conditions,
        kinds=kinds,
    )
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name, "labels": dict(labels)},
        "webhooks": [webhook],
    }
