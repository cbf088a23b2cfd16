"""The compact records the cluster view holds. Pure.

Each record keeps only what a rule reads (a node's labels and readiness, a volume's node
affinity, a claim's volume, a pod's node, its own topology labels, its claims and whether it is
going away), so a cluster of thousands of nodes and 100k pods stays small in memory. Raw API
objects become records in :mod:`webhook.model.extract`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import msgspec
from msgspec import field

from webhook.model.annotations import Declared, read_annotations
from webhook.model.namespaces import NamespaceInfo
from webhook.model.nodepools import KafkaNodePoolInfo, PoolPodInfo
from webhook.model.pinning import UNPINNED, Pinning, topology_label
from webhook.model.podspec import Going

#: Node label naming the node itself; local PersistentVolumes are pinned to a node with it.
HOSTNAME: Final = "kubernetes.io/hostname"


Key = str | tuple[str, str]


# The records are msgspec Structs with ``gc=False``: immutable values holding strings, numbers,
# and tuples, frozensets and dicts of those, so none can be part of a reference cycle, and the
# cycle collector need not track them. Tracked, the 300k records of a 100k-pod cluster made
# every full collection while the lists load a stop of the event loop of about 250 ms, and
# every full collection after it as long.


class NodeInfo(msgspec.Struct, frozen=True, gc=False):
    """A node: its labels, the condition types currently True (when known), and readiness."""

    name: str
    labels: Mapping[str, str]
    true_conditions: frozenset[str] = frozenset()
    #: False when the node says it is not Ready: its Ready condition is False or Unknown, or
    #: it carries the not-ready or unreachable taint. A node that reports no conditions (a
    #: metadata-only object) counts as Ready: a pod there holds its zone either way, and only
    #: a warning turns on it.
    ready: bool = True

    @property
    def key(self) -> str:
        return self.name


class VolumeInfo(msgspec.Struct, frozen=True, gc=False):
    """A PersistentVolume: the nodes it can attach to (:mod:`webhook.model.pinning`), its
    claim, and whether deleting its claim deletes its data."""

    name: str
    #: Its node affinity and topology labels, parsed (one tuple shared by equal ones).
    pinning: Pinning = UNPINNED
    claim: tuple[str, str] | None = None
    #: ``spec.claimRef.uid``: "" when pre-bound by name (the claim may not exist yet).
    claim_uid: str = ""
    #: ``spec.persistentVolumeReclaimPolicy`` is Delete: the data goes when its claim does.
    reclaim_delete: bool = False

    @property
    def key(self) -> str:
        return self.name


class ClaimInfo(msgspec.Struct, frozen=True, gc=False):
    """A PersistentVolumeClaim: the volume it is bound to."""

    namespace: str
    name: str
    volume: str = ""
    #: Tells a claim from an earlier one of the same name (a volume's claimRef names the uid).
    uid: str = ""
    #: ``stszone.io/zone``: the zone stszone gave it when it was created.
    zone: str = ""
    #: Deleted with the pod mounting it (being deleted, or a Pod owns it: ``whenScaled: Delete``
    #: gives a removed ordinal's claims to its pod): that pod's replacement gets a new claim.
    going: bool = False

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)


class StatefulSetInfo(msgspec.Struct, frozen=True, gc=False):
    """A StatefulSet: what placement, the guard and the audit read."""

    namespace: str
    name: str
    annotations: Mapping[str, str] = field(default_factory=dict)
    #: ``annotations`` parsed once, as the view reads the set (not on every pod's request):
    #: the policy they declare (the defaults when malformed) and their problems. Derived in
    #: ``__post_init__`` from ``annotations`` whatever is passed, so they never disagree.
    declared: Declared = field(default_factory=Declared)
    problems: tuple[str, ...] = ()
    replicas: int = 1
    start: int = 0
    templates: tuple[str, ...] = ()
    #: The pod template's ``requiredDuringScheduling...`` nodeSelectorTerms, nodeSelector and
    #: ``spec.nodeName`` (which binds every pod to that node).
    node_terms: tuple[Mapping[str, Any], ...] = ()
    node_selector: Mapping[str, str] = field(default_factory=dict)
    node_name: str = ""
    #: ``spec.persistentVolumeClaimRetentionPolicy.whenScaled`` is Delete: the controller
    #: deletes the claims of the ordinals a scale-down (or a move of ordinals.start) removes.
    deletes_claims: bool = False
    #: The owner group: "" for ``apps/v1``, ``apps.kruise.io`` for an Advanced StatefulSet.
    group: str = ""
    #: An Advanced StatefulSet's ``spec.reserveOrdinals`` as merged intervals (none when the
    #: controller cannot read them: :func:`webhook.model.kruise.parse_reserve`).
    reserved: tuple[tuple[int, int], ...] = ()
    #: False when ``spec.reserveOrdinals`` holds an entry the controller cannot read.
    reserve_ok: bool = True
    uid: str = ""
    skipped: bool = False  # labelled stszone.io/skip=true, like what the objectSelector skips
    #: Its pod template is labelled ``stszone.io/skip=true``: the objectSelector keeps each of
    #: its pods from stszone, which places none of them (they run wherever they were put).
    template_skipped: bool = False
    #: ``metadata.deletionTimestamp`` is set (a foreground deletion, a finalizer): its
    #: controller creates no pod for it any more, so a pod going away is not replaced.
    deleting: bool = False
    #: The names of its misspelt ``stszone.io/`` keys, which ``annotations`` leaves out: no
    #: path but its UPDATE reads them, and audit and explain name them.
    misspelt: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        declared, problems = read_annotations(self.annotations)
        msgspec.structs.force_setattr(self, "declared", declared)
        msgspec.structs.force_setattr(self, "problems", problems)

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)


class PodInfo(msgspec.Struct, frozen=True, gc=False):
    """A StatefulSet pod: ordinal, node, owning set, its own topology labels, the claims it
    mounts, and whether it is going away."""

    namespace: str
    name: str
    owner: str | None
    ordinal: int | None
    node: str = ""
    #: The pod's own topology labels, as (key, value) pairs: Kubernetes 1.33+ copies the node's
    #: ``topology.kubernetes.io/{zone,region}`` onto a pod when it is bound (PodTopologyLabels),
    #: so a pod stays located when its node later loses the label or leaves the view.
    topology: tuple[tuple[str, str], ...] = ()
    #: Why the pod is going away, or "": "Terminating" (``metadata.deletionTimestamp`` set),
    #: else its phase once it has ended ("Failed": evicted, OOM-killed; "Succeeded"). The
    #: StatefulSet controller replaces such a pod. Not the phase itself: a pod going from
    #: Pending to Running (a routine status update) changes no record.
    going: Going = ""
    #: The persistentVolumeClaim volumes that mount the claim the StatefulSet controller names
    #: for them, ``<volume>-<pod name>``, by volume name: one shared tuple for a set's pods.
    templates: tuple[str, ...] = ()
    #: The claims it mounts under any other name (a pod made by hand, a volume of the pod
    #: template naming a claim of its own), in full.
    other_claims: tuple[str, ...] = ()
    #: The owner's group: "" for an ``apps/v1`` StatefulSet, ``apps.kruise.io`` for an
    #: Advanced StatefulSet (owners match on group, kind, name and uid).
    group: str = ""
    owner_uid: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    @property
    def set_key(self) -> tuple[str, str] | tuple[str, str, str] | None:
        """The key of its set's pods in the Store: (namespace, set) for ``apps/v1``, with the
        group appended for another kind, so two kinds' sets of one name never share pods."""
        if self.owner is None:
            return None
        return (
            (self.namespace, self.owner, self.group) if self.group else (self.namespace, self.owner)
        )

    @property
    def claims(self) -> tuple[str, ...]:
        """The names of the claims the pod mounts (``spec.volumes[].persistentVolumeClaim``)."""
        return tuple([f"{t}-{self.name}" for t in self.templates]) + self.other_claims

    def zone_label(self, topology_key: str) -> str | None:
        """The pod's own label for ``topology_key`` (or an equivalent zone key), if any."""
        return topology_label(self.topology, topology_key)


Info = (
    NodeInfo
    | VolumeInfo
    | ClaimInfo
    | StatefulSetInfo
    | PodInfo
    | NamespaceInfo
    | KafkaNodePoolInfo
    | PoolPodInfo
)
