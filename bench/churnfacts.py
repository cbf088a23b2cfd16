"""Where each ordinal is, read from API objects by the churn run's own code, and the checks
that use it (invariants 1-3 of ``bench/churn.py``).

Deliberately not stszone's code (nothing from ``webhook.rules``): the churn checks the guard
against what the objects say, following the contract of docs/guard.md as a second reader.

- A scheduled pod that is not going away (no ``deletionTimestamp``, phase not Failed or
  Succeeded) is in its node's zone label, else its own zone label (the API server copies it
  there at binding), else the zone of a volume it mounts, else nowhere known.
- An ordinal without such a pod is in its claim's volume's zone, else in its rule zone:
  ``zones[(ordinal - start) mod k]``.
- A volume is in the zones its node affinity names (the zone key), or the zones of the nodes
  its hostname terms select, or the zone label on it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

Obj = dict[str, Any]
ZONE_KEY: Final = "topology.kubernetes.io/zone"
HOSTNAME_KEY: Final = "kubernetes.io/hostname"
ZONES_ANNOTATION: Final = "stszone.io/zones"
FORCE_ANNOTATION: Final = "stszone.io/allow-zone-loss"
SKIP_LABEL: Final = "stszone.io/skip"
INDEX_LABEL: Final = "apps.kubernetes.io/pod-index"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The objects of one moment: nodes by name, and one namespace's sets, pods, claims; the
    volumes by name."""

    nodes: Mapping[str, Obj]
    sets: Mapping[str, Obj]
    pods: Mapping[str, Obj]
    claims: Mapping[str, Obj]
    volumes: Mapping[str, Obj]

    @staticmethod
    def of(
        *,
        nodes: Iterable[Obj],
        sets: Iterable[Obj],
        pods: Iterable[Obj],
        claims: Iterable[Obj] = (),
        volumes: Iterable[Obj] = (),
    ) -> Snapshot:
        def by_name(items: Iterable[Obj]) -> dict[str, Obj]:
            return {item["metadata"]["name"]: item for item in items}

        return Snapshot(
            by_name(nodes), by_name(sets), by_name(pods), by_name(claims), by_name(volumes)
        )


def _labels(obj: Obj) -> Mapping[str, str]:
    labels: Mapping[str, str] = obj.get("metadata", {}).get("labels") or {}
    return labels


def going(pod: Obj) -> bool:
    """Terminating, Failed or Succeeded: the pod holds no zone."""
    phase = pod.get("status", {}).get("phase")
    return bool(pod["metadata"].get("deletionTimestamp")) or phase in ("Failed", "Succeeded")


def listed_zones(sts: Obj, default: tuple[str, ...]) -> tuple[str, ...]:
    """The set's ``stszone.io/zones``, else the server's list."""
    text = (sts["metadata"].get("annotations") or {}).get(ZONES_ANNOTATION, "")
    zones = tuple(z.strip() for z in text.split(",") if z.strip())
    return zones or default


def start_of(sts: Obj) -> int:
    return int((sts["spec"].get("ordinals") or {}).get("start", 0))


def rule_zone(sts: Obj, ordinal: int, default: tuple[str, ...]) -> str:
    zones = listed_zones(sts, default)
    return zones[(ordinal - start_of(sts)) % len(zones)]


def volume_zones(snap: Snapshot, volume: Obj) -> set[str]:
    """Zones a PersistentVolume can attach in (empty: nowhere, or not pinned)."""
    zones: set[str] = set()
    required = (volume.get("spec", {}).get("nodeAffinity") or {}).get("required") or {}
    for term in required.get("nodeSelectorTerms") or []:
        for expr in term.get("matchExpressions") or []:
            if expr.get("operator") != "In":
                continue
            if expr["key"] == ZONE_KEY:
                zones.update(expr.get("values") or [])
            elif expr["key"] == HOSTNAME_KEY:
                for node in snap.nodes.values():
                    if _labels(node).get(HOSTNAME_KEY) in (expr.get("values") or []):
                        zones.update(z for z in [_labels(node).get(ZONE_KEY)] if z)
    if not zones and ZONE_KEY in _labels(volume):
        zones.add(_labels(volume)[ZONE_KEY])
    return zones


