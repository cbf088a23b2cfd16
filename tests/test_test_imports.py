"""Test modules share helpers through public helper modules (``tests/builders.py``,
``tests/kruiseobjects.py``, ``tests/e2e/kube.py``, ...), never by reaching into each other's
private names: a ``_helper`` is free to change with the one module that defines it."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).parent


def _is_test_module(dotted: str) -> bool:
    return dotted.startswith("tests.") and dotted.rpartition(".")[2].startswith("test_")


def _private_imports(path: Path) -> list[str]:
    """``module.name`` of each private name ``path`` takes from another test module: imported
    by name, or read off the module imported whole (``played._pod``)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[str] = []
    modules: dict[str, str] = {}  # local name -> test module imported whole
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                dotted = f"{node.module}.{alias.name}"
                if _is_test_module(dotted):
                    modules[alias.asname or alias.name] = dotted
                elif _is_test_module(node.module) and alias.name.startswith("_"):
                    found.append(dotted)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if _is_test_module(alias.name) and alias.asname:
                    modules[alias.asname] = alias.name
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and node.attr.startswith("_")
        ):
            found.append(f"{modules[node.value.id]}.{node.attr}")
    return sorted(set(found))


def test_no_test_module_imports_another_test_modules_private_helpers() -> None:
    """Every test file, the end-to-end ones included."""
    reaching = {
        str(path.relative_to(TESTS)): names
        for path in sorted(TESTS.rglob("*.py"))
        if (names := _private_imports(path))
    }
    assert reaching == {}
