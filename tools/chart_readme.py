"""The values table of the chart's README, made from values.yaml and values.schema.json.

``python tools/chart_readme.py`` rewrites the part of ``charts/stszone/README.md`` between the
two markers below: one row per value (its dotted path), its default from ``values.yaml`` and
its meaning from the ``description`` of its entry in ``values.schema.json``; defaults too long
for a table cell follow the table as YAML. ``--check`` changes nothing and exits 1 when the
README differs from what it would write; ``tests/test_chart_readme.py`` runs the same
comparison, so the README, the values and the schema cannot drift apart.

A value is a leaf of ``values.yaml``: a scalar, a list, an empty map, or a map that Kubernetes
(or Grafana's sidecar) reads as a whole (:data:`WHOLE`), which is documented as one value.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "charts" / "stszone"
README = CHART / "README.md"
BEGIN = (
    "<!-- values: made by `python tools/chart_readme.py` from values.yaml and "
    "values.schema.json; do not edit by hand -->"
)
END = "<!-- end of values -->"
#: Maps documented as one value: their keys are Kubernetes' (or the sidecar's), not the chart's.
WHOLE = frozenset(
    {"resources", "podSecurityContext", "securityContext", "metrics.dashboard.labels"}
)
#: Maps and lists longer than this go below the table, as YAML.
CELL = 40


def leaves(values: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted path -> default, for every value a user sets (in values.yaml's order)."""
    path = prefix.rstrip(".")
    if isinstance(values, dict) and values and path not in WHOLE:
        found: dict[str, Any] = {}
        for key, value in values.items():
            found.update(leaves(value, f"{prefix}{key}."))
        return found
    return {path: values}


def schema_entry(schema: dict[str, Any], path: str) -> dict[str, Any]:
    """The schema's entry for a dotted path; KeyError when it has none."""
    entry = schema
    for key in path.split("."):
        entry = entry["properties"][key]
    return entry


def _flow(value: Any) -> str:
    """A default as one line of YAML (flow style), as a user would write it in a values file."""
    if value == "":
        return '""'
    text: str = yaml.safe_dump(value, default_flow_style=True, width=10_000, sort_keys=False)
    return text.strip().removesuffix("...").strip()


def _anchor(path: str) -> str:
    """The id GitHub and Artifact Hub give the heading of a long default."""
    return "default-" + path.lower().replace(".", "")


def table(values: dict[str, Any], schema: dict[str, Any]) -> str:
    """The generated block: the table, then the defaults too long for it."""
    rows = ["| value | default | meaning |", "| --- | --- | --- |"]
    long: list[str] = []
    for path, default in leaves(values).items():
        meaning = schema_entry(schema, path)["description"].replace("|", "\\|")
        shown = _flow(default)
        if isinstance(default, dict | list) and len(shown) > CELL:
            cell = f"[below](#{_anchor(path)})"
            block = yaml.safe_dump(default, sort_keys=False, default_flow_style=False)
            long += [f"#### Default {path}", "", "```yaml", block.rstrip(), "```", ""]
        else:
            cell = f"`{shown}`"
        rows.append(f"| `{path}` | {cell} | {meaning} |")
    return "\n".join([BEGIN, "", *rows, "", *long, END])


def expected(readme: str) -> str:
    """``readme`` with its generated block made again from the chart's values and schema."""
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    schema = json.loads((CHART / "values.schema.json").read_text())
    start, end = readme.index(BEGIN), readme.index(END) + len(END)
    return readme[:start] + table(values, schema) + readme[end:]


def main(argv: list[str] | None = None) -> int:
    """Rewrite the README's values (or, with --check, say whether it is current)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if stale")
    args = parser.parse_args(argv)
    current = README.read_text()
    wanted = expected(current)
    if args.check:
        if current != wanted:
            print(f"{README.relative_to(ROOT)} is stale: run python tools/chart_readme.py")
            return 1
        return 0
    README.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main())
