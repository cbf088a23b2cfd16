"""The ``stszone`` command line: one module per command, each with its own sub-parser.

A command module offers ``HELP`` (its line in ``stszone``'s overview), ``add_parser`` (its
flags, help and examples; it sets ``run``) and ``run(args) -> exit status``. This module only
gathers them, prints the overview when no command is given, turns a
:class:`~webhook.errors.ConfigError` into one line on stderr and exit status 2, and a reader
that closed the output early into a quiet exit. No logic lives here.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence
from typing import Final

from webhook import __version__
from webhook.cli import audit, certs, explain, manifests, rebalance, review, serve
from webhook.cli.options import FORMATTER, settings_from
from webhook.errors import ConfigError

__all__ = ["build_parser", "main", "settings_from"]

#: The commands, in the order the overview lists them.
COMMANDS: Final = (serve, review, audit, explain, rebalance, certs, manifests)
DESCRIPTION: Final = "Admission webhook that keeps every StatefulSet in every availability zone."


def build_parser(prog: str = "stszone") -> argparse.ArgumentParser:
    """The ``stszone`` argument parser with every command (``prog``: ``kubectl stszone``)."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description=DESCRIPTION,
        formatter_class=FORMATTER,
        epilog=f"run `{prog} COMMAND --help` for each command's flags and examples",
    )
    parser.add_argument("--version", action="version", version=f"stszone {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(commands)
    return parser


def overview(prog: str = "stszone") -> str:
    """What ``stszone`` alone prints: every command with one line, as ``kubectl`` does."""
    width = max(len(c.__name__.rpartition(".")[2]) for c in COMMANDS)
    lines = [
        f"{prog} {__version__}: {DESCRIPTION}",
        "",
        "Commands:",
        *(f"  {c.__name__.rpartition('.')[2]:<{width}}  {c.HELP}" for c in COMMANDS),
        "",
        f"Usage: {prog} COMMAND [flags]; `{prog} COMMAND --help` shows a command's flags and "
        "examples.",
    ]
    return "\n".join(lines)


def dispatch(args: argparse.Namespace, *, prog: str = "stszone") -> int:
    """Run a parsed command; a :class:`ConfigError` is one line on stderr and exit status 2."""
    status: int
    try:
        if args.command is None:
            print(overview(prog))
            status = 0
        else:
            status = args.run(args)
        sys.stdout.flush()
    except ConfigError as err:
        print(f"{prog} {args.command}: {err.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader of our output has gone (`stszone audit | head`). Python ignores SIGPIPE, so
        # end as a command SIGPIPE stops does; stdout goes to /dev/null so that the flush at
        # exit does not fail on the closed pipe again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    return status


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``stszone`` console script and ``python -m webhook``."""
    return dispatch(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
