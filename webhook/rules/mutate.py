"""Mutations: (object, view) -> Outcome with the patch to the mutated copy. Pure.

Every function copies on write and returns :func:`~webhook.wire.review.patched` of the original
and the copy, so the patch comes from ``jsonpatch`` and a second invocation (reinvocation
policy ``IfNeeded``) over the mutated object yields an empty patch.
"""

from __future__ import annotations

from webhook.config import Defaults
from webhook.errors import Denied
from webhook.model import objects
from webhook.model.annotations import (
    DEFAULT_SCHEDULER,
    DEFAULT_TOPOLOGY_KEY,
    NODE_LABEL,
    STORAGE_CLASS_TEMPLATE,
    TOPOLOGY_KEY,
    ZONE,
    ZONES,
    is_label_key,
    storage_class_for,
)
from webhook.model.objects import JSON
from webhook.model.records import statefulset_info
from webhook.model.store import Store
from webhook.rules import affinity
from webhook.rules.placement import (
    claim_name,
    place_by_mode,
    resolve_policy,
)
from webhook.rules.plan import PodPlan, plan_pod, skipped
from webhook.wire import review
from webhook.wire.review import Outcome


def _with_annotation(obj: JSON, key: str, value: str) -> JSON:
    """Copy of ``obj`` with one annotation set (metadata and annotations copied, rest shared)."""
    meta = dict(objects.mapping(obj, "metadata"))
    meta["annotations"] = {**objects.str_map(meta, "annotations", path="metadata"), key: value}
    return {**obj, "metadata": meta}


def mutate_pod(pod: JSON, *, namespace: str, store: Store, defaults: Defaults) -> Outcome:
    """Pin a StatefulSet pod to its ordinal's zone, by its StatefulSet's mode."""
    plan = plan_pod(pod, namespace=namespace, store=store)
    if plan is None:
        return review.allowed()
    mode = plan.policy.declared.mode
    if mode == "scheduler":
        return _scheduler_mode(pod, plan, defaults=defaults)
    if mode == "node-ordinal":
        return _node_ordinal_mode(pod, plan, namespace=namespace, store=store)
    return _affinity_mode(pod, plan)


def _pod_name(pod: JSON, plan: PodPlan) -> str:
    return objects.string(objects.mapping(pod, "metadata"), "name") or (
        f"{plan.policy.statefulset}-{plan.ordinal}"
    )


def _pin(
    pod: JSON,
    plan: PodPlan,
    *,
    key: str,
    value: str,
    what: str,
    fix: str = f"change its {ZONES}",
    reason: str = "ZoneConflict",
) -> JSON:
    """Copy of the pod with ``key In [value]`` in every term; Denied if the pod excludes it."""
    spec = objects.mapping(pod, "spec")
    conflict = affinity.exclusion(spec, key, value)
    if conflict is not None:
        raise Denied(
            f"pod {_pod_name(pod, plan)} has {conflict}, which excludes {key}={value}, "
            f"{what}; remove that constraint from the StatefulSet's pod template or {fix}",
            reason=reason,
        )
    return {**pod, "spec": affinity.with_requirement(spec, key, value)}


def _affinity_mode(pod: JSON, plan: PodPlan) -> Outcome:
    zone = plan.placement.zone
    key = plan.policy.declared.topology_key
    why = f"the zone stszone chose for ordinal {plan.ordinal}"
    if plan.placement.volume:
        why = f"the zone of its volume {plan.placement.volume}"
    mutated = _pin(pod, plan, key=key, value=zone, what=why)
    mutated = _with_annotation(mutated, ZONE, zone)
    return review.patched(pod, mutated, warnings=plan.placement.warnings)


