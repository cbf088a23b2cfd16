"""The request path: ``stszone serve`` with its live view against the bare aiohttp floor.

    python bench/run.py                                # 5 rounds; the summary block at the end
    python bench/run.py --baseline-root ../base        # and another checkout, in the same rounds

The objective (``bench/objective.py``): stszone's p99 within 1.5x the floor's at 200 and at
1,000 requests/s, open loop, each server alone and all together; its requests/s at least 0.7x
the floor's. The floor (``bench/floor.py``) is what any aiohttp admission webhook does at the
least, so the ratios are what stszone's own work costs.

What it does, in order:

1. Makes a CA and serving certificate; starts the fake kube-apiserver holding 5,000 nodes and
   100,000 StatefulSet pods with their claims and volumes (``bench/cluster.py``), and
   ``stszone serve --kubeconfig`` against it: the live list+watch view, so requests are
   answered from a view of live size. It waits for /readyz, then for the first zone-risk pass:
   the rounds measure the steady state, not the one pass over every set a start pays.
2. Starts the floor over the same TLS context and certificate, on the event loop stszone runs
   (uvloop unless ``--stszone-arg=--loop=asyncio``); with ``--baseline-root DIR``, also
   ``stszone serve`` from that source tree, as server ``baseline``. Every server is pinned to
   ``--server-core``; wrk, the open-loop generator and the fake API server to ``--client-core``.
3. Checks every review of the corpus (``bench/corpus.py``) against every server once.
4. Runs ``--rounds`` rounds. In each, every server in turn (the order rotating between rounds):
   wrk's closed loop (``--connections`` keep-alive connections, ``--duration`` s) for
   requests/s, then the open loop (``bench/openloop.py``) at each of ``--rates`` for latency.
   Then the open loop at each rate on every server at once, their schedules interleaved
   ("together"): a moment the machine stalls lands on all of them alike.
5. Prints the summary block (``bench/objective.py``); ``--json FILE`` writes the figures.

The open loop opens its connections before its schedule starts, as the API server keeps its
connections to a webhook open: its latencies are requests', not TLS handshakes'.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import harness
from bench.corpus import chained, corpus, write
from bench.objective import Figures, as_json, met, summary

#: The order servers are listed in.
SERVERS = ("floor", "stszone", "baseline")


def outcomes(items: list[tuple[str, bytes]], port: int, ca: Path) -> Counter[str]:
    """POST every item once; fail loudly unless each answer is a 200 AdmissionReview."""
    counts: Counter[str] = Counter()
    for path, body in items:
        status, answer = harness.post(port, path, body, ca=ca)
        uid = json.loads(body)["request"]["uid"]
        if status != 200 or answer["response"]["uid"] != uid:
            raise RuntimeError(f"{path}: HTTP {status}: {str(answer)[:300]}")
        response = answer["response"]
        if not response["allowed"]:
            counts["denied"] += 1
        elif "patch" in response:
            counts["patched"] += 1
        else:
            counts["allowed"] += 1
    return counts


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per measurement")
    parser.add_argument("--rates", default="200,1000", help="open-loop requests/s, comma-separated")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--server-core", type=int, default=0)
    parser.add_argument("--client-core", type=int, default=1)
    parser.add_argument("--stszone-arg", action="append", default=[], help="extra serve flag")
    parser.add_argument(
        "--baseline-root",
        type=Path,
        help="also measure `stszone serve` run from this source tree (another checkout), "
        "as server 'baseline' in the same rounds",
    )
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--workdir", type=Path, help="keep logs here (default: a temp dir)")
    args = parser.parse_args(argv)
    args.rates = [float(r) for r in args.rates.split(",")]
    return args


def start(h: harness.Harness, args: argparse.Namespace) -> tuple[dict[str, int], Path, Path]:
    """Every server started and in its steady state; their ports, the CA and the corpus."""
    certs = h.certs()
    _, url = h.fakeapi(core=args.client_core)
    view = ["--kubeconfig", str(h.kubeconfig(url)), "--log-level", "warning", *args.stszone_arg]
    loop = next((a.split("=", 1)[1] for a in args.stszone_arg if a.startswith("--loop=")), "uvloop")
    roots = {"stszone": harness.ROOT}
    if args.baseline_root:
        roots["baseline"] = args.baseline_root.resolve()
    ports = {name: harness.free_port() for name in ("floor", *roots)}
    started = time.monotonic()  # the servers list the view at once, from one fake API server
    procs = {
        name: h.stszone(
            port=ports[name], core=args.server_core, certs=certs, view=view, name=name, root=root
        )
        for name, root in roots.items()
    }
    floor = h.floor(port=ports["floor"], core=args.server_core, certs=certs, loop=loop)
    for name, proc in procs.items():
        harness.wait_ready(proc, ports[name], ca=certs.ca, path="/readyz", timeout=600)
        harness.first_pass(ports[name], ca=certs.ca)
        took = time.monotonic() - started
        print(f"{name}: ready, first zone-risk pass done, {took:.1f} s after start", flush=True)
    harness.wait_ready(floor, ports["floor"], ca=certs.ca, path="/healthz", timeout=30)
    print(f"event loop: {loop} (stszone and the floor); workdir {h.workdir}", flush=True)
    items = chained(
        corpus(), lambda body: harness.post(ports["stszone"], "/mutate", body, ca=certs.ca)[1]
    )
    index = write(h.workdir / "corpus", items)
    outcomes(items, ports["floor"], certs.ca)
    answers = {name: dict(outcomes(items, ports[name], certs.ca)) for name in roots}
    print(f"corpus: {len(items)} reviews; answers {answers}", flush=True)
    return ports, certs.ca, index


def measure_round(
    number: int, ports: dict[str, int], *, ca: Path, index: Path, args: argparse.Namespace,
    figures: Figures, procs: dict[str, harness.Proc],
) -> None:  # fmt: skip
    """One round: each server alone (wrk, then the open loop at every rate), then together.

    Each measurement also notes every server's CPU time per request (from /proc), and the
    together runs how busy the server core was: at rates the core can barely carry, a server
    that needs more than its scheduler's share of the core queues while the others run.
    """
    names = list(ports)
    order = names[number % len(names) :] + names[: number % len(names)]
    common = {"ca": ca, "duration": args.duration, "connections": args.connections}

    def spent(name: str, measurement: str, since: float, requests: float) -> None:
        used = procs[name].cpu_seconds() - since
        figures.cpu_per_request[(name, measurement)].append(1e6 * used / max(requests, 1))

    line = []
    for name in order:
        before = procs[name].cpu_seconds()
        closed = harness.wrk(
            ports[name], index, duration=args.duration, connections=args.connections,
            core=args.client_core,
        )  # fmt: skip
        spent(name, "wrk", before, closed["requests"])
        figures.rps[name].append(closed["rps"])
        figures.failed[name] += closed["errors"]
        figures.busy("wrk", closed["generator_cpu"])
        part = f"{name} {closed['rps']:.0f} req/s"
        for rate in args.rates:
            before = procs[name].cpu_seconds()
            (opened,) = harness.openloop(
                [ports[name]], index, rate=rate, core=args.client_core, **common
            )
            spent(name, f"{rate:,.0f}/s alone", before, rate * args.duration)
            figures.latencies[(name, "alone", rate)] += opened["latencies_ms"]
            figures.failed[name] += opened["failed"]
            figures.busy("open loop alone", opened["generator_cpu"])
            part += f", p99 {opened['p99_ms']:.2f} ms at {rate:g}/s"
        line.append(part)
    for rate in args.rates:
        before_all = {n: procs[n].cpu_seconds() for n in order}
        busy, counted = harness.core_times(args.server_core)
        results = harness.openloop(
            [ports[n] for n in order], index, rate=rate, core=args.client_core, **common
        )
        now_busy, now_counted = harness.core_times(args.server_core)
        figures.core_busy[rate].append((now_busy - busy) / max(now_counted - counted, 1e-9))
        for n in order:
            spent(n, f"{rate:,.0f}/s together", before_all[n], rate * args.duration)
        for name, opened in zip(order, results, strict=True):
            figures.latencies[(name, "together", rate)] += opened["latencies_ms"]
            figures.failed[name] += opened["failed"]
        figures.busy("open loop together", results[0]["generator_cpu"])
        together = ", ".join(f"{n} {o['p99_ms']:.2f}" for n, o in zip(order, results, strict=True))
        line.append(f"together at {rate:g}/s p99 ms: {together}")
    print(f"round {number + 1}: " + "; ".join(line), flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="stszone-bench-"))
    with harness.Harness(workdir) as h:
        ports, ca, index = start(h, args)
        for port in ports.values():  # warm-up
            harness.wrk(
                port, index, duration=3, connections=args.connections, core=args.client_core
            )
        figures = Figures(servers=[n for n in SERVERS if n in ports], rates=args.rates)
        procs = {proc.name: proc for proc in h.procs if proc.name in ports}
        for number in range(args.rounds):
            measure_round(
                number, ports, ca=ca, index=index, args=args, figures=figures, procs=procs
            )
    heading = (
        f"request path: {args.rounds} rounds of {args.duration:g} s, {args.connections} "
        f"connections; live view of 5,000 nodes and 100,000 pods, claims and volumes"
    )
    print("\n" + summary(figures, heading=heading))
    if args.json:
        report: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}}
        args.json.write_text(json.dumps({**report, **as_json(figures)}, indent=2))
    return 0 if met(figures) else 1


if __name__ == "__main__":
    sys.exit(main())
