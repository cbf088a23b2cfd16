"""The hostile-client runs of ``bench/faults.py``: pipelined floods, and a client that never
reads its answers."""

from __future__ import annotations

import argparse
import asyncio
import socket
import ssl
import time
from typing import Any

from bench import harness, openloop
from bench.faultrun import Run, report


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