def _scheduler_mode(pod: JSON, plan: PodPlan, *, defaults: Defaults) -> Outcome:
    spec = objects.mapping(pod, "spec")
    current = objects.string(spec, "schedulerName", path="spec")
    wanted = plan.policy.declared.scheduler_name or defaults.scheduler_name
    warnings = plan.placement.warnings
    mutated = _with_annotation(pod, ZONE, plan.placement.zone)
    if current in ("", DEFAULT_SCHEDULER):
        mutated["spec"] = {**spec, "schedulerName": wanted}
    elif current != wanted:
        warnings += (
            f"pod {_pod_name(pod, plan)} asks for scheduler {current!r}; stszone leaves it "
            f"and only records {ZONE}={plan.placement.zone} for it",
        )
    return review.patched(pod, mutated, warnings=warnings)


def _node_ordinal_mode(pod: JSON, plan: PodPlan, *, namespace: str, store: Store) -> Outcome:
    """Pin ordinal N to the node labelled ``<stszone.io/node-label>=N`` (one broker per machine).

    The requirement goes into every nodeSelectorTerm, like the zone in affinity mode. The rule's
    zone plays no part: the node decides the zone, recorded when its node(s) agree on one. The
    scheduler's failure modes become admission warnings: no such node (Pending forever),
    several (the pod may flap between them), a node in a zone the pod or its volume rules out.
    """
    label = plan.policy.declared.node_label or ""
    key = plan.policy.declared.topology_key
    value, name = str(plan.ordinal), _pod_name(pod, plan)
    mutated = _pin(
        pod,
        plan,
        key=label,
        value=value,
        what=f"the node label of ordinal {value}",
        fix=f"change its {NODE_LABEL}",
        reason="NodeConflict",
    )
    nodes = store.nodes_with_label(label, value)
    warnings: tuple[str, ...] = ()
    if not nodes and "nodes" in store.loaded:  # no node view at all (--zones only): unknown
        warnings += (
            f"no node carries {label}={value}; {name} will stay Pending until one does "
            f"(kubectl label node NODE {label}={value})",
        )
    elif len(nodes) > 1:
        warnings += (
            f"nodes {', '.join(nodes)} all carry {label}={value}; {name} may land on any of them "
            "and move between them; keep each value on one node",
        )
    zones = sorted(store.zones_of(nodes, key))
    if plan.placement.zone:  # the node(s) share one zone: record it
        zone = plan.placement.zone
        mutated = _with_annotation(mutated, ZONE, zone)
        conflict = affinity.exclusion(objects.mapping(pod, "spec"), key, zone)
        if conflict is not None:
            warnings += (
                f"{name}: the node with {label}={value} is in zone {zone}, which the pod's "
                f"{conflict} excludes; it will stay Pending",
            )
    for template in plan.policy.templates if zones else ():
        claim = claim_name(template, plan.policy.statefulset, plan.ordinal)
        volume, at = store.claim_zones(namespace, claim, key)
        if at and not at & set(zones):
            warnings += (
                f"{name}: volume {volume} (claim {claim}) is in zone {', '.join(sorted(at))} but "
                f"the node(s) with {label}={value} are in {', '.join(zones)}; the pod cannot "
                "mount it there and will stay Pending",
            )
    return review.patched(pod, mutated, warnings=warnings)


