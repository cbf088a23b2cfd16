"""What ``stszone rebalance`` reads beyond the :class:`~webhook.model.store.Store`. Pure.

The Store keeps what admission needs and no more (a pod's node, a claim's volume), so that the
webhook's caches stay small and a pod's readiness flapping changes no record. Moving pods safely
needs more: which pods are Ready or terminating, which nodes are cordoned, tainted or NotReady,
which claims are being deleted or owned by their pod, how a volume is reclaimed, and whether a
set (an ``apps/v1`` StatefulSet or an OpenKruise Advanced StatefulSet) is mid-rollout, and which
set controls each pod. A one-shot command reads these from the same single list of the
cluster (or saved file) as the Store; :func:`live_state` turns those objects into a
:class:`LiveState`. Shapes it cannot read raise :class:`~webhook.errors.BadObject`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from webhook.model import objects, setkinds
from webhook.model.owners import owned_by, workload_owner
from webhook.model.revisions import set_key


class Taint(NamedTuple):
    """A node taint (``effect`` NoSchedule, PreferNoSchedule or NoExecute)."""

    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class NodeState:
    """Whether new pods can land on a node."""

    name: str
    #: ``spec.unschedulable``: ``kubectl cordon``.
    cordoned: bool = False
    #: The Ready condition; None when the view has no conditions (a metadata-only node).
    ready: bool | None = None
    taints: tuple[Taint, ...] = ()


@dataclass(frozen=True, slots=True)
class PodState:
    """One StatefulSet pod's identity, owner and health."""

    namespace: str
    name: str
    uid: str = ""
    ready: bool = False
    #: ``metadata.deletionTimestamp`` is set: the pod is on its way out.
    deleting: bool = False
    #: (group, name, uid) of the set controlling it (:func:`~webhook.model.owners.workload_owner`).
    owner: tuple[str, str, str] | None = None

    def member_of(self, *, group: str, name: str, uid: str = "") -> bool:
        """Whether the set ``name`` of ``group`` (of ``uid``, when known) controls the pod."""
        return owned_by(self.owner, group=group, name=name, uid=uid)


def unready(name: str, pod: PodState | None) -> str | None:
    """``"db-2 not Ready"`` (or missing, or terminating), or None for a Ready pod."""
    if pod is None:
        return f"{name} missing"
    if pod.deleting:
        return f"{name} terminating"
    return None if pod.ready else f"{name} not Ready"


@dataclass(frozen=True, slots=True)
class ClaimState:
    """A PersistentVolumeClaim's identity and who may garbage-collect it."""

    namespace: str
    name: str
    uid: str = ""
    #: Pods named in its ownerReferences: the garbage collector deletes the claim with them.
    owner_pods: tuple[str, ...] = ()
    #: ``metadata.deletionTimestamp`` is set: it goes once no pod mounts it.
    deleting: bool = False


@dataclass(frozen=True, slots=True)
class SetState:
    """What the set's controller is doing with it, and its pods' template."""

    namespace: str
    name: str
    #: "" for ``apps/v1``, ``apps.kruise.io`` for an Advanced StatefulSet.
    group: str = ""
    uid: str = ""
    replicas: int = 1
    #: ``status.currentRevision != status.updateRevision`` under ``RollingUpdate``: a rolling
    #: update is under way. Under ``OnDelete`` the controller rolls nothing and never moves
    #: ``currentRevision`` (it completes rollouts of ``RollingUpdate`` only), so the revisions
    #: differ for good after a template change and say nothing. Nor is a rollout held at its
    #: ``rollingUpdate.partition`` under way once the replicas at and above it are updated:
    #: the controller updates none below it and never completes such a rollout.
    updating: bool = False
    #: Under ``OnDelete`` with the revisions apart: the pods not yet at the update revision
    #: (``replicas - status.updatedReplicas``). A pod deleted is re-created from the updated
    #: template, so a move updates it too.
    outdated: int = 0
    #: ``rollingUpdate.paused`` (Advanced StatefulSets): the controller updates no pod, so a
    #: rollout under way stays so until it is resumed.
    paused: bool = False
    deleting: bool = False
    tolerations: tuple[Mapping[str, Any], ...] = ()
    #: ``spec.minReadySeconds`` (an Advanced StatefulSet's ``rollingUpdate.minReadySeconds``):
    #: a pod counts as available that long after it turned Ready, and the controller's own
    #: rollouts wait for that, not for Ready.
    min_ready: int = 0
    #: ``status.availableReplicas`` when ``min_ready`` is set (None otherwise: available is
    #: Ready then).
    available: int | None = None
    #: ``metadata.generation``, and the ``status.observedGeneration`` the controller wrote
    #: with the rest of the status (0 when absent).
    generation: int = 0
    observed: int = 0

    @property
    def stale(self) -> str:
        """Why the status does not describe the spec yet ("" when it does): the controller has
        not seen the latest change, so revisions and counts are of an older spec, and
        ``kubectl rollout status`` waits too ("Waiting for statefulset spec update to be
        observed")."""
        if self.generation <= self.observed:
            return ""
        return (
            f"its controller has not yet observed generation {self.generation} of its spec "
            f"(status.observedGeneration {self.observed})"
        )


