"""What a Pod review costs when it comes after an idle gap, step by step, and why.

    taskset -c 0 python bench/cold_request.py

In process, on the benchmark's live-size view (bench/inprocess.py), the corpus' Pod reviews for
``/mutate`` are answered as the server's handler answers them, each step timed: the decode,
the engine, the answer's JSON, the metrics observer and the decision log. Each review is timed
three ways: right after answering it once (warm); after a sleep of ``--gap-ms`` (cold, as one
request at 200/s finds the core); and after the same sleep followed by another pod's review of
another StatefulSet (the code warm, this pod's records and its set's still cold). Cold minus
code-warm is what this pod's own data costs; code-warm minus warm is small when what a review
pays after a gap is mostly the code and shared state it runs through, not the records it reads.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

STEPS = ("decode", "engine", "answer", "metrics", "log", "total")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--gap-ms", type=float, default=5.0, help="the idle gap before a review")
    parser.add_argument("--passes", type=int, default=20, help="passes over the Pod reviews")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # bench, tests
    from bench import inprocess
    from bench.corpus import corpus
    from webhook.config import Settings
    from webhook.rules import admission
    from webhook.server import logs, metrics
    from webhook.wire import review

    print(f"webhook from {Path(admission.__file__).parent.parent}")
    store = inprocess.live_size_store()
    defaults = Settings().defaults()
    observe = metrics.Metrics().observe
    pods = []
    for path, body in corpus():
        request = json.loads(body)["request"]
        if path == "/mutate" and request["kind"]["kind"] == "Pod":
            refs = request["object"]["metadata"].get("ownerReferences") or [{}]
            pods.append((body, refs[0].get("name")))
    clock = time.perf_counter

    def answer(body: bytes, into: dict[str, list[float]] | None) -> None:
        t0 = clock()
        parsed = review.parse(body)
        t1 = clock()
        outcome = admission.mutate(parsed, store=store, defaults=defaults)
        t2 = clock()
        review.dumps(review.response(parsed, outcome))
        t3 = clock()
        observe("mutate", parsed, outcome, t3 - t0, 200)
        t4 = clock()
        logs.log_decision("mutate", parsed, outcome, t3 - t0, 200)
        t5 = clock()
        if into is not None:
            spent = (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t5 - t0)
            for step, seconds in zip(STEPS, spent, strict=True):
                into[step].append(seconds)

    gap = args.gap_ms / 1000
    ways: dict[str, dict[str, list[float]]] = {
        way: {step: [] for step in STEPS} for way in ("warm", "cold", "code warm")
    }
    for body, _ in pods * 20:
        answer(body, None)
    # For each set, the reviews of the other sets' pods (they warm the code, not its records).
    others = {owner: [b for b, o in pods if o != owner] for _, owner in pods}
    for _ in range(args.passes):
        for body, owner in pods:
            answer(body, None)
            answer(body, ways["warm"])
            time.sleep(gap)
            answer(body, ways["cold"])
            time.sleep(gap)
            answer(random.choice(others[owner]), None)
            answer(body, ways["code warm"])

    def cell(values: list[float]) -> str:
        ordered = sorted(values)
        p90 = ordered[int(len(ordered) * 0.9)]
        return f"{statistics.median(ordered) * 1e6:6.1f} ({p90 * 1e6:6.1f})"

    runs = len(ways["warm"]["total"])
    sets = len({owner for _, owner in pods})
    print(
        f"{len(pods)} Pod reviews of {sets} StatefulSets for /mutate, {runs} runs each way; "
        f"gap {args.gap_ms:g} ms; microseconds, p50 (p90)"
    )
    print(f"  {'step':8s} {'warm':>15s} {'cold':>15s} {'code warm':>15s}")
    for step in STEPS:
        print(f"  {step:8s} " + "  ".join(cell(ways[way][step]) for way in ways))
    return 0


if __name__ == "__main__":
    sys.exit(main())