def mutate_statefulset(sts: JSON, *, store: Store) -> Outcome:
    """On CREATE, fill ``stszone.io/zones`` from the server's zone source when it is missing.

    Only the zones the pod template's own nodeSelector / required affinity allow are written:
    a set pinned to two zones by its template gets those two, in the server's order.
    """
    meta = objects.mapping(sts, "metadata")
    annotations = objects.str_map(meta, "annotations", path="metadata")
    if ZONES in annotations:
        return review.allowed()
    key = annotations.get(TOPOLOGY_KEY, DEFAULT_TOPOLOGY_KEY)
    key = key if is_label_key(key) else DEFAULT_TOPOLOGY_KEY
    zones = store.server_zones(key)
    if not zones:
        return review.allowed(
            warnings=(
                f"stszone knows no zones yet (no --zones, no node labelled {key}); "
                f'set {ZONES} on this StatefulSet, e.g. {ZONES}: "zone-a,zone-b,zone-c"',
            )
        )
    # generateName'd sets arrive unnamed; only the template matters here.
    info = statefulset_info({**sts, "metadata": {**meta, "name": meta.get("name") or "unnamed"}})
    allowed = tuple(affinity.allowed_values(info.node_terms, info.node_selector, key, zones))
    if not allowed:
        return review.allowed(
            warnings=(
                f"the pod template's own node constraints exclude every known zone "
                f"({','.join(zones)}); {ZONES} left unset",
            )
        )
    warnings: tuple[str, ...] = ()
    if allowed != zones:
        warnings = (
            f"{ZONES} set to {','.join(allowed)}: the zones of {','.join(zones)} that the pod "
            "template's own node constraints allow",
        )
    return review.patched(sts, _with_annotation(sts, ZONES, ",".join(allowed)), warnings=warnings)


def claim_owner(name: str, *, namespace: str, store: Store) -> tuple[str, int] | None:
    """(StatefulSet, ordinal) whose volumeClaimTemplate produces a claim of this name."""
    best: tuple[str, int] | None = None
    best_len = -1
    for sts in store.statefulsets_in(namespace):
        for template in sts.templates:
            prefix = f"{template}-{sts.name}-"
            rest = name[len(prefix) :]
            if (
                name.startswith(prefix)
                and rest.isascii()
                and rest.isdigit()
                and len(prefix) > best_len
            ):
                best, best_len = (sts.name, int(rest)), len(prefix)
    return best


#: Who creates StatefulSet pods and claims (``request.userInfo.username``).
#: With kube-controller-manager's default ``--use-service-account-credentials=false`` every
#: controller acts as ``system:kube-controller-manager``; with ``true``, as its own account.
STATEFULSET_CONTROLLERS = frozenset(
    {
        "system:serviceaccount:kube-system:statefulset-controller",
        "system:kube-controller-manager",
    }
)


def mutate_claim(claim: JSON, *, namespace: str, store: Store, requester: str = "") -> Outcome:
    """Record the zone on a StatefulSet's claim; set its StorageClass from the template, if any."""
    meta = objects.mapping(claim, "metadata")
    if skipped(meta):
        return review.allowed()
    name = objects.string(meta, "name")
    owner = claim_owner(name, namespace=namespace, store=store)
    if owner is None:
        if requester in STATEFULSET_CONTROLLERS and store.lagging():
            # The controller creates claims right after the set; an Immediate-binding class
            # would provision this one before we know its zone. Refuse; the controller retries.
            raise Denied(
                f"claim {namespace}/{name} comes from the StatefulSet controller, but no "
                "StatefulSet in stszone's view produces it yet (its watch event is usually "
                "milliseconds behind); the controller retries this create",
                reason="StatefulSetNotYetSeen",
            )
        return review.allowed()
    statefulset, ordinal = owner
    policy = resolve_policy(namespace, statefulset, store=store)
    placement = place_by_mode(ordinal, namespace=namespace, policy=policy, store=store)
    if not placement.zone:  # node-ordinal mode and no single node zone yet: nothing to record
        return review.allowed()
    mutated = _with_annotation(claim, ZONE, placement.zone)
    template = policy.declared.storage_class_template
    if template:
        spec = objects.mapping(claim, "spec")
        wanted = storage_class_for(template, placement.zone)
        mutated["spec"] = {**spec, "storageClassName": wanted}
        current = objects.string(spec, "storageClassName", path="spec")
        if current and current != wanted:
            return review.patched(
                claim,
                mutated,
                warnings=(
                    f"claim storageClassName {current} replaced by {wanted} "
                    f"({STORAGE_CLASS_TEMPLATE} of StatefulSet {statefulset})",
                    *placement.warnings,
                ),
            )
    return review.patched(claim, mutated, warnings=placement.warnings)
