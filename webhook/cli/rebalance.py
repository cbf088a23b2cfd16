"""``stszone rebalance``: plan the moves that bring misplaced ordinals to their rule zones, and
with ``--apply`` carry them out (the planner is :mod:`webhook.rules.rebalance`, the executor
:mod:`webhook.cluster.rebalance`, the words :mod:`webhook.cli.rebalance_text`)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable, Collection
from typing import Any, TextIO

from webhook.cli.options import (
    add_output_flag,
    add_own_namespace_flag,
    add_target_namespace_flag,
    add_view_flags,
    command_parser,
    seconds,
    settings_from,
)
from webhook.cli.rebalance_text import (
    KAFKA_WHY,
    kafka_note,
    progress_printer,
    render_json,
    render_outcome,
    render_plan,
)
from webhook.cluster import rebalance as executor
from webhook.cluster.clusterfile import SAVE
from webhook.cluster.rebalancerun import apply
from webhook.cluster.snapshot import Snapshot, from_file, live_snapshot
from webhook.cluster.view import choose_view
from webhook.config import Settings
from webhook.errors import ConfigError
from webhook.model import kruise
from webhook.model.store import Store
from webhook.rules.auditscope import audited_pools
from webhook.rules.rebalance import chosen, plan
from webhook.rules.rebalance_plan import Plan

HELP = "plan (and with --apply make) the moves that bring misplaced ordinals to their zones"
DESCRIPTION = """\
For each opted-in StatefulSet and OpenKruise Advanced StatefulSet (or -n NAMESPACE, or
--statefulset NS/NAME, which names both kinds): every ordinal whose pod runs outside its rule
zone zones[(i - start) mod k] (an Advanced StatefulSet's live ordinals by rank: zones[rank mod
k]), classified as movable (evicting it is enough), pinned by data (a bound volume holds it; it
moves only with --move-data, which deletes that replica's data) or blocked (with the reason),
and the order of the moves: one pod at a time, never the last pod of a zone while another
ordinal belongs there. By default a dry run:
the plan and the equivalent kubectl commands. --apply carries it out through the Eviction API
(PodDisruptionBudgets respected), waiting before each step until every replica is Ready and
after it until the re-created pod is Ready in its zone (and, with minReadySeconds, available);
it stops at the first step that does not converge. Ctrl-C stops after the current step."""
EXAMPLES = """\
examples:
  stszone rebalance                                   dry run: the plan, from $KUBECONFIG
  stszone rebalance -n prod --apply                   move every movable ordinal in prod
  stszone rebalance --statefulset prod/db --apply --move-data     also pinned ones (asks)
  stszone rebalance --cluster cluster.yaml -o json    plan from a saved cluster, for scripts
exit status: 0 converged or nothing to do (dry run: applying would leave nothing misplaced),
1 something left (blocked, pinned without --move-data, stopped, or a set that could not be
planned: its PROBLEM line says why), 2 cannot run
"""
#: Seconds one step may take, by default: a pod of a real database takes minutes to be Ready.
DEFAULT_TIMEOUT = 300.0


def _statefulset(text: str) -> tuple[str, str]:
    namespace, slash, name = text.partition("/")
    if not (slash and namespace and name) or "/" in name:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAMESPACE/NAME, e.g. prod/db")
    return namespace, name


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """The ``rebalance`` sub-parser."""
    parser = command_parser(
        commands,
        "rebalance",
        help=HELP,
        description=DESCRIPTION,
        epilog=EXAMPLES,
        run=run,
    )
    parser.add_argument(
        "--apply", action="store_true", help="carry the plan out (default: dry run)"
    )
    parser.add_argument(
        "--move-data",
        action="store_true",
        help="also move ordinals pinned by a volume, DELETING their claims (and so that "
        "replica's data) with the pod; asks for confirmation unless --yes",
    )
    parser.add_argument(
        "--yes", action="store_true", help="confirm --move-data without asking (for scripts)"
    )
    parser.add_argument(
        "--timeout",
        type=seconds,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help="how long one step of --apply may take in all: the set becoming whole, the "
        "PodDisruptionBudget allowing the eviction, the new pod becoming Ready and, with "
        "minReadySeconds, available share it; also each kubectl wait's --timeout in a dry run "
        f"(default: {DEFAULT_TIMEOUT:g})",
    )
    add_output_flag(parser)
    parser.add_argument(
        "--statefulset",
        type=_statefulset,
        metavar="NS/NAME",
        help="only this StatefulSet (and an Advanced StatefulSet of that name)",
    )
    add_target_namespace_flag(parser)
    add_view_flags(parser)
    add_own_namespace_flag(parser, "--stszone-namespace")
    return parser


def load(settings: Settings, *, namespace: str | None) -> tuple[Snapshot, bool]:
    """The planning view and whether it is live: ``--cluster FILE``, else one list of the
    cluster (only ``namespace``'s objects when given)."""
    if settings.cluster_file is not None:
        snapshot = from_file(settings.cluster_file, zones=settings.zones)
        snapshot.store.kruise_start_ordinal = settings.kruise_start_ordinal
        return snapshot, False
    if choose_view(settings).live:
        return asyncio.run(live_snapshot(settings, namespace=namespace)), True
    raise ConfigError(
        "rebalance needs a cluster: --kubeconfig PATH, $KUBECONFIG, or run in a pod (or "
        f"--cluster FILE, a saved `{SAVE} -o yaml`, to plan only)"
    )


def confirm(
    result: Plan,
    *,
    ask: Callable[[str], str] = input,
    interactive: bool | None = None,
    out: TextIO = sys.stderr,
) -> None:
    """Ask before deleting data; :class:`ConfigError` when nobody answers yes."""
    losing = [(s, step) for s in result.sets for step in s.steps if step.claims]
    if not losing:
        return
    if interactive is None:
        interactive = sys.stdin.isatty()
    if not interactive:
        raise ConfigError(
            "--move-data deletes the data of the pinned ordinals; confirm with --yes when not "
            "on a terminal"
        )
    out.write("--move-data DELETES these claims with their pods (the data is gone for good):\n")
    for set_plan, step in losing:
        claims = ", ".join(c.name for c in step.claims)
        out.write(f"  {set_plan.namespace}/{set_plan.name} ordinal {step.ordinal}: {claims}\n")
    sets = sorted({f"{s.namespace}/{s.name}" for s, _ in losing})
    ordinals = ", ".join(str(step.ordinal) for _, step in losing)
    answer = ask(f"Delete the data of {', '.join(sets)} ordinal(s) {ordinals}? Type yes: ")
    if answer.strip().lower() != "yes":
        raise ConfigError("not confirmed: nothing was changed")


def _not_chosen(snapshot: Snapshot, key: tuple[str, str], *, settings: Settings) -> str:
    """Why ``--statefulset NS/NAME`` names no set to plan."""
    namespace, name = key
    store = snapshot.store
    if store.statefulset(namespace, name) is None and (
        store.statefulset(namespace, name, kruise.GROUP) is None
    ):
        if store.nodepool(namespace, name) is not None:
            return f"{namespace}/{name} is a KafkaNodePool: {KAFKA_WHY}"
        return f"StatefulSet {namespace}/{name} was not found (nor an Advanced StatefulSet)"
    if namespace in settings.defaults().excluded_namespaces:
        return f"stszone never touches namespace {namespace} (kube-system and its own)"
    return (
        f"StatefulSet {namespace}/{name} is not in an opted-in namespace: label namespace "
        f"{namespace} stszone.io/enabled=true"
    )


def kafka_pools(
    store: Store, *, excluded: Collection[str] = (), namespace: str | None
) -> list[tuple[str, str]]:
    """(namespace, name) of the KafkaNodePools the selection covers (those the audit would
    list: opted in, never kube-system or stszone's own namespace); none are in the plan."""
    return [p.key for p in audited_pools(store, excluded=excluded, namespace=namespace)]


def run(args: argparse.Namespace) -> int:
    """``stszone rebalance``."""
    settings = settings_from(args)
    namespace: str | None = args.target_namespace
    if args.statefulset is not None:
        if namespace is not None and namespace != args.statefulset[0]:
            raise ConfigError(
                f"-n {namespace} and --statefulset {'/'.join(args.statefulset)} disagree; give one"
            )
        namespace = args.statefulset[0]
    if args.apply and settings.cluster_file is not None:
        raise ConfigError("--cluster FILE only plans; --apply needs a live cluster (--kubeconfig)")
    snapshot, live = load(settings, namespace=namespace)
    excluded = settings.defaults().excluded_namespaces
    sets = chosen(
        snapshot.store,
        excluded=excluded,
        namespace=namespace,
        statefulset=args.statefulset,
    )
    if args.statefulset is not None and not sets:
        raise ConfigError(_not_chosen(snapshot, args.statefulset, settings=settings))
    result = plan(snapshot.store, snapshot.state, sets=sets, move_data=args.move_data)
    # --statefulset names one set, never a pool.
    pools = (
        []
        if args.statefulset
        else kafka_pools(snapshot.store, excluded=excluded, namespace=namespace)
    )
    table = args.output == "table"
    if table:
        print(render_plan(result, timeout=args.timeout, apply=args.apply))
        if pools:
            print(kafka_note(pools))
    if not args.apply or not live or not result.steps:
        if not table:
            print(json.dumps(render_json(result, timeout=args.timeout, pools=pools), indent=2))
        return 0 if result.complete else 1
    if not args.yes:
        confirm(result)
    timing = executor.Timing(timeout=args.timeout)
    report = progress_printer(sys.stderr)
    outcome = asyncio.run(
        apply(
            result,
            kubeconfig=settings.kubeconfig,
            context=settings.context,
            timing=timing,
            report=report,
        )
    )
    if table:
        print(render_outcome(result, outcome))
    else:
        body = render_json(result, timeout=args.timeout, outcome=outcome, pools=pools)
        print(json.dumps(body, indent=2))
    return 0 if outcome.converged and result.complete else 1
