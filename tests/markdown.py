"""Reading the docs as a test compares them with the program: sections, links, console blocks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from webhook.cli import main

ROOT = Path(__file__).resolve().parent.parent
#: What a newcomer reads: the README and every page of docs/.
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_FENCED = re.compile(r"^```.*?^```", flags=re.MULTILINE | re.DOTALL)


def prose(markdown: str) -> str:
    """``markdown`` without its fenced blocks (a ``# comment`` in a shell block is no heading)."""
    return _FENCED.sub("", markdown)


def anchors(markdown: str) -> set[str]:
    """GitHub's anchors of a page's headings (lower case, spaces to dashes, punctuation gone)."""
    found = set()
    for title in re.findall(r"^#+ (.+)$", prose(markdown), flags=re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")
        found.add(slug)
    return found


def console(doc: str, command: str) -> list[str]:
    """The lines printed under ``$ command`` in a console block of ``doc``."""
    lines = doc.splitlines()
    printed = []
    for line in lines[lines.index(f"$ {command}") + 1 :]:
        if line.startswith(("$ ", "```")):
            break
        printed.append(line)
    return printed


def explain_and_page(
    page: str, example: str, target: str, capsys: pytest.CaptureFixture[str]
) -> tuple[int, list[str], list[str]]:
    """``stszone explain --cluster EXAMPLE TARGET`` run: its exit status and the lines it
    printed; and the lines ``docs/PAGE`` shows under that command."""
    command = f"stszone explain --cluster {example} {target}"
    shown = console((ROOT / "docs" / page).read_text(), command)
    status = main(["explain", "--cluster", str(ROOT / example), target])
    return status, capsys.readouterr().out.splitlines(), shown


def fenced(doc: str, after: str) -> str:
    """The body of the first fenced block that follows the text ``after`` in ``doc``."""
    rest = doc[doc.index(after) :]
    start = rest.index("```")
    body = rest[rest.index("\n", start) + 1 :]
    return body[: body.index("```")]
