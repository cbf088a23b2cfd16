"""Run the fake kube-apiserver (``tests/fakeapi.py``) holding the generated live-size cluster.

Prints ``URL <url>`` on stdout once serving, then serves until SIGTERM/SIGINT. With
``--cut-every SECONDS`` it drops every open watch of every resource that often (the "API server
drops every watch during load" fault), and with ``--churn PER_SECOND`` it updates that many pods
per second so watches carry events. Loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.cluster import GENERATORS, Shape
from tests.fakeapi import FakeApi
from tests.fakestate import RESOURCES


async def main(args: argparse.Namespace) -> None:
    shape = Shape(nodes=args.nodes, replicas=args.replicas)
    started = time.monotonic()
    async with FakeApi(fixtures=True) as api:
        for resource, generate in GENERATORS.items():
            api.objects.load_raw(resource, generate(shape))
        tables = api.objects.tables
        counts = {
            r: [len(tables[r]), sum(len(s.body) for s in tables[r].values())] for r in RESOURCES
        }
        print(f"URL {api.url}", flush=True)
        print(
            f"loaded (objects, bytes) {json.dumps(counts)} in {time.monotonic() - started:.1f}s",
            file=sys.stderr,
            flush=True,
        )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        cuts = 0
        next_cut = loop.time() + args.cut_every if args.cut_every else None
        churn_items = list(api.objects.tables["pods"].values())[:1000]
        churned = 0
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.1 if args.churn else 1.0)
            if args.churn:
                for _ in range(max(1, int(args.churn / 10))):
                    item = churn_items[churned % len(churn_items)]
                    obj = json.loads(item.body)
                    obj["metadata"].setdefault("labels", {})["churn"] = str(churned)
                    api.put("pods", obj)
                    churned += 1
            if next_cut is not None and loop.time() >= next_cut:
                for resource in RESOURCES:
                    api.cut(resource)
                cuts += 1
                next_cut += args.cut_every
        print(f"CUTS {cuts} CHURNED {churned}", flush=True)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=5_000)
    parser.add_argument("--replicas", type=int, default=50, help="pods per set")
    parser.add_argument("--cut-every", type=float, default=0.0, metavar="SECONDS")
    parser.add_argument("--churn", type=float, default=0.0, metavar="PER_SECOND")
    return parser.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse()))
