"""mutmut's test list (``pytest_add_cli_args_test_selection`` in pyproject.toml) holds every test
file that imports a module it mutates, and nothing that does not exist: a test left out of it
lets a mutant survive that the suite kills (docs/testing.md, Mutation testing)."""

from __future__ import annotations

import ast
import fnmatch
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Test files that import a mutated module and are left out of mutmut's list, with why: the list
#: holds only tests that run in-process, with no process, tool or cluster of their own.
#: ``tests/e2e/`` is left out whole: every test there needs a cluster.
LEFT_OUT = {
    "tests/test_churn_check.py": "imports bench/, which mutmut does not copy",
    "tests/test_prometheus_rules.py": "runs promtool",
    "tests/test_reuse_port.py": "starts stszone processes",
    "tests/test_scheduler_example.py": "runs kubectl kustomize",
}


def _mutmut() -> dict[str, list[str]]:
    config: dict[str, list[str]] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"][
        "mutmut"
    ]
    return config


def _mutated(module: str, config: dict[str, list[str]]) -> bool:
    """Whether mutmut mutates ``module`` (a dotted name), as its own config selects files."""
    base = ROOT.joinpath(*module.split("."))
    for file in (base.with_suffix(".py"), base / "__init__.py"):
        path = file.relative_to(ROOT).as_posix()
        if (
            file.is_file()
            and any(path.startswith(source) for source in config["source_paths"])
            and any(fnmatch.fnmatch(path, p) for p in config.get("only_mutate", ["*"]))
            and not any(fnmatch.fnmatch(path, p) for p in config.get("do_not_mutate", []))
        ):
            return True
    return False


def _imported(test: Path) -> set[str]:
    """The modules ``test`` imports itself: ``import a.b``, ``from a import b`` (``a`` and
    ``a.b``, either may be the module)."""
    names = set()
    for node in ast.walk(ast.parse(test.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def test_every_test_of_a_mutated_module_is_in_mutmuts_list() -> None:
    config = _mutmut()
    listed = set(config["pytest_add_cli_args_test_selection"])
    tests = sorted(
        test.relative_to(ROOT).as_posix()
        for test in (ROOT / "tests").rglob("test_*.py")
        if "e2e" not in test.relative_to(ROOT / "tests").parts
    )
    missing = [
        test
        for test in tests
        if test not in listed
        and test not in LEFT_OUT
        and any(_mutated(module, config) for module in _imported(ROOT / test))
    ]
    assert not missing, (
        f"{missing} import a module mutmut mutates: add them to "
        "pytest_add_cli_args_test_selection in pyproject.toml, or to LEFT_OUT here with why"
    )


def test_mutmuts_list_names_only_test_files_that_exist() -> None:
    named = _mutmut()["pytest_add_cli_args_test_selection"] + list(LEFT_OUT)
    gone = [name for name in named if not (ROOT / name).is_file()]
    assert not gone, f"{gone} do not exist: mutmut's list or LEFT_OUT names them"
