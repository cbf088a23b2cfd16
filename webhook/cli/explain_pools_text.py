"""What ``stszone explain`` prints for a KafkaNodePool or a broker's pod: lines or JSON."""

from __future__ import annotations

from typing import Any

from webhook.cli.options import table_lines
from webhook.model.nodepools import REMOVE_NODE_IDS, format_node_ids
from webhook.rules.explain_pools import (
    KIND,
    Broker,
    BrokerPodExplanation,
    PoolExplanation,
    PoolHead,
    PoolSize,
    Verdict,
)
from webhook.rules.text import some

#: Removed brokers a size's line names before it counts the rest.
SHOWN = 6

#: How a zone was set, in words (the JSON keeps the short names).
BY = {"data": "data", "pod": "its pod", "balance": "balance"}


def _head(pool: PoolHead) -> str:
    ids = "not reconciled yet" if pool.node_ids is None else format_node_ids(pool.node_ids)
    return (
        f"{KIND} {pool.namespace}/{pool.name} (cluster {pool.cluster or '?'}): zones "
        f"{','.join(pool.zones) or '(none)'}, replicas {pool.replicas}, node IDs {ids}"
    )


def _warned(pool: PoolHead) -> list[str]:
    return [f"  warning: {w}" for w in pool.warnings]


def _head_json(pool: PoolHead) -> dict[str, Any]:
    return {
        "kind": KIND,
        "namespace": pool.namespace,
        "name": pool.name,
        "cluster": pool.cluster,
        "zones": list(pool.zones),
        "replicas": pool.replicas,
        "nodeIds": list(pool.node_ids) if pool.node_ids is not None else None,
        "removeNodeIds": pool.remove_node_ids,
        "warnings": list(pool.warnings),
    }


def _broker_json(broker: Broker) -> dict[str, Any]:
    row = broker.row
    return {
        "nodeId": broker.node_id,
        "pod": row.pod,
        "expectedZone": broker.zone,
        "expectedBy": broker.zone_by,
        "claim": broker.claim or None,
        "dataZone": row.expected_zone,
        "node": row.node or None,
        "zone": row.zone,
        "status": row.status,
        "guard": {"zone": broker.guard_zone, "why": broker.guard_why},
    }


def _verdict_json(verdict: Verdict) -> dict[str, Any]:
    return {
        "allowed": verdict.allowed,
        "reason": verdict.reason or None,
        "message": verdict.message or None,
        "warnings": list(verdict.warnings),
    }


def _size_json(size: PoolSize) -> dict[str, Any]:
    written = list(size.written) if size.written is not None else None
    return {
        "replicas": size.replicas,
        "removedNodeIds": list(size.removed),
        **_verdict_json(size.scale),
        "update": {"removeNodeIdsWritten": written, **_verdict_json(size.update)},
    }


def pool_json(explained: PoolExplanation) -> dict[str, Any]:
    """Each broker and each smaller size's answers, for scripts."""
    return {
        **_head_json(explained.pool),
        "problem": explained.problem or None,
        "members": [_broker_json(b) for b in explained.brokers],
        "brokersPerZone": dict(explained.counts),
        "sizes": [_size_json(s) for s in explained.sizes],
        "unjudgedSizes": explained.unjudged,
    }


def _guard_cell(broker: Broker) -> str:
    zone = broker.guard_zone
    if zone is None:
        return "unknown"
    row = broker.row
    running = row.node and row.status != "going"
    return f"holds {zone}" if running else f"{zone} (not running)"


def _answer(verdict: Verdict) -> str:
    return "allowed" if verdict.allowed else f"refused ({verdict.reason}): {verdict.message}"


def _removes(ids: tuple[int, ...], zones: dict[int, str | None]) -> str:
    if not ids:
        return "removes none"
    named = [f"{i} ({zones.get(i) or 'zone unknown'})" for i in ids[:SHOWN]]
    return "removes " + some(named, len(ids), shown=SHOWN)


def _size_lines(size: PoolSize, *, current: int, zones: dict[int, str | None]) -> list[str]:
    lines = [f"    {current} -> {size.replicas}: {_removes(size.removed, zones)}: "]
    lines[0] += _answer(size.scale)
    lines += [f"      warning: {w}" for w in size.scale.warnings]
    update = size.update
    if size.written is not None or (update.allowed, update.message) != (
        size.scale.allowed,
        size.scale.message,
    ):
        wrote = ""
        if size.written is not None:
            wrote = (
                f"stszone writes {REMOVE_NODE_IDS}={format_node_ids(size.written)}, so it "
                f"{_removes(size.written, zones)}: "
            )
        lines.append(f"      by kubectl apply/patch of spec.replicas: {wrote}{_answer(update)}")
    return lines


