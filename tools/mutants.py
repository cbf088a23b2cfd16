"""Mutation testing of the pure rules: does a wrong line make some test fail?

    python tools/mutants.py --jobs 2                # every mutant of the rules
    python tools/mutants.py --sample 200 --seed 1   # a reproducible sample
    python tools/mutants.py --module guard --list   # the mutants, not run
    python tools/mutants.py --only guard:_lowest:   # the mutants whose id starts so

Each mutant changes one thing in one of the rules modules (see tools/mutants_make.py for the
changes and the ids). The tests that execute the changed code, found by one run of the suite
under ``coverage``, run against a copy of the repository with that one change (see
tools/mutants_run.py): the mutant is *killed* when one of them fails or hangs, and *survives*
when they pass. A mutant on code no test executes survives without running. Each mutant's line
says which test killed it.

Some mutants cannot be told from the original by any test (a ``<`` that is ``<=`` where the two
values are never equal, a cache bound that changes only memory): they are *equivalent*, listed
in tools/mutants-equivalent.txt as ``id | change | reason`` and left out of the score. An entry
whose change no longer matches what its id names is *stale* (the code moved on), and one that a
test kills was never equivalent: either stops the run until the list is put right. The score
is killed / (all - equivalent); exit status 1 below ``--target`` (0.95), 2 when the list needs
fixing or the tests fail unmutated.

Needs ``coverage`` (``pip install -e '.[mutation]'``); POSIX (the workers fork).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import queue
import random
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

# Run as a script, tools/ is on sys.path and its modules are top-level; mypy checks tools/ as
# the package it also is.
if TYPE_CHECKING:
    from tools.mutants_make import (
        EQUIVALENT,
        MODULES,
        Mutant,
        mutants_of,
        read_equivalent,
        stale_entries,
    )
    from tools.mutants_run import Worker, copy_repository, coverage_map, map_tests, serve, tests_of
else:
    from mutants_make import EQUIVALENT, MODULES, Mutant, mutants_of, read_equivalent, stale_entries
    from mutants_run import Worker, copy_repository, coverage_map, map_tests, serve, tests_of

#: A mutant whose tests run this many times longer than unmutated (plus a margin) is killed.
HANG_FACTOR, HANG_MARGIN = 5.0, 20.0
Job = tuple[Mutant, list[str], float]


def run(chosen: list[Mutant], *, jobs: int) -> dict[str, dict[str, Any]]:
    """id -> the answer of its run, for every chosen mutant some test executes."""
    with tempfile.TemporaryDirectory(prefix="mutants-") as tmp:
        works = [copy_repository(Path(tmp) / f"w{i}") for i in range(max(1, jobs))]
        say("mapping which tests run which lines (the suite under coverage)...")
        lines, seconds = coverage_map(works[0])
        todo: list[Job] = []
        for mutant in chosen:
            tests = sorted(tests_of(mutant, lines), key=lambda t: (seconds.get(t, 0.0), t))
            if tests:
                limit = HANG_MARGIN + HANG_FACTOR * sum(seconds.get(t, 1.0) for t in tests)
                todo.append((mutant, tests, limit))
        workers = [Worker(w) for w in works]
        try:
            needed = sorted({t for _, tests, _ in todo for t in tests})
            say(f"the {len(needed)} tests they need, unmutated, in a worker...")
            baseline = workers[0].run(None, "", needed, timeout=3600)
            if not baseline["passed"]:
                sys.exit(f"unmutated, {baseline['failed']} fails in a worker")
            started = time.monotonic()
            results = _run_all(todo, workers)
            say(f"{len(todo)} mutants run in {time.monotonic() - started:.0f} s "
                f"by {len(workers)} worker(s)")  # fmt: skip
        finally:
            for worker in workers:
                worker.close()
    return results


def _run_all(todo: list[Job], workers: list[Worker]) -> dict[str, dict[str, Any]]:
    """Every job on the first free worker; one line per mutant as it ends."""
    pending: queue.Queue[Job] = queue.Queue()
    for job in todo:
        pending.put(job)
    results: dict[str, dict[str, Any]] = {}

    def drive(worker: Worker) -> None:
        while True:
            try:
                mutant, tests, limit = pending.get_nowait()
            except queue.Empty:
                return
            answer = results[mutant.id] = worker.run(mutant.module, mutant.source, tests, limit)
            verdict = "survived" if answer["passed"] else "killed"
            by = "" if answer["passed"] else f"  by {answer['failed']}"
            say(f"[{len(results):4}/{len(todo)}] {verdict:8} {answer['seconds']:5.1f}s "
                f"{mutant.id:44} {mutant.where:16} {mutant.change}{by}")  # fmt: skip

    with concurrent.futures.ThreadPoolExecutor(max_workers=len(workers)) as pool:
        for future in [pool.submit(drive, w) for w in workers]:
            future.result()
    return results


def report(
    chosen: list[Mutant],
    results: dict[str, dict[str, Any]],
    listed: dict[str, tuple[str, str]],
    *,
    target: float,
) -> tuple[int, dict[str, dict[str, str]]]:
    """Print the table per module, the equivalents per reason, the survivors and the score;
    (the exit status, every mutant's outcome)."""
    rows: dict[str, Counter[str]] = defaultdict(Counter)
    outcomes: dict[str, dict[str, str]] = {}
    for mutant in chosen:
        answer = results.get(mutant.id)
        if answer is not None and not answer["passed"]:
            outcome, by = "killed", answer["failed"]
        elif mutant.id in listed:
            outcome, by = "equivalent", listed[mutant.id][1]
        else:
            outcome, by = "survived", "" if answer else "no test runs this code"
        outcomes[mutant.id] = {"outcome": outcome, "by": by, "change": mutant.change,
                               "where": mutant.where}  # fmt: skip
        rows[mutant.module][outcome] += 1
    print(f"{'module':10} {'mutants':>8} {'killed':>7} {'equivalent':>11} {'survived':>9}")
    for module, row in [*rows.items(), ("total", sum(rows.values(), Counter()))]:
        print(f"{module:10} {row.total():8} {row['killed']:7} {row['equivalent']:11} "
              f"{row['survived']:9}")  # fmt: skip
    reasons = Counter(o["by"] for o in outcomes.values() if o["outcome"] == "equivalent")
    for reason, count in reasons.most_common():
        print(f"equivalent: {count:3}  {reason}")
    wrongly = [i for i, o in outcomes.items() if o["outcome"] == "killed" and i in listed]
    for mutant_id in wrongly:
        print(f"listed as equivalent, but killed by {outcomes[mutant_id]['by']}: {mutant_id}")
    for mutant in chosen:
        if outcomes[mutant.id]["outcome"] == "survived":
            why = ", ".join(filter(None, [mutant.where, outcomes[mutant.id]["by"]]))
            print(f"survived: {mutant.id} | {mutant.change} |  ({why})")
    total = Counter(o["outcome"] for o in outcomes.values())
    counted = total["killed"] + total["survived"]
    score = total["killed"] / counted if counted else 1.0
    print(f"score: {total['killed']}/{counted} = {score:.1%} of the non-equivalent mutants "
          f"(target {target:.0%})")  # fmt: skip
    return (2 if wrongly else 0 if score >= target else 1), outcomes


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--module", action="append", choices=MODULES, help="only these modules")
    parser.add_argument("--only", action="append", metavar="PREFIX", help="ids starting so")
    parser.add_argument("--sample", type=int, help="run this many mutants, chosen at random")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1, help="mutants run at once")
    parser.add_argument("--list", action="store_true", help="print the mutants, run nothing")
    parser.add_argument("--target", type=float, default=0.95)
    parser.add_argument("--json", type=Path, help="write every mutant's outcome here")
    parser.add_argument("--serve", type=Path, help=argparse.SUPPRESS)  # a worker
    parser.add_argument("--map", type=Path, help=argparse.SUPPRESS)  # the coverage run
    args = parser.parse_args()
    if args.map:
        return map_tests(args.map)
    if args.serve:
        serve(args.serve)
        return 0

    generated = [m for module in args.module or MODULES for m in mutants_of(module)]
    assert len({m.id for m in generated}) == len(generated), "two mutants share an id"
    listed = read_equivalent()
    stale = stale_entries(listed, generated)
    if stale:
        say(f"{EQUIVALENT.name} has stale entries (judge them again):")
        say("\n".join(f"  {s}" for s in stale))
        return 2
    chosen = [m for m in generated if not args.only or m.id.startswith(tuple(args.only))]
    if args.sample is not None and args.sample < len(chosen):
        chosen = random.Random(args.seed).sample(chosen, args.sample)
    chosen.sort(key=lambda m: (m.module, m.lines, m.id))
    if args.list:
        for m in chosen:
            print(f"{m.id:44} {m.where:16} {m.change}{'  (equivalent)' * (m.id in listed)}")
        say(f"{len(chosen)} mutants")
        return 0
    status, outcomes = report(chosen, run(chosen, jobs=args.jobs), listed, target=args.target)
    if args.json is not None:
        args.json.write_text(json.dumps(outcomes, indent=1, sort_keys=True))
    return status


if __name__ == "__main__":
    sys.exit(main())
