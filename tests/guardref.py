"""An independent, brute-force reading of the scale-down guard's rules, for property tests.

Written from the rules as the product states them, not from the guard's code: it visits every
ordinal one by one and reads the store's raw tables (never ``webhook.rules.locate``):

- a scheduled pod is in its node's zone label, else its own topology label, else its bound
  volume's zone, else its zone is unknown (never the placement rule);
- an ordinal without a scheduled pod is in its bound volume's zone, else where the rule puts
  it (node-ordinal mode: the one zone of the nodes labelled with it), else unknown;
- a scale-down is refused when a listed zone held by a removed ordinal of known zone is held by
  no kept ordinal of known zone, or when an unknown zone could change that answer (a kept
  unknown ordinal with a lost zone; a removed unknown ordinal with a listed zone no kept
  ordinal of known zone holds). With no list at all, any removed unknown ordinal refuses.
"""

from __future__ import annotations

from dataclasses import dataclass

from webhook.model.store import Store
from webhook.rules.placement import Policy

ZONE_KEY = "topology.kubernetes.io/zone"


def locate(store: Store, policy: Policy, ordinal: int, *, namespace: str = "ns") -> str | None:
    """The zone of one ordinal from the raw tables, or None when it is unknown."""
    key, name = policy.declared.topology_key, policy.statefulset
    volume: set[str] | None = None
    for template in policy.templates:
        _, zones = store.claim_zones(namespace, f"{template}-{name}-{ordinal}", key)
        if zones:
            volume = set(zones) if volume is None else volume & set(zones)
    by_volume = None
    if volume:
        ordered = [z for z in policy.zones if z in volume] or sorted(volume)
        rule = policy.zones[(ordinal - policy.start) % len(policy.zones)] if policy.zones else None
        by_volume = rule if rule in volume else ordered[0]
    pod = store.pods.get((namespace, f"{name}-{ordinal}"))
    if pod is not None and pod.owner == name and pod.node:
        node = store.nodes.get(pod.node)
        if node is not None and key in node.labels:
            return node.labels[key]
        own = dict(pod.topology).get(key)
        return own or by_volume
    if by_volume is not None:
        return by_volume
    if policy.declared.mode == "node-ordinal":
        label = policy.declared.node_label or ""
        labelled = {
            n.labels[key]
            for n in store.nodes.values()
            if n.labels.get(label) == str(ordinal) and key in n.labels
        }
        return labelled.pop() if len(labelled) == 1 else None
    if policy.zones:
        return policy.zones[(ordinal - policy.start) % len(policy.zones)]
    return None


@dataclass(frozen=True)
class Answer:
    """What the rules say about one scale-down; ordinals are listed in order."""

    refused: bool
    #: Listed zone -> the removed ordinals that hold it (no kept ordinal of known zone does).
    lost: dict[str, list[int]]
    #: Listed zones no kept ordinal of known zone holds, that a removed unknown one may hold.
    at_risk: list[str]
    #: Zone outside the list -> the removed ordinals in it.
    unlisted: dict[str, list[int]]
    depends_on_unknown: bool
    unknown_removed: list[int]
    unknown_kept: list[int]


def judge(where: dict[int, str | None], policy: Policy, old: range, new: range) -> Answer:
    """The rules applied to the zones ``where`` of every ordinal."""
    kept = {where[o] for o in new} - {None}
    removed = [o for o in old if o not in new]
    listed = set(policy.zones) or ({where[o] for o in old} - {None})
    lost: dict[str, list[int]] = {}
    unlisted: dict[str, list[int]] = {}
    for o in removed:
        zone = where[o]
        if zone is not None and zone in listed and zone not in kept:
            lost.setdefault(zone, []).append(o)
        elif zone is not None and zone not in listed:
            unlisted.setdefault(zone, []).append(o)
    unknown_removed = [o for o in removed if where[o] is None]
    unknown_kept = [o for o in new if where[o] is None]
    at_risk = (
        [z for z in policy.zones if z not in kept and z not in lost] if unknown_removed else []
    )
    risky = bool(at_risk) if policy.zones else True
    depends = bool(lost and unknown_kept) or bool(unknown_removed and risky)
    return Answer(
        bool(lost) or depends, lost, at_risk, unlisted, depends, unknown_removed, unknown_kept
    )


def walk(
    store: Store, policy: Policy, old: range, new: range, *, namespace: str = "ns"
) -> tuple[Answer, int | None]:
    """(the answer for ``old`` -> ``new``, the smallest count the rules allow, or None)."""
    widest = range(new.start, new.start + max(len(old), len(new)))
    span = range(min(old.start, new.start), max(old.stop, widest.stop))
    where = {o: locate(store, policy, o, namespace=namespace) for o in span}
    lowest = next(
        (
            n
            for n in range(len(widest) + 1)
            if not judge(where, policy, old, range(widest.start, widest.start + n)).refused
        ),
        None,
    )
    return judge(where, policy, old, new), lowest