def claim_zones(snap: Snapshot, claim_name: str) -> set[str]:
    claim = snap.claims.get(claim_name)
    if claim is None or not claim.get("spec", {}).get("volumeName"):
        return set()
    volume = snap.volumes.get(claim["spec"]["volumeName"])
    return volume_zones(snap, volume) if volume is not None else set()


def ordinal_claims(sts: Obj, ordinal: int) -> list[str]:
    """``<template>-<set>-<ordinal>`` for each volumeClaimTemplate."""
    name = sts["metadata"]["name"]
    return [
        f"{t['metadata']['name']}-{name}-{ordinal}"
        for t in sts["spec"].get("volumeClaimTemplates") or []
    ]


def pod_of(snap: Snapshot, sts: Obj, ordinal: int) -> Obj | None:
    """The pod of ``ordinal`` that this set controls (same name, owner uid)."""
    pod = snap.pods.get(f"{sts['metadata']['name']}-{ordinal}")
    if pod is None:
        return None
    owners = pod["metadata"].get("ownerReferences") or []
    if not any(o.get("uid") == sts["metadata"].get("uid") for o in owners):
        return None
    return pod


def pod_zone(snap: Snapshot, pod: Obj) -> str | None:
    """Where a scheduled pod is: its node's zone label, else its own (None: not known)."""
    node = snap.nodes.get(pod["spec"].get("nodeName", ""))
    if node is not None and ZONE_KEY in _labels(node):
        return _labels(node)[ZONE_KEY]
    return _labels(pod).get(ZONE_KEY)


def ordinal_zone(snap: Snapshot, sts: Obj, ordinal: int, default: tuple[str, ...]) -> str | None:
    """Where ``ordinal`` is by the facts (None: unknown)."""
    pod = pod_of(snap, sts, ordinal)
    if pod is not None and pod["spec"].get("nodeName") and not going(pod):
        zone = pod_zone(snap, pod)
        if zone is not None:
            return zone
        mounted = [
            v["persistentVolumeClaim"]["claimName"]
            for v in pod["spec"].get("volumes") or []
            if v.get("persistentVolumeClaim")
        ]
        zones = set().union(*(claim_zones(snap, c) for c in mounted)) if mounted else set()
        return next(iter(zones)) if len(zones) == 1 else None
    claimed = set().union(*(claim_zones(snap, c) for c in ordinal_claims(sts, ordinal)))
    if claimed:
        return next(iter(claimed)) if len(claimed) == 1 else None
    return rule_zone(sts, ordinal, default)


@dataclass(frozen=True, slots=True)
class Kept:
    """What the ordinals a replica count keeps hold, by the facts."""

    held: frozenset[str]
    unknown: tuple[int, ...]
    rows: tuple[tuple[int, str | None], ...]

    def lost(self, listed: Iterable[str]) -> list[str]:
        """Listed zones no kept ordinal of known zone holds."""
        return [zone for zone in listed if zone not in self.held]


def kept(snap: Snapshot, sts: Obj, replicas: int, default: tuple[str, ...]) -> Kept:
    start = start_of(sts)
    rows = tuple((o, ordinal_zone(snap, sts, o, default)) for o in range(start, start + replicas))
    return Kept(
        frozenset(z for _, z in rows if z is not None),
        tuple(o for o, z in rows if z is None),
        rows,
    )


