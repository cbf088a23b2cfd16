"""What ``stszone explain`` prints: an explanation as lines for people or JSON for scripts."""

from __future__ import annotations

from typing import Any

from webhook.cli.options import table_lines
from webhook.rules.explain import Member, PodExplanation, Workload, WorkloadExplanation
from webhook.rules.explain_sizes import SizeAnswer
from webhook.rules.text import members_span
from webhook.rules.verdict import being_deleted


def _head(workload: Workload) -> str:
    span = members_span(workload.replicas, workload.start, workload.live)
    return (
        f"{workload.kind} {workload.namespace}/{workload.name}: mode {workload.mode}, zones "
        f"{','.join(workload.zones) or '(none)'}, replicas {workload.replicas}{span}"
    )


def _warned(workload: Workload) -> list[str]:
    return [f"  warning: {w}" for w in workload.warnings]


def _placed(member: Member) -> str:
    row = member.row
    if row.expected_zone is None:
        return f"no zone: {row.expected_by}"
    text = f"{row.expected_zone} (set by {row.expected_by})"
    if member.rule_zone is not None and row.expected_zone != member.rule_zone:
        text += f", away from its rule zone {member.rule_zone}: its data is there"
    return text


def pod_text(explained: PodExplanation) -> str:
    """The explanation of one pod, for people."""
    title = f"Pod {explained.namespace}/{explained.name}"
    workload, member = explained.workload, explained.member
    if workload is None or member is None:
        lines = [f"{title}: stszone leaves it alone: {explained.left_alone}"]
        if workload is not None:
            lines += [f"  {_head(workload)}", *_warned(workload)]
        return "\n".join(lines)
    row = member.row
    lines = [f"{title}: ordinal {row.ordinal} of {_head(workload)}", *_warned(workload)]
    if explained.left_alone:
        lines.append(f"  NOTE: stszone does not place its pods now: {explained.left_alone}")
    rows = [("rule zone", member.rule_zone or "(none: node-ordinal mode or no zones)")]
    rows.append(("stszone's zone", _placed(member)))
    allowed = explained.allowed_zones
    if explained.missing_node:
        constraints = (
            f"bind its pods to node {explained.missing_node} (spec.nodeName), which does not "
            "exist, so they run nowhere"
        )
        if explained.deleting:
            constraints += f"; {being_deleted(workload.kind)}"
    elif allowed is None:
        constraints = "name no zone"
    elif row.expected_zone is not None and row.expected_zone not in allowed:
        constraints = (
            f"allow only {', '.join(allowed) or 'no listed zone'}: they exclude "
            f"{row.expected_zone}, so a new pod of this ordinal is refused"
        )
    else:
        constraints = f"allow {', '.join(allowed)} of {', '.join(workload.zones)}"
    rows.append(("own constraints", constraints))
    if row.node:
        ready = "Ready" if row.node_ready else "NOT Ready"
        rows.append(("runs on", f"node {row.node}, zone {row.zone or '(unknown)'}, {ready}"))
    else:
        rows.append(("runs on", "no node yet" if row.status == "pending" else "(no pod)"))
    status = row.status + (f": {row.why}" if row.why else "")
    if row.status == "MISPLACED" and workload.mode == "node-ordinal":
        status += _off_its_nodes(row.expected_by)
    elif row.status == "MISPLACED":
        status += (
            f": it runs outside {row.expected_zone} (placed before stszone, or by hand); "
            "`stszone rebalance` can move it"
        )
    elif row.status == "skipped":
        status += ": stszone expects it nowhere, and `stszone rebalance` moves none of its set"
    rows.append(("status", status))
    rows.append(("guard", member.guard.why))
    width = max(len(k) for k, _ in rows)
    lines += [f"  {k + ':':<{width + 1}} {v}" for k, v in rows]
    return "\n".join(lines)


def _off_its_nodes(expected_by: str) -> str:
    """Why a node-ordinal pod is misplaced: it runs on none of the nodes labelled for its
    ordinal (its zone may well be theirs), which only its re-creation changes."""
    nodes = expected_by.removeprefix("nodes ")
    if nodes == expected_by:  # no node carries the label
        return ": no node is labelled for its ordinal; re-created, it waits for one"
    return (
        f": it runs on none of the nodes labelled for its ordinal ({nodes}); re-created, "
        "stszone pins it to them (`stszone rebalance` moves no pod of node-ordinal mode)"
    )


