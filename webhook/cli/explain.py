"""``stszone explain``: load a view, explain one pod or one workload, print text or JSON."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Final

from webhook.cli.audit import load_view
from webhook.cli.explain_pools_text import broker_pod_json, broker_pod_text, pool_json, pool_text
from webhook.cli.explain_text import pod_json, pod_text, workload_json, workload_text
from webhook.cli.options import (
    add_output_flag,
    add_own_namespace_flag,
    add_target_namespace_flag,
    add_view_flags,
    command_parser,
    settings_from,
)
from webhook.errors import ConfigError
from webhook.model.kruise import GROUP as KRUISE
from webhook.model.store import Store
from webhook.rules.explain import explain_pod, explain_workload
from webhook.rules.explain_pools import broker_of, explain_broker_pod, explain_pool

HELP = "where stszone placed a pod and why; what each smaller size of a set or pool would get"
DESCRIPTION = """\
For a pod: its StatefulSet and ordinal (a broker's: its KafkaNodePool and node ID), the zone
the rule gives it, the zone of its data (a bound volume pinned to a zone wins), what its own
constraints allow, the node and zone it runs in, and whether it holds its zone for the
scale-down guard (and why not: going away, or a zone nobody can read). For a StatefulSet:
each member in one line, and the answer the scale-down guard would give to each smaller
replica count -- allowed, with its warnings, or refused and why. For a KafkaNodePool: each
broker's zone, the brokers per zone, and for each smaller replica count the node IDs the
operator would remove and the guard's answer. The answers are the webhook's own: nothing is
asked of the cluster but one list."""
EXAMPLES = """\
examples:
  stszone explain --cluster deploy/examples/guard/cluster.yaml pod/db-3
  stszone explain --cluster deploy/examples/guard/cluster.yaml sts/db     each size's answer
  stszone explain --kubeconfig ~/.kube/config -n shop statefulset/db -o json
  kubectl stszone explain pod/db-3                     live, the context's namespace
  kubectl stszone explain sts/db -o json | jq '.sizes[] | select(.allowed) | .replicas'
  stszone explain -n kafka knp/broker                  a Strimzi pool: each broker, each size
TARGET is TYPE/NAME (pod, po, statefulset, sts, statefulset.apps; for an OpenKruise Advanced
StatefulSet asts or statefulset.apps.kruise.io; for a Strimzi KafkaNodePool kafkanodepool, knp
or kafkanodepool.kafka.strimzi.io) or a NAME (a pod -- a broker's too --, else a StatefulSet,
else a KafkaNodePool).
Without -n (stszone alone), NAME is looked for in every namespace.
exit status: 0 explained, 1 not found (or found in several namespaces), 2 the view cannot be
loaded
"""
#: Why a pod may be missing from the view.
POD_HINT: Final = (
    " (the view holds the pods of StatefulSets and Kafka node pools only: stszone leaves any "
    "other pod alone, and a pod with a StatefulSet's labels but no owner -- orphaned by "
    "kubectl delete sts --cascade=orphan, or made by hand -- is no member: neither the guard "
    "nor audit counts it)"
)
#: TYPE of TYPE/NAME -> what is explained.
TYPES: Final = {
    "pod": "pod",
    "pods": "pod",
    "po": "pod",
    "statefulset": "statefulset",
    "statefulsets": "statefulset",
    "sts": "statefulset",
    "statefulset.apps": "statefulset",
    "statefulsets.apps": "statefulset",
    # OpenKruise Advanced StatefulSets (kubectl's names for them, and short ones).
    "statefulset.apps.kruise.io": "advancedstatefulset",
    "statefulsets.apps.kruise.io": "advancedstatefulset",
    "asts": "advancedstatefulset",
    "advancedstatefulset": "advancedstatefulset",
    # Strimzi KafkaNodePools (kubectl's names for them: its CRD's short name is knp).
    "kafkanodepool": "kafkanodepool",
    "kafkanodepools": "kafkanodepool",
    "knp": "kafkanodepool",
    "kafkanodepool.kafka.strimzi.io": "kafkanodepool",
    "kafkanodepools.kafka.strimzi.io": "kafkanodepool",
}


def _target(text: str) -> tuple[str | None, str]:
    kind, slash, name = text.partition("/")
    if not slash:
        return None, text
    if kind.lower() not in TYPES or not name:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not TYPE/NAME with TYPE one of {', '.join(sorted(set(TYPES)))}"
        )
    return TYPES[kind.lower()], name


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """The ``explain`` sub-parser."""
    parser = command_parser(
        commands, "explain", help=HELP, description=DESCRIPTION, epilog=EXAMPLES, run=run
    )
    parser.add_argument(
        "target", type=_target, metavar="TARGET", help="pod/NAME, sts/NAME or knp/NAME"
    )
    add_output_flag(parser)
    add_target_namespace_flag(parser)
    add_view_flags(parser, operands="TARGET")
    add_own_namespace_flag(parser, "--stszone-namespace")
    return parser


def run(args: argparse.Namespace) -> int:
    """``stszone explain``."""
    kind, name = args.target
    namespace = None if args.all_namespaces else args.target_namespace
    settings = settings_from(args)
    return run_explain(
        load_view(settings),
        kind=kind,
        name=name,
        namespace=namespace,
        output=args.output,
        excluded=settings.defaults().excluded_namespaces,
    )


def _found(
    store: Store, kind: str | None, name: str, namespace: str | None
) -> list[tuple[str, str]]:
    """(kind, namespace) of every object ``kind`` (None: a pod, else a set, else a pool) could
    name; a broker's pod is a "brokerpod"."""
    everywhere = (
        {ns for ns, _ in store.pods}
        | {ns for ns, _ in store.statefulsets}
        | {ns for ns, _ in store.kruisesets}
        | {ns for ns, _ in store.nodepools}
        | {ns for ns, _ in store.poolpods}
    )
    spaces = [namespace] if namespace is not None else sorted(everywhere)
    pods = [("pod", ns) for ns in spaces if store.pod(ns, name) is not None]
    pods += [
        ("brokerpod", ns)
        for ns in spaces
        if (ns, name) in store.poolpods and broker_of(store, ns, name) is not None
    ]
    sets = [("statefulset", ns) for ns in spaces if store.statefulset(ns, name) is not None]
    advanced = [
        ("advancedstatefulset", ns)
        for ns in spaces
        if store.statefulset(ns, name, KRUISE) is not None
    ]
    pools = [("kafkanodepool", ns) for ns in spaces if store.nodepool(ns, name) is not None]
    if kind == "pod":
        # A pod not created yet is explained as its set's ordinal, or its pool's node ID.
        head, _, tail = name.rpartition("-")
        ordinal = tail.isascii() and tail.isdigit()
        missing = [
            ("pod", ns)
            for ns in spaces
            if ordinal and (store.statefulset(ns, head) or store.statefulset(ns, head, KRUISE))
        ]
        missing += [
            ("brokerpod", ns)
            for ns in spaces
            if (ns, name) not in store.poolpods and broker_of(store, ns, name) is not None
        ]
        return pods or missing
    if kind == "statefulset":
        return sets
    if kind == "advancedstatefulset":
        return advanced
    if kind == "kafkanodepool":
        return pools
    return pods or sets or advanced or pools


def _body(
    store: Store, which: str, namespace: str, name: str, *, output: str, excluded: frozenset[str]
) -> str | dict[str, Any]:
    """The explanation of what ``_found`` found, as text or JSON."""
    if which == "pod":
        explained = explain_pod(store, namespace, name, excluded=excluded)
        if explained is None:  # pragma: no cover - _found only names what the view holds
            raise ConfigError(f"pod {namespace}/{name} left the view")
        return pod_json(explained) if output == "json" else pod_text(explained)
    if which == "brokerpod":
        broker = explain_broker_pod(store, namespace, name, excluded=excluded)
        if broker is None:  # pragma: no cover - as above
            raise ConfigError(f"pod {namespace}/{name} left the view")
        return broker_pod_json(broker) if output == "json" else broker_pod_text(broker)
    if which == "kafkanodepool":
        pool = explain_pool(store, namespace, name, excluded=excluded)
        if pool is None:  # pragma: no cover - as above
            raise ConfigError(f"KafkaNodePool {namespace}/{name} left the view")
        return pool_json(pool) if output == "json" else pool_text(pool)
    group = KRUISE if which == "advancedstatefulset" else ""
    workload = explain_workload(store, namespace, name, group=group, excluded=excluded)
    if workload is None:  # pragma: no cover - as above
        raise ConfigError(f"StatefulSet {namespace}/{name} left the view")
    return workload_json(workload) if output == "json" else workload_text(workload)


def run_explain(
    store: Store,
    *,
    kind: str | None,
    name: str,
    namespace: str | None,
    output: str,
    excluded: frozenset[str] = frozenset(),
) -> int:
    """Print the explanation; 1 when the target is not found (or is ambiguous)."""
    found = _found(store, kind, name, namespace)
    what = f"{kind or 'pod, StatefulSet or KafkaNodePool'} {name}"
    if not found:
        where = f"namespace {namespace}" if namespace is not None else "any namespace"
        hint = "" if kind in ("statefulset", "kafkanodepool") else POD_HINT
        print(f"stszone explain: no {what} in {where} of the view{hint}", file=sys.stderr)
        return 1
    if len(found) > 1:
        places = ", ".join(f"{k.replace('brokerpod', 'pod')} {ns}/{name}" for k, ns in found)
        print(f"stszone explain: {what} is ambiguous ({places}); give -n or TYPE/", file=sys.stderr)
        return 1
    ((which, where),) = found
    body = _body(store, which, where, name, output=output, excluded=excluded)
    print(json.dumps(body, indent=2) if output == "json" else body)
    return 0
