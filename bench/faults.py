"""Load, soak and fault runs against ``stszone serve`` on loopback; each stops by itself.

    python bench/faults.py soak            10 min at a steady rate; RSS and open fds sampled
    python bench/faults.py watch-drops     the fake API drops every watch every 2 s under load
    python bench/faults.py cert-rotation   the serving certificate re-issued every 5 s under load
    python bench/faults.py sigterm         SIGTERM under load: drain, then exit 0
    python bench/faults.py flood           20 connections x 2,000 pipelined reviews; fresh reviews
    python bench/faults.py no-reader       a client writes reviews for 60 s, never reads an answer
    python bench/faults.py all             the six, one after the other

Every run starts the fake kube-apiserver with the live-size cluster (``bench/cluster.py``: 5,000
nodes, 100,000 pods, their claims and volumes) updating ``--churn`` pods per second, and
``stszone serve --kubeconfig`` against it (the live list+watch view), pinned to
``--server-core``, and waits for its first zone-risk pass; the open-loop generator
(``bench/openloop.py``, in this process) and the fake API run on ``--client-core``. Each run
prints requests sent, failed, the latency tail and its own checks, ending ``PASS`` or ``FAIL``;
``--json FILE`` keeps the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import harness, openloop
from bench.faultrun import Run, report, tail
from bench.hostile import flood, no_reader


def soak(h: harness.Harness, args: argparse.Namespace) -> dict[str, Any]:
    """Steady rate for ``--minutes``; RSS and fds every 10 s; no growth after warm-up."""
    run = Run(h, args, fakeapi=[])
    samples: list[tuple[float, int, int]] = []
    seconds = args.minutes * 60

    async def sample(result: openloop.Result) -> dict[str, Any]:
        started = time.monotonic()
        while time.monotonic() - started < seconds:
            samples.append(
                (time.monotonic() - started, run.server.rss_bytes(), run.server.open_fds())
            )
            await asyncio.sleep(10)
        return {}

    result, _ = asyncio.run(run.load(seconds, during=sample))
    warm = [s for s in samples if s[0] >= args.warmup]
    base_rss, base_fds = warm[0][1], warm[0][2]
    peak_rss, peak_fds = max(s[1] for s in warm), max(s[2] for s in warm)
    end_rss, end_fds = warm[-1][1], warm[-1][2]
    mib = 2**20
    figures = {
        **tail(result),
        "rate": args.rate,
        "minutes": args.minutes,
        "rss_mib_start/after_warmup/peak/end": [
            round(samples[0][1] / mib, 1),
            round(base_rss / mib, 1),
            round(peak_rss / mib, 1),
            round(end_rss / mib, 1),
        ],
        "fds_start/after_warmup/peak/end": [samples[0][2], base_fds, peak_fds, end_fds],
        "samples": len(samples),
    }
    checks = {
        "no request failed": result.failed == 0,
        "RSS after warm-up grows < 5%": peak_rss <= base_rss * 1.05,
        "open fds after warm-up grow by <= connections": peak_fds <= base_fds + 2,
    }
    return report("soak", figures, checks)


def watch_drops(h: harness.Harness, args: argparse.Namespace) -> dict[str, Any]:
    """The fake API cuts every open watch every ``--cut-every`` seconds during the load."""
    run = Run(h, args, fakeapi=["--cut-every", str(args.cut_every)])
    before = run.metrics()

    async def watch(result: openloop.Result) -> dict[str, Any]:
        unready = 0
        started = time.monotonic()
        while time.monotonic() - started < args.seconds:
            await asyncio.sleep(1)
            status, _ = await asyncio.to_thread(harness.get, run.port, "/readyz", ca=run.certs.ca)
            unready += status != 200
        return {"readyz_not_200_samples": unready}

    result, extra = asyncio.run(run.load(args.seconds, during=watch))
    after = run.metrics()

    def restarts(samples: dict[tuple[str, frozenset[tuple[str, str]]], float]) -> float:
        return sum(v for (n, _), v in samples.items() if n == "stszone_watch_restarts_total")

    synced = [v for (n, _), v in after.items() if n == "stszone_cache_synced"]
    figures = {
        **tail(result),
        "rate": args.rate,
        "seconds": args.seconds,
        "watch_restarts_during_run": restarts(after) - restarts(before),
        **extra,
    }
    checks = {
        "no request failed": result.failed == 0,
        "watches restarted (the faults happened)": figures["watch_restarts_during_run"] > 0,
        "every cache still synced": bool(synced) and all(v == 1 for v in synced),
    }
    return report("watch-drops", figures, checks)


def cert_rotation(h: harness.Harness, args: argparse.Namespace) -> dict[str, Any]:
    """``stszone certs --force`` every ``--rotate-every`` s; clients reconnect every 20 requests."""
    run = Run(h, args, fakeapi=[])
    out = run.certs.cert.parent
    serials: list[str] = []

    async def rotate(result: openloop.Result) -> dict[str, Any]:
        started = time.monotonic()
        while time.monotonic() - started < args.seconds - args.rotate_every:
            await asyncio.sleep(args.rotate_every)
            command = [harness.PYTHON, "-m", "webhook", "certs", "--out", str(out)]
            command += ["--force", "--dns", "localhost", "--ip", "127.0.0.1"]
            done = await asyncio.to_thread(
                subprocess.run, command, capture_output=True, text=True, check=True
            )
            serials.extend(
                line.split("serial ")[1].rstrip(")")
                for line in done.stdout.splitlines()
                if "serial " in line
            )
        return {}

    result, _ = asyncio.run(run.load(args.seconds, reconnect_every=20, during=rotate))
    expiry = run.metrics().get(("stszone_certificate_expiry_timestamp_seconds", frozenset()))
    figures = {
        **tail(result),
        "rate": args.rate,
        "seconds": args.seconds,
        "certificates_issued": len(serials),
        "distinct_serials_seen_by_clients": len(result.serials),
        "tls_handshakes": result.connects,
        "expiry_metric": expiry,
    }
    checks = {
        "no request failed": result.failed == 0,
        "clients saw the rotated certificates": len(result.serials) >= len(serials),
    }
    return report("cert-rotation", figures, checks)


def sigterm(h: harness.Harness, args: argparse.Namespace) -> dict[str, Any]:
    """SIGTERM after ``--before`` s of load; the load goes on until the process has exited."""
    run = Run(h, args, fakeapi=[])
    delay = 2.0  # Settings.shutdown_delay: readiness off, listener still open
    marks: dict[str, float] = {}

    async def terminate(result: openloop.Result) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        await asyncio.sleep(args.before)
        marks["sigterm"] = loop.time()
        run.server.popen.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(run.server.popen.wait, 60)
        marks["exited"] = loop.time()
        return {"exit_code": code}

    seconds = args.before + 30
    result, extra = asyncio.run(run.load(seconds, during=terminate))
    t0 = marks["sigterm"]
    early = [f for f in result.failures if f[0] < t0 + delay]
    late = [f for f in result.failures if f[0] >= t0 + delay]
    # Once the listener is closed, a new connection fails (refused; or reset, when it was still
    # in the kernel's accept queue): that is the design. A failure on a connection that had
    # been made (a request cut) is a lost request.
    cut = [f for f in late if not f[1].startswith("connect ")]
    late = [f for f in late if f[1].startswith("connect ")]
    answered_after = [a for a in result.answered if a[0] >= t0]
    first_refusal = min((f[0] - t0 for f in late), default=None)
    figures = {
        **tail(result),
        "rate": args.rate,
        "answered_after_sigterm": len(answered_after),
        "failed_before_listener_closed": len(early),
        "new_connections_failed_after_listener_closed (by design)": len(late),
        "cut_after_listener_closed": len(cut),
        "first_refusal_after_sigterm_s": round(first_refusal, 2) if first_refusal else None,
        "exited_after_sigterm_s": round(marks["exited"] - t0, 2),
        **extra,
    }
    log = run.server.log.read_text()
    checks = {
        "no failure before SIGTERM + shutdown delay": not early,
        "no request cut after the listener closed (only new connections refused)": not cut,
        "requests answered after SIGTERM": bool(answered_after),
        "exit code 0": extra["exit_code"] == 0,
        "no traceback in the log": "Traceback" not in log,
    }
    return report("sigterm", figures, checks)


RUNS = {
    "soak": soak,
    "watch-drops": watch_drops,
    "cert-rotation": cert_rotation,
    "sigterm": sigterm,
    "flood": flood,
    "no-reader": no_reader,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("run", choices=[*RUNS, "all"])
    parser.add_argument("--rate", type=float, default=300.0, help="requests/s (default 300)")
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--churn", type=float, default=20.0, help="pod updates/s in the fake API")
    parser.add_argument("--minutes", type=float, default=10.0, help="soak length")
    parser.add_argument("--warmup", type=float, default=120.0, help="soak warm-up seconds")
    parser.add_argument("--seconds", type=float, default=60.0, help="fault run length")
    parser.add_argument("--cut-every", type=float, default=2.0)
    parser.add_argument("--rotate-every", type=float, default=5.0)
    parser.add_argument("--before", type=float, default=5.0, help="load before SIGTERM")
    parser.add_argument("--flood-connections", type=int, default=20)
    parser.add_argument("--flood-reviews", type=int, default=2000, help="per flood connection")
    parser.add_argument("--server-core", type=int, default=0)
    parser.add_argument("--client-core", type=int, default=1)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args(argv)
    os.sched_setaffinity(0, {args.client_core})
    names = list(RUNS) if args.run == "all" else [args.run]
    results = []
    for name in names:
        workdir = (args.workdir or Path(tempfile.mkdtemp(prefix="stszone-faults-"))) / name
        with harness.Harness(workdir) as h:
            results.append(RUNS[name](h, args))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str))
    return 0 if all(r["pass"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
