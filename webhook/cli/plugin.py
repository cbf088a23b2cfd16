"""``kubectl stszone``: every stszone command as a kubectl plugin, aimed the way kubectl aims.

kubectl runs ``kubectl-stszone`` (a console script of this package) for ``kubectl stszone
ARGS`` and passes ARGS alone: kubectl's own flags cannot come before a plugin's name ("flags
cannot be placed before plugin name"), and nothing of its configuration reaches the plugin. So
the plugin resolves what kubectl would, for the commands that read a cluster (those with the
cluster-view flags: audit, review, serve, and any later one such as rebalance):

- the kubeconfig: ``--kubeconfig``, else ``$KUBECONFIG`` (several files joined by ``:`` are
  merged, the first one winning), else ``~/.kube/config``; in a pod with none of them, the
  pod's service account and namespace, as kubectl's in-cluster config;
- the context: ``--context``, else the kubeconfig's current-context;
- the namespace, for commands with ``-n/--namespace``: ``-n``, else ``-A`` for every opted-in
  namespace, else the context's namespace, else ``default`` -- where ``stszone`` alone looks
  at every opted-in namespace; a target given as ``NS/NAME`` (``rebalance --statefulset``)
  names its own.

Both are then passed to the command explicitly (the kubeconfig as ``--kubeconfig``, which
names one file, unless it is ``$KUBECONFIG``'s list, which the command reads itself), so the
command contacts that cluster even where it would stay offline by itself: ``kubectl stszone
review FILE`` answers from the context's cluster (one list, no watch), while ``stszone review
FILE`` stays offline unless it is given ``--kubeconfig``/``--context`` (the first command a
user runs must not depend on the environment). ``--offline`` or ``--cluster FILE`` keep the
plugin away from the cluster too. Commands that read no cluster (certs, manifests) run
unchanged. Nothing is resolved per command by name, so a command added later needs no change
here.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

import yaml

from webhook.cli import build_parser, dispatch
from webhook.cluster.credsource import SERVICE_ACCOUNT, in_cluster_possible
from webhook.cluster.kubeconfig import KUBECONFIG_ENV, kubeconfig_files, require_kubeconfig
from webhook.cluster.kubecontext import kubeconfig_context
from webhook.errors import ConfigError

PROG: Final = "kubectl stszone"
#: kubectl's namespace when the context names none.
DEFAULT_NAMESPACE: Final = "default"
#: Where client-go's in-cluster config reads the namespace first (the downward API).
POD_NAMESPACE_ENV: Final = "POD_NAMESPACE"


def default_kubeconfig(environ: Mapping[str, str]) -> str:
    """``$KUBECONFIG`` if set, else ``~/.kube/config`` (kubectl's order)."""
    if environ.get(KUBECONFIG_ENV):
        return environ[KUBECONFIG_ENV]
    home = environ.get("HOME") or str(Path.home())
    return str(Path(home) / ".kube" / "config")


def aim(
    args: argparse.Namespace,
    *,
    environ: Mapping[str, str],
    service_account: Path = SERVICE_ACCOUNT,
) -> argparse.Namespace:
    """Fill in the kubeconfig, context and namespace kubectl would use (see the module doc)."""
    if not hasattr(args, "kubeconfig") or args.offline or args.cluster_file is not None:
        return args
    if in_a_pod(args, environ=environ, service_account=service_account):
        args.in_cluster = True
        if _wants_namespace(args) and args.target_namespace is None:
            args.target_namespace = pod_namespace(environ, service_account)
        return args
    if args.kubeconfig:
        files, named = kubeconfig_files(args.kubeconfig, listed=False), "--kubeconfig"
    elif environ.get(KUBECONFIG_ENV):
        # Left to the command, which reads $KUBECONFIG as a list: --kubeconfig is one file.
        files, named = kubeconfig_files(environ[KUBECONFIG_ENV], listed=True), f"${KUBECONFIG_ENV}"
    else:
        args.kubeconfig = default_kubeconfig(environ)
        files, named = (args.kubeconfig,), "kubectl's kubeconfig"
    require_kubeconfig(files, named=named)
    context = kubeconfig_context(files, args.context)
    args.context = context.name
    if _wants_namespace(args) and args.target_namespace is None:
        args.target_namespace = context.namespace or DEFAULT_NAMESPACE
    return args


def _wants_namespace(args: argparse.Namespace) -> bool:
    # A target given as NS/NAME (rebalance --statefulset) names its namespace itself.
    named_target = getattr(args, "statefulset", None) is not None
    return hasattr(args, "target_namespace") and not args.all_namespaces and not named_target


def in_a_pod(
    args: argparse.Namespace, *, environ: Mapping[str, str], service_account: Path
) -> bool:
    """Whether kubectl would talk as the pod's service account: no kubeconfig named, none
    found that holds a configuration, and in-cluster possible ($KUBERNETES_SERVICE_HOST and
    _PORT, a mounted token)."""
    if args.kubeconfig or args.context or environ.get(KUBECONFIG_ENV):
        return False
    if holds_configuration(Path(default_kubeconfig(environ))):
        return False
    return in_cluster_possible(environ, service_account)


def holds_configuration(path: Path) -> bool:
    """Whether the kubeconfig ``path`` is one to kubectl: it exists and names a cluster, a
    context, a user or a current-context. client-go deems an empty file, or a stub without
    them, an empty configuration and falls back to the in-cluster config (a file that does not
    read is one: loading it says why)."""
    if not path.exists():
        return False
    try:
        loaded = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError):
        return True
    if loaded is None:
        return False
    if not isinstance(loaded, dict):
        return True
    return any(loaded.get(key) for key in ("clusters", "contexts", "users", "current-context"))


def pod_namespace(environ: Mapping[str, str], service_account: Path) -> str:
    """kubectl's namespace in a pod: $POD_NAMESPACE, else the service account's, else
    default."""
    if environ.get(POD_NAMESPACE_ENV):
        return environ[POD_NAMESPACE_ENV]
    try:
        found = (service_account / "namespace").read_text().strip()
    except OSError:
        found = ""
    return found or DEFAULT_NAMESPACE


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
