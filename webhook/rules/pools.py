"""Mutations for Strimzi KafkaNodePools: the pool's zones, its brokers' pods and claims. Pure.

- A KafkaNodePool created in an opted-in namespace gets ``stszone.io/zones`` from the server's
  zone source when it has none (as a StatefulSet does).
- A broker's claim (created by the operator before its pod) gets the zone its broker will
  get (:mod:`webhook.rules.poolzones`) and, with ``stszone.io/storage-class-template`` on the
  pool, that zone's StorageClass.
- A broker's pod gets the zone annotation and a required node affinity on its zone, so that
  ``broker.rack`` (read by Strimzi from the node's zone label with ``spec.kafka.rack``)
  matches the zone stszone chose. One whose pool a live view has not seen yet, while it holds
  another pool of the same Kafka cluster, is refused for retry (:func:`_require_seen`).
"""

from __future__ import annotations

from typing import Final

from webhook.errors import Denied
from webhook.model import objects
from webhook.model.annotations import (
    STORAGE_CLASS_TEMPLATE,
    ZONE,
    ZONES,
    storage_class_for,
)
from webhook.model.nodepools import node_id_of, pool_of
from webhook.model.objects import JSON
from webhook.model.selection import PodSelection, pod_selection
from webhook.model.store import Store
from webhook.rules import affinity, fit
from webhook.rules.decision import (
    Decision,
    Edit,
    NodeRequirement,
    StorageClass,
    ZoneAnnotation,
    ZonesAnnotation,
    allow,
    edit,
    refuse,
)
from webhook.rules.mutate import server_zones_for
from webhook.rules.plan import WAY_IN, WEBHOOK_WAY_IN, skipped
from webhook.rules.poolplan import cluster_pools
from webhook.rules.poolzones import PoolPolicy, choose, id_claims, pool_policy
from webhook.rules.zonelist import zones_fix

#: Who creates a broker's pod, and creates it again after a refusal meant for retry.
PODSET_CONTROLLER: Final = "the StrimziPodSet controller of the Strimzi cluster operator"


def pool_member(obj: JSON) -> tuple[str, str, int] | None:
    """(cluster, pool, node ID) of a pod or claim the Strimzi operator made for a pool broker
    (labelled ``strimzi.io/cluster`` and ``strimzi.io/pool-name``, its name ending in the
    node ID), else None (also for one labelled ``stszone.io/skip=true``)."""
    meta = objects.mapping(obj, "metadata")
    labels = objects.str_map(meta, "labels", path="metadata")
    owner = pool_of(labels)
    if owner is None:  # every pod that is not a broker's: the common case, answered first
        return None
    name = objects.string(meta, "name", path="metadata")
    node_id = node_id_of(name)
    if node_id is None or skipped(labels):
        return None
    broker = f"{owner[0]}-{owner[1]}-{node_id}"
    if name != broker and not name.endswith(f"-{broker}"):
        return None
    return owner[0], owner[1], node_id


def _policy(namespace: str, cluster: str, pool: str, *, store: Store) -> PoolPolicy | None:
    policy = pool_policy(namespace, pool, store=store)
    if policy is None or policy.pool.cluster != cluster:
        return None
    return policy


def _member_policy(obj: JSON, namespace: str, *, store: Store) -> tuple[PoolPolicy, int] | None:
    """The policy of the pool ``obj`` (a broker's pod or claim) belongs to, and its node ID."""
    member = pool_member(obj)
    if member is None:
        return None
    cluster, pool, node_id = member
    policy = _policy(namespace, cluster, pool, store=store)
    return None if policy is None else (policy, node_id)


def _require_seen(pod: JSON, namespace: str, *, store: Store) -> None:
    """Refuse, for retry, a broker's pod whose KafkaNodePool a live view has not seen yet,
    as a StatefulSet's pod is refused (:func:`webhook.rules.policy.resolve_policy`).

    Only when another pool of its Kafka cluster is in the view: that cluster uses
    KafkaNodePools, so this one exists and lags. A Kafka without node pools keeps its brokers
    in a virtual pool (``kafka``) that only the operator's memory holds, and a cluster that
    serves no KafkaNodePool has none in the view: waiting for those would refuse their pods for
    good, so they are let through, with nothing to place them by.
    """
    member = pool_member(pod)
    if member is None or not store.lagging():
        return
    cluster, pool, _ = member
    if store.nodepool(namespace, pool) is not None:
        return
    if cluster_pools(namespace, cluster, store=store):
        name = objects.string(objects.mapping(pod, "metadata"), "name")
        raise Denied(
            f"KafkaNodePool {namespace}/{pool} of Kafka cluster {cluster} has not reached "
            "stszone's view yet (its watch event is usually milliseconds behind its creation); "
            f"retry in a moment ({PODSET_CONTROLLER} creates pod {name} again)",
            reason="StatefulSetNotYetSeen",
        )


