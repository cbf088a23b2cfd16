"""The mutants of a module for tools/mutants.py: each one change, its id, and how it reads.

A mutant changes one thing: a comparison flipped (``<`` for ``<=``, ``in`` for ``not in``...),
``and`` for ``or``, a ``not`` dropped, an operator swapped (``+`` for ``-``...), a condition
negated, a constant changed (``True`` for ``False``, ``n + 1``, ``"XX" + s``), a ``**spread``
dropped from a dict, ``break`` for ``continue``, ``return None`` for a return value.
Docstrings, f-string parts and annotations (``Literal[...]`` types included) are left alone:
they never run.

Its id is ``module:scope:kind:n``: the function holding it (``Class.method``, or ``<import>``
for code that runs at import: module constants, default arguments, decorators), the kind of
change and its rank among the changes of that kind in that scope. An edit elsewhere in the
module leaves it alone, so the list of equivalent mutants stays attached to the code it was
judged on: each entry carries the change as it read then (``last >= widest.stop -> last >
widest.stop``), and an entry whose id is gone or names another change is *stale*.
"""

from __future__ import annotations

import ast
import copy
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The pure rules, module -> file: placement and its pod plan, the mutations (pods, sets,
#: claims), validation and the scale-down guard, with the modules they are built from (locate
#: and verdict for the guard, claims for mutate, scaling for validate, text and ordinals for
#: several) and the one writer of the model the mutations call (see ``ONLY``).
MODULES = {
    **{
        name: f"webhook/rules/{name}.py"
        for name in (
            "placement", "affinity", "plan", "mutate", "claims", "validate", "scaling", "guard",
            "locate", "verdict", "text", "ordinals",
        )
    },
    "objects": "webhook/model/objects.py",
}  # fmt: skip
#: Modules of which only these functions are rules code.
ONLY = {"objects": ("with_annotation",)}
#: The mutants no test can tell from the original: ``id | change | reason`` per line.
EQUIVALENT = ROOT / "tools" / "mutants-equivalent.txt"
IMPORT = "<import>"
DOCUMENTED = ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef

_COMPARE_SWAPS: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
_BINOP_SWAPS: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.FloorDiv,
    ast.FloorDiv: ast.Mult,
    ast.Mod: ast.FloorDiv,
    ast.BitOr: ast.BitAnd,
    ast.BitAnd: ast.BitOr,
}


@dataclass(frozen=True, slots=True)
class Mutant:
    """One change to one module: what it is, where, and the mutated source."""

    module: str
    #: The function (``Class.method``) holding the change; ``<import>`` for import-time code.
    scope: str
    kind: str
    #: 1-based rank among the changes of this kind in this scope, in source order.
    nth: int
    #: The lines whose execution runs the changed code (first, last).
    lines: tuple[int, int]
    #: ``before -> after``, in source terms.
    change: str
    source: str

    @property
    def id(self) -> str:
        return f"{self.module}:{self.scope}:{self.kind}:{self.nth}"

    @property
    def where(self) -> str:
        return f"{Path(MODULES[self.module]).name}:{self.lines[0]}"


def _kinds(node: ast.AST) -> Iterator[tuple[str, int]]:
    """(kind, which operand) of every change that applies to ``node`` itself."""
    if isinstance(node, ast.Compare):
        yield from (("compare", i) for i, op in enumerate(node.ops) if type(op) in _COMPARE_SWAPS)
    elif isinstance(node, ast.BoolOp):
        yield "boolop", 0
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield "drop-not", 0
    elif isinstance(node, ast.BinOp) and type(node.op) in _BINOP_SWAPS:
        yield "binop", 0
    elif isinstance(node, ast.If | ast.While | ast.IfExp):
        # ``if not x`` negated is ``if x``: the drop-not mutant already, not a second one.
        if not (isinstance(node.test, ast.UnaryOp) and isinstance(node.test.op, ast.Not)):
            yield "negate-test", 0
    elif isinstance(node, ast.Constant) and isinstance(node.value, bool | int | str):
        if node.value != "":
            yield type(node.value).__name__, 0  # bool, int or str
    elif isinstance(node, ast.Dict):
        yield from (("drop-spread", i) for i, key in enumerate(node.keys) if key is None)
    elif isinstance(node, ast.Continue):
        yield "continue-break", 0
    elif isinstance(node, ast.Return) and node.value is not None:
        yield from [("return-none", 0)] if ast.unparse(node.value) != "None" else []


def _sites(tree: ast.Module) -> Iterator[tuple[ast.AST, str, int, str]]:
    """(node, kind, which operand, scope) of every change, in source order."""

    def visit(node: ast.AST, scope: str, runs: bool) -> Iterator[tuple[ast.AST, str, int, str]]:
        yield from ((node, kind, i, scope if runs else IMPORT) for kind, i in _kinds(node))
        if isinstance(node, ast.JoinedStr) or (
            isinstance(node, ast.Subscript) and ast.unparse(node.value) == "Literal"
        ):
            return  # f-string parts; a type, read by mypy only
        docstring = None
        if isinstance(node, DOCUMENTED) and ast.get_docstring(node) is not None:
            docstring = node.body[0]
        for field, value in ast.iter_fields(node):
            if field in ("annotation", "returns"):
                continue
            for child in value if isinstance(value, list) else [value]:
                if not isinstance(child, ast.AST) or child is docstring:
                    continue
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and field == "body":
                    inner = node.name if scope == IMPORT else f"{scope}.{node.name}"
                    yield from visit(child, inner, True)
                elif isinstance(node, ast.ClassDef) and field == "body":
                    yield from visit(child, node.name, runs)
                else:
                    yield from visit(child, scope, runs or isinstance(node, ast.Lambda))

    yield from visit(tree, IMPORT, False)


