"""Why a set's pods cannot move now: the set's health, its claims, its rule zone's nodes.

Pure, and the same for an ``apps/v1`` StatefulSet and an Advanced StatefulSet. The set: every
member (each live ordinal) must have its pod, owned by this set, Ready; no rollout under way,
the set not being deleted. A claim whose ownerReferences name its pod (left by
``persistentVolumeClaimRetentionPolicy.whenScaled: Delete``) is deleted by the garbage
collector once that pod is, so evicting it would lose data.
The nodes: a coarse version of what the scheduler's filters check, enough to tell a person
*before* a pod is evicted that it would have nowhere to go -- the node is cordoned
(``spec.unschedulable``, the NodeUnschedulable filter), NotReady, tainted NoSchedule/NoExecute
with no matching toleration (TaintToleration), outside the pod template's ``nodeSelector``
and required nodeAffinity (NodeAffinity: the terms are ORed, the expressions of a term ANDed),
or not the node its ``spec.nodeName`` binds every pod to. A pod bound by ``spec.nodeName``
skips the scheduler: the kubelet of that node admits it, checking its nodeSelector and node
affinity and only the NoExecute taints it does not tolerate (its predicate admission; the
taint manager would evict it too), so a cordon and NoSchedule taints do not keep it off; a
NotReady node still does, its kubelet being the one that would run it.
CPU, memory, ports and inter-pod affinity are not checked; the executor's wait for Ready
catches those.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from webhook.model import state as states
from webhook.model.annotations import SKIP
from webhook.model.records import NodeInfo, StatefulSetInfo
from webhook.model.selection import template_selection
from webhook.model.state import LiveState, NodeState, SetState, Taint
from webhook.model.store import Store
from webhook.rules.placement import claim_name
from webhook.rules.policy import Policy, workload_kind

#: How many names a reason lists before counting the rest.
NAMED: Final = 5

#: The taint the node lifecycle controller adds to cordoned nodes; tolerating it lets a pod
#: onto a cordoned node (DaemonSets do), so the cordon is judged by it when tolerated.
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"


def tolerates(tolerations: Iterable[Mapping[str, Any]], taint: Taint) -> bool:
    """Whether any toleration matches ``taint`` (key, value and effect, as the scheduler does)."""
    for tol in tolerations:
        effect = tol.get("effect") or ""
        if effect and effect != taint.effect:
            continue
        key, operator = tol.get("key") or "", tol.get("operator") or "Equal"
        if operator == "Exists" and (not key or key == taint.key):
            return True
        if operator == "Equal" and key == taint.key and (tol.get("value") or "") == taint.value:
            return True
    return False


def selected(
    node: NodeInfo,
    *,
    terms: Sequence[Mapping[str, Any]],
    selector: Mapping[str, str],
    node_name: str = "",
) -> bool:
    """Whether ``node`` meets a nodeSelector, required nodeSelectorTerms (any one term; an
    empty term selects no node) and a ``spec.nodeName``, as kube-scheduler reads them
    (:mod:`webhook.model.selection`)."""
    return template_selection(terms, selector, node_name).admits(node.labels, node.name)


def unfit(
    node: NodeInfo, state: NodeState | None, *, sts: StatefulSetInfo, set_state: SetState | None
) -> str | None:
    """Why the set's re-created pod could not land on ``node`` ("cordoned", ...), or None."""
    if sts.node_name and node.name != sts.node_name:
        # Bound by name: no other node is ever considered, whatever its state.
        return f"not the pod template's spec.nodeName ({sts.node_name})"
    tolerations = set_state.tolerations if set_state is not None else ()
    # Bound by name, the pod never meets the scheduler's filters, only the kubelet's admission
    # (the module docstring): the cordon and NoSchedule taints are the scheduler's alone.
    scheduled = not sts.node_name
    if state is not None:
        cordon = Taint(UNSCHEDULABLE_TAINT, "", "NoSchedule")
        if scheduled and state.cordoned and not tolerates(tolerations, cordon):
            return "cordoned"
        if state.ready is False:
            return "NotReady"
        effects = ("NoSchedule", "NoExecute") if scheduled else ("NoExecute",)
        for taint in state.taints:
            if taint.effect in effects and not tolerates(tolerations, taint):
                return f"tainted {taint.key}:{taint.effect}"
    if not selected(
        node, terms=sts.node_terms, selector=sts.node_selector, node_name=sts.node_name
    ):
        return "outside the pod template's nodeSelector/nodeAffinity"
    return None


def some(names: Iterable[str]) -> str:
    """``a, b, c, d, e and 2 more``."""
    items = list(names)
    shown = ", ".join(items[:NAMED])
    return shown + (f" and {len(items) - NAMED} more" if len(items) > NAMED else "")