def pool_text(explained: PoolExplanation) -> str:
    """Each broker in one line, the brokers per zone and each smaller size's answer."""
    pool = explained.pool
    lines = [_head(pool), *_warned(pool)]
    if explained.problem:
        lines.append(f"  PROBLEM: {explained.problem}")
        if explained.sizes:  # its /scale is judged on the defaults all the same
            lines.append("  its new brokers are refused until that is fixed; a scale-down is")
            lines.append("  judged on the defaults: a scale-down to each smaller size would be:")
        return "\n".join([*lines, *_sizes_lines(explained, dict(explained.guarded))])
    header = ("NODE ID", "POD", "ZONE", "SET BY", "DATA IN", "NODE", "RUNS IN", "STATUS", "GUARD")
    rows = [
        (
            str(b.node_id),
            b.row.pod,
            b.zone or "?",
            BY[b.zone_by],
            b.row.expected_zone or "-",
            b.row.node or "-",
            b.row.zone or "-",
            b.row.status,
            _guard_cell(b),
        )
        for b in explained.brokers
    ]
    lines += table_lines(header, rows)
    for broker in explained.brokers:
        if broker.guard_zone is None or broker.row.status not in ("ok",):
            lines.append(f"  node ID {broker.node_id}: {broker.guard_why}")
    held = ", ".join(f"{zone} {n}" for zone, n in explained.counts) or "(none)"
    lines.append(f"  brokers per zone: {held}")
    if pool.remove_node_ids is not None:
        lines.append(
            f"  {REMOVE_NODE_IDS}: {pool.remove_node_ids} (the operator removes these first, "
            "in that order, then the highest)"
        )
    if explained.sizes:
        lines.append("  a scale-down to each smaller size (kubectl scale) would be:")
    zones = {b.node_id: b.guard_zone for b in explained.brokers}
    return "\n".join([*lines, *_sizes_lines(explained, zones)])


def _sizes_lines(explained: PoolExplanation, zones: dict[int, str | None]) -> list[str]:
    lines = []
    for size in explained.sizes:
        lines += _size_lines(size, current=explained.pool.replicas, zones=zones)
    if explained.unjudged:
        lines.append(f"    (sizes below {explained.sizes[-1].replicas} not judged)")
    return lines


def _chosen(explained: BrokerPodExplanation) -> str:
    choice = explained.choice
    if choice is None:
        return "(none)"
    if choice.why == "data":
        return f"{choice.zone} (data gravity: its claim {choice.claim} is in {choice.zone})"
    return (
        f"{choice.zone} (balance: none of its claims is in a known zone, so the pool's listed "
        "zone with the fewest of its other brokers, ties to the first listed)"
    )


def _recorded(explained: BrokerPodExplanation) -> str:
    broker, choice = explained.broker, explained.choice
    if broker is not None and broker.row.status == "no pod":
        return "(no pod)"
    if not explained.recorded:
        return "(none: the pod was created without stszone)"
    text = f"{explained.recorded} (stszone.io/zone on the pod)"
    if choice is not None and choice.zone != explained.recorded:
        text += f"; a re-created pod would go to {choice.zone}"
    return text


def broker_pod_text(explained: BrokerPodExplanation) -> str:
    """The explanation of one broker's pod, for people."""
    title = f"Pod {explained.namespace}/{explained.name}"
    pool, broker = explained.pool, explained.broker
    if pool is None or broker is None:
        lines = [f"{title}: stszone leaves it alone: {explained.left_alone}"]
        if pool is not None:
            lines += [f"  {_head(pool)}", *_warned(pool)]
        return "\n".join(lines)
    row = broker.row
    lines = [f"{title}: node ID {broker.node_id} of {_head(pool)}", *_warned(pool)]
    if explained.left_alone:
        lines.append(f"  NOTE: stszone does not place its pods now: {explained.left_alone}")
    rows = [("stszone's zone", _chosen(explained)), ("recorded", _recorded(explained))]
    if row.node:
        rows.append(("runs on", f"node {row.node}, zone {row.zone or '(unknown)'}"))
    else:
        rows.append(("runs on", "no node yet" if row.status == "pending" else "(no pod)"))
    status: str = row.status
    if row.status == "MISPLACED":
        status += f": it runs outside {row.expected_zone}, the zone of its data"
    rows.append(("status", status))
    rows.append(("guard", broker.guard_why))
    width = max(len(k) for k, _ in rows)
    lines += [f"  {k + ':':<{width + 1}} {v}" for k, v in rows]
    return "\n".join(lines)


def broker_pod_json(explained: BrokerPodExplanation) -> dict[str, Any]:
    """The explanation of one broker's pod, for scripts."""
    choice = explained.choice
    chosen = None
    if choice is not None:
        why = "data" if choice.why == "data" else "balance"
        chosen = {"zone": choice.zone, "why": why, "claim": choice.claim or None}
    return {
        "kind": "Pod",
        "namespace": explained.namespace,
        "name": explained.name,
        "leftAlone": explained.left_alone or None,
        "workload": _head_json(explained.pool) if explained.pool is not None else None,
        "member": _broker_json(explained.broker) if explained.broker is not None else None,
        "chosen": chosen,
        "recordedZone": explained.recorded or None,
    }