def mutate_pool_pod(pod: JSON, *, namespace: str, store: Store) -> Decision:
    """Pin a broker's pod to its zone: that of its data, else the pool's fewest."""
    found = _member_policy(pod, namespace, store=store)
    if found is None:
        _require_seen(pod, namespace, store=store)
        return allow()
    policy, node_id = found
    name = policy.broker(node_id)
    spec = objects.mapping(pod, "spec")
    claims = [
        objects.string(objects.mapping(v, "persistentVolumeClaim"), "claimName")
        for v in objects.dicts(spec, "volumes", path="spec")
        if v.get("persistentVolumeClaim")
    ]
    choice = choose(namespace, node_id, policy=policy, store=store, claims=claims)
    key, zone = policy.key, choice.zone
    selection = pod_selection(spec)
    judged = fit.fit(selection, key=key, value=zone, view=store)
    if not judged.allowed:
        verb = "admits no node of" if judged.by_nodes else "excludes"
        # A broker follows its data whatever the list says: only a new claim moves it.
        fix = zones_fix(policy.declared, owner="the pool")
        if choice.why == "data":
            fix = (
                f"give the broker a new claim (its data decides its zone, whatever "
                f"{policy.origin} says; deleting claim {choice.claim} deletes that data)"
            )
        return refuse(
            f"pod {name} of KafkaNodePool {policy.pool.name} has {judged.conflict}, which "
            f"{verb} {key}={zone}, the zone stszone chose for it; "
            f"{_origin(selection, key=key, zone=zone, store=store, policy=policy)}, or {fix}",
            reason="ZoneConflict",
        )
    warnings: tuple[str, ...] = ()
    if choice.why == "data" and zone not in policy.zones:
        warnings = (f"{name} follows its claim {choice.claim} to {zone}, not in {policy.origin}",)
    return edit(ZoneAnnotation(zone), NodeRequirement(key, zone), warnings=warnings)


def _origin(
    selection: PodSelection, *, key: str, zone: str, store: Store, policy: PoolPolicy
) -> str:
    """Where the constraints refusing a broker its zone can come from, and what to do.

    The operator writes a broker's node affinity from ``spec.template.pod.affinity`` of its
    KafkaNodePool, else from ``spec.kafka.template.pod.affinity`` of its Kafka (never both:
    KafkaPool.fromCrd takes one template whole), and never a nodeSelector or a nodeName: its
    PodTemplate has no such fields. stszone's view keeps neither template, so it cannot tell
    whether the affinity is in one: it names both places, and the way in."""
    affinity = PodSelection(required=selection.required)
    others = selection._replace(required=None)
    by_affinity = not fit.fit(affinity, key=key, value=zone, view=store).allowed
    by_others = not fit.fit(others, key=key, value=zone, view=store).allowed
    said = []
    if by_affinity:
        pool, cluster = policy.pool.name, policy.pool.cluster
        said.append(
            "Strimzi writes a broker's node affinity from spec.template.pod.affinity of "
            f"KafkaNodePool {pool} (or, when the pool has no spec.template, from "
            f"spec.kafka.template.pod.affinity of Kafka {cluster}); stszone does not read those, "
            "so if neither holds it, a mutating webhook added it on the pod's way in "
            f"({WEBHOOK_WAY_IN}): remove it where it is"
        )
    if by_others or not by_affinity:  # alone, or together with the affinity
        fields = [f for f, v in (("nodeSelector", selection.selector),
                                 ("spec.nodeName", selection.node_name)) if v]  # fmt: skip
        # PodNodeSelector writes the nodeSelector alone: a nodeName came from a webhook.
        way = "an admission plugin or webhook" if selection.selector else "a mutating webhook"
        said.append(
            f"Strimzi never writes a broker's {' or '.join(fields)}, so {way} added it on the "
            f"pod's way in ({WAY_IN if selection.selector else WEBHOOK_WAY_IN}): remove it there"
        )
    return "; ".join(said)


