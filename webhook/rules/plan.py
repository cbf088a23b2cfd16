"""The plan for one StatefulSet pod: its policy, ordinal and placement. Pure.

Shared by the mutating and the validating webhook (and the extender), so all of them compute
the same zone for the same pod. Both read the pod once (:func:`read_pod`, every part checked as
:mod:`webhook.model.objects` checks it) and pass the :class:`PodView` along.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, NamedTuple

from webhook.errors import Denied
from webhook.model import kruise, objects, setkinds
from webhook.model.annotations import SKIP, stszone_annotations
from webhook.model.objects import JSON
from webhook.model.owners import ordinal_of, workload_owner
from webhook.model.store import Store
from webhook.rules.placement import Placement, place_by_mode
from webhook.rules.policy import Policy, resolve_policy, workload_kind

#: Who creates StatefulSet pods and claims (``request.userInfo.username``), and the group key
#: of the sets each creates them for (:data:`webhook.model.setkinds.KINDS`).
#: With kube-controller-manager's default ``--use-service-account-credentials=false`` every
#: controller acts as ``system:kube-controller-manager``; with ``true``, as its own account.
STATEFULSET_CONTROLLERS: Final[Mapping[str, str]] = {
    "system:serviceaccount:kube-system:statefulset-controller": "",
    "system:kube-controller-manager": "",
    # OpenKruise's Advanced StatefulSet controller (kruise-manager's own account).
    "system:serviceaccount:kruise-system:kruise-manager": kruise.GROUP,
}

#: What adds node constraints to a pod on its way in, before stszone's webhook sees it: a
#: mutating webhook, any of them; the PodNodeSelector admission plugin, a nodeSelector only (it
#: merges its namespace's ``scheduler.alpha.kubernetes.io/node-selector`` into it).
WEBHOOK_WAY_IN: Final = "a Kyverno or Gatekeeper mutation"
WAY_IN: Final = f"PodNodeSelector's namespace annotation, {WEBHOOK_WAY_IN}"


def skipped(labels: Mapping[str, str]) -> bool:
    """Whether an object's labels hold ``stszone.io/skip=true`` (it is left alone)."""
    return labels.get(SKIP) == "true"


def pod_claims(pod: JSON) -> tuple[str, ...]:
    """The claim names of a pod's persistentVolumeClaim volumes, in order."""
    return spec_claims(objects.mapping(pod, "spec"))


def spec_claims(spec: JSON) -> tuple[str, ...]:
    """The claim names of a pod spec's persistentVolumeClaim volumes, in order."""
    return tuple(
        objects.string(objects.mapping(v, "persistentVolumeClaim"), "claimName")
        for v in objects.dicts(spec, "volumes", path="spec")
        if v.get("persistentVolumeClaim")
    )


class PodView(NamedTuple):
    """What the pod rules read of a StatefulSet pod, each part read (and checked) once."""

    #: ``metadata.name`` ("" when unset: the messages then name the ordinal).
    name: str
    #: The StatefulSet that controls it.
    owner: str
    ordinal: int
    #: Its annotations, and the stszone policy keys among them (``stszone.io/zone`` left out).
    annotations: dict[str, str]
    policy_annotations: dict[str, str]
    #: The claims it mounts, in order: they decide where its data is.
    claims: tuple[str, ...]
    spec: JSON
    #: Its StatefulSet's uid, from the owner reference (what Events about the set name).
    owner_uid: str = ""
    #: Its owner's group: "" for ``apps/v1``, ``apps.kruise.io`` for an Advanced StatefulSet.
    group: str = ""
    #: Its set's own controller sent its create: it made the pod from the set's template.
    by_controller: bool = False


def read_pod(pod: JSON, *, requester: str) -> PodView | None:
    """The pod as the rules read it, or None for a pod stszone leaves alone (no StatefulSet
    controls it, or it carries ``stszone.io/skip=true``); :class:`Denied` when it has no
    ordinal. ``requester``: who sent its create (``request.userInfo.username``)."""
    meta = objects.mapping(pod, "metadata")
    found = workload_owner(meta)
    if found is None:
        return None
    group, owner, uid = found
    labels = objects.str_map(meta, "labels", path="metadata")
    if skipped(labels):
        return None
    ordinal = ordinal_of(meta, labels)
    name = objects.string(meta, "name")
    if ordinal is None:
        raise Denied(
            f"pod {name or '(unnamed)'} of {workload_kind(group)} {owner} has no ordinal (no "
            "apps.kubernetes.io/pod-index label, no -N name suffix)",
            reason="NoOrdinal",
        )
    annotations = objects.str_map(meta, "annotations", path="metadata")
    spec = objects.mapping(pod, "spec")
    return PodView(
        name,
        owner,
        ordinal,
        annotations,
        stszone_annotations(annotations),
        spec_claims(spec),
        spec,
        uid,
        group,
        STATEFULSET_CONTROLLERS.get(requester) == group,
    )


