"""The chart describes itself: its README (what `helm show readme` prints) lists every value
with the default values.yaml gives it and the meaning values.schema.json gives it, and its
Chart.yaml carries what `helm lint` and Artifact Hub look for."""

from __future__ import annotations

import json
import re
from urllib.parse import urlparse

import pytest
import yaml

from tests.helm import CHART, Helm, helm_for_tests, release
from tests.rendered import container
from tools import chart_readme


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    """The pinned helm, isolated from the user's helm configuration."""
    return helm_for_tests(tmp_path_factory.mktemp("helm-home"))


def test_readme_values_are_made_from_values_and_schema() -> None:
    """The README's values block is what tools/chart_readme.py makes of the two files now."""
    readme = chart_readme.README.read_text()
    assert readme == chart_readme.expected(readme), (
        "charts/stszone/README.md is stale: run python tools/chart_readme.py"
    )


def test_readme_lists_every_value_with_its_default_and_meaning() -> None:
    """One row per value, in values.yaml's order; each default as values.yaml has it."""
    readme = chart_readme.README.read_text()
    block = readme[readme.index(chart_readme.BEGIN) : readme.index(chart_readme.END)]
    rows = re.findall(r"^\| `([\w.]+)` \| (.+?) \| (.+) \|$", block, flags=re.MULTILINE)
    values = chart_readme.leaves(yaml.safe_load((CHART / "values.yaml").read_text()))
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert [path for path, _, _ in rows] == list(values)
    for path, default, meaning in rows:
        assert meaning == chart_readme.schema_entry(schema, path)["description"], path
        if default.startswith("[below]"):
            heading = f"#### Default {path}\n\n```yaml\n"
            block = readme[readme.index(heading) + len(heading) :]
            assert yaml.safe_load(block[: block.index("```")]) == values[path], path
        else:
            assert yaml.safe_load(default.strip("`")) == values[path], path


def test_stale_readme_is_found() -> None:
    """A changed default makes the README differ from what the tool writes."""
    readme = chart_readme.README.read_text()
    changed = readme.replace("| `replicas` | `2` |", "| `replicas` | `3` |")
    assert changed != readme
    assert chart_readme.expected(changed) != changed


def test_helm_show_readme_prints_the_readme(helm: Helm) -> None:
    """What Artifact Hub and `helm show readme` show, with install, upgrade, uninstall, the
    certificate modes and the values."""
    shown = helm.run("show", "readme", str(CHART))
    assert shown.strip() == chart_readme.README.read_text().strip()
    for heading in ("## Install", "## Upgrade", "## Uninstall", "## Certificates", "## Values"):
        assert f"\n{heading}\n" in shown, heading


def test_lint_says_nothing_at_all(helm: Helm) -> None:
    """`helm lint --strict` passes without a single INFO (icon and the rest present)."""
    out = helm.run("lint", "--strict", str(CHART))
    assert "[INFO]" not in out and "[WARNING]" not in out, out


def test_chart_yaml_carries_artifact_hub_metadata(helm: Helm) -> None:
    """home, sources, icon, maintainers, kubeVersion, and Artifact Hub's license, changes and
    images, the images being those the default values run."""
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    for key in ("home", "icon", *chart["sources"]):
        url = chart.get(key, key)
        assert urlparse(url).scheme == "https", url
    assert chart["maintainers"] and all(m["name"] for m in chart["maintainers"])
    assert chart["kubeVersion"] == ">=1.27.0-0"
    annotations = chart["annotations"]
    assert annotations["artifacthub.io/license"]
    changes = yaml.safe_load(annotations["artifacthub.io/changes"])
    assert changes and {c["kind"] for c in changes} <= {
        "added",
        "changed",
        "deprecated",
        "removed",
        "fixed",
        "security",
    }
    images = yaml.safe_load(annotations["artifacthub.io/images"])
    assert [image["image"] for image in images] == [container(release(helm.template()))["image"]]