@dataclass(frozen=True, slots=True)
class LiveState:
    """Pods, nodes, claims, volumes' reclaim policies and sets, by key (a set's is
    :func:`~webhook.model.revisions.set_key`'s: its group appended when not ``apps/v1``)."""

    pods: Mapping[tuple[str, str], PodState] = field(default_factory=dict)
    nodes: Mapping[str, NodeState] = field(default_factory=dict)
    claims: Mapping[tuple[str, str], ClaimState] = field(default_factory=dict)
    #: PersistentVolume name -> ``spec.persistentVolumeReclaimPolicy``.
    reclaim: Mapping[str, str] = field(default_factory=dict)
    sets: Mapping[tuple[str, ...], SetState] = field(default_factory=dict)

    def workload(self, namespace: str, name: str, group: str = "") -> SetState | None:
        """The set ``name`` of ``group`` ("": ``apps/v1``), if listed."""
        return self.sets.get(set_key(namespace, name, group))


def _deleting(meta: Mapping[str, Any]) -> bool:
    return bool(meta.get("deletionTimestamp"))


def _condition(obj: Mapping[str, Any], kind: str) -> bool | None:
    status = objects.mapping(obj, "status")
    for condition in objects.dicts(status, "conditions", path="status"):
        if condition.get("type") == kind:
            return condition.get("status") == "True"
    return None


def node_state(obj: Mapping[str, Any]) -> NodeState:
    """A Node's cordon, readiness and taints."""
    meta, spec = objects.mapping(obj, "metadata"), objects.mapping(obj, "spec")
    taints = tuple(
        Taint(objects.string(t, "key"), objects.string(t, "value"), objects.string(t, "effect"))
        for t in objects.dicts(spec, "taints", path="spec")
    )
    return NodeState(
        name=objects.string(meta, "name"),
        cordoned=spec.get("unschedulable") is True,
        ready=_condition(obj, "Ready"),
        taints=taints,
    )


def pod_state(obj: Mapping[str, Any]) -> PodState:
    """A Pod's uid, Ready condition, deletion and controlling set."""
    meta = objects.mapping(obj, "metadata")
    return PodState(
        namespace=objects.string(meta, "namespace"),
        name=objects.string(meta, "name"),
        uid=objects.string(meta, "uid"),
        ready=_condition(obj, "Ready") is True,
        deleting=_deleting(meta),
        owner=workload_owner(meta),
    )


def claim_state(obj: Mapping[str, Any]) -> ClaimState:
    """A PersistentVolumeClaim's uid and owning pods."""
    meta = objects.mapping(obj, "metadata")
    owners = tuple(
        objects.string(ref, "name")
        for ref in objects.dicts(meta, "ownerReferences", path="metadata")
        if ref.get("kind") == "Pod" and ref.get("apiVersion") == "v1"
    )
    return ClaimState(
        namespace=objects.string(meta, "namespace"),
        name=objects.string(meta, "name"),
        uid=objects.string(meta, "uid"),
        owner_pods=owners,
        deleting=_deleting(meta),
    )


