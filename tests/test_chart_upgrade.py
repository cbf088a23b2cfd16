"""The `helm upgrade` the docs give, from a release an earlier chart installed.

Helm renders an upgrade from the values it rebuilds out of the stored release
(``pkg/action/upgrade.go``, ``Upgrade.reuseValues``): ``--reuse-values`` replaces the new
chart's defaults by the old chart's defaults coalesced with the release's values
(``chart.Values = oldVals``); ``--reset-then-reuse-values`` keeps the new chart's defaults and
puts the release's values over them; with neither and no values given, the release's values
are copied over the new defaults. The render below does the same with ``helm template``, so it
needs no cluster; the lab shows the same answers from ``helm upgrade`` itself.
"""

from __future__ import annotations

import copy
import json
import re
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helm import CHART, ROOT, Helm, Obj, helm_for_tests

#: Where users read how to upgrade.
PAGES = [ROOT / "docs" / "install.md", CHART / "README.md"]
#: What the release was installed with (`helm install --set ...`).
GIVEN: dict[str, Any] = {"replicas": 3, "webhooks": {"failurePolicy": "Ignore"}}


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    """The pinned helm, isolated from the user's helm configuration."""
    return helm_for_tests(tmp_path_factory.mktemp("helm-home"))


def _defaults() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((CHART / "values.yaml").read_text())
    return loaded


def _before_kinds() -> dict[str, Any]:
    """The defaults of the charts that registered apps/v1 StatefulSets only."""
    values = _defaults()
    del values["kruise"], values["kafkaNodePools"]
    return values


def _before_spread() -> dict[str, Any]:
    """The defaults of the charts that spread their replicas by one topologyKey."""
    values = _defaults()
    del values["topologySpreadConstraints"]
    values["topologyKey"] = "topology.kubernetes.io/zone"
    return values


def documented_upgrades() -> list[tuple[str, list[str]]]:
    """Every `helm upgrade ... charts/stszone ...` command of the pages, split into words."""
    found = []
    for page in PAGES:
        text = re.sub(r"\s+", " ", page.read_text())
        for command in re.findall(r"helm upgrade [^`]*charts/stszone[^`]*", text):
            found.append((f"{page.relative_to(ROOT)}: {command}", shlex.split(command)))
    return found


def _render(helm: Helm, chart: Path, values: dict[str, Any]) -> list[Obj]:
    out = helm.run(
        "template", "stszone", str(chart), "--namespace", "stszone-system",
        "--values", "-", stdin=json.dumps(values),
    )  # fmt: skip
    return [doc for doc in yaml.safe_load_all(out) if doc]


def upgrade_render(
    helm: Helm, words: list[str], *, earlier: dict[str, Any], tmp_path: Path
) -> list[Obj]:
    """What `helm upgrade` with ``words`` renders for a release that a chart with the default
    values ``earlier`` installed with ``GIVEN``."""
    if "--reuse-values" in words and "--reset-values" not in words:
        chart = tmp_path / "reused"
        shutil.copytree(CHART, chart)
        (chart / "values.yaml").write_text(yaml.safe_dump(earlier))
        return _render(helm, chart, copy.deepcopy(GIVEN))
    return _render(helm, CHART, copy.deepcopy(GIVEN))


def test_the_docs_give_an_upgrade_command() -> None:
    """The pages this test reads still say how to upgrade with Helm."""
    assert {label.split(":")[0] for label, _ in documented_upgrades()} == {
        str(page.relative_to(ROOT)) for page in PAGES
    }


@pytest.mark.parametrize(
    "earlier", [_before_kinds(), _before_spread()], ids=["before-kinds", "before-spread"]
)
@pytest.mark.parametrize(
    "documented", documented_upgrades(), ids=[label for label, _ in documented_upgrades()]
)
def test_documented_upgrade_renders_this_chart_with_the_values_given(
    helm: Helm, tmp_path: Path, earlier: dict[str, Any], documented: tuple[str, list[str]]
) -> None:
    """From a release of an earlier chart, the documented upgrade renders what a fresh install
    of this chart with the same values renders: no schema refusal of a value the chart dropped,
    no template failing on a value it added, and this chart's defaults for the rest."""
    _, words = documented
    fresh = _render(helm, CHART, copy.deepcopy(GIVEN))
    assert upgrade_render(helm, words, earlier=earlier, tmp_path=tmp_path) == fresh
