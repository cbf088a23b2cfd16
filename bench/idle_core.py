"""What a gap between requests costs on this machine, apart from any server.

    taskset -c 0 python bench/idle_core.py            # 5 ms gaps: one request at 200/s
    taskset -c 0 python bench/idle_core.py --gap-ms 1

Times two loops 300 times each: back to back; after sleeping ``--gap-ms`` (the core idles, as a
webhook's does between requests at a low rate); and after spinning on the clock for as long (the
process never lets go of the core). One loop is arithmetic only; the other reads 300 dicts
spread over 300,000, as a request reads records of a large view. When the reads slow down after
a spin too, something outside the process evicted the caches in the gap, and a request's cost
at a low rate is mostly the cache lines it touches (docs/performance.md, the eighth round).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable

RECORDS = 300_000
READS = 300


def arithmetic() -> int:
    total = 0
    for i in range(2_000):
        total += i * i
    return total


def reader() -> Callable[[], int]:
    """A loop of ``READS`` dict reads at random places among ``RECORDS`` small dicts."""
    records = [{"a": i, "b": -i} for i in range(RECORDS)]
    places = [random.randrange(RECORDS) for _ in range(READS)]

    def read() -> int:
        total = 0
        for i in places:
            total += records[i]["a"]
        return total

    return read


def timed(work: Callable[[], int], *, before: Callable[[], None] | None, times: int) -> list[float]:
    spent = []
    for _ in range(times):
        if before is not None:
            before()
        started = time.perf_counter()
        work()
        spent.append(time.perf_counter() - started)
    return spent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--gap-ms", type=float, default=5.0, help="the gap between two runs")
    parser.add_argument("--times", type=int, default=300, help="runs of each loop each way")
    args = parser.parse_args(argv)
    gap = args.gap_ms / 1000

    def sleep() -> None:
        time.sleep(gap)

    def spin() -> None:
        until = time.perf_counter() + gap
        while time.perf_counter() < until:
            pass

    print(f"microseconds per loop, p50 (p90) over {args.times} runs; gap {args.gap_ms:g} ms")
    for name, work in (("arithmetic", arithmetic), (f"{READS} dict reads", reader())):
        timed(work, before=None, times=args.times)  # warm up
        cells = []
        for before in (None, sleep, spin):
            spent = sorted(timed(work, before=before, times=args.times))
            p90 = spent[int(len(spent) * 0.9)]
            cells.append(f"{statistics.median(spent) * 1e6:7.1f} ({p90 * 1e6:7.1f})")
        back, slept, spun = cells
        print(f"  {name:16s} back to back {back}  after a sleep {slept}  after a spin {spun}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
