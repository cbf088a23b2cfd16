"""The benchmark: ``stszone serve`` against the bare aiohttp floor (``bench/floor.py``).

    python bench/run.py                      # 5 alternating rounds, live view of 305k objects
    python bench/run.py --rounds 3 --profile # and a py-spy profile of stszone under load

The targets: stszone's requests/s at least 0.9x the floor's on the same event loop, and its p99
at 200 requests/s at most 1.25x the floor's. The floor is what any aiohttp admission webhook
must do at the least, so the ratio is what stszone's own work costs.

What it does, in order:

1. Makes a CA and serving certificate; starts the fake kube-apiserver (``tests/fakeapi.py``)
   holding 5,000 nodes and 100,000 StatefulSet pods with their claims and volumes (305,050
   objects, ``bench/cluster.py``), and ``stszone serve --kubeconfig`` against it: the live
   list+watch view, so requests are answered from a Store of live size. It waits for /readyz,
   then for the first zone-risk pass (``stszone_zone_risk_last_pass_timestamp_seconds`` in
   /metrics): the rounds measure the steady state, not the one pass over every set a start pays.
2. Starts the floor: bare aiohttp, same TLS context and certificate, one process, on
   ``--floor-loop`` (default uvloop, the loop ``stszone serve`` runs, so the ratio is like for
   like). With ``--baseline-root DIR``, also ``stszone serve`` from that source tree (another
   checkout), as server ``baseline`` in the same rounds. Every server is pinned to
   ``--server-core``; wrk, the open-loop generator and the fake API server to ``--client-core``.
3. Checks every corpus item against every server once (HTTP 200, uid echoed).
4. Runs ``--rounds`` rounds; each round measures every server, the order rotating:
   closed loop (wrk, ``--connections`` keep-alive connections, ``--duration`` s) -> requests/s;
   open loop (``bench/openloop.py`` at ``--rate`` req/s over the same number of connections)
   -> p50/p99/max latency. Server and generator CPU shares are recorded: a generator near
   100% of its core would be the bottleneck, and the script says so. Then, once per round,
   the open loop at ``--rate`` on every server at the same time ("together"), their schedules
   interleaved (each server's requests fall between the others', ``bench/openloop.py``): a
   moment the machine stalls lands on all of them alike, not on whichever had the core then.
5. Prints per-round figures, medians across rounds, and every server's ratios to the floor,
   against the targets (the p99 target on the median of the rounds' p99s), each server
   measured alone and all together; and each server's p99 over every round's answers pooled,
   a steadier figure than any one round's. ``--json FILE`` writes all of it.

The open loop opens its connections before its schedule starts, as the API server keeps its
connections to a webhook open: its latencies are requests', not TLS handshakes'.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import harness
from bench.corpus import chained, corpus, write
from bench.openloop import percentile

#: stszone's requests/s over the aiohttp floor's, on the same event loop: at least this.
TARGET_RPS = 0.9
#: stszone's p99 at --rate over the aiohttp floor's: at most this.
TARGET_P99 = 1.25
#: py-spy installs beside the interpreter (the venv's bin/), which may not be on PATH.
PY_SPY = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or "py-spy"
#: The order servers are listed in; ratios are to the first.
SERVERS = ("floor", "baseline", "stszone")


def check_corpus(items: list[tuple[str, bytes]], port: int, ca: Path) -> Counter[str]:
    """POST every item once; fail loudly unless each answer is a 200 AdmissionReview."""
    outcomes: Counter[str] = Counter()
    for path, body in items:
        status, answer = harness.post(port, path, body, ca=ca)
        uid = json.loads(body)["request"]["uid"]
        if status != 200 or answer["response"]["uid"] != uid:
            raise RuntimeError(f"{path}: HTTP {status}: {str(answer)[:300]}")
        response = answer["response"]
        if not response["allowed"]:
            outcomes["denied"] += 1
        elif "patch" in response:
            outcomes["patched"] += 1
        else:
            outcomes["allowed"] += 1
    return outcomes


#: The gauge a server exports once every StatefulSet has figures (its first zone-risk pass).
LAST_PASS = "stszone_zone_risk_last_pass_timestamp_seconds "


def first_pass(port: int, *, ca: Path, timeout: float = 600.0) -> float:
    """Seconds until the server's first zone-risk pass is done: the rounds measure the steady
    state, not the start-up pass over every set (which a restart pays once)."""
    started = time.monotonic()
    while LAST_PASS not in harness.get(port, "/metrics", ca=ca)[1]:
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"no zone-risk pass after {timeout}s")
        time.sleep(0.5)
    return time.monotonic() - started


def profile(pid: int, port: int, index: Path, args: argparse.Namespace, out: Path) -> str:
    """py-spy on stszone while wrk drives it; the top frames.

    py-spy pauses the process for each sample (its default, blocking mode) so that stacks are
    whole; that slows stszone down, so this run's requests/s is not reported.
    """
    raw = out / "stszone.pyspy.txt"
    command = [PY_SPY, "record", "-r", "250", "-p", str(pid), "-d", str(int(args.duration))]
    spy = subprocess.Popen(
        harness.pinned([*command, "--format", "raw", "-o", str(raw)], args.client_core),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(1.0)
    harness.wrk(
        port,
        index,
        duration=args.duration - 2,
        connections=args.connections,
        core=args.client_core,
    )
    spy.wait(args.duration + 30)
    return summarise_profile(raw)


def summarise_profile(raw: Path, *, top: int = 25) -> str:
    """Self and inclusive shares of the event loop's samples (collapsed stacks, py-spy raw).

    Only stacks of the event-loop thread count: the idle workers of the default thread pool
    (used once at start-up) would otherwise show as samples too.
    """
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        # asyncio's loop runs callbacks from _run_once; uvloop's from C, under Runner.run.
        if not stack or ("_run_once" not in stack and "Runner.run" not in stack):
            continue
        count = int(count_text)
        frames = [_short(f) for f in stack.split(";")]
        total += count
        own[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
    lines = [f"{total} samples of the event-loop thread; self time:"]
    lines += [f"  {100 * n / total:5.1f}%  {frame}" for frame, n in own.most_common(top)]
    lines.append("inclusive time:")
    lines += [f"  {100 * n / total:5.1f}%  {frame}" for frame, n in inclusive.most_common(top + 15)]
    return "\n".join(lines)


def _short(frame: str) -> str:
    # "handle (webhook/server/app.py:93)" -> "handle (webhook/server/app.py)"; paths shortened.
    name, _, where = frame.partition(" (")
    where = where.rstrip(")").rsplit(":", 1)[0]
    for marker in ("site-packages/", "lib/python3.11/", "/work/main/"):
        if marker in where:
            where = where.split(marker, 1)[1]
    return f"{name} ({where})"


def measure(
    port: int, index: Path, *, ca: Path, args: argparse.Namespace, proc: harness.Proc
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One server, one measurement: wrk's closed loop with the server's CPU share, then the
    open loop at ``--rate``."""
    cpu0 = proc.cpu_seconds()
    closed = harness.wrk(
        port, index, duration=args.duration, connections=args.connections, core=args.client_core
    )
    closed["server_cpu"] = (proc.cpu_seconds() - cpu0) / (closed["duration_us"] / 1e6)
    (opened,) = harness.openloop(
        [port],
        index,
        ca=ca,
        rate=args.rate,
        duration=args.duration,
        connections=args.connections,
        core=args.client_core,
    )
    return closed, opened


