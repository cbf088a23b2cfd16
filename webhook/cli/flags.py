"""Every command's flags, help texts and examples: the ``stszone`` argument parser.

``cli.py`` turns what this parser reads into settings and hands over; each check here is a
type conversion argparse reports as a usage error (exit 2) naming the flag.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from webhook.config import DEFAULT_NAMESPACE, DEFAULT_SCHEDULER_NAME, split_label_rule
from webhook.model.annotations import split_zones, zone_list_problems
from webhook.model.names import is_label_value, is_qualified_name

_FORMATTER = argparse.RawDescriptionHelpFormatter


def _zones(text: str) -> tuple[str, ...]:
    zones = split_zones(text)
    problems = zone_list_problems(zones, source="--zones")
    if problems:
        raise argparse.ArgumentTypeError("; ".join(problems))
    return zones


def _condition_type(text: str) -> str:
    # Condition types are qualified names ("StorageReady", "example.io/DiskHealthy").
    if not is_qualified_name(text.strip()):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a node condition type; e.g. --storage-unhealthy-condition "
            "StorageUnhealthy"
        )
    return text.strip()


def _label_rule(text: str) -> str:
    key, value = split_label_rule(text)
    if not is_qualified_name(key) or (
        value is not None and value != "" and not is_label_value(value)
    ):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not KEY or KEY=VALUE of a node label; e.g. --storage-unhealthy-label "
            "storage.example.io/unhealthy=true"
        )
    return text


def _add_view_flags(parser: argparse.ArgumentParser) -> None:
    """Where the cluster view comes from: shared by serve, review and audit."""
    group = parser.add_argument_group("cluster view")
    group.add_argument(
        "--zones",
        type=_zones,
        metavar="A,B,C",
        default=os.environ.get("STSZONE_ZONES") and _zones(os.environ["STSZONE_ZONES"]),
        help="zone list new StatefulSets get, in this order (default: zones on nodes, sorted; "
        "env STSZONE_ZONES)",
    )
    group.add_argument(
        "--cluster",
        type=Path,
        metavar="FILE",
        help="offline view from a saved `kubectl get nodes,pv,pvc,sts,pods -A -o yaml` list",
    )
    group.add_argument(
        "--kubeconfig",
        metavar="PATH",
        help="kubeconfig for the live view (default: in-cluster service account, else $KUBECONFIG)",
    )
    group.add_argument(
        "--offline",
        action="store_true",
        help="never contact a cluster, even when a kubeconfig is found",
    )
    group.add_argument(
        "--scheduler-name",
        default=DEFAULT_SCHEDULER_NAME,
        help="scheduler set on pods in scheduler mode when the StatefulSet names none "
        f"(default: {DEFAULT_SCHEDULER_NAME})",
    )
    group.add_argument(
        "--namespace",
        default=os.environ.get("POD_NAMESPACE", DEFAULT_NAMESPACE),
        help="stszone's own namespace, never intercepted (default: $POD_NAMESPACE or "
        f"{DEFAULT_NAMESPACE})",
    )


SERVE_EXAMPLES = """\
examples:
  stszone serve --zones a,b,c                      offline, dev certificates under certs/
  stszone serve --cluster cluster.yaml             offline view from a saved cluster
  stszone serve --kubeconfig ~/.kube/config        live view (list+watch) of a cluster
  stszone serve --cert /tls/tls.crt --key /tls/tls.key --port 8443   in a pod
"""

REVIEW_EXAMPLES = """\
examples:
  stszone review --zones a,b,c tests/fixtures/admission/003-Pod-CREATE.json
  stszone review --cluster cluster.yaml --endpoint validate review.json
  kubectl create --dry-run=client -o json ... | stszone review --zones a,b,c -
exit status: 0 answered (allowed or denied), 2 the file is not an AdmissionReview
"""

AUDIT_EXAMPLES = """\
examples:
  kubectl get nodes,pv,pvc,sts,pods,namespaces -A -o yaml > cluster.yaml
  stszone audit --cluster cluster.yaml                  offline, from the saved cluster
  stszone audit --cluster cluster.yaml --zones a,b,c    zones for sets without stszone.io/zones
  stszone audit --kubeconfig ~/.kube/config -o json     live: one list of the cluster, no watch
  stszone audit --cluster cluster.yaml -o json | jq '.statefulsets[] | select(.misplaced > 0)'
