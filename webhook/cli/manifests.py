"""``stszone manifests``: print the installation YAML with the caBundle and the TLS Secret."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from webhook.cli.options import DEFAULTS, command_parser
from webhook.install.deployfiles import COMPONENTS, PATCH_COMPONENTS
from webhook.install.manifests import run_manifests
from webhook.install.registration import Kinds

HELP = "print the installation YAML (self-managed certificates, or the caBundle and Secret)"
DESCRIPTION = """\
Print the kustomize base of deploy/ as one YAML stream, ready for `kubectl apply -f -`. Without
--ca the webhook manages its own certificates (stszone serve --manage-certs: a CA and serving
pair in Secret stszone-tls, injected into both webhook configurations, rotated before expiry).
With --ca the certificates are provided instead: the caBundle of both webhook configurations is
set to --ca, a kubernetes.io/tls Secret holds the serving pair, the Deployment mounts it, and
the webhook writes nothing. The pair is checked first: it must chain to the CA, the key must
match, and it must name stszone.NS.svc (with failurePolicy Fail a wrong certificate refuses
every pod create in opted-in namespaces). --namespace changes every reference to the
namespace."""
EXAMPLES = """\
examples:
  stszone manifests | kubectl apply -f -             self-managed certificates
  stszone certs --out certs && stszone manifests --ca certs/ca.crt | kubectl apply -f -
  stszone manifests --ca certs/ca.crt --image registry.example.com/stszone:0.1.0
  stszone manifests --ca ca.crt --cert tls.crt --key tls.key --namespace webhooks
  stszone manifests --ca certs/ca.crt --no-secret    the Secret is managed elsewhere
  stszone manifests --ca certs/ca.crt --no-match-conditions    Kubernetes 1.27 and older
  kubectl kustomize platform/stszone | stszone manifests --ca certs/ca.crt --base -
  stszone manifests --kustomize-dir base/            the base as kustomize files (no certs)
  stszone manifests --component rebalance --kustomize-dir deploy/components/rebalance
  stszone manifests --component provided-certs --kustomize-dir deploy/components/provided-certs
certs/ is what `stszone certs --out certs` writes; a pair given with --cert/--key names
stszone.NS.svc of --namespace (`stszone certs --namespace webhooks` issues one). --base takes
an overlay of your own (platform/stszone above) that adds deploy/components/provided-certs;
one whose webhook makes its own certificates (deploy/base, deploy/overlays/dev) is refused.
--ca, --cert, --key and --base each read standard input when given -, one of them at a time
(standard input holds one file).
exit status: 0 printed, 2 refused (unreadable or mismatched certificates, bad flag)
"""


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """The ``manifests`` sub-parser."""
    parser = command_parser(
        commands,
        "manifests",
        help=HELP,
        description=DESCRIPTION,
        epilog=EXAMPLES,
        run=run,
    )
    parser.add_argument(
        "--ca",
        type=Path,
        metavar="FILE",
        help="CA bundle (PEM) the API server trusts (- for stdin): provided certificates "
        "(default: none, the webhook manages its own)",
    )
    parser.add_argument(
        "--cert",
        type=Path,
        metavar="FILE",
        help="serving certificate (PEM) for the Secret, - for stdin (default: tls.crt beside --ca)",
    )
    parser.add_argument(
        "--key",
        type=Path,
        metavar="FILE",
        help="serving key (PEM) for the Secret, - for stdin (default: tls.key beside --ca)",
    )
    parser.add_argument(
        "--no-secret",
        action="store_true",
        help="leave the TLS Secret out (it is created another way)",
    )
    parser.add_argument(
        "--namespace", help=f"namespace to install into (default: {DEFAULTS.namespace})"
    )
    parser.add_argument(
        "--image", help="container image (default: stszone:VERSION, as `kind load` names it)"
    )
    parser.add_argument(
        "--no-match-conditions",
        action="store_true",
        help="send every pod of an opted-in namespace, not only StatefulSet pods: for "
        "Kubernetes older than 1.28, whose API server lacks matchConditions (docs/install.md)",
    )
    parser.add_argument(
        "--no-kafka-node-pools",
        action="store_true",
        help="leave Strimzi KafkaNodePools out: not registered, not read, "
        "`serve --no-kafka-node-pools`",
    )
    parser.add_argument(
        "--no-kruise",
        action="store_true",
        help="leave OpenKruise Advanced StatefulSets out: not registered, not read, "
        "`serve --no-kruise`",
    )
    parser.add_argument(
        "--base",
        type=Path,
        metavar="FILE",
        help="fill in a rendered overlay instead of the built-in base (- for stdin); the overlay "
        "adds the component deploy/components/provided-certs, e.g. "
        "`kubectl kustomize platform/stszone | stszone manifests --ca ca.crt --base -`",
    )
    parser.add_argument(
        "--component",
        choices=sorted({*COMPONENTS, *PATCH_COMPONENTS}),
        help="print (or with --kustomize-dir write) an optional component instead of the "
        "base: rebalance = RBAC for running `stszone rebalance` from a Job (no --ca needed); "
        "provided-certs = the patches that mount a provided Secret instead (--kustomize-dir)",
    )
    parser.add_argument(
        "--kustomize-dir",
        type=Path,
        metavar="DIR",
        help="write the base as kustomize files into DIR instead of printing (how deploy/ is made)",
    )
    return parser


def run(args: argparse.Namespace) -> int:
    """``stszone manifests``."""
    return run_manifests(
        ca=args.ca,
        cert=args.cert,
        key=args.key,
        secret=not args.no_secret,
        namespace=args.namespace,
        image=args.image,
        base=args.base,
        kustomize_dir=args.kustomize_dir,
        match_conditions=not args.no_match_conditions,
        kinds=Kinds(kafka_node_pools=not args.no_kafka_node_pools, kruise=not args.no_kruise),
        component=args.component,
    )
