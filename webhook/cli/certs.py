"""``stszone certs``: write a CA and a serving certificate for the webhook Service, say what."""

from __future__ import annotations

import argparse
import datetime as dt
import shlex
from pathlib import Path
from typing import Any

from webhook.cli.options import DEFAULTS, command_parser
from webhook.install.certfiles import issue
from webhook.install.certs import CA_DAYS, KEY_TYPE, KEY_TYPES, SERVING_DAYS
from webhook.install.deploybase import NAME
from webhook.install.manifests import check_dns_label

HELP = "write a CA and a serving certificate for the webhook Service"
DESCRIPTION = """\
Write ca.crt, ca.key, tls.crt and tls.key into --out. The serving certificate names the
Service as the API server dials it (NAME, NAME.NS, NAME.NS.svc, NAME.NS.svc.cluster.local)
plus any --dns/--ip. A ca.crt/ca.key already in --out is reused: re-issuing with --force
replaces only the serving pair, and clients that trust the CA keep trusting it.
Keys are written 0600, every file atomically (a watching server never reads half a file)."""
EXAMPLES = """\
examples:
  stszone certs                                    certs/ for stszone.stszone-system
  stszone certs --out /tmp/wh --dns wh.example.com --ip 10.0.0.5   extra names (URL webhooks)
  stszone certs --force                            re-issue tls.crt/tls.key from the same CA
  stszone certs --key-type rsa-3072 --days 90      RSA key, 90-day serving certificate
exit status: 0 written, 2 refused (files exist without --force, unusable CA or flag)
"""


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """The ``certs`` sub-parser."""
    parser = command_parser(
        commands,
        "certs",
        help=HELP,
        description=DESCRIPTION,
        epilog=EXAMPLES,
        run=run,
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULTS.certs_dir,
        metavar="DIR",
        help=f"directory (default: {DEFAULTS.certs_dir}/)",
    )
    parser.add_argument("--service", default=NAME, help=f"Service name (default: {NAME})")
    parser.add_argument(
        "--namespace",
        default=DEFAULTS.namespace,
        help=f"Service namespace (default: {DEFAULTS.namespace})",
    )
    parser.add_argument(
        "--dns", action="append", default=[], metavar="NAME", help="extra DNS name (repeatable)"
    )
    parser.add_argument(
        "--ip", action="append", default=[], metavar="ADDR", help="IP address (repeatable)"
    )
    parser.add_argument(
        "--days",
        type=int,
        default=SERVING_DAYS,
        help=f"serving certificate validity (default: {SERVING_DAYS})",
    )
    parser.add_argument(
        "--ca-days", type=int, default=CA_DAYS, help=f"validity of a new CA (default: {CA_DAYS})"
    )
    parser.add_argument(
        "--key-type",
        choices=KEY_TYPES,
        default=KEY_TYPE,
        help=f"key of new certificates (default: {KEY_TYPE})",
    )
    parser.add_argument(
        "--force", action="store_true", help="replace an existing tls.crt/tls.key (the CA is kept)"
    )
    return parser


def run(args: argparse.Namespace) -> int:
    """Issue the files into ``--out`` and print what was written; ConfigError on refusal."""
    out = Path(args.out)
    check_dns_label(args.service, flag="--service", what="Service name", example=NAME)
    check_dns_label(
        args.namespace, flag="--namespace", what="namespace name", example=DEFAULTS.namespace
    )
    issued = issue(
        out,
        service=args.service,
        namespace=args.namespace,
        dns=args.dns,
        ips=args.ip,
        days=args.days,
        ca_days=args.ca_days,
        key_type=args.key_type,
        force=args.force,
    )
    ca_verb = "created" if issued.ca_created else "reused "
    print(f"{ca_verb} {issued.ca}  (CA certificate: the webhook configurations' caBundle)")
    print(f"{ca_verb} {issued.ca_key}  (CA key, 0600: keep it to re-issue; not needed to serve)")
    print(f"wrote   {issued.cert}  (serving certificate, serial {issued.serial:x})")
    print(f"wrote   {issued.key}  (serving key, 0600)")
    print(f"names:  {', '.join(issued.names)}")
    print(f"valid until {issued.not_after:%Y-%m-%d %H:%M}Z")
    wanted = dt.datetime.now(dt.UTC) + dt.timedelta(days=args.days)
    if issued.not_after < wanted - dt.timedelta(days=1):
        # new_serving caps the leaf at the CA's expiry; say so instead of surprising later.
        print(f"note: shortened to the CA's expiry; replace {issued.ca} before then")
    ca, namespace = shlex.quote(str(issued.ca)), shlex.quote(args.namespace)
    apply = f"stszone manifests --ca {ca} --namespace {namespace} | kubectl apply -f -"
    print(f"next:   {apply}")
    return 0
