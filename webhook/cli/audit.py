"""``stszone audit``: load a view, audit it, print a table or JSON, exit 1 on problems."""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from webhook.cli.audit_nodes import nodes_json, nodes_text
from webhook.cli.audit_pools import pools_json, pools_text
from webhook.cli.options import (
    add_output_flag,
    add_own_namespace_flag,
    add_target_namespace_flag,
    add_view_flags,
    command_parser,
    settings_from,
    table_lines,
)
from webhook.cluster.clusterfile import SAVE
from webhook.cluster.live import live_store
from webhook.cluster.view import choose_view, offline_store
from webhook.config import Settings
from webhook.errors import ConfigError
from webhook.model.annotations import ENABLED
from webhook.model.setkinds import KINDS
from webhook.model.store import Store
from webhook.rules import kruiseguard
from webhook.rules.audit import Report, SetReport, audit
from webhook.rules.poolaudit import PoolReport, audit_pools
from webhook.rules.text import members_span
from webhook.rules.verdict import being_deleted

HELP = "expected vs actual zone of each ordinal, safe replica counts, removable nodes"
EXAMPLES = f"""\
examples:
  {SAVE} -o yaml > cluster.yaml
  stszone audit --cluster cluster.yaml                  offline, from the saved cluster
  stszone audit --cluster cluster.yaml --zones a,b,c    zones for sets without stszone.io/zones
  {SAVE} -o json | stszone audit --cluster -    from stdin
  stszone audit --kubeconfig ~/.kube/config -n prod     live, one namespace
  kubectl stszone audit                                 live, the current context's namespace
  stszone audit --kubeconfig ~/.kube/config -o json     live: one list of the cluster, no watch
  stszone audit --cluster cluster.yaml -o json | jq '.statefulsets[] | select(.misplaced > 0)'
exit status: 0 all placed as expected, 1 a pod misplaced, a node-ordinal label missing or
duplicated, malformed annotations, or a pod template bound to a node that does not exist (none
of them of a set being deleted), 2 the view cannot be loaded
"""
DESCRIPTION = """\
For each opted-in StatefulSet (every one when the view holds no Namespace objects): each
ordinal's expected zone, its pod's node and zone, and a mark where they differ; the lowest
replica count that keeps every zone (what the scale-down guard allows); node-ordinal labels
missing or on several nodes; and the nodes that can be removed without losing a zone or a
pod of any audited StatefulSet, Advanced StatefulSet or KafkaNodePool (the exact rule is
printed under the node lists), and for each other node the workloads it holds back: their
members left no node to go to or to mount their volumes, and the zones left empty."""


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """The ``audit`` sub-parser."""
    parser = command_parser(
        commands,
        "audit",
        help=HELP,
        description=DESCRIPTION,
        epilog=EXAMPLES,
        run=run,
    )
    add_output_flag(parser)
    add_target_namespace_flag(parser)
    add_view_flags(parser)
    add_own_namespace_flag(parser, "--stszone-namespace")
    return parser


def run(args: argparse.Namespace) -> int:
    """``stszone audit``."""
    namespace = None if args.all_namespaces else args.target_namespace
    return run_audit(settings_from(args), output=args.output, namespace=namespace)


def load_view(settings: Settings) -> Store:
    """The view to audit: ``--cluster FILE``, else the live cluster (one list, no watch)."""
    if choose_view(settings).live:
        return asyncio.run(live_store(settings))
    if settings.cluster_file is None:
        raise ConfigError(
            f"audit needs a view of the cluster: --cluster FILE (a saved `{SAVE} -o yaml`), "
            "or a cluster to list (--kubeconfig, $KUBECONFIG, or run in a pod)"
        )
    return offline_store(settings)


def _too_large(report: SetReport) -> bool:
    """An Advanced StatefulSet the guard does not judge a change of (it allows it, with a
    warning): no count of it is judged, which is not that none keeps every zone."""
    return KINDS[report.group].live_ordinals and report.replicas > kruiseguard.LIMIT


