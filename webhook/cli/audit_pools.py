"""``stszone audit``'s section on Strimzi KafkaNodePools: text and JSON."""

from __future__ import annotations

from typing import Any

from webhook.cli.options import table_lines
from webhook.rules.poolaudit import PoolReport


def pool_lines(report: PoolReport) -> list[str]:
    """One pool: its brokers, zone counts and the lowest safe replica count."""
    head = (
        f"KafkaNodePool {report.namespace}/{report.name} (cluster {report.cluster}): zones "
        f"{','.join(report.zones) or '(none)'}, replicas {report.replicas}"
    )
    warned = [f"  warning: {w}" for w in report.warnings]
    if report.problem:
        return [head, f"  PROBLEM: {report.problem}", *warned]
    rows = [
        (str(r.node_id), r.pod, r.expected_zone or "-", r.node or "-", r.zone or "-", r.status)
        for r in report.rows
    ]
    header = ("NODE ID", "POD", "DATA IN", "NODE", "ZONE", "STATUS")
    lines = [head, *warned, *table_lines(header, rows)]
    counts = ", ".join(f"{zone} {n}" for zone, n in report.counts) or "(none)"
    lowest = "none keeps them all" if report.lowest is None else str(report.lowest)
    lines.append(
        f"  brokers per zone: {counts} (imbalance {report.imbalance}); lowest replica count "
        f"that keeps every zone: {lowest}"
    )
    return lines


def pools_text(reports: tuple[PoolReport, ...]) -> str:
    """Every pool's lines, a blank line between them."""
    lines: list[str] = []
    for report in reports:
        lines += [*pool_lines(report), ""]
    return "\n".join(lines)


def pools_json(reports: tuple[PoolReport, ...]) -> list[dict[str, Any]]:
    """The pools as JSON (``--output json``, key ``kafkaNodePools``)."""
    return [
        {
            "namespace": p.namespace,
            "name": p.name,
            "cluster": p.cluster,
            "zones": list(p.zones),
            "replicas": p.replicas,
            "brokers": [
                {
                    "nodeId": r.node_id,
                    "pod": r.pod,
                    "dataZone": r.expected_zone,
                    "node": r.node or None,
                    "zone": r.zone,
                    "status": r.status,
                }
                for r in p.rows
            ],
            "brokersPerZone": dict(p.counts),
            "imbalance": p.imbalance,
            "lowestSafeReplicas": p.lowest,
            "problem": p.problem or None,
            "warnings": list(p.warnings),
            "misplaced": p.misplaced,
        }
        for p in reports
    ]