class PodPlan(NamedTuple):
    """What a StatefulSet pod must look like: the policy, its ordinal and its placement, and
    the claims it mounts (which decide where its data is)."""

    policy: Policy
    ordinal: int
    placement: Placement
    claims: tuple[str, ...] = ()


def plan_pod(pod: PodView, *, namespace: str, store: Store) -> PodPlan:
    """The plan for a pod stszone manages, worked out from the pod and the view as they are.

    Shared by the mutating and the validating webhook so both compute the same zone.
    """
    policy = resolve_policy(
        namespace,
        pod.owner,
        store=store,
        pod_annotations=pod.policy_annotations,
        pod_claims=pod.claims,
        group=pod.group,
    )
    placement = place_by_mode(
        pod.ordinal,
        namespace=namespace,
        policy=policy,
        store=store,
        claims=pod.claims,
        pod=pod.name,
    )
    return PodPlan(policy, pod.ordinal, placement, pod.claims)


def not_in_template(pod: PodView, *, what: str = "that constraint", selector: bool = False) -> str:
    """Where a constraint of the pod that its set's pod template (as the view holds it) lacks
    comes from, and what to do; ``selector``: the pod's nodeSelector is part of it.

    A pod its set's controller did not create was made from a saved manifest (``kubectl
    replace --force`` of an old pod keeps the zone stszone pinned it to, and the node it ran
    on): the constraint is in its own spec. One the controller created was made from the
    template, so the constraint was added on its way in -- by a webhook called before
    stszone's, or, for a nodeSelector, also by the PodNodeSelector admission plugin, which runs
    before every webhook and writes nothing else -- or the template changed and the view has
    not seen it yet."""
    kind = setkinds.KINDS[pod.group]
    if pod.by_controller:
        way = (
            f"an admission plugin or webhook added it on the way in ({WAY_IN})"
            if selector
            else f"a mutating webhook added it on the way in ({WEBHOOK_WAY_IN})"
        )
        return (
            f"{what} is not in the {kind.text}'s pod template as stszone's view holds it, yet "
            f"{kind.controller} created the pod: {way}: remove it there; or the template "
            "changed since: remove it from the template"
        )
    return (
        f"{what} is in the pod's own spec (the manifest applied), not in the {kind.text}'s pod "
        f"template: remove it from the manifest, or let {kind.controller} create the pod from "
        "its template"
    )


def check_node_name(pod: PodView, plan: PodPlan, *, namespace: str, store: Store) -> None:
    """Deny a pod created with ``spec.nodeName`` on a node outside its zone (or, in node-ordinal
    mode, a node without its ordinal label).

    ``spec.nodeName`` bypasses the scheduler: the kubelet of that node checks the pod's node
    affinity itself, rejects it, and the StatefulSet controller re-creates it there again, in
    a loop -- when its template names that node; a pod whose template does not is told where
    the node name came from (:func:`not_in_template`). A node the view does not hold is left
    to the kubelet.
    """
    node = objects.string(pod.spec, "nodeName", path="spec")
    info = store.nodes.get(node)  # none is named "" (a pod without spec.nodeName)
    if info is None:
        return
    name = pod.name or f"ordinal {plan.ordinal}"
    declared = plan.policy.declared
    if declared.mode == "node-ordinal":
        label = declared.node_label or ""  # pragma: no mutate (never empty here)
        wanted = str(plan.ordinal)
        have = info.labels.get(label)
        if have == wanted:
            return
        where = f"{label}={have}" if have is not None else f"no label {label}"
        goal = f"the node labelled {label}={wanted}"
    else:
        key, wanted = declared.topology_key, plan.placement.zone
        have = info.labels.get(key)
        if have == wanted or not wanted:
            return
        where = f"zone {have}" if have is not None else f"no label {key}"
        goal = f"zone {wanted}"
    told = f"pod {name} names spec.nodeName {node}, which has {where}; ordinal {plan.ordinal} "
    sts = store.statefulset(namespace, pod.owner, pod.group)
    if sts is not None and sts.node_name != node:
        raise Denied(
            f"{told}belongs on {goal}, so the kubelet would refuse it; "
            + not_in_template(pod, what="spec.nodeName"),
            reason="NodeNameConflict",
        )
    raise Denied(
        f"{told}belongs on {goal}, so the kubelet would refuse it and the {plan.policy.kind} "
        "controller re-create it there in a loop; remove spec.nodeName from the pod template",
        reason="NodeNameConflict",
    )