exit status: 0 all placed as expected, 1 a pod misplaced or a node-ordinal label missing or
duplicated or malformed annotations, 2 the view cannot be loaded
"""


def build_parser() -> argparse.ArgumentParser:
    """The ``stszone`` argument parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="stszone",
        description="Admission webhook that keeps every StatefulSet in every availability zone.",
        formatter_class=_FORMATTER,
        epilog="run `stszone COMMAND --help` for each command's flags and examples",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = sub.add_parser(
        "serve",
        help="run the HTTPS admission webhook",
        description="Run the admission webhook (mutate, validate, healthz, readyz) over HTTPS.",
        epilog=SERVE_EXAMPLES,
        formatter_class=_FORMATTER,
    )
    serve.add_argument("--host", default="0.0.0.0", help="address to listen on (default: 0.0.0.0)")
    serve.add_argument("--port", type=int, default=8443, help="port (default: 8443)")
    serve.add_argument("--cert", type=Path, help="serving certificate (PEM); with --key")
    serve.add_argument("--key", type=Path, help="serving key (PEM); with --cert")
    serve.add_argument(
        "--certs-dir",
        type=Path,
        default=Path("certs"),
        help="where development certificates are created when --cert/--key are not given "
        "(default: certs/)",
    )
    serve.add_argument("--log-format", choices=("text", "json"), default="text")
    serve.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    serve.add_argument(
        "--metrics-port", type=int, help="serve /metrics on this port too (default: same port)"
    )
    serve.add_argument(
        "--loop",
        choices=("uvloop", "asyncio"),
        default="uvloop",
        help="event loop: uvloop (default; about 9%% more requests/s here) or asyncio's own",
    )
    serve.add_argument(
        "--max-unsynced",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="readiness fails when a cache cannot re-sync for this long (default: 120)",
    )
    serve.add_argument(
        "--shutdown-grace",
        type=float,
        default=20.0,
        metavar="SECONDS",
        help="time to finish in-flight requests after SIGTERM (default: 20)",
    )
    serve.add_argument(
        "--storage-unhealthy-condition",
        metavar="TYPE",
        type=_condition_type,
        help="node condition type whose status True marks its storage unhealthy (extender "
        "filter); seen only in full Node objects: nodeCacheCapable: false, or a --cluster file",
    )
    serve.add_argument(
        "--storage-unhealthy-label",
        metavar="KEY[=VALUE]",
        type=_label_rule,
        help="node label that marks its storage unhealthy (extender filter); KEY alone matches "
        "any value; works with nodeCacheCapable true and false",
    )
    _add_view_flags(serve)

    rev = sub.add_parser(
        "review",
        help="answer one AdmissionReview from a file, no server",
        description="Answer one AdmissionReview as the API server would experience it: the "
        "mutating webhook, then the validating webhook on the mutated object. Prints the "
        "response AdmissionReview as JSON.",
        epilog=REVIEW_EXAMPLES,
        formatter_class=_FORMATTER,
    )
    rev.add_argument("file", help="AdmissionReview JSON file, or - for stdin")
    rev.add_argument(
        "--endpoint",
        choices=("chain", "mutate", "validate"),
        default="chain",
        help="answer as one endpoint alone (default: chain = mutate then validate)",
    )
    _add_view_flags(rev)

    audit = sub.add_parser(
        "audit",
        help="expected vs actual zone of every StatefulSet ordinal, safe replica counts, "
        "removable nodes",
        description="""\
For each opted-in StatefulSet (every one when the view holds no Namespace objects): each
ordinal's expected zone, its pod's node and zone, and a mark where they differ; the lowest
replica count that keeps every zone (what the scale-down guard allows); node-ordinal labels
missing or on several nodes; and the nodes that can be removed without losing any
StatefulSet's zone or pod (the exact rule is printed under the node lists).""",
        epilog=AUDIT_EXAMPLES,
        formatter_class=_FORMATTER,
    )
    audit.add_argument(
        "--output",
        "-o",
        choices=("table", "json"),
        default="table",
        help="table for people (default), json for scripts",
    )
    _add_view_flags(audit)

    from webhook.install.certs import KEY_TYPES

    certs = sub.add_parser(
        "certs",
        help="write a CA and a serving certificate for the webhook Service",
        description="""\
Write ca.crt, ca.key, tls.crt and tls.key into --out. The serving certificate names the
Service as the API server dials it (NAME, NAME.NS, NAME.NS.svc, NAME.NS.svc.cluster.local)
plus any --dns/--ip. A ca.crt/ca.key already in --out is reused: re-issuing with --force
replaces only the serving pair, and clients that trust the CA keep trusting it.
Keys are written 0600, every file atomically (a watching server never reads half a file).""",
        epilog="""\
examples:
  stszone certs                                    certs/ for stszone.stszone-system
  stszone certs --out /tmp/wh --dns wh.example.com --ip 10.0.0.5   extra names (URL webhooks)
  stszone certs --force                            re-issue tls.crt/tls.key from the same CA
  stszone certs --key-type rsa-3072 --days 90      RSA key, 90-day serving certificate
exit status: 0 written, 2 refused (files exist without --force, unusable CA or flag)
""",
        formatter_class=_FORMATTER,
    )
    certs.add_argument(
        "--out", type=Path, default=Path("certs"), metavar="DIR", help="directory (default: certs/)"
    )
    certs.add_argument("--service", default="stszone", help="Service name (default: stszone)")
    certs.add_argument(
        "--namespace",
        default=DEFAULT_NAMESPACE,
        help=f"Service namespace (default: {DEFAULT_NAMESPACE})",
    )
    certs.add_argument(
        "--dns", action="append", default=[], metavar="NAME", help="extra DNS name (repeatable)"
    )
    certs.add_argument(
        "--ip", action="append", default=[], metavar="ADDR", help="IP address (repeatable)"
    )
    certs.add_argument(
        "--days", type=int, default=365, help="serving certificate validity (default: 365)"
    )
    certs.add_argument(
        "--ca-days", type=int, default=3650, help="validity of a new CA (default: 3650)"
    )
    certs.add_argument(
        "--key-type",
        choices=KEY_TYPES,
        default="ecdsa-p256",
        help="key of new certificates (default: ecdsa-p256)",
    )
    certs.add_argument(
        "--force", action="store_true", help="replace an existing tls.crt/tls.key (the CA is kept)"
    )
    manifests = sub.add_parser(
        "manifests",
        help="print the installation YAML with the caBundle and the TLS Secret",
        description="""\
Print the kustomize base of deploy/ as one YAML stream, with the caBundle of both webhook
configurations set to --ca and a kubernetes.io/tls Secret holding the serving pair, ready for
`kubectl apply -f -`. The pair is checked first: it must chain to the CA, the key must match,
and it must name stszone.NS.svc (with failurePolicy Fail a wrong certificate refuses every pod
create in opted-in namespaces). --namespace changes every reference to the namespace.""",
        epilog="""\
examples:
  stszone certs --out certs && stszone manifests --ca certs/ca.crt | kubectl apply -f -
  stszone manifests --ca certs/ca.crt --image registry.example.com/stszone:0.1.0
  stszone manifests --ca ca.crt --cert tls.crt --key tls.key --namespace webhooks
  stszone manifests --ca certs/ca.crt --no-secret    the Secret is managed elsewhere
  kubectl kustomize deploy/overlays/dev | stszone manifests --ca certs/ca.crt --base -
  stszone manifests --kustomize-dir base/            the base as kustomize files (no certs)
exit status: 0 printed, 2 refused (unreadable or mismatched certificates, bad flag)
""",
        formatter_class=_FORMATTER,
    )
    manifests.add_argument(
        "--ca", type=Path, metavar="FILE", help="CA bundle (PEM) the API server trusts"
    )
    manifests.add_argument(
        "--cert",
        type=Path,
        metavar="FILE",
        help="serving certificate (PEM) for the Secret (default: tls.crt beside --ca)",
    )
    manifests.add_argument(
        "--key",
        type=Path,
        metavar="FILE",
        help="serving key (PEM) for the Secret (default: tls.key beside --ca)",
    )
    manifests.add_argument(
        "--no-secret",
        action="store_true",
        help="leave the TLS Secret out (it is created another way)",
    )
    manifests.add_argument(
        "--namespace", help=f"namespace to install into (default: {DEFAULT_NAMESPACE})"
    )
    manifests.add_argument(
        "--image", help="container image (default: stszone:VERSION, as `kind load` names it)"
    )
    manifests.add_argument(
        "--base",
        type=Path,
        metavar="FILE",
        help="fill in a rendered overlay instead of the built-in base (- for stdin), e.g. "
        "`kubectl kustomize deploy/overlays/dev | stszone manifests --ca ca.crt --base -`",
    )
    manifests.add_argument(
        "--kustomize-dir",
        type=Path,
        metavar="DIR",
        help="write the base as kustomize files into DIR instead of printing (how deploy/ is made)",
    )
    return parser