def set_group(obj: Mapping[str, Any]) -> str | None:
    """The group of a raw StatefulSet: "" for ``apps``, ``apps.kruise.io`` for an Advanced
    StatefulSet (of a version stszone reads), None for any other group of that kind."""
    return setkinds.group_of(str(obj.get("apiVersion", "apps/v1")))


def set_state(obj: Mapping[str, Any]) -> SetState:
    """A StatefulSet's (or an Advanced StatefulSet's: the same fields) replicas, rollout,
    deletion and pod template facts."""
    meta, spec = objects.mapping(obj, "metadata"), objects.mapping(obj, "spec")
    status = objects.mapping(obj, "status")
    template = objects.mapping(spec, "template", path="spec")
    current = objects.string(status, "currentRevision")
    update = objects.string(status, "updateRevision")
    strategy = objects.mapping(spec, "updateStrategy", path="spec")
    rolling = objects.string(strategy, "type", path="spec.updateStrategy") != "OnDelete"
    replicas = objects.int32(spec, "replicas", default=1, path="spec")
    steps = objects.mapping(strategy, "rollingUpdate", path="spec.updateStrategy")
    partition = objects.integer(
        steps, "partition", default=0, path="spec.updateStrategy.rollingUpdate"
    )
    # Both controllers update only the replicas at and above the partition (an index from the
    # first ordinal; Kruise counts live members alike) and leave the rest at currentRevision.
    updated = objects.integer(status, "updatedReplicas", default=0, path="status")
    staged = updated >= replicas - partition
    group = set_group(obj) or ""
    in_strategy = setkinds.KINDS[group].min_ready_in_strategy
    where, within = (steps, "spec.updateStrategy.rollingUpdate") if in_strategy else (spec, "spec")
    min_ready = objects.integer(where, "minReadySeconds", default=0, path=within)
    available = objects.integer(status, "availableReplicas", default=0, path="status")
    return SetState(
        namespace=objects.string(meta, "namespace"),
        name=objects.string(meta, "name"),
        group=group,
        uid=objects.string(meta, "uid"),
        replicas=replicas,
        updating=rolling and not staged and bool(current and update and current != update),
        paused=steps.get("paused") is True,
        outdated=max(replicas - updated, 0) if not rolling and current != update else 0,
        deleting=_deleting(meta),
        min_ready=min_ready,
        available=available if min_ready > 0 else None,
        generation=objects.integer(meta, "generation", default=0, path="metadata"),
        observed=objects.integer(status, "observedGeneration", default=0, path="status"),
        tolerations=tuple(
            objects.dicts(
                objects.mapping(template, "spec", path="spec.template"),
                "tolerations",
                path="spec.template.spec",
            )
        ),
    )


def live_state(items: Iterable[Mapping[str, Any]]) -> LiveState:
    """The :class:`LiveState` of raw API objects (each with its ``kind``); others are ignored."""
    pods: dict[tuple[str, str], PodState] = {}
    nodes: dict[str, NodeState] = {}
    claims: dict[tuple[str, str], ClaimState] = {}
    reclaim: dict[str, str] = {}
    sets: dict[tuple[str, ...], SetState] = {}
    for item in items:
        kind = item.get("kind")
        if kind == "Pod":
            pod = pod_state(item)
            pods[(pod.namespace, pod.name)] = pod
        elif kind == "Node":
            node = node_state(item)
            nodes[node.name] = node
        elif kind == "PersistentVolumeClaim":
            claim = claim_state(item)
            claims[(claim.namespace, claim.name)] = claim
        elif kind == "PersistentVolume":
            spec = objects.mapping(item, "spec")
            name = objects.string(objects.mapping(item, "metadata"), "name")
            # The API server defaults a hand-made PV to Retain; provisioners copy their class's.
            reclaim[name] = objects.string(spec, "persistentVolumeReclaimPolicy") or "Retain"
        elif kind == "StatefulSet" and set_group(item) is not None:
            # Keyed by group too: an Advanced StatefulSet and an apps/v1 set of the same name
            # are two objects.
            sts = set_state(item)
            sets[set_key(sts.namespace, sts.name, sts.group)] = sts
    return LiveState(pods=pods, nodes=nodes, claims=claims, reclaim=reclaim, sets=sets)
