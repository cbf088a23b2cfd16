"""What the Store says about one StatefulSet: its pods by ordinal, their zones, its claims'
ordinals. Pure: summaries of the records of one set, which the Store's indexes keep in step with
the set's records (:mod:`webhook.model.index`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from webhook.model.records import NodeInfo, PodInfo


def claim_stem(namespace: str, claim: str) -> tuple[str, str] | None:
    """(namespace, "<template>-<set>") of a claim named "<template>-<set>-<ordinal>", else None."""
    stem, dash, ordinal = claim.rpartition("-")
    return (namespace, stem) if dash and ordinal.isascii() and ordinal.isdigit() else None


def claim_ordinals(names: Iterable[str]) -> frozenset[int]:
    """The ordinals of claims named "<template>-<set>-<ordinal>" (indexed: all well-formed)."""
    return frozenset(int(name.rpartition("-")[2]) for name in names)


@dataclass(frozen=True, slots=True)
class SetPods:
    """The pods of one StatefulSet, as the guard reads them."""

    #: Every pod's ordinal (its ``pod-index`` label, else its name's suffix).
    ordinals: frozenset[int]
    #: Pods by the ordinal their name carries: the pod ``<set>-<N>`` is ordinal N's pod.
    by_name: Mapping[int, PodInfo]
    #: The ordinals (by name, sorted) whose pod is going away: few, and read by every
    #: scale-down that drops a zone.
    going: tuple[int, ...] = ()

    @classmethod
    def of(cls, pods: Iterable[PodInfo]) -> SetPods:
        ordinals: set[int] = set()
        by_name: dict[int, PodInfo] = {}
        for pod in pods:
            if pod.ordinal is not None:
                ordinals.add(pod.ordinal)
            if pod.owner and pod.name.startswith(f"{pod.owner}-"):
                suffix = pod.name[len(pod.owner) + 1 :]
                # "<set>-<N>" exactly, as the controller names it: "db-03" is nobody's pod.
                if suffix.isascii() and suffix.isdigit() and (suffix == "0" or suffix[0] != "0"):
                    by_name[int(suffix)] = pod
        going = tuple(sorted(o for o, pod in by_name.items() if pod.going))
        return cls(frozenset(ordinals), by_name, going)


def by_zone(zones: Mapping[int, str | None]) -> dict[str, list[int]]:
    """Zone -> its ordinals, in the order of ``zones`` (ordinals of unknown zone left out)."""
    grouped: dict[str, list[int]] = {}
    for ordinal, zone in zones.items():
        if zone is not None:
            grouped.setdefault(zone, []).append(ordinal)
    return grouped


def by_residue(ordinals: Iterable[int], k: int) -> list[list[int]]:
    """The ordinals whose residue mod ``k`` is 0, 1, ..., k - 1, each in the order given."""
    grouped: list[list[int]] = [[] for _ in range(k)]
    for ordinal in ordinals:
        grouped[ordinal % k].append(ordinal)
    return grouped


@dataclass(frozen=True, slots=True)
class PodZones:
    """The zones of a set's pods that run on a node the view holds with the zone label and are
    not going away: the common case of :class:`webhook.rules.locate.Locator`."""

    #: Ordinal (by pod name) -> its node's zone, in ordinal order.
    zones: Mapping[int, str]
    #: Zone -> its ordinals, sorted.
    by_zone: Mapping[str, list[int]]
    #: Ordinal -> its node, for the pods (not going away) on a node that is not Ready.
    unready: Mapping[int, str] = field(default_factory=dict)
    #: Ordinal -> its node, for the pods on a node that no longer exists: going away, as PodGC
    #: deletes them (their ordinals are where their replacements go).
    gone: Mapping[int, str] = field(default_factory=dict)

    @classmethod
    def placed(
        cls,
        pods: SetPods,
        nodes: Mapping[str, NodeInfo],
        topology_key: str,
        *,
        node_gone: Callable[[str], bool],
    ) -> PodZones:
        """Where the scheduled pods of a set that are not going away are, by their nodes'
        ``topology_key`` label; which of them run on nodes that are not Ready; and which sit
        on nodes that no longer exist (``node_gone``: going away too)."""
        zones: dict[int, str] = {}
        unready: dict[int, str] = {}
        gone: dict[int, str] = {}
        for ordinal in sorted(pods.by_name):
            pod = pods.by_name[ordinal]
            node = nodes.get(pod.node) if pod.node and not pod.going else None
            if node is None:
                if pod.node and not pod.going and node_gone(pod.node):
                    gone[ordinal] = pod.node
                continue  # not scheduled, going away (it holds no zone), or on a node unknown
            if zone := node.labels.get(topology_key):
                zones[ordinal] = zone
            if not node.ready:
                unready[ordinal] = node.name
        return cls.of(zones, unready=unready, gone=gone)

    @classmethod
    def of(
        cls,
        zones: dict[int, str],
        *,
        unready: dict[int, str] | None = None,
        gone: dict[int, str] | None = None,
    ) -> PodZones:
        """From ordinal -> zone, in ordinal order (and the pods on nodes not Ready or gone)."""
        return cls(zones, by_zone(zones), unready or {}, gone or {})

    def residues(self, k: int) -> list[list[int]]:
        """The ordinals (sorted) whose residue mod ``k`` is 0, 1, ..., k - 1."""
        return by_residue(self.zones, k)
