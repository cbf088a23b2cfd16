"""One name per meaning in the rules and the model: no module there binds both ``x`` and
``_x`` at its top level, which a reader takes for one thing (a public function and its
helper) even where they mean two."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MODULES = sorted((ROOT / "webhook" / "rules").glob("*.py")) + sorted(
    (ROOT / "webhook" / "model").glob("*.py")
)


def _defined(tree: ast.Module) -> set[str]:
    """The names a module binds at its top level: definitions, assignments, imports."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


@pytest.mark.parametrize("module", MODULES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_module_of_the_rules_or_model_spells_one_name_two_ways(module: Path) -> None:
    names = _defined(ast.parse(module.read_text()))
    assert not sorted(n for n in names if f"_{n}" in names)
