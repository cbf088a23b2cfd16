"""What stszone's own work costs per request, without a server: decode, rules, answer, metrics.

    python bench/inprocess.py               # the benchmark's corpus over a view of live size
    python bench/inprocess.py --per-item    # and each corpus item on its own

Builds the benchmark's cluster (``bench/cluster.py``: 5,000 nodes, 100,000 pods with their
claims and volumes) straight into a Store, freezes it out of the garbage collector as the live
view does once synced, then cycles through the benchmark corpus (``bench/corpus.py``) the way a
server sees it, every review after a different one, and reports microseconds per request for:

* ``decode``: ``review.parse`` (the lean msgspec decode of ``review.decode`` and the envelope
  checks);
* ``answer``: decode, ``admission.mutate``/``validate``, the response envelope and its JSON,
  and the metrics and log observers, i.e. all a handler does besides aiohttp's own work;
* ``json.loads``: the stdlib decode the floor does, for comparison.

The figure inside a busy server is higher: TLS and aiohttp run between requests and leave the
CPU caches cold (``bench/run.py --profile`` shows the split there).
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import cluster
from bench.corpus import Item, chained, corpus
from tests.builders import RECORDED_LISTS
from webhook.cluster.clusterfile import store_from_objects
from webhook.config import Settings
from webhook.model.store import Store
from webhook.rules import admission
from webhook.server import logs, metrics
from webhook.wire import review

API_FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "api"
GENERATED = {
    "Node": cluster.nodes,
    "Namespace": cluster.namespaces,
    "StatefulSet": cluster.statefulsets,
    "Pod": cluster.pods,
    "PersistentVolumeClaim": cluster.claims,
    "PersistentVolume": cluster.volumes,
}


def live_size_store() -> Store:
    """The benchmark's generated cluster plus the recorded one, as the live view holds them."""
    shape = cluster.Shape()
    objects: list[Any] = []
    for kind, generate in GENERATED.items():
        for stored in generate(shape):
            objects.append({**json.loads(stored.body), "kind": kind})
    objects += [json.loads((API_FIXTURES / f"{name}.json").read_text()) for name in RECORDED_LISTS]
    store = store_from_objects(objects)
    del objects
    gc.collect()
    gc.freeze()
    return store


def answerer(store: Store) -> Callable[[str, bytes], bytes]:
    """Everything the server's handler does for one body, minus aiohttp."""
    defaults = Settings().defaults()
    observe = metrics.Metrics().observe
    rules = {"/mutate": admission.mutate, "/validate": admission.validate}

    def answer(path: str, body: bytes) -> bytes:
        started = time.perf_counter()
        endpoint = path.strip("/")
        parsed = review.parse(body)
        outcome = rules[path](parsed, store=store, defaults=defaults)
        wire = review.dumps(review.response(parsed, outcome))
        elapsed = time.perf_counter() - started
        observe(endpoint, parsed, outcome, elapsed, 200)
        logs.log_decision(endpoint, parsed, outcome, elapsed, 200)
        return wire

    return answer


def per_request(work: Callable[[str, bytes], object], items: list[Item], cycles: int) -> float:
    """Microseconds per call of ``work``, cycling through ``items`` (best of three passes)."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for _ in range(cycles):
            for path, body in items:
                work(path, body)
        best = min(best, (time.perf_counter() - started) / (cycles * len(items)))
    return best * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--cycles", type=int, default=300, help="passes over the corpus")
    parser.add_argument("--per-item", action="store_true", help="also time each item alone")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    store = live_size_store()
    print(f"view of live size built in {time.perf_counter() - started:.1f}s")
    answer = answerer(store)
    items = chained(corpus(), lambda body: json.loads(answer("/mutate", body)))
    figures = {
        "decode": per_request(lambda _, body: review.parse(body), items, args.cycles),
        "answer": per_request(answer, items, args.cycles),
        "json.loads": per_request(lambda _, body: json.loads(body), items, args.cycles),
    }
    print(f"{len(items)} reviews, {args.cycles} cycles; microseconds per request:")
    for name, us in figures.items():
        print(f"  {name:10s} {us:6.1f}")
    if args.per_item:
        for i, (path, body) in enumerate(items):
            request = json.loads(body)["request"]
            us = per_request(answer, [(path, body)], max(1, args.cycles // 3))
            print(f"  {i:3d} {path:9s} {request['kind']['kind']:6s} {len(body):6d} B {us:7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
