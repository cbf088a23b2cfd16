"""The words of ``stszone rebalance``: the plan as a table per set with the equivalent kubectl
commands, the same as JSON, progress lines, and what a run did."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any, Final, TextIO

from webhook.cli.options import table_lines
from webhook.cluster.rebalance import Event, Outcome
from webhook.rules.policy import workload_kind
from webhook.rules.rebalance_plan import Plan, Row, SetPlan, Step


def kubectl_commands(step: Step, *, timeout: float) -> list[str]:
    """What one step does, as kubectl commands a person could run instead.

    kubectl has no eviction command for one pod (``kubectl drain`` evicts a whole node), so the
    Eviction is created with ``create --raw``, with the pod's uid as a precondition as stszone
    sends it. ``kubectl wait --for=delete`` cannot follow a pod that comes back under the same
    name (it waits for the successor), so the loop waits for another uid, then for Ready.
    Then, as ``--apply`` does before the next step, until the set counts every replica
    available: with ``minReadySeconds`` a Ready pod is available only that long after, and a
    PodDisruptionBudget counts Ready pods, so nothing else holds the next eviction back.
    ``kubectl rollout status`` would not do: it follows a rollout of the template, and returns
    at once when none is under way. ``kubectl wait --for=jsonpath=...=N`` on
    ``status.availableReplicas`` does, on either kind (kubectl 1.32 takes the form below).
    """
    ns, pod = step.namespace, step.pod
    eviction: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": pod, "namespace": ns},
    }
    if step.uid:
        eviction["deleteOptions"] = {"preconditions": {"uid": step.uid}}
    body = json.dumps(eviction, separators=(",", ":"))
    commands = [f"kubectl -n {ns} delete pvc {c.name} --wait=false" for c in step.claims]
    commands.append(
        f"kubectl create --raw /api/v1/namespaces/{ns}/pods/{pod}/eviction -f - <<< '{body}'"
    )
    if step.uid:
        commands.append(
            f"until kubectl -n {ns} get pod {pod} -o jsonpath='{{.metadata.uid}}' | grep -qv "
            f"'^{step.uid}$'; do sleep 1; done"
        )
    commands.append(f"kubectl -n {ns} wait pod/{pod} --for=condition=Ready --timeout={timeout:g}s")
    kind = f"statefulsets.{step.group}" if step.group else "statefulset"
    commands.append(
        f"kubectl -n {ns} wait {kind}/{step.statefulset} "
        f"--for=jsonpath='{{.status.availableReplicas}}'={step.replicas} --timeout={timeout:g}s"
    )
    return commands


def action(row: Row) -> str:
    """The ACTION cell of a row."""
    if row.step is not None:
        claims = ", ".join(c.name for c in row.claims)
        return f"step {row.step}: " + (f"delete {claims}, evict" if claims else "evict")
    return {"in place": "-", "pinned by data": "keep (needs --move-data)"}.get(row.kind, "none")


def _set_lines(set_plan: SetPlan, *, timeout: float, commands: bool) -> list[str]:
    head = (
        f"{set_plan.kind} {set_plan.namespace}/{set_plan.name}: zones "
        f"{','.join(set_plan.zones) or '(none)'}, replicas {set_plan.replicas}"
    )
    if set_plan.problem:
        return [head, f"  PROBLEM: {set_plan.problem}"]
    if set_plan.note:
        return [head, f"  {set_plan.note}"]
    rows = [
        (str(r.ordinal), r.pod, r.node or "-", r.zone or "-", r.target, r.kind, action(r))
        for r in set_plan.rows
    ]
    header = ("ORDINAL", "POD", "NODE", "NOW", "TARGET", "CLASS", "ACTION")
    lines = [head, *table_lines(header, rows)]
    for row in set_plan.rows:
        for note in row.notes:
            lines.append(f"  {row.ordinal}: {note}")
    if set_plan.replicas > len(rows):  # the plan walks the first WALK_LIMIT members
        lines.append(
            f"  (the first {len(rows)} of {set_plan.replicas} members: the others are not planned)"
        )
    if set_plan.steps and commands:
        lines += [
            "  The same with kubectl, in order (--apply also checks, before each step, that the",
            "  set is whole and the pod unchanged, and after it, that the new pod is in its zone):",
        ]
        for number, step in enumerate(set_plan.steps, start=1):
            lines.append(f"    # step {number}: {step.pod} {step.source} -> {step.target}")
            lines += [f"    {c}" for c in kubectl_commands(step, timeout=timeout)]
    return lines


def render_plan(result: Plan, *, timeout: float, apply: bool) -> str:
    """The plan for people."""
    lines: list[str] = []
    if not result.sets:
        lines += ["No StatefulSet to rebalance.", ""]
    for set_plan in result.sets:
        # A dry run shows the kubectl equivalent; --apply shows its progress instead.
        lines += [*_set_lines(set_plan, timeout=timeout, commands=not apply), ""]
    # A set that could not be planned has no rows: it counts neither as moved nor as left.
    unplanned = [s for s in result.sets if s.problem]
    if unplanned:
        names = ", ".join(f"{s.kind} {s.namespace}/{s.name}" for s in unplanned)
        lines.append(f"{len(unplanned)} set(s) could not be planned (PROBLEM above): {names}.")
    moves, left = len(result.steps), sum(len(s.left) for s in result.sets)
    stay = f"{left} ordinal(s) stay outside their zone"
    if not moves and not left and not unplanned:
        lines.append("Nothing to do: every ordinal is in its rule zone.")
    elif not moves and not left:
        if len(unplanned) < len(result.sets):
            lines.append("Nothing to do in the other sets: every ordinal is in its rule zone.")
    elif not moves:
        lines.append(f"Nothing can move now: {stay} (the reasons are under each table).")
    elif apply:
        lines.append(f"Plan: {moves} move(s); {stay}.")
    else:
        lines.append(f"Dry run: {moves} move(s); {stay}; run again with --apply to make them.")
    return "\n".join(lines)


#: Why a KafkaNodePool's brokers are never in the plan.
KAFKA_WHY: Final = (
    "brokers are not moved: a broker's data moves with Kafka's partition reassignment (Cruise "
    "Control), not with its pod; see docs/kafka.md"
)


def kafka_note(pools: Sequence[tuple[str, str]]) -> str:
    """The line under the plan naming the KafkaNodePools left out, and why."""
    names = ", ".join(f"{namespace}/{name}" for namespace, name in pools)
    return f"KafkaNodePool{'s' if len(pools) > 1 else ''} {names}: {KAFKA_WHY}"


def _row_json(row: Row) -> dict[str, Any]:
    return {
        "ordinal": row.ordinal,
        "pod": row.pod,
        "node": row.node or None,
        "zone": row.zone,
        "target": row.target,
        "class": row.kind,
        "step": row.step,
        "action": action(row),
        "notes": list(row.notes),
        "claims": [c.name for c in row.claims],
    }


def render_json(
    result: Plan,
    *,
    timeout: float,
    outcome: Outcome | None = None,
    pools: Sequence[tuple[str, str]] = (),
) -> dict[str, Any]:
    """The plan (and what applying it did) for scripts; ``pools``: the KafkaNodePools the
    selection covers, none of which it moves (the table's note under the plan)."""
    applied: dict[str, Any] | None = None
    if outcome is not None:
        applied = {
            "converged": outcome.converged,
            "stopped": outcome.stopped or None,
            "interrupted": outcome.interrupted,
            "statefulsets": [
                {
                    "apiGroup": s.group or "apps",
                    "namespace": s.namespace,
                    "name": s.name,
                    "moved": list(s.moved),
                    "alreadyInPlace": list(s.skipped),
                    "left": list(s.left),
                    "stopped": s.stopped or None,
                }
                for s in outcome.sets
            ],
        }
    return {
        "moveData": result.move_data,
        "complete": result.complete,
        "statefulsets": [
            {
                "apiGroup": s.group or "apps",
                "kind": "StatefulSet",
                "namespace": s.namespace,
                "name": s.name,
                "zones": list(s.zones),
                "replicas": s.replicas,
                "problem": s.problem or None,
                "note": s.note or None,
                "ordinals": [_row_json(r) for r in s.rows],
                "steps": [
                    {
                        "step": number,
                        "ordinal": step.ordinal,
                        "pod": step.pod,
                        "from": step.source,
                        "to": step.target,
                        "claims": [c.name for c in step.claims],
                        "commands": kubectl_commands(step, timeout=timeout),
                    }
                    for number, step in enumerate(s.steps, start=1)
                ],
                "left": list(s.left),
            }
            for s in result.sets
        ],
        "kafkaNodePools": [
            {"namespace": namespace, "name": name, "note": KAFKA_WHY} for namespace, name in pools
        ],
        "applied": applied,
    }


def render_outcome(result: Plan, outcome: Outcome) -> str:
    """What ``--apply`` did, per set, and the verdict."""
    lines = [""]
    for done in outcome.sets:
        moved = ", ".join(map(str, done.moved)) or "none"
        kind = f"{workload_kind(done.group)} " if done.group else ""
        line = f"{kind}{done.namespace}/{done.name}: moved ordinal(s) {moved}"
        if done.skipped:
            line += f"; already in their zone: {', '.join(map(str, done.skipped))}"
        if done.left:
            line += f"; not moved: {', '.join(map(str, done.left))}"
        if done.stopped:
            line += f"; stopped: {done.stopped}"
        lines.append(line)
    if outcome.stopped:
        lines.append(f"Stopped: {outcome.stopped}")
    elif outcome.interrupted:
        lines.append("Interrupted (Ctrl-C): stopped after the step in progress; nothing half done.")
    elif outcome.converged and result.complete:
        lines.append("Converged: every ordinal is in its rule zone.")
    elif outcome.converged:
        lines.append("Every planned move is done; the ordinals the plan left stay where they are.")
    return "\n".join(lines)


#: Events that end a step; on a terminal the others rewrite the step's line as it goes.
FINAL: Final = frozenset({"moved", "skipped", "stopped"})


def progress_printer(stream: TextIO) -> Callable[[Event], None]:
    """Progress: on a terminal one line per step, rewritten as the step goes (evicting,
    waiting) and kept once it ends; otherwise one JSON object per event and line."""
    terminal = stream.isatty()

    def report(event: Event) -> None:
        where = f"{event.namespace}/{event.statefulset}" if event.statefulset else "rebalance"
        if terminal:
            count = f" {event.step}/{event.steps}" if event.steps else ""
            end = "\n" if event.kind in FINAL else ""
            stream.write(f"\r\x1b[K[{where}{count}] {event.message}{end}")  # \x1b[K: clear line
        else:
            entry = {
                "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "event": event.kind,
                "namespace": event.namespace or None,
                "statefulset": event.statefulset or None,
                "ordinal": event.ordinal,
                "step": event.step or None,
                "steps": event.steps or None,
                "message": event.message,
            }
            stream.write(json.dumps(entry) + "\n")
        stream.flush()

    return report