def unplanned(sts: StatefulSetInfo, policy: Policy) -> str:
    """Why an opted-in set has nothing to rebalance ("" when it may have)."""
    if policy.declared.mode == "node-ordinal":
        return "node-ordinal mode pins ordinals to labelled nodes, not zones: nothing to rebalance"
    if sts.template_skipped:  # its pods are never placed: none is outside a zone of stszone's
        return f"its pod template is labelled {SKIP}=true: stszone places none of its pods"
    return ""


def set_blockers(
    sts: StatefulSetInfo,
    state: LiveState,
    ordinals: Sequence[int],
    *,
    gone: Mapping[str, str] | None = None,
) -> list[str]:
    """Reasons no ordinal of the set may move now (``ordinals``: its members; ``gone``: member
    pod -> its node, for pods bound to a node that no longer exists: their Ready condition
    outlives the node until PodGC deletes them, so they hold no zone however they report)."""
    lost = gone or {}
    info = state.workload(sts.namespace, sts.name, sts.group)
    reasons: list[str] = []
    if info is not None and info.deleting:
        reasons.append(f"the {workload_kind(sts.group)} is being deleted")
    if info is not None and info.stale:
        # Its status is of an older spec: a rollout the change starts is not in it yet.
        reasons.append(f"{info.stale}; run rebalance once it has")
    elif info is not None and info.updating and info.paused:
        reasons.append(
            "its rolling update is paused (spec.updateStrategy.rollingUpdate.paused) with "
            "replicas left to update, and a re-created pod would take the new revision: resume "
            "the rollout and run rebalance once it has finished"
        )
    elif info is not None and info.updating:
        reasons.append("a rolling update is under way; run rebalance once it has finished")
    names = (f"{sts.name}-{ordinal}" for ordinal in ordinals)
    unready = [w for n in names if (w := _unready(n, sts=sts, state=state, gone=lost))]
    if unready:
        reasons.append(
            f"not every replica is Ready ({len(ordinals) - len(unready)}/{len(ordinals)}: "
            f"{some(unready)}); pods move only while all are"
        )
    return reasons


def _unready(
    name: str, *, sts: StatefulSetInfo, state: LiveState, gone: Mapping[str, str]
) -> str | None:
    """Why the member pod ``name`` does not count as Ready, or None."""
    if why := states.unready(name, _member(name, sts=sts, state=state)):
        return why
    return f"{name} on node {gone[name]}, which no longer exists" if name in gone else None


def _member(name: str, *, sts: StatefulSetInfo, state: LiveState) -> states.PodState | None:
    """The pod ``name`` when the set controls it; a pod of that name another set (an ``apps/v1``
    set of the same name, an earlier set) controls is not this set's member."""
    pod = state.pods.get((sts.namespace, name))
    if pod is None or not pod.member_of(group=sts.group, name=sts.name, uid=sts.uid):
        return None
    return pod


def zone_blocker(
    zone: str, *, sts: StatefulSetInfo, policy: Policy, store: Store, state: LiveState
) -> str | None:
    """Why no node of ``zone`` could take the set's re-created pod, or None when one can."""
    key = policy.declared.topology_key
    nodes = sorted(name for name, node in store.nodes.items() if node.labels.get(key) == zone)
    if not nodes:
        return f"no node is labelled {key}={zone}"
    info: SetState | None = state.workload(sts.namespace, sts.name, sts.group)
    why = {
        name: unfit(store.nodes[name], state.nodes.get(name), sts=sts, set_state=info)
        for name in nodes
    }
    if all(why.values()):
        return f"no node of {zone} can take it ({some(f'{n} {w}' for n, w in why.items())})"
    return None


def owned_claims(
    ordinal: int, *, sts: StatefulSetInfo, policy: Policy, state: LiveState
) -> list[str]:
    """Why evicting the pod would delete data: claims whose ownerReferences name the pod, and
    claims being deleted (``kubernetes.io/pvc-protection`` holds them only while a pod mounts
    them; the controller re-creates the pod once they are gone, on fresh claims)."""
    pod = f"{sts.name}-{ordinal}"
    reasons = []
    for template in policy.templates:
        claim = state.claims.get((sts.namespace, claim_name(template, sts.name, ordinal)))
        if claim is not None and claim.deleting:
            reasons.append(
                f"claim {claim.name} is being deleted: evicting {pod} would let it go with its "
                "data, and the pod would come back on a fresh, empty claim"
            )
        elif claim is not None and pod in claim.owner_pods:
            reasons.append(
                f"claim {claim.name} is owned by pod {pod} (persistentVolumeClaimRetentionPolicy "
                "whenScaled: Delete, from a scale-down): evicting the pod would let the garbage "
                "collector delete the claim and its data"
            )
    return reasons
