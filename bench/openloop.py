"""Open-loop load at a fixed rate over keep-alive TLS connections; latency per request.

Each of ``--connections`` connections sends on its own fixed schedule (``rate / connections``
per second, phases staggered), so the offered rate does not drop when the server slows down.
A request's latency runs from its scheduled time when it had to wait for the previous answer on
its connection (coordinated omission corrected), else from the moment it was written. The HTTP
client is a few lines over ``asyncio`` streams, lighter than any library client, so it runs far
below one core at the rates used here (``bench/run.py`` reports its CPU time). It runs on
asyncio's own loop over ``select()`` (:func:`new_loop`): uvloop's ``loop.time()`` counts whole
milliseconds, coarser than the latencies measured, and ``epoll_wait`` sleeps whole milliseconds,
so each timer woke up to a millisecond late and requests due within a millisecond of each other
(at 1,000/s, every server's next one) were sent together.

Connections are opened (TLS handshake and all) before the schedule starts, as the API server
keeps its connections to a webhook open: the latencies are those of requests, not of
handshakes. A connection the server closes, or one ``reconnect_every`` ends, is opened again
inside the schedule, and that request's latency includes the handshake.

With ``--port`` given several times, every server gets ``--rate`` at the same time, their
schedules interleaved (server k's requests fall ``k / servers`` of the way between server 0's),
so whatever slows the machine for a moment lands on all of them alike; one JSON line per port.

    python bench/openloop.py --port 8443 --ca certs/ca.crt --corpus DIR/index --rate 1000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import selectors
import ssl
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Result:
    latencies: list[float] = field(default_factory=list)
    sent: int = 0
    failed: int = 0
    late: int = 0  # requests that waited for the previous answer on their connection
    errors: dict[str, int] = field(default_factory=dict)
    #: (loop time, what) of every failure, and (loop time, latency) of every answer.
    failures: list[tuple[float, str]] = field(default_factory=list)
    answered: list[tuple[float, float]] = field(default_factory=list)
    #: Serial numbers of the server certificates seen in handshakes.
    serials: set[int] = field(default_factory=set)
    connects: int = 0

    def fail(self, what: str, at: float) -> None:
        self.failed += 1
        self.errors[what] = self.errors.get(what, 0) + 1
        self.failures.append((at, what))


def _serial(writer: asyncio.StreamWriter) -> int:
    from cryptography import x509

    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    return x509.load_der_x509_certificate(der).serial_number


def request_bytes(path: str, body: bytes) -> bytes:
    """One HTTP/1.1 POST of a JSON ``body`` to ``path``, as the API server sends a review."""
    head = (
        f"POST {path}?timeout=10s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nAccept: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def load_corpus(index: Path) -> list[bytes]:
    """HTTP/1.1 request bytes for every ``path file`` line of a corpus index."""
    requests = []
    for line in index.read_text().splitlines():
        path, file = line.split()
        requests.append(request_bytes(path, Path(file).read_bytes()))
    return requests


async def exchange(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes
) -> tuple[int, bytes, bool]:
    """Send one request, read one response: (status, body, server asked to close)."""
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    length, close = 0, False
    for line in lines[1:]:
        name, _, value = line.partition(":")
        name = name.strip().lower()
        if name == "content-length":
            length = int(value)
        elif name == "connection" and value.strip().lower() == "close":
            close = True
    body = await reader.readexactly(length) if length else b""
    return status, body, close


async def connection(
    index: int,
    *,
    host: str,
    port: int,
    ctx: ssl.SSLContext,
    requests: list[bytes],
    period: float,
    start: float,
    end: float,
    result: Result,
    limit: float,
    reconnect_every: int,
    until: Callable[[], bool] | None = None,
) -> None:
    loop = asyncio.get_running_loop()

    async def connect() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A new connection (its TLS handshake), counted, its certificate noted if rotating."""
        made = await asyncio.open_connection(host, port, ssl=ctx)
        result.connects += 1
        if reconnect_every:
            result.serials.add(_serial(made[1]))
        return made

    conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
    try:  # before the schedule: a failure here shows as the first request's, on a new attempt
        conn = await asyncio.wait_for(connect(), limit)
    except (OSError, TimeoutError, ssl.SSLError):
        conn = None
    scheduled = start
    k = index
    on_this_connection = 0
    while scheduled < end and not (until is not None and until()):
        now = loop.time()
        if now < scheduled:
            await asyncio.sleep(scheduled - now)
            began = loop.time()
        else:
            began = scheduled
            result.late += 1
        result.sent += 1
        request = requests[k % len(requests)]
        k += 1
        phase = "connect " if conn is None else ""  # failures say whether a connection was made
        try:
            if conn is None:
                conn = await connect()
                phase = ""
                on_this_connection = 0
            status, _, close = await asyncio.wait_for(exchange(*conn, request), limit)
            on_this_connection += 1
            now = loop.time()
            if status != 200:
                result.fail(f"HTTP {status}", now)
            else:
                result.latencies.append(now - began)
                result.answered.append((now, now - began))
            if close or (reconnect_every and on_this_connection >= reconnect_every):
                conn[1].close()
                conn = None
        except (OSError, asyncio.IncompleteReadError, TimeoutError, ssl.SSLError) as err:
            result.fail(phase + type(err).__name__, loop.time())
            if conn is not None:
                conn[1].close()
            conn = None
        scheduled += period
    if conn is not None:
        conn[1].close()