def _judged(report: SetReport) -> bool:
    """Whether the guard judged the set's replica counts (found the lowest safe one, or that
    none keeps every zone): not for a set being deleted (nobody scales it), one with malformed
    annotations, or one too large (:func:`_too_large`)."""
    return not (report.deleting or report.problem or _too_large(report))


def _lowest(report: SetReport) -> str:
    """The lowest replica count the guard allows, or why there is none."""
    if report.lowest is not None:
        return str(report.lowest)
    if _too_large(report):
        return f"not judged (over {kruiseguard.LIMIT} members)"
    return "none keeps them all"


def _set_lines(report: SetReport) -> list[str]:
    live = report.members if KINDS[report.group].live_ordinals else None
    span = members_span(report.replicas, report.start, live)
    head = (
        f"{report.kind} {report.namespace}/{report.name}: mode {report.mode}, zones "
        f"{','.join(report.zones) or '(none)'}, replicas {report.replicas}{span}"
    )
    warned = [f"  warning: {w}" for w in report.warnings]
    # A set being deleted gets no new pod, so no annotation or label of it places one: shown,
    # no problem.
    mark, aside = "PROBLEM: ", ""
    if report.deleting:
        mark, aside = "", " (no problem: a set being deleted gets no new pod)"
    if report.problem:
        return [head, f"  {mark}{report.problem}{aside}", *warned]
    rows = [
        (
            str(r.ordinal),
            r.expected_zone or "?",
            r.expected_by,
            r.node or "-",
            r.zone or "-",
            r.status if r.node_ready else f"{r.status}, node not Ready",
        )
        for r in report.rows
    ]
    header = ("ORDINAL", "EXPECTED", "SET BY", "NODE", "ZONE", "STATUS")
    lines = [head, *warned, *table_lines(header, rows)]
    for r in report.rows:
        if r.status == "going":
            lines.append(f"  ordinal {r.ordinal}: going away: {r.why}")
        elif r.status == "no pod" and r.why:  # the pod it gets would never run
            lines.append(f"  ordinal {r.ordinal}: holds no zone: {r.why}")
        elif r.why:
            lines.append(f"  ordinal {r.ordinal}: zone unknown: {r.why}")
        if not r.node_ready:
            lines.append(
                f"  ordinal {r.ordinal}: node {r.node} is not Ready: its pod still holds "
                f"{r.zone or 'its zone'}, but a scale-down that leaves it the zone's last pod "
                "relies on the node coming back"
            )
    if report.replicas > len(report.rows):  # the audit walks the first WALK_LIMIT members
        lines.append(f"  (the first {len(report.rows)} of {report.replicas} members)")
    held = f"  zones held now: {', '.join(report.held) or '(none)'}; "
    if report.deleting:
        lines.append(held + f"no replica count judged: {being_deleted(report.kind)}")
    else:
        lines.append(held + f"lowest replica count that keeps every zone: {_lowest(report)}")
    if report.missing_labels:
        ordinals = ", ".join(map(str, report.missing_labels))
        lines.append(f"  {mark}no node carries the ordinal label of ordinal(s) {ordinals}{aside}")
    for ordinal, nodes in (report.duplicate_labels or {}).items():
        lines.append(
            f"  {mark}ordinal {ordinal}'s label is on several nodes: {', '.join(nodes)}{aside}"
        )
    if report.missing_node:  # never of a set being deleted: its controller makes no pod
        lines.append(
            f"  PROBLEM: its pod template binds every pod to node {report.missing_node} "
            "(spec.nodeName), which does not exist: they never run; correct or remove "
            "spec.nodeName"
        )
    return lines


