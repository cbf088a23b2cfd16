"""Mutation testing of the pure rules: does a wrong line make some test fail?

    python tools/mutants.py                         # every mutant of the rules modules
    python tools/mutants.py --sample 200 --seed 1   # a reproducible sample
    python tools/mutants.py --module placement --list   # the mutants, not run

Each mutant changes one thing in one of ``MODULES`` (a comparison flipped, ``and`` for ``or``,
a condition negated, a constant changed, a ``**spread`` dropped from a dict, ...). The tests that
execute the mutated line (found once per test file with ``coverage``) run against a copy of the
repository with that one change; the mutant is *killed* when they fail (or hang past a bound),
and *survives* when they pass. A mutant on a line no test executes survives without running.

Some mutants cannot be told apart from the original by any test (a ``<`` that is ``<=`` where
the two values are never equal, a cache bound that changes only memory): they are
*equivalent*, listed with the reason in ``tools/mutants-equivalent.txt`` by their id, and left
out of the score. The score is killed / (all - equivalent). Exit status 1 when it is below
``--target`` (default 0.95).

Needs ``coverage`` (``pip install -e '.[mutation]'``). Runs on one core per ``--jobs``.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import copy
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The pure rules the issue names (plan.py holds the pod plan mutate and validate share).
MODULES = ("placement", "affinity", "plan", "mutate", "validate", "guard")
EQUIVALENT = ROOT / "tools" / "mutants-equivalent.txt"
#: A mutant whose tests run this many times longer than the unmutated run counts as killed.
HANG_FACTOR = 5.0

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
    """One change: where, what kind, and the mutated source of the module."""

    module: str
    line: int
    col: int
    kind: str
    detail: str

    @property
    def id(self) -> str:
        return f"{self.module}:{self.line}:{self.col}:{self.kind}:{self.detail}"


def _docstring_nodes(tree: ast.AST) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                found.add(id(value))
    return found


def _in_fstring(tree: ast.AST) -> set[int]:
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            inside.update(id(child) for child in ast.walk(node))
    return inside


def _returns_none(node: ast.Return) -> bool:
    return node.value is None or (isinstance(node.value, ast.Constant) and node.value.value is None)


def _sites(tree: ast.Module) -> Iterator[tuple[ast.AST, str, str]]:
    """(node, kind, detail) for every place a mutation applies, in source order."""
    skip = _docstring_nodes(tree) | _in_fstring(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                if type(op) in _COMPARE_SWAPS:
                    yield node, "compare", f"{i}:{type(op).__name__}"
        elif isinstance(node, ast.BoolOp):
            yield node, "boolop", type(node.op).__name__
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            yield node, "drop-not", ""
        elif isinstance(node, ast.BinOp) and type(node.op) in _BINOP_SWAPS:
            yield node, "binop", type(node.op).__name__
        elif isinstance(node, ast.If | ast.While | ast.IfExp):
            yield node, "negate-test", ""
        elif isinstance(node, ast.Constant) and id(node) not in skip:
            value = node.value
            if isinstance(value, bool):
                yield node, "bool", str(value)
            elif isinstance(value, int):
                yield node, "int", str(value)
            elif isinstance(value, str) and value:
                yield node, "str", repr(value)[:40]
        elif isinstance(node, ast.Dict):
            for i, key in enumerate(node.keys):
                if key is None:
                    yield node, "drop-spread", str(i)
        elif isinstance(node, ast.Continue):
            yield node, "continue-break", ""
        elif isinstance(node, ast.Return) and not _returns_none(node):
            yield node, "return-none", ""


def _apply(node: ast.AST, kind: str, detail: str) -> ast.AST:
    """The replacement of ``node`` for this mutation (the node is a deep copy)."""
    if kind == "compare":
        assert isinstance(node, ast.Compare)
        i = int(detail.split(":")[0])
        node.ops[i] = _COMPARE_SWAPS[type(node.ops[i])]()
    elif kind == "boolop":
        assert isinstance(node, ast.BoolOp)
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif kind == "drop-not":
        assert isinstance(node, ast.UnaryOp)
        return node.operand
    elif kind == "binop":
        assert isinstance(node, ast.BinOp)
        node.op = _BINOP_SWAPS[type(node.op)]()
    elif kind == "negate-test":
        assert isinstance(node, ast.If | ast.While | ast.IfExp)
        node.test = ast.UnaryOp(op=ast.Not(), operand=node.test)
    elif kind == "bool":
        assert isinstance(node, ast.Constant)
        node.value = not node.value
    elif kind == "int":
        assert isinstance(node, ast.Constant)
        node.value = node.value + 1 if node.value != 1 else 0
    elif kind == "str":
        assert isinstance(node, ast.Constant)
        node.value = "XX" + node.value
    elif kind == "drop-spread":
        assert isinstance(node, ast.Dict)
        i = int(detail)
        del node.keys[i]
        del node.values[i]
    elif kind == "continue-break":
        return ast.Break()
    elif kind == "return-none":
        assert isinstance(node, ast.Return)
        node.value = ast.Constant(value=None)
    return node


class _Replace(ast.NodeTransformer):
    def __init__(self, target: ast.AST, replacement: ast.AST) -> None:
        self.target, self.replacement = target, replacement

    def visit(self, node: ast.AST) -> ast.AST:
        if node is self.target:
            return self.replacement
        return super().visit(node)


def module_path(module: str) -> Path:
    return ROOT / "webhook" / "rules" / f"{module}.py"


def mutants_of(module: str) -> list[tuple[Mutant, str]]:
    """Every mutant of one module, with its mutated source."""
    source = module_path(module).read_text()
    tree = ast.parse(source)
    found: list[tuple[Mutant, str]] = []
    for index, (node, kind, detail) in enumerate(list(_sites(tree))):
        mutated_tree = ast.parse(source)
        target = list(_sites(mutated_tree))[index][0]
        replacement = _apply(copy.deepcopy(target), kind, detail)
        new_tree = ast.fix_missing_locations(_Replace(target, replacement).visit(mutated_tree))
        mutated = ast.unparse(new_tree)
        if mutated == ast.unparse(tree):
            continue
        line, col = getattr(node, "lineno", 0), getattr(node, "col_offset", 0)
        found.append((Mutant(module, line, col, kind, detail), mutated))
    return found


def coverage_map(work: Path) -> dict[tuple[str, int], set[str]]:
    """(module, line) -> the tests (pytest node ids) that execute that line of a rules module.

    One run of the whole suite under ``coverage`` with the test function as dynamic context.
    """
    rc = work / ".mutants-coveragerc"
    rc.write_text("[run]\ndynamic_context = test_function\ninclude = */webhook/rules/*\n")
    data = work / ".mutants-coverage"
    subprocess.run(
        [sys.executable, "-m", "coverage", "run", f"--rcfile={rc}", f"--data-file={data}",
         "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests", "--ignore=tests/e2e"],
        cwd=work, env=_env(work), capture_output=True, check=False,
    )  # fmt: skip
    out = subprocess.run(
        [sys.executable, "-m", "coverage", "json", f"--rcfile={rc}", f"--data-file={data}",
         "--show-contexts", "-o", "-"],
        cwd=work, env=_env(work), capture_output=True, text=True, check=True,
    )  # fmt: skip
    lines: dict[tuple[str, int], set[str]] = {}
    for name, info in json.loads(out.stdout)["files"].items():
        module = Path(name).stem
        for line, contexts in info.get("contexts", {}).items():
            tests = {node for c in contexts if c and (node := _node_id(work, c))}
            if tests:
                lines[(module, int(line))] = tests
    return lines


def _node_id(work: Path, context: str) -> str | None:
    """``tests.test_x.test_f`` (or ``tests.test_x.Class.test_f``) -> a pytest node id."""
    parts = context.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        path = Path(*parts[:cut]).with_suffix(".py")
        if (work / path).is_file():
            return "::".join([str(path), *parts[cut:]])
    return None


def _env(work: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STSZONE_E2E")}
    env["PYTHONPATH"] = str(work)
    env["HYPOTHESIS_PROFILE"] = "mutation"
    return env


def _tests(work: Path, files: set[str], timeout: float) -> tuple[bool, float, str]:
    """(passed, seconds, output tail) of the given test files in the work copy; a hang fails."""
    started = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *sorted(files)],
            cwd=work, env=_env(work), capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return False, timeout, "timed out"
    return done.returncode == 0, time.monotonic() - started, done.stdout[-3000:]


def _copy(dest: Path) -> Path:
    """A copy of the files git tracks (tests read deploy/, README.md, fixtures...)."""
    tracked = (
        subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, tracked):
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if (ROOT / name).is_file():
            shutil.copy2(ROOT / name, target)
    return dest


def _run_one(
    work: Path, mutant: Mutant, source: str, files: set[str], baseline: float
) -> tuple[Mutant, str]:
    path = work / "webhook" / "rules" / f"{mutant.module}.py"
    original = path.read_text()
    path.write_text(source)
    try:
        passed, _, _ = _tests(work, files, timeout=max(30.0, baseline * HANG_FACTOR))
    finally:
        path.write_text(original)
    return mutant, "survived" if passed else "killed"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--module", action="append", choices=MODULES, help="only these modules")
    parser.add_argument("--sample", type=int, help="run this many mutants, chosen at random")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1, help="mutants run at once")
    parser.add_argument("--list", action="store_true", help="print the mutants, run nothing")
    parser.add_argument("--target", type=float, default=0.95)
    parser.add_argument("--json", type=Path, help="write every mutant's result here")
    args = parser.parse_args()

    modules = args.module or list(MODULES)
    everything = [m for module in modules for m in mutants_of(module)]
    if args.sample is not None and args.sample < len(everything):
        everything = random.Random(args.seed).sample(everything, args.sample)
    everything.sort(key=lambda pair: (pair[0].module, pair[0].line, pair[0].col))
    if args.list:
        for mutant, _ in everything:
            print(mutant.id)
        print(f"{len(everything)} mutants", file=sys.stderr)
        return 0
    equivalent = (
        {
            line.split("#", 1)[0].strip()
            for line in EQUIVALENT.read_text().splitlines()
            if line.split("#", 1)[0].strip()
        }
        if EQUIVALENT.exists()
        else set()
    )

    with tempfile.TemporaryDirectory(prefix="mutants-") as tmp:
        works = [_copy(Path(tmp) / f"w{i}") for i in range(max(1, args.jobs))]
        print("mapping which tests run which lines...", file=sys.stderr)
        covered = coverage_map(works[0])
        all_files = {f for files in covered.values() for f in files}
        ok, baseline, output = _tests(works[0], all_files, timeout=3600)
        if not ok:
            print(f"the unmutated tests fail; fix them first:\n{output}", file=sys.stderr)
            return 2
        results: dict[str, str] = {}
        jobs: list[tuple[Mutant, str, set[str]]] = []
        for mutant, source in everything:
            files = covered.get((mutant.module, mutant.line), set())
            if not files:
                results[mutant.id] = "survived (no test runs this line)"
            else:
                jobs.append((mutant, source, files))
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(works)) as pool:
            free = list(works)
            futures = {}
            pending = list(jobs)
            while pending or futures:
                while pending and free:
                    mutant, source, files = pending.pop(0)
                    work = free.pop()
                    future = pool.submit(_run_one, work, mutant, source, files, baseline)
                    futures[future] = work
                done, _ = concurrent.futures.wait(
                    futures, return_when=concurrent.futures.FIRST_COMPLETED
                )
                for future in done:
                    free.append(futures.pop(future))
                    mutant, verdict = future.result()
                    results[mutant.id] = verdict
                    print(f"{verdict:9} {mutant.id}", file=sys.stderr, flush=True)

    killed = sum(v == "killed" for v in results.values())
    counted = [i for i in results if i not in equivalent]
    killed_counted = sum(results[i] == "killed" for i in counted)
    survivors = sorted(i for i in counted if results[i] != "killed")
    print(f"mutants: {len(results)}  killed: {killed}  equivalent (listed): "
          f"{len(results) - len(counted)}")  # fmt: skip
    score = killed_counted / len(counted) if counted else 1.0
    print(f"score: {killed_counted}/{len(counted)} = {score:.1%} of the non-equivalent mutants")
    for mutant_id in survivors:
        print(f"  survived: {mutant_id} ({results[mutant_id]})")
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1, sort_keys=True))
    return 0 if score >= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