def offsets(*, rate: float, connections: int, servers: int) -> list[list[float]]:
    """When each server's connections first send, in seconds after the start: every server's
    requests ``1 / rate`` apart, and server k's ``k / servers`` of the way between server 0's."""
    gap = 1 / rate
    return [[(i + k / servers) * gap for i in range(connections)] for k in range(servers)]


async def together(
    *,
    host: str,
    ports: list[int],
    ctx: ssl.SSLContext,
    requests: list[bytes],
    rate: float,
    duration: float,
    connections: int,
    limit: float = 10.0,
    reconnect_every: int = 0,
    results: list[Result] | None = None,
    until: Callable[[], bool] | None = None,
) -> list[Result]:
    """Offer ``rate`` requests/s to every port at once, schedules interleaved (``offsets``);
    one Result per port. The connections are opened in the half second before the start."""
    loop = asyncio.get_running_loop()
    results = results if results is not None else [Result() for _ in ports]
    period = connections / rate
    start = loop.time() + 0.5
    tasks = [
        connection(
            i,
            host=host,
            port=port,
            ctx=ctx,
            requests=requests,
            period=period,
            start=start + first,
            end=start + duration,
            result=result,
            limit=limit,
            reconnect_every=reconnect_every,
            until=until,
        )
        for port, result, firsts in zip(
            ports,
            results,
            offsets(rate=rate, connections=connections, servers=len(ports)),
            strict=True,
        )
        for i, first in enumerate(firsts)
    ]
    await asyncio.gather(*tasks)
    return results


def new_loop() -> asyncio.AbstractEventLoop:
    """The generator's event loop: ``select()`` takes its timeout in microseconds, where
    ``epoll_wait`` rounds it up to a whole millisecond; a few dozen connections are well within
    what ``select()`` watches cheaply."""
    return asyncio.SelectorEventLoop(selectors.SelectSelector())


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of unsorted values: the least value that at least
    ``q`` percent of them do not exceed; NaN when empty."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    # round(): q * n / 100 in floating point can land a hair above the whole number it is.
    rank = math.ceil(round(q * len(ordered) / 100, 9))
    return ordered[max(0, min(len(ordered), rank) - 1)]


def summary(result: Result, *, wall: float, cpu: float) -> dict[str, object]:
    lat = result.latencies
    return {
        "sent": result.sent,
        "ok": len(lat),
        "failed": result.failed,
        "errors": result.errors,
        "late": result.late,
        "p50_ms": percentile(lat, 50) * 1e3,
        "p99_ms": percentile(lat, 99) * 1e3,
        "p999_ms": percentile(lat, 99.9) * 1e3,
        "max_ms": max(lat) * 1e3 if lat else float("nan"),
        "generator_cpu": cpu / wall if wall else 0.0,
        #: Every answer's latency, for percentiles pooled over several runs (bench/run.py).
        "latencies_ms": [round(x * 1e3, 4) for x in lat],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="fixed-rate open-loop TLS load")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument(
        "--port",
        type=int,
        action="append",
        required=True,
        help="the server's port; several: all of them at once, schedules interleaved",
    )
    parser.add_argument("--ca", required=True, help="CA that signed the server's certificate")
    parser.add_argument("--corpus", type=Path, required=True, help="corpus index (bench/corpus.py)")
    parser.add_argument("--rate", type=float, default=1000.0, help="requests per second")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds")
    parser.add_argument("--connections", type=int, default=16)
    args = parser.parse_args(argv)
    ctx = ssl.create_default_context(cafile=args.ca)
    requests = load_corpus(args.corpus)
    wall0, cpu0 = time.monotonic(), time.process_time()
    with asyncio.Runner(loop_factory=new_loop) as runner:
        results = runner.run(
            together(
                host=args.host,
                ports=args.port,
                ctx=ctx,
                requests=requests,
                rate=args.rate,
                duration=args.duration,
                connections=args.connections,
            )
        )
    wall, cpu = time.monotonic() - wall0, time.process_time() - cpu0
    for result in results:  # the generator's CPU share is the whole process's, on every line
        json.dump(summary(result, wall=wall, cpu=cpu), sys.stdout)
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