def _apply(node: ast.AST, kind: str, which: int) -> ast.AST:
    """The replacement of ``node`` (a copy, changed in place) for this change."""
    if isinstance(node, ast.Compare):
        node.ops[which] = _COMPARE_SWAPS[type(node.ops[which])]()
    elif isinstance(node, ast.BoolOp):
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif isinstance(node, ast.UnaryOp):
        return node.operand
    elif isinstance(node, ast.BinOp):
        node.op = _BINOP_SWAPS[type(node.op)]()
    elif isinstance(node, ast.If | ast.While | ast.IfExp):
        node.test = ast.UnaryOp(op=ast.Not(), operand=node.test)
    elif isinstance(node, ast.Constant):
        value = node.value
        if kind == "bool":
            node.value = not value
        elif kind == "str":
            assert isinstance(value, str)  # kind is the constant's type name (_kinds)
            node.value = "XX" + value
        else:
            assert isinstance(value, int)
            node.value = value + 1 if value != 1 else 0
    elif isinstance(node, ast.Dict):
        del node.keys[which], node.values[which]
    elif isinstance(node, ast.Continue):
        return ast.Break()
    elif isinstance(node, ast.Return):
        node.value = ast.Constant(value=None)
    return node


def _shown(node: ast.AST, parent: ast.AST | None) -> ast.AST:
    """What a change is shown by: an ``if``'s test, not its body; a number or a bool with what
    holds it (``items[0]``, ``NAMED = 10``, ``frozen=True``); anything else itself."""
    if isinstance(node, ast.If | ast.While):
        return node.test
    number = isinstance(node, ast.Constant) and not isinstance(node.value, str)
    return parent if number and parent is not None and not hasattr(parent, "body") else node


def _common(a: str, b: str) -> int:
    """The length of the common start of ``a`` and ``b``."""
    return next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )


def _change(before: str, after: str, *, width: int = 60, context: int = 24) -> str:
    """``before -> after`` on one line, long code cut to the part that differs."""
    old, new = (" ".join(text.split()) for text in (before, after))
    if len(old) + len(new) > 2 * width:
        head = _common(old, new)
        tail = _common(old[head:][::-1], new[head:][::-1])
        start = max(0, head - context)

        def cut(text: str) -> str:
            end = min(len(text), len(text) - tail + context, start + width + 12)
            return f"{'...' * (start > 0)}{text[start:end]}{'...' * (end < len(text))}"

        old, new = cut(old), cut(new)
    return f"{old} -> {new}"


@contextmanager
def _swapped(parent: ast.AST, old: ast.AST, new: ast.AST) -> Iterator[None]:
    """``parent`` with its child ``old`` replaced by ``new`` for the duration."""
    for field, value in ast.iter_fields(parent):
        if value is old:
            setattr(parent, field, new)
            try:
                yield
            finally:
                setattr(parent, field, old)
            return
        if isinstance(value, list) and any(v is old for v in value):
            i = next(i for i, v in enumerate(value) if v is old)
            value[i] = new
            try:
                yield
            finally:
                value[i] = old
            return
    raise LookupError("not a child")


def mutants_of(module: str, *, root: Path = ROOT) -> list[Mutant]:
    """Every mutant of one module (only the ``ONLY`` functions of some)."""
    tree = ast.parse((root / MODULES[module]).read_text())
    unmutated = ast.unparse(tree)
    parents = {id(child): p for p in ast.walk(tree) for child in ast.iter_child_nodes(p)}
    ranks: Counter[tuple[str, str]] = Counter()
    found: list[Mutant] = []
    for node, kind, which, scope in list(_sites(tree)):
        if module in ONLY and scope.split(".")[0] not in ONLY[module]:
            continue
        parent = parents[id(node)]
        replacement = _apply(copy.deepcopy(node), kind, which)
        shown = _shown(node, parent)
        before = ast.unparse(shown)
        with _swapped(parent, node, replacement):
            mutated = ast.unparse(tree)
            after = ast.unparse(shown if shown is parent else _shown(replacement, None))
        if mutated == unmutated:
            continue
        ranks[(scope, kind)] += 1
        span = node if isinstance(node, ast.Return) else _shown(node, None)
        lines = (span.lineno, span.end_lineno or span.lineno)  # type: ignore[attr-defined]
        change = _change(before, after)
        found.append(Mutant(module, scope, kind, ranks[(scope, kind)], lines, change, mutated))
    return found


def read_equivalent(path: Path = EQUIVALENT) -> dict[str, tuple[str, str]]:
    """id -> (change, reason), from the list of equivalent mutants."""
    listed: dict[str, tuple[str, str]] = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        if line.strip() and not line.startswith("#"):
            mutant_id, rest = line.split(" | ", 1)
            change, reason = rest.rsplit(" | ", 1)
            listed[mutant_id.strip()] = (change.strip(), reason.strip())
    return listed


def stale_entries(listed: dict[str, tuple[str, str]], mutants: list[Mutant]) -> list[str]:
    """Entries for these mutants' modules whose id is gone or now names another change."""
    by_id = {m.id: m for m in mutants}
    modules = {m.module for m in mutants}
    stale = []
    for mutant_id, (change, _) in listed.items():
        now = by_id.get(mutant_id)
        if mutant_id.split(":")[0] in modules and (now is None or now.change != change):
            stale.append(f"{mutant_id} | {change}  (now: {now.change if now else 'no such id'})")
    return stale
