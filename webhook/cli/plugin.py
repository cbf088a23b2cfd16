"""``kubectl stszone``: every stszone command as a kubectl plugin, aimed the way kubectl aims.

kubectl runs ``kubectl-stszone`` (a console script of this package) for ``kubectl stszone
ARGS`` and passes ARGS alone: kubectl's own flags cannot come before a plugin's name ("flags
cannot be placed before plugin name"), and nothing of its configuration reaches the plugin. So
the plugin resolves what kubectl would, for the commands that read a cluster (those with the
cluster-view flags: audit, review, serve, and any later one such as rebalance):

- the kubeconfig: ``--kubeconfig``, else ``$KUBECONFIG`` (several files joined by ``:`` are
  merged, the first one winning), else ``~/.kube/config``;
- the context: ``--context``, else the kubeconfig's current-context;
- the namespace, for commands with ``-n/--namespace``: ``-n``, else ``-A`` for every opted-in
  namespace, else the context's namespace, else ``default`` -- where ``stszone`` alone looks
  at every opted-in namespace; a target given as ``NS/NAME`` (``rebalance --statefulset``)
  names its own.

Both are then passed to the command explicitly, so the command contacts that cluster even
where it would stay offline by itself: ``kubectl stszone review FILE`` answers from the
context's cluster (one list, no watch), while ``stszone review FILE`` stays offline unless it
is given ``--kubeconfig``/``--context`` (the first command a user runs must not depend on the
environment). ``--offline`` or ``--cluster FILE`` keep the plugin away from the cluster too.
Commands that read no cluster (certs, manifests) run unchanged. Nothing is resolved per
command by name, so a command added later needs no change here.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from webhook.cli import build_parser, dispatch
from webhook.cluster.credentials import KUBECONFIG_ENV, kubeconfig_context, require_kubeconfig
from webhook.errors import ConfigError

PROG: Final = "kubectl stszone"
#: kubectl's namespace when the context names none.
DEFAULT_NAMESPACE: Final = "default"


def default_kubeconfig(environ: Mapping[str, str]) -> str:
    """``$KUBECONFIG`` if set, else ``~/.kube/config`` (kubectl's order)."""
    if environ.get(KUBECONFIG_ENV):
        return environ[KUBECONFIG_ENV]
    home = environ.get("HOME") or str(Path.home())
    return str(Path(home) / ".kube" / "config")


def aim(args: argparse.Namespace, *, environ: Mapping[str, str]) -> argparse.Namespace:
    """Fill in the kubeconfig, context and namespace kubectl would use (see the module doc)."""
    if not hasattr(args, "kubeconfig") or args.offline or args.cluster_file is not None:
        return args
    if args.kubeconfig:
        named = "--kubeconfig"
    else:
        named = f"${KUBECONFIG_ENV}" if environ.get(KUBECONFIG_ENV) else "kubectl's kubeconfig"
        args.kubeconfig = default_kubeconfig(environ)
    require_kubeconfig(args.kubeconfig, named=named)
    context = kubeconfig_context(args.kubeconfig, args.context)
    args.context = context.name
    # A target given as NS/NAME (rebalance --statefulset) names its namespace itself.
    named_target = getattr(args, "statefulset", None) is not None
    wants_namespace = (
        hasattr(args, "target_namespace") and not args.all_namespaces and not named_target
    )
    if wants_namespace and args.target_namespace is None:
        args.target_namespace = context.namespace or DEFAULT_NAMESPACE
    return args


def main(argv: Sequence[str] | None = None, *, environ: Mapping[str, str] = os.environ) -> int:
    """Entry point of the ``kubectl-stszone`` console script."""
    args = build_parser(prog=PROG).parse_args(sys.argv[1:] if argv is None else argv)
    try:
        aim(args, environ=environ)
    except ConfigError as err:
        print(f"{PROG} {args.command}: {err.message}", file=sys.stderr)
        return 2
    return dispatch(args, prog=PROG)


if __name__ == "__main__":
    sys.exit(main())
