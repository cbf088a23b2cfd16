"""What the modules the image compiles with mypyc must not do (pyproject.toml's mypyc hook).

mypyc builds a generator expression's whole list before the first item is read, unless a
builtin that consumes it anyway takes it (``any``, ``sum``, ``tuple``, ``"".join`` ...). Where
Python walks a generator lazily -- over ``range(first, 2**31)`` in the scale-down guard -- the
compiled build would build a list of two billion ints. The hook swallows mypyc's warning about
it ("Treating generator comprehension as list"), and only the suite run against the compiled
build (``.ci/run``) would show the effect; this finds it in the source, in the fast suite.
"""

from __future__ import annotations

import ast
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import pytest

from tools.lock import mypyc_hook

ROOT = Path(__file__).resolve().parent.parent
HOOK = mypyc_hook(tomllib.loads((ROOT / "pyproject.toml").read_text()))
#: Calls that mypyc compiles with a generator expression as first argument without a list of it
#: (any, all, sum, next), or that consume the whole sequence anyway (mypyc/irbuild/specialize.py;
#: checked against mypyc's warnings on this package: these gave none).
CONSUMERS = frozenset(
    {"any", "all", "sum", "next", "list", "tuple", "set", "frozenset", "dict"}
    | {"sorted", "min", "max"}
)
#: Methods that take one the same way (str.join, set.update, list.extend).
METHODS = frozenset({"join", "update", "extend"})


def compiled_modules() -> list[Path]:
    """The files the hook compiles: its include patterns, less its exclude patterns."""
    found = []
    for path in sorted((ROOT / "webhook").rglob("*.py")):
        relative = "/" + path.relative_to(ROOT).as_posix()
        included = any(
            relative.startswith(p.rstrip("/") + "/") or relative == p for p in HOOK["include"]
        )
        excluded = any(relative == p or fnmatch(path.name, p) for p in HOOK["exclude"])
        if included and not excluded:
            found.append(path)
    return found


def eager_generators(source: str) -> list[int]:
    """Lines of generator expressions that mypyc would build as a whole list."""
    tree = ast.parse(source)
    consumed: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else None
        method = func.attr if isinstance(func, ast.Attribute) else None
        if (name in CONSUMERS or method in METHODS) and isinstance(node.args[0], ast.GeneratorExp):
            consumed.add(id(node.args[0]))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.GeneratorExp) and id(node) not in consumed
    ]


def test_the_hook_compiles_the_engine() -> None:
    """The list the checks below read is the engine: all three packages, less what is left."""
    names = {p.relative_to(ROOT).as_posix() for p in compiled_modules()}
    assert {"webhook/rules/guard.py", "webhook/wire/review.py", "webhook/model/store.py"} <= names
    assert not names & {"webhook/wire/lean.py", "webhook/model/index.py", "webhook/__init__.py"}
    assert not any(n.startswith(("webhook/server/", "webhook/cluster/")) for n in names)


@pytest.mark.parametrize("path", compiled_modules(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_generator_expression_that_mypyc_would_build_as_a_list(path: Path) -> None:
    lines = eager_generators(path.read_text())
    assert not lines, (
        f"{path.relative_to(ROOT)}: generator expressions at lines {lines} would be built as "
        "whole lists by mypyc; write a list comprehension where the sequence is small, or a "
        "generator function (def ... yield) where it must stay lazy"
    )


@pytest.mark.parametrize(
    ("source", "eager"),
    [
        ("x = (o for o in range(10**9) if o)", True),
        ("f(o for o in r)", True),
        ("dict.fromkeys(z for z in zones)", True),
        ("any(o for o in r)", False),
        ("sum(1 for o in r)", False),
        ("', '.join(str(o) for o in r)", False),
        ("tuple(o for o in r)", False),
        ("max((o for o in r), default=0)", False),
        ("next((o for o in r if o), None)", False),
        ("zones.update(v for v in values)", False),
        ("g = (o for o in r); next(g)", True),
    ],
)
def test_what_counts_as_eager(source: str, eager: bool) -> None:
    assert bool(eager_generators(source)) is eager