def misplaced_pods(snap: Snapshot, default: tuple[str, ...]) -> list[str]:
    """Invariant 1: bound pods of the namespace's sets outside their rule zone and their
    volume's zone (skipped pods and sets with ``stszone.io/skip`` left out)."""
    problems = []
    for sts in snap.sets.values():
        if _labels(sts).get(SKIP_LABEL) == "true":
            continue
        for pod in snap.pods.values():
            owners = pod["metadata"].get("ownerReferences") or []
            if not any(o.get("uid") == sts["metadata"].get("uid") for o in owners):
                continue
            if not pod["spec"].get("nodeName") or _labels(pod).get(SKIP_LABEL) == "true":
                continue
            ordinal = int(_labels(pod).get(INDEX_LABEL, pod["metadata"]["name"].rsplit("-")[-1]))
            zone = pod_zone(snap, pod)
            allowed = {rule_zone(sts, ordinal, default)}
            for claim in ordinal_claims(sts, ordinal):
                allowed |= claim_zones(snap, claim)
            if zone is not None and zone not in allowed:
                problems.append(
                    f"{pod['metadata']['name']} on node {pod['spec']['nodeName']} in {zone}, "
                    f"expected {' or '.join(sorted(allowed))}"
                )
    return problems


def accepted_scale_down(
    snaps: Iterable[Snapshot], name: str, new: int, default: tuple[str, ...]
) -> str | None:
    """Invariant 2: None when, in one of ``snaps`` (before and after the request: the facts
    may move while it is answered), the kept ordinals hold every listed zone; else why not."""
    why = []
    for snap in snaps:
        sts = snap.sets.get(name)
        if sts is None:
            return None  # deleted meanwhile: nothing left to lose
        found = kept(snap, sts, new, default)
        lost = found.lost(listed_zones(sts, default))
        if not lost:
            return None
        why.append(f"kept ordinals {list(found.rows)} leave {', '.join(lost)} unheld")
    return "; ".join(why) or None


#: How a refusal names an unknown ordinal: ``ordinal 2, whose zone is unknown (why)``, or, for
#: several, ``ordinals 2 and 5, whose zones are unknown (ordinal 2: why; ordinal 5: why)``.
ORDINAL_NAMED: Final = re.compile(r"ordinal (\d+)(?::|, whose zone is unknown)")


def named_ordinals(message: str) -> set[int]:
    """Ordinals a refusal names as unknown."""
    return {int(m[1]) for m in ORDINAL_NAMED.finditer(message)}


def refusal(
    snaps: Iterable[Snapshot], name: str, new: int, message: str, default: tuple[str, ...]
) -> str | None:
    """Invariant 3: None when, in one of ``snaps``, a zone the refusal names is listed and no
    kept ordinal of known zone holds it, or an ordinal it names as unknown is unknown; else
    why the refusal is not borne out."""
    why = []
    for snap in snaps:
        sts = snap.sets.get(name)
        if sts is None:
            continue
        listed = listed_zones(sts, default)
        found = kept(snap, sts, new, default)
        named = [z for z in listed if re.search(rf"\b{re.escape(z)}\b", message)]
        if set(named) & set(found.lost(listed)):
            return None
        start = start_of(sts)
        old = int(sts["spec"].get("replicas", 1))
        every = range(start, start + max(old, new))
        unknown = {o for o in every if ordinal_zone(snap, sts, o, default) is None}
        if named_ordinals(message) & unknown:
            return None
        why.append(f"zones named {named}, kept ordinals {list(found.rows)}")
    return "; ".join(why) or f"set {name} not found"


def described(snap: Snapshot, name: str | None = None) -> Obj:
    """What a broken invariant prints: the nodes (zone, cordon), and the sets and pods (all, or
    set ``name``'s)."""
    nodes = {
        n: {"zone": _labels(o).get(ZONE_KEY), "cordoned": bool(o["spec"].get("unschedulable"))}
        for n, o in snap.nodes.items()
    }
    pods = {
        p: {
            "node": o["spec"].get("nodeName"),
            "zone": (o["metadata"].get("annotations") or {}).get("stszone.io/zone"),
            "going": going(o),
        }
        for p, o in snap.pods.items()
        if name is None or p.rsplit("-", 1)[0] == name
    }
    sets = {
        s: {"replicas": o["spec"].get("replicas"), "annotations": o["metadata"].get("annotations")}
        for s, o in snap.sets.items()
        if name is None or s == name
    }
    return {"nodes": nodes, "sets": sets, "pods": pods}
