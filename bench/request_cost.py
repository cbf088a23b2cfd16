"""What the request path's own work costs, in process, with and without the patch memo.

    python bench/request_cost.py                  # --repeat N passes over the corpus per run

Every recorded Pod and Scale review (:func:`bench.corpus.recorded`) is parsed, decided and
rendered to response bytes (``webhook.wire.review``: what ``/mutate`` and ``/validate`` do
between the body and the answer), against the offline view of the guard example's saved
cluster. The runs alternate, memo on and off, three of each, and the median of each is
printed in microseconds per request. With the memo off (``webhook.wire.patch``'s pairs are
never kept), each patch is ``jsonpatch.make_patch``'s full work: the figure that keeps the
memo is the difference (docs/performance.md).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import corpus  # noqa: E402
from webhook.cluster.clusterfile import load_store  # noqa: E402
from webhook.config import Defaults  # noqa: E402
from webhook.rules.admission import Endpoint  # noqa: E402
from webhook.wire import patch, review  # noqa: E402

CLUSTER = ROOT / "deploy" / "examples" / "guard" / "cluster.yaml"


def run(items: list[corpus.Item], *, repeat: int, memo: bool) -> float:
    """Microseconds per request over ``repeat`` passes of ``items``."""
    store = load_store(CLUSTER, zones=("zone-a", "zone-b", "zone-c"))
    defaults = Defaults()
    patch._PATCHES.clear()
    patch._MEMO_KEY_BYTES = 8192 if memo else -1  # -1: no pair is small enough to keep
    started = time.perf_counter()
    for _ in range(repeat):
        for path, body in items:
            parsed = review.parse(body)
            endpoint: Endpoint = "mutate" if path == "/mutate" else "validate"
            answered = review.answer(endpoint, parsed, store=store, defaults=defaults)
            review.dumps(review.response(parsed, answered))
    return (time.perf_counter() - started) / (repeat * len(items)) * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=300, help="passes over the corpus per run")
    args = parser.parse_args(argv)
    items = corpus.recorded()
    figures: dict[bool, list[float]] = {True: [], False: []}
    for memo in (True, False, False, True, True, False):
        figures[memo].append(run(items, repeat=args.repeat, memo=memo))
    on, off = statistics.median(figures[True]), statistics.median(figures[False])
    print(f"request path in process: {len(items)} recorded reviews x {args.repeat}, 3 runs each")
    print(f"us per request, median: memo on {on:.1f}, memo off {off:.1f} ({off / on:.2f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