def _member_json(member: Member) -> dict[str, Any]:
    row = member.row
    return {
        "ordinal": row.ordinal,
        "ruleZone": member.rule_zone,
        "expectedZone": row.expected_zone,
        "expectedBy": row.expected_by,
        "node": row.node or None,
        "zone": row.zone,
        "nodeReady": row.node_ready if row.node else None,
        "status": row.status,
        "why": row.why or None,
        "guard": {
            "zone": member.guard.zone,
            "counts": member.guard.counts,
            "neverRuns": member.guard.never_runs,
            "why": member.guard.why,
        },
    }


def _workload_json(workload: Workload) -> dict[str, Any]:
    return {
        "kind": workload.kind,
        "namespace": workload.namespace,
        "name": workload.name,
        "mode": workload.mode,
        "zones": list(workload.zones),
        "replicas": workload.replicas,
        "start": workload.start,
        "warnings": list(workload.warnings),
    }


def pod_json(explained: PodExplanation) -> dict[str, Any]:
    """The explanation of one pod, for scripts."""
    workload, member = explained.workload, explained.member
    allowed = explained.allowed_zones
    return {
        "kind": "Pod",
        "namespace": explained.namespace,
        "name": explained.name,
        "leftAlone": explained.left_alone or None,
        "workload": _workload_json(workload) if workload is not None else None,
        "member": _member_json(member) if member is not None else None,
        "allowedZones": list(allowed) if allowed is not None else None,
        "missingNode": explained.missing_node or None,
        "deleting": explained.deleting,
    }


def _guard_cell(member: Member) -> str:
    zone, row = member.guard.zone, member.row
    if member.guard.never_runs:
        return "none (never runs)"
    if row.status == "going":
        return f"none (going; counts {member.guard.counts or '?'})"
    if zone is None:
        return "unknown"
    return f"holds {zone}" if row.node else f"{zone} (not running)"


def _size_lines(answer: SizeAnswer, *, current: int) -> list[str]:
    head = f"    {current} -> {answer.replicas}: "
    if answer.allowed:
        lines = [head + "allowed"]
    else:
        lines = [head + f"refused ({answer.reason}): {answer.message}"]
    lines += [f"      warning: {w}" for w in answer.warnings]
    return lines


def workload_text(explained: WorkloadExplanation) -> str:
    """Each member in one line and each smaller size's answer, for people."""
    workload = explained.workload
    lines = [_head(workload), *_warned(workload)]
    if explained.problem:
        lines.append(f"  PROBLEM: {explained.problem}")
        if explained.sizes:  # its scale-downs are judged on the defaults all the same
            lines.append("  its new pods are refused until that is fixed; a scale-down is judged")
            lines.append("  on the defaults: a scale-down to each smaller size would be:")
        return "\n".join([*lines, *_sizes_lines(explained)])
    header = ("ORDINAL", "RULE", "EXPECTED", "SET BY", "NODE", "ZONE", "STATUS", "GUARD")
    rows = [
        (
            str(m.row.ordinal),
            m.rule_zone or "-",
            m.row.expected_zone or "?",
            m.row.expected_by,
            m.row.node or "-",
            m.row.zone or "-",
            m.row.status if m.row.node_ready else f"{m.row.status}, node not Ready",
            _guard_cell(m),
        )
        for m in explained.members
    ]
    lines += table_lines(header, rows)
    for member in explained.members:
        if member.guard.zone is None or member.row.status == "going" or not member.row.node_ready:
            lines.append(f"  ordinal {member.row.ordinal}: {member.guard.why}")
    if workload.replicas > len(explained.members):
        lines.append(f"  (the first {len(explained.members)} of {workload.replicas} members)")
    if explained.sizes:
        lines.append("  a scale-down to each smaller size would be:")
    return "\n".join([*lines, *_sizes_lines(explained)])


def _sizes_lines(explained: WorkloadExplanation) -> list[str]:
    """Each smaller size's answer (or why none is judged)."""
    current = explained.workload.replicas
    lines = []
    if explained.deleting:
        lines.append(f"  no smaller size judged: {being_deleted(explained.workload.kind)}")
    for answer in explained.sizes:
        lines += _size_lines(answer, current=current)
    if explained.unjudged:
        lines.append(f"    (sizes below {explained.sizes[-1].replicas} not judged)")
    return lines


def workload_json(explained: WorkloadExplanation) -> dict[str, Any]:
    """Each member and each smaller size's answer, for scripts."""
    return {
        **_workload_json(explained.workload),
        "problem": explained.problem or None,
        "members": [_member_json(m) for m in explained.members],
        "sizes": [
            {
                "replicas": a.replicas,
                "allowed": a.allowed,
                "reason": a.reason or None,
                "message": a.message or None,
                "warnings": list(a.warnings),
            }
            for a in explained.sizes
        ],
        "unjudgedSizes": explained.unjudged,
        "deleting": explained.deleting,
    }
