"""``stszone audit``'s section on node removal: the nodes that can go, and why each other one
cannot, as text and JSON."""

from __future__ import annotations

from typing import Any

from webhook.rules.audit import Report
from webhook.rules.removal import Blocked
from webhook.rules.text import SHOWN, some

REMOVAL_NOTE = (
    "(removable: every audited pod on the node can be re-created on another node of its zone,\n"
    " or carrying its ordinal label, and no audited workload (StatefulSet, Advanced StatefulSet,\n"
    " KafkaNodePool) loses a zone or a place to run a pod; CPU, memory, taints and other\n"
    " workloads are not checked. Nodes removable one at a time may not be removable together:\n"
    " drain from the second list, or re-run the audit.)"
)


def _members(pods: tuple[str, ...]) -> str:
    """``db-2``, ``db-2 and db-5``, ``db-2, db-5, db-8 and 4 more``."""
    return some(pods, len(pods))


def cost(blocked: Blocked) -> str:
    """What removing a node costs one workload, in one line: ``db-2 has no node left to go
    to; zone zone-c left empty (db-2 is its only member there)``. A member has no node left to
    go to when drained, when pending, and when re-created (a rolling update re-creates them
    all)."""
    parts = []
    nowhere, unmounted = blocked.nowhere, blocked.unmounted
    if nowhere:
        verb, its = ("has", "its") if len(nowhere) == 1 else ("have", "their")
        mount = f" or to mount {its} volumes" if unmounted == nowhere else ""
        parts.append(f"{_members(nowhere)} {verb} no node left to go to{mount}")
    if unmounted and unmounted != nowhere:
        parts.append(f"no node left can mount the volumes of {_members(unmounted)}")
    for zone, pods in blocked.emptied:
        held = "is its only member" if len(pods) == 1 else "are its only members"
        parts.append(f"zone {zone} left empty ({_members(pods)} {held} there)")
    return "; ".join(parts)


def nodes_text(report: Report) -> list[str]:
    """The lists of nodes that can be removed, then each other node with the first few
    workloads it would cost something (and a count of the rest), then what "removable" means."""
    lines = [
        f"Nodes that can be removed one at a time: {', '.join(report.removable) or '(none)'}",
        f"Nodes that can be removed together: {', '.join(report.removable_together) or '(none)'}",
    ]
    if report.unremovable:
        lines.append("Nodes that cannot be removed, and why:")
    for node, costs in report.unremovable:
        for each in costs[:SHOWN]:
            w = each.workload
            lines.append(f"  {node}: {w.title} {w.namespace}/{w.name}: {cost(each)}")
        if len(costs) > SHOWN:
            lines.append(f"  {node}: {len(costs) - SHOWN} more workload(s); -o json lists them all")
    return [*lines, REMOVAL_NOTE]


def _cost_json(blocked: Blocked) -> dict[str, Any]:
    w = blocked.workload
    return {
        "apiGroup": w.group,
        "kind": w.kind,
        "namespace": w.namespace,
        "name": w.name,
        "noNodeLeft": list(blocked.nowhere),
        "noNodeForVolumes": list(blocked.unmounted),
        "zonesLeftEmpty": {zone: list(pods) for zone, pods in blocked.emptied},
    }


def nodes_json(report: Report) -> dict[str, Any]:
    """The node lists as JSON (``--output json``), and for each node that cannot be removed
    every workload it would cost something and every member."""
    return {
        "removableNodes": list(report.removable),
        "removableTogether": list(report.removable_together),
        "unremovableNodes": {
            node: [_cost_json(each) for each in costs] for node, costs in report.unremovable
        },
    }