def median(rounds: list[dict[str, Any]], key: str) -> float:
    values: list[float] = [r[key] for r in rounds]
    return statistics.median(values)


def ratios(summary: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Every other server's medians over the floor's."""
    return {
        f"{name}/floor": {
            k: summary[name][k] / summary["floor"][k] for k in ("rps", "p50_ms", "p99_ms", "max_ms")
        }
        for name in SERVERS
        if name in summary and name != "floor"
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per measurement")
    parser.add_argument(
        "--rate", type=float, default=200.0, help="open-loop requests/s (the p99 target is at 200)"
    )
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--server-core", type=int, default=0)
    parser.add_argument("--client-core", type=int, default=1)
    parser.add_argument(
        "--view",
        choices=("live", "zones"),
        default="live",
        help="live: fake API with 5,000 nodes / 100,000 pods (default); zones: --zones only",
    )
    parser.add_argument("--profile", action="store_true", help="py-spy stszone under load")
    parser.add_argument("--stszone-arg", action="append", default=[], help="extra serve flag")
    parser.add_argument(
        "--floor-loop",
        choices=("asyncio", "uvloop"),
        default="uvloop",
        help="the aiohttp floor's event loop (default uvloop, as stszone serve runs unless "
        "given --stszone-arg=--loop=asyncio)",
    )
    parser.add_argument(
        "--baseline-root",
        type=Path,
        help="also measure `stszone serve` run from this source tree (e.g. an older checkout), "
        "as server 'baseline' in the same rounds",
    )
    parser.add_argument("--json", type=Path, help="write every figure here")
    parser.add_argument("--workdir", type=Path, help="keep logs/profiles here (default: temp)")
    args = parser.parse_args(argv)

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="stszone-bench-"))
    items = corpus()
    report: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}, "rounds": []}
    with harness.Harness(workdir) as h:
        certs = h.certs()
        if args.view == "live":
            _, url = h.fakeapi(core=args.client_core)
            view = ["--kubeconfig", str(h.kubeconfig(url)), "--log-level", "warning"]
        else:
            view = ["--offline", "--zones", "zone-a,zone-b,zone-c", "--log-level", "warning"]
        ports = {"stszone": harness.free_port(), "floor": harness.free_port()}
        server = h.stszone(
            port=ports["stszone"], core=args.server_core, certs=certs, view=view + args.stszone_arg
        )
        floor = h.floor(
            port=ports["floor"], core=args.server_core, certs=certs, loop=args.floor_loop
        )
        procs = {"stszone": server, "floor": floor}
        stszone_loop = next(
            (a.split("=", 1)[1] for a in args.stszone_arg if a.startswith("--loop=")), "uvloop"
        )
        print(
            f"event loops: stszone {stszone_loop}, aiohttp floor {args.floor_loop}"
            + ("" if stszone_loop == args.floor_loop else " (NOT like for like)"),
            flush=True,
        )
        report["loops"] = {"stszone": stszone_loop, "floor": args.floor_loop}
        if args.baseline_root:
            ports["baseline"] = harness.free_port()
            procs["baseline"] = h.stszone(
                port=ports["baseline"],
                core=args.server_core,
                certs=certs,
                view=view + args.stszone_arg,
                name="baseline",
                root=args.baseline_root,
            )
        synced = harness.wait_ready(
            server, ports["stszone"], ca=certs.ca, path="/readyz", timeout=600
        )
        if "baseline" in procs:  # started with stszone: its wait does not count in stszone's
            harness.wait_ready(
                procs["baseline"], ports["baseline"], ca=certs.ca, path="/readyz", timeout=600
            )
        harness.wait_ready(floor, ports["floor"], ca=certs.ca, path="/healthz", timeout=30)
        print(f"stszone ready in {synced:.1f}s (view: {args.view}); workdir {workdir}", flush=True)
        if args.view == "live":
            _, metrics = harness.get(ports["stszone"], "/metrics", ca=certs.ca)
            objects = [m for m in metrics.splitlines() if m.startswith("stszone_cache_objects")]
            print("  " + "\n  ".join(objects) if objects else "  (no cache metrics)")
            report["cache"] = objects
        for name in ("stszone", "baseline"):
            if name in procs:
                took = first_pass(ports[name], ca=certs.ca)
                print(f"{name}: first zone-risk pass {took:.1f}s after ready", flush=True)
                report.setdefault("first_pass_s", {})[name] = took
        items = chained(
            items, lambda body: harness.post(ports["stszone"], "/mutate", body, ca=certs.ca)[1]
        )
        index = write(workdir / "corpus", items)
        outcomes = check_corpus(items, ports["stszone"], certs.ca)
        check_corpus(items, ports["floor"], certs.ca)
        print(f"corpus: {len(items)} reviews; stszone answers {dict(outcomes)}", flush=True)
        report["corpus"] = {"items": len(items), "stszone": dict(outcomes)}
        if args.baseline_root:
            assert check_corpus(items, ports["baseline"], certs.ca) == outcomes

        for port in ports.values():  # warm-up
            harness.wrk(
                port, index, duration=3, connections=args.connections, core=args.client_core
            )

        pooled: dict[str, list[float]] = {}  # every round's open-loop latencies, per server
        pooled_together: dict[str, list[float]] = {}  # the same, from the rounds' together runs
        for number in range(args.rounds):
            names = list(ports)
            order = names[number % len(names) :] + names[: number % len(names)]  # rotate
            row: dict[str, Any] = {"round": number + 1}
            for name in order:
                closed, opened = measure(
                    ports[name], index, ca=certs.ca, args=args, proc=procs[name]
                )
                pooled.setdefault(name, []).extend(opened.pop("latencies_ms"))
                row[name] = {"closed": closed, "open": opened}
                print(
                    f"round {number + 1} {name:8s} {closed['rps']:7.0f} req/s "
                    f"(errors {closed['errors']}, server cpu {100 * closed['server_cpu']:.0f}%, "
                    f"wrk cpu {100 * closed['generator_cpu']:.0f}%) | at {args.rate:g}/s: "
                    f"p50 {opened['p50_ms']:.2f} p99 {opened['p99_ms']:.2f} "
                    f"max {opened['max_ms']:.2f} ms (failed {opened['failed']}, "
                    f"late {opened['late']}, gen cpu {100 * opened['generator_cpu']:.0f}%)",
                    flush=True,
                )
            # Then every server at once, schedules interleaved: a moment the machine stalls
            # (another process, the hypervisor) lands on all of them alike, not on whichever
            # server had the core then. The order of the interleave rotates with the round's.
            both = harness.openloop(
                [ports[name] for name in order],
                index,
                ca=certs.ca,
                rate=args.rate,
                duration=args.duration,
                connections=args.connections,
                core=args.client_core,
            )
            row["together"] = dict(zip(order, both, strict=True))
            for name, opened in row["together"].items():
                pooled_together.setdefault(name, []).extend(opened.pop("latencies_ms"))
            print(
                f"round {number + 1} together at {args.rate:g}/s each: p99 "
                + ", ".join(f"{n} {row['together'][n]['p99_ms']:.2f}" for n in names)
                + f" ms (failed {sum(o['failed'] for o in both)}, "
                f"gen cpu {100 * both[0]['generator_cpu']:.0f}%)",
                flush=True,
            )
            report["rounds"].append(row)

        if args.profile:
            report["profile"] = profile(server.pid, ports["stszone"], index, args, workdir)
            print(report["profile"])
        report["stszone_rss_mib"] = server.rss_bytes() / 2**20

    if not report["rounds"]:
        return 0
    summary: dict[str, Any] = {}
    for name in ports:
        closed_rounds: list[dict[str, Any]] = [r[name]["closed"] for r in report["rounds"]]
        open_rounds: list[dict[str, Any]] = [r[name]["open"] for r in report["rounds"]]
        summary[name] = {
            "rps": median(closed_rounds, "rps"),
            "p50_ms": median(open_rounds, "p50_ms"),
            "p99_ms": median(open_rounds, "p99_ms"),
            "max_ms": max(o["max_ms"] for o in open_rounds),
            "wrk_cpu": max(c["generator_cpu"] for c in closed_rounds),
            "openloop_cpu": max(o["generator_cpu"] for o in open_rounds),
            "failed": sum(o["failed"] + 0 for o in open_rounds)
            + sum(c["errors"] for c in closed_rounds),
            "together_p99_ms": statistics.median(
                r["together"][name]["p99_ms"] for r in report["rounds"]
            ),
        }
    report["summary"] = summary
    report["ratios"] = ratios(summary)
    print(
        f"\nmedians over {args.rounds} rounds ({args.duration:g}s each, "
        f"{args.connections} connections; open loop at {args.rate:g}/s)"
    )
    print(f"{'':16s} {'req/s':>8s} {'p50 ms':>8s} {'p99 ms':>8s} {'max ms':>8s} {'failed':>7s}")
    for name in (n for n in SERVERS if n in summary):
        x = summary[name]
        print(
            f"{name:16s} {x['rps']:8.0f} {x['p50_ms']:8.2f} {x['p99_ms']:8.2f} "
            f"{x['max_ms']:8.2f} {x['failed']:7d}"
        )
    for label, r in report["ratios"].items():
        print(
            f"{label:16s} {r['rps']:8.2f} {r['p50_ms']:8.2f} {r['p99_ms']:8.2f} {r['max_ms']:8.2f}"
        )
    # The machine's speed drifts between rounds (the floor itself moves by a fifth or more):
    # each round's own ratio shows how far the median can be trusted.
    each = [r["stszone"]["closed"]["rps"] / r["floor"]["closed"]["rps"] for r in report["rounds"]]
    report["round_ratios"] = {"stszone/floor": each}
    print(
        f"stszone/floor req/s round by round: {' '.join(f'{x:.2f}' for x in each)} "
        f"(range {min(each):.2f}-{max(each):.2f})"
    )
    # A round's p99 rests on its 40 slowest answers in 4,000; every round's answers together
    # give a steadier figure than the median of the rounds' p99s (the target's definition).
    p99 = report["pooled_p99_ms"] = {n: percentile(pooled[n], 99) for n in SERVERS if n in pooled}
    print(
        "p99 over every round's answers pooled (ms): "
        + ", ".join(f"{n} {v:.2f}" for n, v in p99.items())
        + f"; stszone/floor {p99['stszone'] / p99['floor']:.2f}"
    )
    together = report["pooled_together_p99_ms"] = {
        n: percentile(pooled_together[n], 99) for n in SERVERS if n in pooled_together
    }
    print(
        f"together, every server at {args.rate:g}/s at once: median of the rounds' p99s (ms) "
        + ", ".join(f"{n} {summary[n]['together_p99_ms']:.2f}" for n in SERVERS if n in summary)
        + "; pooled "
        + ", ".join(f"{n} {v:.2f}" for n, v in together.items())
    )
    s = summary["stszone"]
    rps = s["rps"] / summary["floor"]["rps"]
    like = report["loops"]["stszone"] == report["loops"]["floor"]
    print(
        f"targets: requests/s >= {TARGET_RPS:g}x the aiohttp floor"
        f"{'' if like else ' (loops differ: not like for like)'}: "
        f"{'met' if rps >= TARGET_RPS else 'MISSED'} ({rps:.2f}x)"
    )
    for label, key in (("each alone", "p99_ms"), ("together", "together_p99_ms")):
        mine, floor_p99 = s[key], summary["floor"][key]
        print(
            f"targets: p99 at {args.rate:g}/s <= {TARGET_P99:g}x the aiohttp floor's, {label}: "
            f"{'met' if mine <= TARGET_P99 * floor_p99 else 'MISSED'} "
            f"({mine:.2f} vs {floor_p99:.2f} ms: {mine / floor_p99:.2f}x)"
        )
    busiest = max(x["wrk_cpu"] for x in summary.values())
    print(
        f"generators: wrk at most {100 * busiest:.0f}% of its core, open loop at most "
        f"{100 * max(x['openloop_cpu'] for x in summary.values()):.0f}%"
        + ("  (WARNING: wrk near its core's limit)" if busiest > 0.9 else "")
    )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
