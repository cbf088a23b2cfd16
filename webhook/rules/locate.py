"""Where each ordinal of a StatefulSet is, facts first. Pure.

The zone of an ordinal is, in order of trust:

1. a *scheduled* pod (``spec.nodeName`` set) that is not going away is where its node is: the
   node's topology label, else the pod's own topology label (Kubernetes 1.33+ copies the
   node's zone onto a pod when it binds it: PodTopologyLabels), else the zone of the volumes
   bound to the claims it mounts when they allow one zone (a regional disk usable from
   several does not say which of them the pod runs in). When none of these says, its zone is
   **unknown** -- never filled in from the placement rule, which says where a pod *should*
   go, not where a pod placed before stszone (or by hand) *is*;
2. an ordinal with no scheduled pod is where its data is: the zone of the volumes bound to
   its claims (a volume pinned to nodes, by hostname or a driver's node key, is in those
   nodes' zones; one whose nodes are gone is nowhere, and the ordinal's zone unknown), and for
   a set with a storage-class template, the zone recorded on a claim not bound yet, where its
   class makes its volume (:func:`webhook.rules.placement.claim_data`: its pod goes there);
3. else where stszone will put it: the placement rule (affinity and scheduler modes), or, in
   node-ordinal mode, the zone of the node(s) carrying its ordinal label when every one of
   them is labelled with that zone (kube-scheduler may bind its pod to any of them, one with
   no zone label too). Without an answer there, the zone is unknown too.

A pod that is going away (Terminating, Failed, Succeeded, or bound to a node that no longer
exists, which PodGC deletes) holds no zone: the StatefulSet controller replaces it, and stszone
places the replacement by 2 and 3, so the ordinal is where its replacement will be, never where
the dying pod sits. A set being deleted (``metadata.deletionTimestamp``) gets no replacement:
its controller (kube-controller-manager's, and kruise-manager's) then creates and deletes no
pod at all, so no change of it moves a zone; its ordinal is still counted by 2 and 3, and the
message says that nothing replaces the pod.

A pod template whose ``spec.nodeName`` names a node that does not exist (:func:`missing_node`)
binds every pod the controller makes to it, asking no scheduler: no kubelet runs the pod, and
PodGC deletes it for the controller to make it there again. So an ordinal without a running pod
(none, or one going away) holds no zone -- source ``stranded``, zone None -- and its zone is not
unknown either: no fact is missing, it runs nowhere. Its data and the rule do not count it, as
its pod never reaches them; a pod already running on a node of the cluster still holds its zone.
A set being deleted with such a template strands its members alike, the message saying that no
pod is made for them: 2 and 3 would count them where no pod of theirs can ever run.

Every unknown carries the reason, in words a person can act on ("node n7 has no label
topology.kubernetes.io/zone"). The scale-down guard, ``stszone audit`` and node removal all use
this one :class:`Locator`, so they agree on every cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final, Literal, NamedTuple

from webhook.model.records import PodInfo, StatefulSetInfo
from webhook.model.store import Store
from webhook.rules.pinned import volume_zones
from webhook.rules.placement import controller_claims, policy_zone, shared_zone, zone_among
from webhook.rules.policy import Policy

Source = Literal[
    "pod",
    "pod-label",
    "volume",
    "claim",
    "node-label",
    "rule",
    "replacement",
    "ending",
    "stranded",
    "unknown",
]

#: Sources that are facts about a pod that exists and is scheduled.
SCHEDULED: frozenset[Source] = frozenset({"pod", "pod-label"})


class Located(NamedTuple):
    """The zone of one ordinal, what says so, and ``detail``: the node, volume, claim (not bound
    yet: source ``claim``) or pinned nodes behind it, or for an unknown zone (and for one that
    holds none, ``stranded``) the reason.

    A named tuple rather than a frozen dataclass: a scale-down locates every known ordinal,
    and a tuple is built several times faster.
    """

    ordinal: int
    zone: str | None
    source: Source
    detail: str = ""
    #: The node of a scheduled pod, going away or not ("" when there is none).
    node: str = ""


#: What becomes of a pod bound to a node that does not exist, and what to do about it.
_NEVER: Final = (
    "never runs, and PodGC deletes it in turn; correct or remove the template's nodeName"
)

#: How each kind of going away reads in a message.
_GOING: Final = {
    "Terminating": "is Terminating",
    "Failed": "has Failed",
    "Succeeded": "has Succeeded",
}


def missing_node(namespace: str, *, policy: Policy, store: Store) -> str:
    """The node the set's pod template binds every pod to (``spec.nodeName``) when the view
    holds the cluster's nodes and not that one, and the set is not being deleted; else "".
    Every pod its controller makes from that template never runs (the module docstring)."""
    held = store.statefulset(namespace, policy.statefulset, policy.group)
    return "" if held is None or held.deleting else _gone_node(held, store=store)


def _gone_node(held: StatefulSetInfo | None, *, store: Store) -> str:
    """The node ``held``'s pod template binds every pod to, when the view holds the cluster's
    nodes and not that one, its set being deleted or not; else ""."""
    return held.node_name if held is not None and store.node_gone(held.node_name) else ""


class Locator:
    """Finds the zone of ordinals of one set (see the module docstring for the order). Built
    once per set, so locating many ordinals shares the lookups."""

    __slots__ = (
        "bound_to",
        "ending",
        "going",
        "key",
        "namespace",
        "nodes",
        "pods",
        "policy",
        "store",
        "stranded",
    )

    def __init__(
        self, *, namespace: str, policy: Policy, store: Store, stranded: str | None = None
    ) -> None:
        self.namespace, self.policy, self.store = namespace, policy, store
        self.key = policy.declared.topology_key
        held = store.statefulset(namespace, policy.statefulset, policy.group)
        #: The set is being deleted: its controller replaces no pod.
        self.ending = held is not None and held.deleting
        #: The missing node its template binds pods to, the set being deleted or not ("": none).
        self.bound_to = _gone_node(held, store=store)
        #: :func:`missing_node` (``stranded``, when the caller has read it for the set): an
        #: ordinal without a running pod holds no zone ("": none).
        self.stranded = ("" if self.ending else self.bound_to) if stranded is None else stranded
        pods = store.set_pods(namespace, policy.statefulset, policy.group)
        self.pods, self.going = pods.by_name, pods.going
        self.nodes = store.nodes

    def zones(
        self, ordinals: Iterable[int], *, running: Mapping[int, str]
    ) -> list[tuple[int, str | None]]:
        """``(ordinal, self(ordinal).zone)`` for each of ``ordinals`` but those that hold no
        zone (``stranded``: neither held nor unknown), without building the :class:`Located`
        in the usual case, a scheduled pod on a node with the label, whose zone ``running``
        gives (:meth:`Store.pod_zones`): the scale-down guard asks it of every known ordinal,
        and only names a few."""
        found: list[tuple[int, str | None]] = []
        for ordinal in ordinals:
            zone = running.get(ordinal)
            if zone is None:
                item = self(ordinal)
                if item.source == "stranded":
                    continue
                zone = item.zone
            found.append((ordinal, zone))
        return found

    def __call__(self, ordinal: int) -> Located:
        pod = self.pods.get(ordinal)
        if pod is None and self.stranded:
            return Located(
                ordinal,
                None,
                "stranded",
                f"its pod, when made, is bound to the missing node {self.stranded} by the pod "
                f"template's spec.nodeName: it {_NEVER}",
            )
        if pod is None and self.bound_to:  # being deleted: no pod is made for it at all
            why = f"no pod is made for it: its {self.policy.kind} is being deleted{self._bound}"
            return Located(ordinal, None, "stranded", why)
        if pod is None:
            return self._unscheduled(ordinal, controller_claims(ordinal, policy=self.policy))
        if pod.going or self.store.node_gone(pod.node):
            return self._replaced(ordinal, pod)
        if pod.node:
            return self._scheduled(ordinal, pod)
        return self._unscheduled(ordinal, pod.claims)

    def claims(self, ordinal: int) -> tuple[str, ...]:
        """The claims ``ordinal``'s pod mounts, or (no pod) those its controller names for it."""
        pod = self.pods.get(ordinal)
        return pod.claims if pod is not None else controller_claims(ordinal, policy=self.policy)

    def sits(self, pod: PodInfo) -> str | None:
        """The zone a scheduled pod runs in by its node's label, else its own (None: unread;
        an empty label, which PodTopologyLabels copies from a node so labelled, names none)."""
        node = self.nodes.get(pod.node)  # an unscheduled pod's "" names no node
        zone = node.labels.get(self.key) if node is not None else None
        return zone or (pod.zone_label(self.key) if pod.node else None) or None

    def _unscheduled(self, ordinal: int, claims: Sequence[str]) -> Located:
        """An ordinal without a running pod: its volumes, else the rule (or node label)."""
        policy, store = self.policy, self.store
        pinned = volume_zones(claims, namespace=self.namespace, policy=policy, store=store)
        if pinned.nowhere:
            return Located(ordinal, None, "unknown", pinned.nowhere)
        if pinned.zones:
            zone = zone_among(pinned.zones, ordinal, policy)
            if not pinned.names:  # only claims not bound yet, recorded in a zone
                return Located(ordinal, zone, "claim", ", ".join(pinned.claims))
            return Located(ordinal, zone, "volume", pinned.volumes)
        if policy.declared.mode == "node-ordinal":
            label = policy.declared.node_label or ""  # pragma: no mutate (never empty here)
            nodes = store.nodes_with_label(label, str(ordinal))
            if (shared := shared_zone(nodes, self.key, store=store)) is not None:
                return Located(ordinal, shared, "node-label", ", ".join(nodes))
            pinned_zones = store.zones_of(nodes, self.key)
            if not nodes:
                why = f"no pod and no node labelled {label}={ordinal}"
            elif len(pinned_zones) > 1:
                why = (
                    f"nodes labelled {label}={ordinal} span zones {', '.join(sorted(pinned_zones))}"
                )
            elif pinned_zones:  # its pod may be bound to one whose zone nobody can read
                bare = [n for n in nodes if store.node_zone(n, self.key) is None]
                several = len(bare) > 1
                why = (
                    f"node{'s' if several else ''} {', '.join(bare)} labelled {label}={ordinal} "
                    f"ha{'ve' if several else 's'} no label {self.key}"
                )
            else:
                why = f"no node labelled {label}={ordinal} has a label {self.key}"
            return Located(ordinal, None, "unknown", why)
        if policy.zones:
            return Located(ordinal, policy_zone(ordinal, policy), "rule")
        return Located(ordinal, None, "unknown", "no pod, no zone-pinned volume and no zone list")

    def _replaced(self, ordinal: int, pod: PodInfo) -> Located:
        """A pod going away: the ordinal is where its replacement goes (its volumes, else the
        rule), and the detail says so: "db-0 is Terminating on node n1 in zone-c; its
        replacement goes to zone-a", "db-0 is on node n1, which no longer exists (PodGC deletes
        the pod); its replacement goes to zone-a"; or, bound to a missing node by the template,
        that it holds no zone."""
        where = f" on node {pod.node}" if pod.node else ""
        if (sits := self.sits(pod)) is not None:
            where += f" in {sits}"
        if pod.going:
            head = f"{pod.name} {_GOING[pod.going]}{where}"
        else:
            head = f"{pod.name} is{where}, which no longer exists (PodGC deletes the pod)"
        if self.stranded:  # no scheduler is asked: the replacement is bound to it as well
            return Located(
                ordinal,
                None,
                "stranded",
                f"{head}; its replacement is bound to the missing node {self.stranded} by the pod "
                f"template's spec.nodeName: it {_NEVER}",
                pod.node,
            )
        # A claim that goes with this pod is not its replacement's: the controller makes a new one.
        kept = [c for c in pod.claims if not self._goes(c)]
        after = self._unscheduled(ordinal, pod.claims if self.ending else kept)
        if self.ending:
            ends = f"{head}; nothing replaces it: its {self.policy.kind} is being deleted"
            if self.bound_to:
                return Located(ordinal, None, "stranded", ends + self._bound, pod.node)
            if after.zone is None:
                why = f"{ends}; its zone is unknown: {after.detail}"
                return Located(ordinal, None, "unknown", why, pod.node)
            return Located(ordinal, after.zone, "ending", ends, pod.node)
        if after.zone is None:
            return Located(
                ordinal,
                None,
                "unknown",
                f"{head}; its replacement's zone is unknown: {after.detail}",
                pod.node,
            )
        goes = f"{head}; its replacement goes to {after.zone}"
        if after.source == "volume":
            goes += f" with its volume {after.detail}"
        elif after.source == "claim":
            goes += f" with its claim {after.detail} (not bound yet)"
        if dropped := [c for c in pod.claims if c not in kept]:
            many = len(dropped) > 1
            goes += (
                f"; claim{'s' if many else ''} {', '.join(dropped)} {'are' if many else 'is'} "
                f"deleted with {pod.name}, and a new one made"
            )
        return Located(ordinal, after.zone, "replacement", goes, pod.node)

    @property
    def _bound(self) -> str:
        """What the template of a set being deleted would do with a pod (:attr:`bound_to`)."""
        return (
            f", and its pod template binds every pod to the missing node {self.bound_to} "
            "(spec.nodeName), where none runs"
        )

    def _goes(self, claim: str) -> bool:
        """Whether ``claim`` is deleted with the pod mounting it (:attr:`ClaimInfo.going`)."""
        info = self.store.claims.get((self.namespace, claim))
        return info is not None and info.going

    def _scheduled(self, ordinal: int, pod: PodInfo) -> Located:
        """A scheduled pod: its node's label, its own label, its volume -- or unknown."""
        node_name = pod.node
        node = self.nodes.get(node_name)
        zone = node.labels.get(self.key) if node is not None else None
        if zone:
            return Located(ordinal, zone, "pod", node_name, node_name)
        if own := pod.zone_label(self.key):
            return Located(ordinal, own, "pod-label", node_name, node_name)
        policy = self.policy
        # Bound volumes only: a scheduled pod is where it runs, which a claim's record does
        # not say (the pod may predate it).
        pinned = volume_zones(
            pod.claims, namespace=self.namespace, policy=policy, store=self.store, recorded=False
        )
        if len(pinned.zones) == 1:  # a disk in one zone: its pod runs there
            return Located(ordinal, next(iter(pinned.zones)), "volume", pinned.volumes, node_name)
        why = (
            f"node {node_name} has no label {self.key}"
            if node is not None
            else f"node {node_name} is not in stszone's view"
        )
        if pinned.nowhere:
            why += f", and its {pinned.nowhere}"
        elif pinned.zones:  # a regional disk: the pod runs in one of its zones, unread
            why += (
                f", and its volume {pinned.volumes} is usable from "
                f"{', '.join(sorted(pinned.zones))}"
            )
        return Located(ordinal, None, "unknown", why, node_name)
