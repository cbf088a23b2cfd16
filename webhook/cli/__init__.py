"""Command line: flags and environment -> settings, then hand over. No logic lives here.

The flags are defined in :mod:`webhook.cli.flags`. Each subcommand's work is in its own module:
``serve`` in :mod:`webhook.cli.serve`, ``review`` in :mod:`webhook.cli.review`, ``certs`` in
:mod:`webhook.cli.certs`, ``manifests`` in :mod:`webhook.install.manifests`, ``audit`` in
:mod:`webhook.cli.audit`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from webhook.cli.flags import build_parser
from webhook.config import Settings
from webhook.errors import ConfigError

__all__ = ["build_parser", "main", "settings_from"]


def settings_from(args: argparse.Namespace) -> Settings:
    """Build :class:`Settings` from parsed flags (shared by every subcommand that reads a view)."""
    if (getattr(args, "cert", None) is None) != (getattr(args, "key", None) is None):
        raise ConfigError(
            "--cert and --key go together: give both, or neither for dev certificates"
        )
    return Settings(
        host=getattr(args, "host", "0.0.0.0"),
        port=getattr(args, "port", 8443),
        cert=getattr(args, "cert", None),
        key=getattr(args, "key", None),
        certs_dir=getattr(args, "certs_dir", Path("certs")),
        zones=args.zones or None,
        cluster_file=args.cluster,
        kubeconfig=args.kubeconfig,
        offline=args.offline,
        namespace=args.namespace,
        scheduler_name=args.scheduler_name,
        log_format=getattr(args, "log_format", "text"),
        log_level=getattr(args, "log_level", "info"),
        metrics_port=getattr(args, "metrics_port", None),
        loop=getattr(args, "loop", "uvloop"),
        max_unsynced=getattr(args, "max_unsynced", 120.0),
        shutdown_grace=getattr(args, "shutdown_grace", 20.0),
        storage_unhealthy_condition=getattr(args, "storage_unhealthy_condition", None),
        storage_unhealthy_label=getattr(args, "storage_unhealthy_label", None),
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``stszone`` console script and ``python -m webhook``."""
    args = build_parser().parse_args(argv)
    try:
        if args.command == "serve":
            from webhook.cli.serve import run_serve

            return run_serve(settings_from(args))
        if args.command == "review":
            from webhook.cli.review import run_review

            return run_review(settings_from(args), path=args.file, endpoint=args.endpoint)
        if args.command == "audit":
            from webhook.cli.audit import run_audit

            return run_audit(settings_from(args), output=args.output)
        if args.command == "certs":
            from webhook.cli.certs import run_certs

            return run_certs(args)
        if args.command == "manifests":
            from webhook.install.manifests import run_manifests

            return run_manifests(
                ca=args.ca,
                cert=args.cert,
                key=args.key,
                secret=not args.no_secret,
                namespace=args.namespace,
                image=args.image,
                base=args.base,
                kustomize_dir=args.kustomize_dir,
            )
    except ConfigError as err:
        print(f"stszone {args.command}: {err.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    raise AssertionError(f"unhandled command {args.command}")  # argparse restricts the choices


if __name__ == "__main__":
    sys.exit(main())
