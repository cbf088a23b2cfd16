"""What a newcomer reads holds: every page and section the docs point to exists, and what they
print as the program's is what it prints (more of it in ``test_explain_pools`` for kafka.md and
``test_first_contact`` for the README's session)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.markdown import PAGES, ROOT, anchors, explain_and_page, fenced, prose

#: A markdown link's target, ``[text](target)``.
_LINK = re.compile(r"\]\(([^)\s]+)\)")
#: A page named in the text, ``docs/guard.md``, as a reader would type it from the checkout.
_NAMED = re.compile(r"(?<![\w./-])docs/[\w-]+\.md\b")


def _targets(page: Path) -> list[tuple[Path, str]]:
    """(file, anchor or "") of every link and every ``docs/*.md`` named on ``page``."""
    text = prose(page.read_text())
    found = []
    for target in _LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        path, _, anchor = target.partition("#")
        found.append((page.parent / path if path else page, anchor))
    found += [(ROOT / name, "") for name in _NAMED.findall(text)]
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_page_and_section_the_docs_point_to_exists(page: Path) -> None:
    """A link, or a page named in the text, leads somewhere: the file, and its section."""
    broken = []
    for path, anchor in _targets(page):
        if not path.exists():
            broken.append(f"{path.relative_to(ROOT)}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path.read_text()):
            broken.append(f"{path.relative_to(ROOT)}#{anchor}: no such section")
    assert broken == []


def test_install_shows_the_match_condition_the_manifests_register() -> None:
    """docs/install.md prints "the condition both configurations carry": it is deploy/base's."""
    doc = (ROOT / "docs" / "install.md").read_text()
    shown = yaml.safe_load(fenced(doc, "The condition both configurations carry"))
    registered = [
        webhook["matchConditions"]
        for config in yaml.safe_load_all((ROOT / "deploy" / "base" / "webhooks.yaml").read_text())
        for webhook in config["webhooks"]
    ]
    assert registered and all(conditions == registered[0] for conditions in registered)
    assert shown == {"matchConditions": registered[0]}


GUARD_EXAMPLE = "deploy/examples/guard/cluster.yaml"


@pytest.mark.parametrize("target", ["pod/db-3", "sts/db"])
def test_kubectl_plugin_page_shows_what_explain_prints(
    capsys: pytest.CaptureFixture[str], target: str
) -> None:
    """docs/kubectl-plugin.md's explain of the guard example, line for line."""
    _, printed, shown = explain_and_page("kubectl-plugin.md", GUARD_EXAMPLE, target, capsys)
    assert printed == shown
