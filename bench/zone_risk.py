"""Cost of the zone-risk refresh: how long one full sweep holds the event loop.

    .venv/bin/python bench/zone_risk.py --sets 1 --replicas 10000
    .venv/bin/python bench/zone_risk.py --sets 200 --replicas 20

Builds an offline view of one opted-in namespace with ``--sets`` StatefulSets of
``--replicas`` scheduled pods each (3 zones, pods spread round robin, so every pod is placed as
expected) and times one unbounded ``RiskScan.sweep`` (the budget set out of the way), i.e. the
CPU the background job spends to refresh every set once. A set's audit visits at most
``WALK_LIMIT`` (1,000) of its ordinals, so a larger ``--replicas`` costs no more than 1,000. The
job awaits at each of the sweep's pauses (every few ordinals, and after each set); the longest
time between two pauses is the longest the job holds the event loop, and is printed too. A
second sweep follows on the same view: nothing has changed, so it audits no set again.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests import builders as b
from webhook.cluster.clusterfile import store_from_objects
from webhook.rules.risk import RiskScan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", type=int, default=1)
    parser.add_argument("--replicas", type=int, default=1000)
    args = parser.parse_args()
    zones = ("a", "b", "c")
    objects = [b.node(f"n{zone}", zone) for zone in zones]
    labels = {"stszone.io/enabled": "true"}
    objects.append({"kind": "Namespace", "metadata": {"name": "ns", "labels": labels}})
    for s in range(args.sets):
        annotations = {"stszone.io/zones": ",".join(zones)}
        objects.append(b.statefulset(f"db{s}", replicas=args.replicas, annotations=annotations))
        for i in range(args.replicas):
            objects.append(b.sts_pod(f"db{s}", i, node=f"n{zones[i % 3]}"))
    scan = RiskScan(store_from_objects(objects), budget=sys.maxsize)
    for what in ("one sweep", "a second sweep, the view unchanged"):
        visited = scan.visited
        elapsed, pauses, longest = timed(scan)
        visited = scan.visited - visited
        per_ordinal = f"{elapsed / visited * 1e6:.1f} us per ordinal, " if visited else ""
        print(
            f"{args.sets} set(s) x {args.replicas} replicas: {what} {elapsed * 1000:.1f} ms, "
            f"{per_ordinal}{visited} ordinals visited; "
            f"{pauses} pauses, longest hold between two {longest * 1000:.2f} ms"
        )


def timed(scan: RiskScan) -> tuple[float, int, float]:
    """(seconds, pauses, longest seconds between two pauses) of one sweep."""
    started = last = time.perf_counter()
    longest = 0.0
    pauses = 0
    for _ in scan.sweep():
        now = time.perf_counter()
        longest, last, pauses = max(longest, now - last), now, pauses + 1
    elapsed = time.perf_counter() - started
    return elapsed, pauses, max(longest, time.perf_counter() - last)


if __name__ == "__main__":
    main()