def validate_pool_pod(pod: JSON, *, namespace: str, store: Store) -> Decision:
    """Deny a broker's pod whose recorded zone (``stszone.io/zone``) is not required of its
    nodes: a mutating webhook after stszone removed the requirement. Checked against the pod's
    own annotation, not a fresh choice: the view may change between the two webhooks."""
    member = pool_member(pod)
    if member is None:
        return allow()
    cluster, pool, node_id = member
    policy = _policy(namespace, cluster, pool, store=store)
    meta = objects.mapping(pod, "metadata")
    zone = objects.str_map(meta, "annotations", path="metadata").get(ZONE)
    if policy is None or not zone:
        return allow()
    if affinity.pins(objects.mapping(pod, "spec"), policy.key, zone):
        return allow()
    # stszone's own webhook did run (the pod carries its zone): another one, after it, undid
    # the pin; the API server calls stszone again after such a change only with IfNeeded.
    return refuse(
        f"pod {policy.broker(node_id)} of KafkaNodePool {pool} reached validation without the "
        f"required nodeAffinity {policy.key} In [{zone}] that stszone sets for it: a mutating "
        "webhook that ran after stszone removed it, or added a nodeSelectorTerm without it (terms "
        "are ORed); find it (kubectl get mutatingwebhookconfigurations) and make it leave the "
        "required node affinity of the pool's pods alone, or keep those pods out of it (an "
        "objectSelector on the label strimzi.io/pool-name), and keep reinvocationPolicy: "
        "IfNeeded on mutate.stszone.io, so that the API server calls stszone again after it",
        reason="ZoneRequirementMissing",
    )


def mutate_pool_claim(claim: JSON, *, namespace: str, store: Store) -> Decision:
    """Give a broker's claim the zone its broker will get, and that zone's StorageClass."""
    found = _member_policy(claim, namespace, store=store)
    if found is None:
        return allow()
    policy, node_id = found
    meta = objects.mapping(claim, "metadata")
    spec = objects.mapping(claim, "spec")
    name, uid = objects.string(meta, "name"), objects.string(meta, "uid", path="metadata")
    volume = objects.string(spec, "volumeName", path="spec") or store.prebound(
        namespace, name, uid=uid, new=True
    )
    siblings = [c for c in id_claims(namespace, node_id, policy=policy, store=store) if c != name]
    choice = choose(
        namespace,
        node_id,
        policy=policy,
        store=store,
        claims=[name, *siblings],
        creating=(name, uid),
    )
    edits: list[Edit] = [ZoneAnnotation(choice.zone)]
    warnings: tuple[str, ...] = ()
    template = policy.declared.storage_class_template
    current = spec.get("storageClassName")
    if template and not volume:  # a named volume binds only if the classes match: kept
        wanted = storage_class_for(template, choice.zone)
        if current == "":
            warnings = (
                f'claim {name} keeps storageClassName "" (volumes without a class); '
                "the storage-class template is not applied",
            )
        else:
            edits.append(StorageClass(wanted))
            if isinstance(current, str) and current != wanted:
                warnings = (
                    f"claim {name}: storageClassName {current} -> {wanted} "
                    f"({STORAGE_CLASS_TEMPLATE})",
                )
    return edit(*edits, warnings=warnings)


def mutate_nodepool(pool: JSON, *, store: Store) -> Decision:
    """On CREATE, fill ``stszone.io/zones`` from the server's zone source when it is missing."""
    meta = objects.mapping(pool, "metadata")
    annotations = objects.str_map(meta, "annotations", path="metadata")
    if ZONES in annotations:
        return allow()
    name = objects.string(meta, "name") or "(unnamed)"
    # A pool's creation is sent by a person or a tool, not by the operator: none is named.
    key, zones = server_zones_for(
        annotations, store=store, what=f"KafkaNodePool {name}", retried_by=""
    )
    if not zones:
        return allow(
            warnings=(f"KafkaNodePool {name}: no zones known (no --zones, no node with {key})",)
        )
    return edit(ZonesAnnotation(zones))
