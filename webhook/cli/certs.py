"""``stszone certs``: write a CA and a serving certificate for the webhook Service, say what."""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path

from webhook.install.certfiles import issue


def run_certs(args: argparse.Namespace) -> int:
    """Issue the files into ``--out`` and print what was written; ConfigError on refusal."""
    out = Path(args.out)
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
    apply = f"stszone manifests --ca {issued.ca} --namespace {args.namespace} | kubectl apply -f -"
    print(f"next:   {apply}")
    return 0
