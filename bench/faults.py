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
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from prometheus_client.parser import text_string_to_metric_families

from bench import harness, openloop
from bench.corpus import chained, corpus, write
from bench.run import first_pass


class Run:
    """One fault run: the fake API, stszone, the corpus, and the figures collected."""

    def __init__(self, h: harness.Harness, args: argparse.Namespace, *, fakeapi: list[str]) -> None:
        self.h, self.args = h, args
        self.certs = h.certs()
        _, url = h.fakeapi(core=args.client_core, extra=["--churn", str(args.churn), *fakeapi])
        self.port = harness.free_port()
        view = ["--kubeconfig", str(h.kubeconfig(url)), "--log-level", "info"]
        self.server = h.stszone(port=self.port, core=args.server_core, certs=self.certs, view=view)
        self.ready_after = harness.wait_ready(
            self.server, self.port, ca=self.certs.ca, path="/readyz", timeout=600
        )
        # The steady state, as bench/run.py measures it: not the one pass over every set (and
        # the collection after it) that a start pays once.
        self.first_pass_after = first_pass(self.port, ca=self.certs.ca)
        items = chained(
            corpus(), lambda body: harness.post(self.port, "/mutate", body, ca=self.certs.ca)[1]
        )
        self.requests = openloop.load_corpus(write(h.workdir / "corpus", items))
        self.ctx = ssl.create_default_context(cafile=str(self.certs.ca))

    def metrics(self) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        _, text = harness.get(self.port, "/metrics", ca=self.certs.ca)
        return {
            (s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }

    async def load(
        self,
        seconds: float,
        *,
        reconnect_every: int = 0,
        during: Callable[[openloop.Result], Awaitable[dict[str, Any]]] | None = None,
    ) -> tuple[openloop.Result, dict[str, Any]]:
        """Open-loop load for ``seconds``; ``during`` runs beside it and returns its figures."""
        result = openloop.Result()
        load = asyncio.create_task(
            openloop.together(
                host="127.0.0.1",
                ports=[self.port],
                ctx=self.ctx,
                requests=self.requests,
                rate=self.args.rate,
                duration=seconds,
                connections=self.args.connections,
                reconnect_every=reconnect_every,
                results=[result],
            )
        )
        extra = await during(result) if during is not None else {}
        await load
        return result, extra


def tail(result: openloop.Result) -> dict[str, Any]:
    lat = result.latencies
    return {
        "sent": result.sent,
        "answered": len(lat),
        "failed": result.failed,
        "errors": result.errors,
        "p50_ms": round(openloop.percentile(lat, 50) * 1e3, 2),
        "p99_ms": round(openloop.percentile(lat, 99) * 1e3, 2),
        "p999_ms": round(openloop.percentile(lat, 99.9) * 1e3, 2),
        "max_ms": round(max(lat) * 1e3, 2) if lat else None,
    }


def report(name: str, figures: dict[str, Any], checks: dict[str, bool]) -> dict[str, Any]:
    ok = all(checks.values())
    print(f"\n== {name}: {'PASS' if ok else 'FAIL'}")
    for key, value in figures.items():
        print(f"  {key}: {value}")
    for check, passed in checks.items():
        print(f"  [{'ok' if passed else 'FAILED'}] {check}")
    return {"name": name, "pass": ok, "figures": figures, "checks": checks}


# --- the runs -----------------------------------------------------------------------------


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


async def _status(reader: asyncio.StreamReader) -> int:
    """Read one response; its status (``openloop.exchange`` also writes the request first)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = next(
        (
            int(v)
            for n, _, v in (x.partition(":") for x in lines[1:])
            if n.lower() == "content-length"
        ),
        0,
    )
    await reader.readexactly(length)
    return int(lines[0].split()[1])


async def _flood_connection(
    port: int, ctx: ssl.SSLContext, data: bytes, count: int, answered: list[int]
) -> int:
    """Write ``data`` (``count`` pipelined requests) in one go, then read every answer; the
    number of non-200 answers."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx)
    bad = 0
    try:
        writer.write(data)
        for _ in range(count):
            status = await _status(reader)
            bad += status != 200
            answered[0] += 1
    finally:
        writer.close()
    return bad


async def _fresh_review(port: int, ctx: ssl.SSLContext, request: bytes) -> tuple[float, float]:
    """One review on a new connection: (seconds from connect to answer, of which after the
    TLS handshake)."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx)
    connected = loop.time()
    try:
        status, _, _ = await openloop.exchange(reader, writer, request)
    finally:
        writer.close()
    if status != 200:
        raise RuntimeError(f"a fresh review got HTTP {status}")
    done = loop.time()
    return done - started, done - connected


def flood(h: harness.Harness, args: argparse.Namespace) -> dict[str, Any]:
    """``--flood-connections`` connections each write ``--flood-reviews`` valid reviews
    pipelined in one go (and read their answers); meanwhile, every 0.2 s, a review on a fresh
    connection. Fair service answers the fresh ones well under a second."""
    run = Run(h, args, fakeapi=[])
    per = args.flood_reviews
    requests = run.requests
    datas = [
        b"".join(requests[(c + i) % len(requests)] for i in range(per))
        for c in range(args.flood_connections)
    ]

    async def go() -> tuple[list[int], list[tuple[float, float]], float]:
        loop = asyncio.get_running_loop()
        answered = [0]
        started = loop.time()
        floods = [
            asyncio.create_task(_flood_connection(run.port, run.ctx, d, per, answered))
            for d in datas
        ]
        probes: list[tuple[float, float]] = []
        while not all(f.done() for f in floods):
            if answered[0]:  # the flood is being served
                probes.append(await _fresh_review(run.port, run.ctx, requests[0]))
            await asyncio.sleep(0.2)
        return await asyncio.gather(*floods), probes, loop.time() - started

    bad, probes, took = asyncio.run(go())
    total = [p[0] for p in probes]
    after = [p[1] for p in probes]
    figures = {
        "flood": f"{args.flood_connections} connections x {per} pipelined reviews",
        "flood_answered_in_s": round(took, 2),
        "flood_non_200": sum(bad),
        "fresh_reviews": len(probes),
        "fresh_connect_to_answer_ms_p50/max": [
            round(openloop.percentile(total, 50) * 1e3, 1),
            round(max(total, default=0) * 1e3, 1),
        ],
        "fresh_after_handshake_ms_p50/max": [
            round(openloop.percentile(after, 50) * 1e3, 1),
            round(max(after, default=0) * 1e3, 1),
        ],
    }
    checks = {
        "every flood review answered 200": sum(bad) == 0,
        "fresh reviews were sent during the flood": len(probes) >= 3,
        "every fresh review answered within 1 s, handshake included": max(total, default=9) < 1,
    }
    return report("flood", figures, checks)


def _write_without_reading(port: int, ctx: ssl.SSLContext, data: bytes, seconds: float) -> int:
    """Write pipelined requests for ``seconds``, never reading; the bytes the server took."""
    raw = socket.create_connection(("127.0.0.1", port))
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
    sent = 0
    deadline = time.monotonic() + seconds
    with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        tls.settimeout(0.5)
        while time.monotonic() < deadline:
            try:
                sent += tls.send(data)
            except TimeoutError:
                continue
    return sent


def no_reader(h: harness.Harness, args: argparse.Namespace) -> dict[str, Any]:
    """A client writes pipelined reviews for ``--seconds`` and never reads an answer: the bytes
    the server accepted, and its RSS, stay bounded; a fresh review is still answered."""
    run = Run(h, args, fakeapi=[])
    data = b"".join(run.requests) * 4
    rss: list[int] = []

    async def go() -> tuple[int, tuple[float, float]]:
        writing = asyncio.create_task(
            asyncio.to_thread(_write_without_reading, run.port, run.ctx, data, args.seconds)
        )
        while not writing.done():
            rss.append(run.server.rss_bytes())
            await asyncio.sleep(1)
        fresh = await _fresh_review(run.port, run.ctx, run.requests[0])
        return await writing, fresh

    before = run.server.rss_bytes()
    sent, fresh = asyncio.run(go())
    mib = 2**20
    figures = {
        "seconds": args.seconds,
        "bytes_accepted_mib": round(sent / mib, 1),
        "rss_mib_before/peak/end": [
            round(before / mib, 1),
            round(max(rss) / mib, 1),
            round(rss[-1] / mib, 1),
        ],
        "rss_growth_mib": round((max(rss) - before) / mib, 1),
        "fresh_review_after_ms": round(fresh[0] * 1e3, 1),
    }
    checks = {
        "bytes accepted < 100 MiB": sent < 100 * mib,
        "RSS grew < 50 MiB": max(rss) - before < 50 * mib,
    }
    return report("no-reader", figures, checks)


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
