"""What several commands share: the cluster-view flags, the Settings parsed flags make, tables.

Defaults live in :class:`~webhook.config.Settings` and nowhere else: the parser shows them in
its help (from :data:`DEFAULTS`) and leaves them to Settings when a flag is not given.
Environment variables (``STSZONE_ZONES``, ``POD_NAMESPACE``) are read when a command runs, not
when the parser is built, so ``--help`` works whatever they hold.
"""

from __future__ import annotations

import argparse
import os
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any, Final

from webhook.cluster.clusterfile import SAVE
from webhook.config import Settings
from webhook.errors import ConfigError
from webhook.model.annotations import split_zones, zone_list_problems


class Formatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and epilogs as written; an option's help wrapped at spaces only, never
    inside a word at its hyphen, so a command it quotes (``kubectl api-resources``) reads as
    one to type."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


FORMATTER: Final = Formatter
#: The defaults every command shows and falls back to.
DEFAULTS: Final = Settings()
_FIELDS: Final = frozenset(f.name for f in fields(Settings))
ZONES_ENV: Final = "STSZONE_ZONES"
NAMESPACE_ENV: Final = "POD_NAMESPACE"


def seconds(text: str, *, finite: bool = False) -> float:
    """An argparse type: a number of seconds above 0 (and not infinite, when ``finite``)."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0 or (finite and value == float("inf")):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0")
    return value


def port(text: str, *, any_free: bool = False) -> int:
    """An argparse type: a TCP port, 1 to 65535 (0 too when ``any_free``: the kernel picks one).

    Without it a port above 65535 is not refused but wrapped by the event loop (uvloop listens
    on 99999 % 65536 = 34463), and a negative one fails later as "--host does not resolve".
    """
    lowest = 0 if any_free else 1
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not lowest <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port ({lowest} to 65535)")
    return value


def command_parser(
    commands: Any, name: str, *, help: str, description: str, epilog: str, run: Any
) -> argparse.ArgumentParser:
    """The sub-parser of command ``name``: its help, description and examples, laid out as
    written, and ``run`` as what it does."""
    parser: argparse.ArgumentParser = commands.add_parser(
        name, help=help, description=description, epilog=epilog, formatter_class=FORMATTER
    )
    parser.set_defaults(run=run)
    return parser


def zone_list(text: str, *, source: str = "--zones") -> tuple[str, ...]:
    """``a,b,c`` -> ``("a", "b", "c")``; argparse reports a malformed list as a usage error."""
    zones = split_zones(text)
    problems = zone_list_problems(zones, source=source)
    if problems:
        raise argparse.ArgumentTypeError("; ".join(problems))
    return zones


def add_view_flags(parser: argparse.ArgumentParser, *, operands: str = "") -> None:
    """Where the cluster view comes from: shared by every command that reads a cluster.
    ``operands``: what the command takes after its flags (``TARGET``), for the stdin example."""
    piped = " ".join(filter(None, (parser.prog, "--cluster -", operands)))
    group = parser.add_argument_group("cluster view")
    group.add_argument(
        "--zones",
        type=zone_list,
        metavar="A,B,C",
        help="zone list new StatefulSets get, in this order (default: $STSZONE_ZONES, else the "
        "zones on nodes, sorted)",
    )
    group.add_argument(
        "--cluster",
        dest="cluster_file",
        type=Path,
        metavar="FILE",
        help=f"offline view from a saved `{SAVE} -o yaml` list, read once at start; - reads "
        f"it from stdin (`{SAVE} -o json | {piped}`)",
    )
    group.add_argument(
        "--kubeconfig",
        metavar="PATH",
        help="kubeconfig file for the live view, one path as kubectl's flag (default: in-cluster "
        "service account, else $KUBECONFIG, which may join files with ':')",
    )
    group.add_argument(
        "--context",
        metavar="NAME",
        help="kubeconfig context for the live view (default: the kubeconfig's current-context)",
    )
    group.add_argument(
        "--offline",
        action="store_true",
        help="never contact a cluster, even when a kubeconfig is found",
    )
    group.add_argument(
        "--no-kruise",
        dest="kruise",
        action="store_false",
        default=None,
        help="leave OpenKruise Advanced StatefulSets (apps.kruise.io) alone: neither watched "
        "nor judged (default: watched where their CRD is served)",
    )
    group.add_argument(
        "--kruise-start-ordinal",
        action="store_true",
        default=None,
        help="kruise-manager runs with its StatefulSetStartOrdinal feature gate: an Advanced "
        "StatefulSet's spec.ordinals.start counts (default: its ordinals start at 0)",
    )
    group.add_argument(
        "--scheduler-name",
        default=DEFAULTS.scheduler_name,
        help="scheduler set on pods in scheduler mode when the StatefulSet names none "
        f"(default: {DEFAULTS.scheduler_name})",
    )


def add_output_flag(parser: argparse.ArgumentParser) -> None:
    """``-o/--output table|json``, as kubectl users expect."""
    parser.add_argument(
        "--output",
        "-o",
        choices=("table", "json"),
        default="table",
        help="table for people (default), json for scripts",
    )


def add_own_namespace_flag(parser: argparse.ArgumentParser, flag: str) -> None:
    """The flag naming stszone's own namespace (never intercepted, like kube-system).

    ``serve`` calls it ``--namespace`` (the Deployment sets ``$POD_NAMESPACE``); the commands a
    person runs against a cluster call it ``--stszone-namespace``, because there ``-n/--namespace``
    means what it means to kubectl: the namespace to look at.
    """
    parser.add_argument(
        flag,
        dest="namespace",
        metavar="NAMESPACE",
        help="stszone's own namespace, never intercepted (default: $POD_NAMESPACE, else "
        f"{DEFAULTS.namespace})",
    )


def add_target_namespace_flag(parser: argparse.ArgumentParser) -> None:
    """``-n/--namespace`` (only this namespace's StatefulSets) and ``-A/--all-namespaces``, as
    kubectl users expect. ``kubectl stszone`` fills ``-n`` from the kubeconfig context when
    neither is given (:mod:`webhook.cli.plugin`); ``stszone`` alone looks at every namespace."""
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument(
        "-n",
        "--namespace",
        dest="target_namespace",
        metavar="NAMESPACE",
        help="only StatefulSets in this namespace (default: every opted-in namespace; "
        "kubectl stszone: the context's namespace)",
    )
    scope.add_argument(
        "-A",
        "--all-namespaces",
        action="store_true",
        help="every opted-in namespace (what stszone does without -n)",
    )


def settings_from(args: argparse.Namespace, *, environ: Mapping[str, str] = os.environ) -> Settings:
    """The Settings of a parsed command line; flags not given keep the Settings defaults."""
    given: dict[str, Any] = {k: v for k, v in vars(args).items() if k in _FIELDS and v is not None}
    if "exclude_namespaces" in given:  # repeated flag: argparse appends to a list
        given["exclude_namespaces"] = tuple(given["exclude_namespaces"])
    if (given.get("cert") is None) != (given.get("key") is None):
        raise ConfigError(
            "--cert and --key go together: give both, or neither for dev certificates"
        )
    if not given.get("zones"):
        given.pop("zones", None)
        text = environ.get(ZONES_ENV, "")
        if text:
            try:
                given["zones"] = zone_list(text, source=f"${ZONES_ENV}")
            except argparse.ArgumentTypeError as err:
                raise ConfigError(f"{err}; fix or unset {ZONES_ENV}, or pass --zones") from None
    if "namespace" not in given and environ.get(NAMESPACE_ENV):
        given["namespace"] = environ[NAMESPACE_ENV]
    return Settings(**given)


def table_lines(
    header: Sequence[str], rows: Sequence[Sequence[str]], *, indent: str = "  "
) -> list[str]:
    """Columns padded to their widest cell, as kubectl prints them; no lines for no rows (a
    workload at zero replicas): a header over nothing reads as a table that failed to print,
    and the line above says there are no members."""
    if not rows:
        return []
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    return [
        indent + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in (header, *rows)
    ]
