"""Where each ordinal of a StatefulSet is, facts first. Pure.

The zone of an ordinal is, in order of trust:

1. a *scheduled* pod (``spec.nodeName`` set) is where its node is: the node's topology label,
   else the pod's own topology label (Kubernetes 1.33+ copies the node's zone onto a pod when
   it binds it: PodTopologyLabels), else the zone of the volume bound to its claim. When none
   of these says, its zone is **unknown** -- never filled in from the placement rule, which
   says where a pod *should* go, not where a pod placed before stszone (or by hand) *is*;
2. an ordinal with no scheduled pod is where its data is: the zone of its bound volume (a local
   volume pinned to a node by hostname counts as that node's zone);
3. else where stszone will put it: the placement rule (affinity and scheduler modes), or, in
   node-ordinal mode, the zone of the node(s) carrying its ordinal label when they share one
   zone. Without an answer there, the zone is unknown too.

Every unknown carries the reason, in words a person can act on ("node n7 has no label
topology.kubernetes.io/zone"). The scale-down guard, ``stszone audit`` and node removal all use
this one :class:`Locator`, so they agree on every cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal, NamedTuple

from webhook.model.records import PodInfo
from webhook.model.store import Store
from webhook.rules.placement import Policy, claim_name, rule_zone, zone_among

Source = Literal["pod", "pod-label", "volume", "node-label", "rule", "unknown"]

#: Sources that are facts about a pod that exists and is scheduled.
SCHEDULED: frozenset[Source] = frozenset({"pod", "pod-label"})


class Located(NamedTuple):
    """The zone of one ordinal, what says so, and ``detail``: the node, volume or pinned nodes
    behind it, or for an unknown zone the reason.

    A named tuple rather than a frozen dataclass: a scale-down locates every known ordinal,
    and a tuple is built several times faster.
    """

    ordinal: int
    zone: str | None
    source: Source
    detail: str = ""
    #: The node of a scheduled pod ("" when there is none).
    node: str = ""


def volume_zones(
    ordinal: int, *, namespace: str, policy: Policy, store: Store
) -> tuple[str, frozenset[str]]:
    """(volume names, zones) allowed by the volumes bound to the ordinal's claims.

    Several claims intersect (the pod must reach all of them); a local PV pinned by hostname
    counts as its node's zone (``Store.claim_zones``).
    """
    key = policy.declared.topology_key
    names: list[str] = []
    allowed: frozenset[str] | None = None
    for template in policy.templates:
        volume, zones = store.claim_zones(
            namespace, claim_name(template, policy.statefulset, ordinal), key
        )
        if zones:
            names.append(volume)
            allowed = zones if allowed is None else allowed & zones
    return ", ".join(names), allowed or frozenset()


class Locator:
    """Finds the zone of ordinals of one set (see the module docstring for the order). Built
    once per set, so locating many ordinals shares the lookups."""

    __slots__ = ("key", "namespace", "nodes", "pods", "policy", "store")

    def __init__(self, *, namespace: str, policy: Policy, store: Store) -> None:
        self.namespace, self.policy, self.store = namespace, policy, store
        self.key = policy.declared.topology_key
        self.pods = store.set_pods(namespace, policy.statefulset).by_name
        self.nodes = store.nodes

    def zones(
        self, ordinals: Iterable[int], *, running: Mapping[int, str]
    ) -> list[tuple[int, str | None]]:
        """``(ordinal, self(ordinal).zone)`` for each of ``ordinals``, without building the
        :class:`Located` in the usual case, a scheduled pod on a node with the label, whose
        zone ``running`` gives (:meth:`Store.pod_zones`): the scale-down guard asks it of every
        known ordinal, and only names a few."""
        return [(o, running.get(o) or self(o).zone) for o in ordinals]

    def __call__(self, ordinal: int) -> Located:
        pod = self.pods.get(ordinal)
        if pod is not None and pod.node:
            return self._scheduled(ordinal, pod)
        policy, store = self.policy, self.store
        volume, zones = volume_zones(ordinal, namespace=self.namespace, policy=policy, store=store)
        if zones:
            return Located(ordinal, zone_among(zones, ordinal, policy), "volume", volume)
        if policy.declared.mode == "node-ordinal":
            label = policy.declared.node_label or ""
            nodes = store.nodes_with_label(label, str(ordinal))
            pinned = store.zones_of(nodes, self.key)
            if len(pinned) == 1:
                return Located(ordinal, next(iter(pinned)), "node-label", ", ".join(nodes))
            if not nodes:
                why = f"no pod and no node labelled {label}={ordinal}"
            elif pinned:
                why = f"nodes labelled {label}={ordinal} span zones {', '.join(sorted(pinned))}"
            else:
                why = f"no node labelled {label}={ordinal} has a label {self.key}"
            return Located(ordinal, None, "unknown", why)
        if policy.zones:
            return Located(
                ordinal, rule_zone(ordinal, zones=policy.zones, start=policy.start), "rule"
            )
        return Located(ordinal, None, "unknown", "no pod, no zone-pinned volume and no zone list")

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
        volume, zones = volume_zones(
            ordinal, namespace=self.namespace, policy=policy, store=self.store
        )
        if zones:
            return Located(ordinal, zone_among(zones, ordinal, policy), "volume", volume, node_name)
        why = (
            f"node {node_name} has no label {self.key}"
            if node is not None
            else f"node {node_name} is not in stszone's view"
        )
        return Located(ordinal, None, "unknown", why, node_name)
