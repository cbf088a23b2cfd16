"""What a newcomer reads holds: what the docs print as the program's is what it prints (more of
it in ``test_explain_pools`` for kafka.md and ``test_first_contact`` for the README's session)."""

from __future__ import annotations

import pytest

from tests.markdown import ROOT, console
from webhook.cli import main

GUARD_EXAMPLE = "deploy/examples/guard/cluster.yaml"


@pytest.mark.parametrize("target", ["pod/db-3", "sts/db"])
def test_kubectl_plugin_page_shows_what_explain_prints(
    capsys: pytest.CaptureFixture[str], target: str
) -> None:
    """docs/kubectl-plugin.md's explain of the guard example, line for line."""
    command = f"stszone explain --cluster {GUARD_EXAMPLE} {target}"
    shown = console((ROOT / "docs" / "kubectl-plugin.md").read_text(), command)
    main(["explain", "--cluster", str(ROOT / GUARD_EXAMPLE), target])
    assert capsys.readouterr().out.splitlines() == shown
