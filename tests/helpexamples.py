"""The examples of ``stszone COMMAND --help``, read from the help text itself and run as written.

A shell runs each example line, with ``stszone`` standing for this checkout's ``python -m
webhook`` (the console script on PATH may belong to another install), so an example that
cannot work as printed fails its test instead of its first reader.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import re
import subprocess
import sys
from pathlib import Path

from tests.process import clean_environ
from webhook import cli

ROOT = Path(__file__).resolve().parent.parent
#: What an example line holds after its command: a comment, three or more spaces away.
_COMMENT = re.compile(r"\s{3,}")


def help_text(command: str) -> str:
    """What ``stszone COMMAND --help`` prints."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        cli.main([command, "--help"])
    return out.getvalue()


def help_examples(command: str) -> list[str]:
    """The command lines under ``examples:`` in ``stszone COMMAND --help``, comments cut off."""
    text = help_text(command)
    lines = text[text.index("\nexamples:\n") :].splitlines()[2:]
    indented = itertools.takewhile(lambda line: line.startswith("  "), lines)
    return [_COMMENT.split(line.strip())[0] for line in indented]


def run_example(
    line: str, *, cwd: Path, stdin: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``line`` run by bash (a pipeline fails when any command in it fails) in ``cwd``."""
    stszone = 'stszone() { "$STSZONE_PYTHON" -m webhook "$@"; }\n'
    return subprocess.run(
        ["bash", "-o", "pipefail", "-c", stszone + line],
        cwd=cwd,
        env={**clean_environ(), "STSZONE_PYTHON": sys.executable, "PYTHONPATH": str(ROOT)},
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
