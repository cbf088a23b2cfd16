"""The live view at scale: time to ready, CPU, peak RSS, and how long admissions wait meanwhile.

    python bench/cache_scale.py                     # this tree: 2 runs
    python bench/cache_scale.py --root ../base      # this tree against another checkout, 2 pairs

The fake API server of the tests holds the generated cluster (``bench/cluster.py``: 5,000
nodes, 100,000 pods, claims and volumes, some 850 MB of JSON to list); ``stszone serve
--kubeconfig`` lists and watches it, and this driver polls ``/readyz`` from the moment it
spawns the webhook. Once ready, it reads the webhook's CPU time and peak resident set
(``VmHWM``), and its own loop-lag probe (``stszone_event_loop_lag_*`` on ``/metrics``: a task
that sleeps 5 ms and notes how late it wakes; of the worst lag, how much the loop's own work
can explain, the rest being the process waiting for a core).

While the lists load, admission requests are served too: from the moment the webhook accepts
connections until it is ready, an open-loop client (``bench/openloop.py``, ``--stall-rate``
requests/s over eight keep-alive connections) sends ``/mutate`` reviews of generated pods,
each latency counted from its scheduled time: the worst one bounds the longest stop of the
event loop while pages were folded.

With ``--root DIR`` the runs alternate between this tree and ``stszone serve`` run from DIR
(another checkout, same interpreter), ``--rounds`` pairs in ABBA order, against the same fake
API server; the objective is this tree's median ready time within 1.15x and its median peak
RSS within 1.10x of DIR's. The fake API server and this driver run on ``--client-core``, the
webhook on ``--server-core``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import ssl
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, Final

from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import harness, openloop
from bench.cluster import Shape, namespace_name, set_name
from bench.corpus import pod_review

#: This tree's median over the other checkout's: ready time, peak RSS; at most these.
READY_LIMIT: Final = 1.15
RSS_LIMIT: Final = 1.10
#: A loop lag over this counts as a stall (the probe's histogram has a bucket here).
STALL_S: Final = 0.02


class ListingLoad:
    """``/mutate`` at a fixed rate while the lists load, in a thread of its own."""

    def __init__(self, port: int, ca: Path, args: argparse.Namespace) -> None:
        self.ready = threading.Event()
        self.result = openloop.Result()
        shape = Shape(replicas=args.replicas)
        reviews = [
            pod_review(
                namespace_name(i % shape.namespaces), set_name(i * 7 % 40), i % shape.replicas
            )
            for i in range(50)
        ]
        load = openloop.together(
            host="127.0.0.1",
            ports=[port],
            ctx=ssl.create_default_context(cafile=str(ca)),
            requests=[openloop.request_bytes("/mutate", json.dumps(r).encode()) for r in reviews],
            rate=args.stall_rate,
            duration=args.timeout,
            connections=8,
            results=[self.result],
            until=self.ready.is_set,
        )
        self._thread = threading.Thread(target=self._run, args=(load,), daemon=True)
        self._thread.start()

    @staticmethod
    def _run(load: Coroutine[Any, Any, list[openloop.Result]]) -> None:
        with asyncio.Runner(loop_factory=openloop.new_loop) as runner:
            runner.run(load)

    def stop(self) -> dict[str, Any]:
        self.ready.set()
        self._thread.join(30)
        latencies = self.result.latencies
        return {
            "requests": len(latencies),
            "failed": self.result.failed,
            "p99_ms": round(openloop.percentile(latencies, 99) * 1e3, 2),
            "max_ms": round(max(latencies, default=float("nan")) * 1e3, 2),
        }


def loop_lag(port: int, ca: Path) -> dict[str, Any]:
    """The webhook's loop-lag probe so far: the worst wake, the most of it the loop's own work
    explains, and the wakes later than ``STALL_S``; empty for a webhook without the probe."""
    status, text = harness.get(port, "/metrics", ca=ca)
    samples = {
        (sample.name, sample.labels.get("le")): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if family.name.startswith("stszone_event_loop_")
    }
    if status != 200 or not samples:
        return {}
    wakes = samples[("stszone_event_loop_lag_seconds_count", None)]
    on_time = samples[("stszone_event_loop_lag_seconds_bucket", repr(STALL_S))]
    busy = samples.get(("stszone_event_loop_busy_lag_max_seconds", None))
    return {
        "max_ms": round(samples[("stszone_event_loop_lag_max_seconds", None)] * 1e3, 2),
        "busy_max_ms": round(busy * 1e3, 2) if busy is not None else None,
        "wakes_over_stall": int(wakes - on_time),
    }


def one_run(
    h: harness.Harness, args: argparse.Namespace, *, name: str, root: Path, kubeconfig: Path
) -> dict[str, Any]:
    """Start ``stszone serve`` from ``root``, measure it until ready, stop it."""
    port = harness.free_port()
    view = ["--kubeconfig", str(kubeconfig)]
    certs = h.certs()
    started = time.monotonic()
    proc = h.stszone(port=port, core=args.server_core, certs=certs, view=view, name=name, root=root)
    load: ListingLoad | None = None
    ready = None
    try:
        while time.monotonic() - started < args.timeout and proc.alive():
            try:
                status = harness.get(port, "/readyz", ca=certs.ca, timeout=2)[0]
            except OSError:
                status = 0
            if status and load is None:
                load = ListingLoad(port, certs.ca, args)
            if status == 200:
                ready = time.monotonic() - started
                break
            time.sleep(0.1)
        waits = load.stop() if load is not None else {}
        if ready is None:
            raise RuntimeError(f"{name} not ready: {proc.log.read_text()[-2000:]}")
        return {
            "name": name,
            "ready_s": round(ready, 2),
            "cpu_s": round(proc.cpu_seconds(), 2),
            "peak_rss_mb": round(proc.peak_rss_bytes() / 2**20, 1),
            "mutate_while_listing": waits,
            "loop_lag": loop_lag(port, certs.ca),
        }
    finally:
        proc.stop()


def table(runs: list[dict[str, Any]]) -> list[str]:
    lines = [
        f"{'run':12s} {'ready s':>8s} {'CPU s':>7s} {'peak RSS MB':>12s} "
        f"{'worst wait ms':>14s} {'worst lag ms (own work)':>24s} {'failed':>7s}"
    ]
    for run in runs:
        lag, wait = run["loop_lag"], run["mutate_while_listing"]
        own = f"{lag.get('max_ms')} ({lag.get('busy_max_ms')})"
        lines.append(
            f"{run['name']:12s} {run['ready_s']:8.2f} {run['cpu_s']:7.2f} "
            f"{run['peak_rss_mb']:12.0f} {wait.get('max_ms', float('nan')):14.1f} "
            f"{own:>24s} {wait.get('failed', 0):7d}"
        )
    return lines


def summary(runs: list[dict[str, Any]], *, heading: str) -> tuple[str, bool]:
    """The block to paste, and whether the objective was met (no baseline: nothing to meet)."""
    lines = [heading, *table(runs)]

    def median(label: str, key: str) -> float:
        values: list[float] = [r[key] for r in runs if r["name"].startswith(label)]
        return statistics.median(values)

    met = True
    if any(r["name"].startswith("baseline") for r in runs):
        for key, what, limit in (
            ("ready_s", "ready", READY_LIMIT),
            ("peak_rss_mb", "peak RSS", RSS_LIMIT),
        ):
            ratio = median("stszone", key) / median("baseline", key)
            ok = ratio <= limit
            met &= ok
            lines.append(
                f"objective: {what} {ratio:.2f}x the baseline's (medians "
                f"{median('stszone', key):.1f} and {median('baseline', key):.1f}; <= {limit:g}x) "
                f"{'met' if ok else 'MISSED'}"
            )
    failed = sum(r["mutate_while_listing"].get("failed", 0) for r in runs)
    lines.append(f"/mutate while listing: {failed} failed")
    return "\n".join(lines), met


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--root",
        "--baseline-root",
        type=Path,
        help="compare with `stszone serve` run from this source tree (another checkout)",
    )
    parser.add_argument("--rounds", type=int, default=2, help="runs (pairs with --root)")
    parser.add_argument("--replicas", type=int, default=50, help="pods per set (50: 100,000)")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds to ready")
    parser.add_argument("--stall-rate", type=float, default=200.0, help="/mutate/s while listing")
    parser.add_argument("--server-core", type=int, default=0, help="core stszone runs on")
    parser.add_argument("--client-core", type=int, default=1, help="core of the rest")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--workdir", type=Path, help="keep logs here (default: a temp dir)")
    args = parser.parse_args(argv)
    os.sched_setaffinity(0, {args.client_core})
    roots = {"stszone": harness.ROOT}
    if args.root:
        roots["baseline"] = args.root.resolve()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="stszone-cache-scale-"))
    runs = []
    with harness.Harness(workdir) as h:
        _, url = h.fakeapi(core=args.client_core, extra=["--replicas", str(args.replicas)])
        kubeconfig = h.kubeconfig(url)
        for number in range(args.rounds):
            names = list(roots) if number % 2 == 0 else list(roots)[::-1]  # ABBA
            for name in names:
                run = one_run(
                    h, args, name=f"{name}-{number + 1}", root=roots[name], kubeconfig=kubeconfig
                )
                print(json.dumps(run), flush=True)
                runs.append(run)
    pods = Shape(replicas=args.replicas).pods
    heading = (
        f"live view: 5,000 nodes and {pods:,} pods, claims and volumes; {args.rounds} "
        f"{'pairs' if args.root else 'runs'}, /mutate at {args.stall_rate:g}/s while listing"
    )
    text, met = summary(runs, heading=heading)
    print("\n" + text)
    if args.json:
        args.json.write_text(json.dumps(runs, indent=2))
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