def render_text(report: Report, *, pools: tuple[PoolReport, ...] = ()) -> str:
    """The human-readable audit (its summary weighs ``pools`` too: they set the exit status)."""
    lines: list[str] = []
    if report.all_namespaces:
        lines += [
            f"Audited every StatefulSet: the view holds no Namespace objects, so opt-in "
            f"({ENABLED}=true) is unknown.",
            "",
        ]
    if not report.sets and report.left_out:
        lines += [
            f"No StatefulSet to audit: {report.left_out} in namespaces stszone never intercepts "
            f"(not labelled {ENABLED}=true, or kube-system, or stszone's own), left out.",
            "",
        ]
    elif not report.sets:
        lines += ["No StatefulSet to audit.", ""]
    for sts in report.sets:
        lines += [*_set_lines(sts), ""]
    lines += [*nodes_text(report), ""]
    misplaced = sum(s.misplaced_problems for s in report.sets)
    misplaced += sum(p.misplaced for p in pools)
    broken = f"{sum(s.has_problems for s in report.sets)} StatefulSet(s)"
    if broken_pools := sum(p.has_problems for p in pools):
        broken += f" and {broken_pools} KafkaNodePool(s)"
    if report.has_problems or broken_pools:
        lines.append(f"{broken} with problems; {misplaced} pod(s) misplaced.")
    elif ending := sum(s.misplaced - s.misplaced_problems for s in report.sets):
        lines.append(
            f"No problems: the {ending} misplaced pod(s) are of StatefulSets being deleted, "
            "which they go with."
        )
    else:
        lines.append("Every audited pod is where stszone expects it.")
    return "\n".join(lines)


def render_json(report: Report, *, pools: tuple[PoolReport, ...] = ()) -> dict[str, Any]:
    """The audit as JSON for scripts (``--output json``); ``problems`` weighs ``pools`` too."""
    return {
        "allNamespaces": report.all_namespaces,
        "statefulsets": [
            {
                "apiGroup": s.group or "apps",
                "kind": "StatefulSet",
                "namespace": s.namespace,
                "name": s.name,
                "mode": s.mode,
                "zones": list(s.zones),
                "replicas": s.replicas,
                "start": s.start,
                "ordinals": [
                    {
                        "ordinal": r.ordinal,
                        "expectedZone": r.expected_zone,
                        "expectedBy": r.expected_by,
                        "node": r.node or None,
                        "zone": r.zone,
                        "status": r.status,
                        "why": r.why or None,
                        "nodeReady": r.node_ready if r.node else None,
                    }
                    for r in s.rows
                ],
                "zonesHeld": list(s.held),
                "lowestSafeReplicas": s.lowest,
                # null above reads as "none keeps every zone" only where the counts were judged
                "lowestSafeJudged": _judged(s),
                "deleting": s.deleting,
                "skipped": s.skipped,
                "missingNodeLabels": list(s.missing_labels),
                "duplicateNodeLabels": {
                    str(o): list(n) for o, n in (s.duplicate_labels or {}).items()
                },
                "problem": s.problem or None,
                "missingNode": s.missing_node or None,
                "warnings": list(s.warnings),
                "misplaced": s.misplaced,
            }
            for s in report.sets
        ],
        **nodes_json(report),
        "problems": report.has_problems or any(p.has_problems for p in pools),
    }


def run_audit(settings: Settings, *, output: str, namespace: str | None = None) -> int:
    """Print the audit of the view (one namespace, or all); 1 when something is misplaced or
    broken, else 0."""
    view = load_view(settings)
    excluded = settings.defaults().excluded_namespaces
    report = audit(view, excluded=excluded, namespace=namespace)
    pools = audit_pools(view, excluded=excluded, namespace=namespace)
    if output == "json":
        body = {**render_json(report, pools=pools), "kafkaNodePools": pools_json(pools)}
        print(json.dumps(body, indent=2))
    else:
        print((pools_text(pools) + "\n" if pools else "") + render_text(report, pools=pools))
    return 1 if report.has_problems or any(p.has_problems for p in pools) else 0
