"""The webhook's HTTP/1.1 connection (``webhook.server.http``), byte by byte.

Each test feeds a :class:`~webhook.server.http.Connection` the bytes a client would send, in
pieces chosen by the test, and reads what the connection wrote to its transport: the real app
(``make_app``) answers. No sockets and no TLS here: framing, limits, keep-alive, timers and
back-pressure are checked at the edges a network would hide. ``test_routes``,
``test_timeouts`` and ``test_answer_wire`` check the same connection over real TLS.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from webhook.config import MAX_BODY, Settings
from webhook.model.store import Store
from webhook.server.app import install_metrics, make_app
from webhook.server.http import MAX_HEAD, Connection, Limits, Listener
from webhook.server.runtime import InFlight, Runtime

FIXTURE = Path(__file__).parent / "fixtures" / "admission" / "003-Pod-CREATE.json"
BODY = FIXTURE.read_bytes()
UID = json.loads(BODY)["request"]["uid"]


@dataclass
class Transport:
    """What a connection writes, and what it asked of its transport."""

    written: bytearray = field(default_factory=bytearray)
    closed: bool = False
    aborted: bool = False
    reading: bool = True
    ended: asyncio.Event = field(default_factory=asyncio.Event)

    def write(self, data: bytes) -> None:
        assert not self.closed, "written after close"
        self.written += data

    def close(self) -> None:
        self.closed = True
        self.ended.set()

    def abort(self) -> None:
        self.aborted = self.closed = True

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True


@dataclass
class Client:
    conn: Connection
    transport: Transport
    in_flight: InFlight
    runtime: Runtime

    def send(self, data: bytes, *, piece: int | None = None) -> None:
        step = piece or len(data) or 1
        for at in range(0, len(data), step):
            self.conn.data_received(data[at : at + step])

    def answers(self) -> list[tuple[int, dict[str, str], bytes]]:
        """Every complete response written so far: (status, headers, body)."""
        data, out = bytes(self.transport.written), []
        while data:
            head, _, rest = data.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            status = int(lines[0].split()[1])
            headers = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            length = int(headers.get("content-length", "0"))
            if status == 100:
                length = 0
            out.append((status, headers, rest[:length]))
            data = rest[length:]
        return out


def post(
    body: bytes = BODY, *, path: str = "/mutate", extra: str = "", version: str = "1.1"
) -> bytes:
    return (
        f"POST {path}?timeout=10s HTTP/{version}\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\n{extra}Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


@pytest.fixture
async def client() -> Client:
    return connect()


def connect(
    *,
    idle: float = 120.0,
    body: float = 30.0,
    max_body: int = MAX_BODY,
    metrics: bool = False,
    clock: Clock | None = None,
) -> Client:
    """A connection to the real app; with ``clock``, its timers run on the test's clock."""
    settings = Settings(host="127.0.0.1", port=0, max_body=max_body)
    runtime = Runtime(
        store=Store(zones=("a", "b", "c")), defaults=settings.defaults(), settings=settings
    )
    if metrics:
        install_metrics(runtime, registry=CollectorRegistry())
    listener = Listener(make_app(runtime), Limits(idle, body, max_body), runtime.in_flight)
    conn = listener._connection()
    if clock is not None:
        conn.loop = clock  # type: ignore[assignment]
    transport = Transport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    return Client(conn, transport, runtime.in_flight, runtime)


def reviewed(answer: tuple[int, dict[str, str], bytes]) -> str:
    status, headers, body = answer
    assert status == 200 and headers["content-type"] == "application/json", answer
    uid: str = json.loads(body)["response"]["uid"]
    return uid


@pytest.mark.parametrize("piece", [1, 2, 7, 64, 1000, None])
async def test_a_request_in_any_pieces_gets_the_same_answer(piece: int | None) -> None:
    """Split anywhere (request line, headers, body), a review is answered once, the same."""
    whole, pieces = connect(), connect()
    whole.send(post())
    pieces.send(post(), piece=piece)
    assert [reviewed(a) for a in pieces.answers()] == [UID]
    assert pieces.answers()[0][2] == whole.answers()[0][2]
    assert not pieces.transport.closed and pieces.in_flight.count == 0


async def test_pipelined_requests_are_answered_in_order(client: Client) -> None:
    """Three requests in one write: three answers, in the order asked, on an open connection."""
    other = json.loads(BODY)
    other["request"]["uid"] = "second"
    second = json.dumps(other).encode()
    client.send(post() + post(second, path="/validate") + b"GET /healthz HTTP/1.1\r\n\r\n")
    first, then, health = client.answers()
    assert (reviewed(first), reviewed(then)) == (UID, "second")
    assert (health[0], health[2]) == (200, b"ok\n")
    assert not client.transport.closed


@pytest.mark.parametrize(
    ("version", "connection", "stays_open", "says"),
    [
        ("1.1", None, True, None),
        ("1.1", "close", False, "close"),
        ("1.0", None, False, None),
        ("1.0", "keep-alive", True, "keep-alive"),
    ],
)
async def test_keep_alive_follows_the_request(
    client: Client, version: str, connection: str | None, stays_open: bool, says: str | None
) -> None:
    extra = f"Connection: {connection}\r\n" if connection else ""
    client.send(post(extra=extra, version=version))
    [answer] = client.answers()
    assert reviewed(answer) == UID
    assert answer[1].get("connection") == says
    assert client.transport.closed is not stays_open


async def test_answers_close_the_connection_once_shutting_down(client: Client) -> None:
    client.runtime.shutting_down = True
    client.send(post())
    [answer] = client.answers()
    assert reviewed(answer) == UID and answer[1]["connection"] == "close"
    assert client.transport.closed


async def test_a_malformed_request_line_is_a_400_naming_it(client: Client) -> None:
    client.send(b"POST /mutate HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n")
    [(status, headers, body)] = client.answers()
    assert status == 400 and headers["connection"] == "close"
    assert b"Content-Length" in body, body
    client.send(post())  # lingering: read and dropped, never parsed or answered
    assert len(client.answers()) == 1 and client.in_flight.count == 0


async def test_headers_over_the_cap_are_a_431(client: Client) -> None:
    client.send(b"POST /mutate HTTP/1.1\r\nX-Pad: " + b"x" * (MAX_HEAD + 10))
    [(status, headers, _)] = client.answers()
    assert status == 431 and headers["connection"] == "close"


async def test_a_body_announced_over_the_cap_is_refused_before_it_comes() -> None:
    """413 at the headers, then what the client still sends is dropped (no reset under it)."""
    client = connect(max_body=1000)
    client.send(post(b"x" * 5000)[:-5000])
    [(status, headers, body)] = client.answers()
    assert status == 413 and headers["connection"] == "close"
    assert b"5000 bytes is over the 1000 byte cap" in body
    assert not client.transport.closed, "closed while the body may still be on its way"
    client.send(b"x" * 5000)
    assert len(client.answers()) == 1


async def test_a_chunked_body_over_the_cap_is_refused_when_it_passes_it() -> None:
    client = connect(max_body=1000)
    head = (
        b"POST /extender/filter HTTP/1.1\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
    )
    chunk = b"%x\r\n%s\r\n" % (600, b"x" * 600)
    client.send(head + chunk)
    assert client.answers() == [] and client.in_flight.count == 1
    client.send(chunk)
    [(status, _, body)] = client.answers()
    assert status == 413 and b"nodeCacheCapable" in body
    assert client.in_flight.count == 0


async def test_a_wrong_content_type_is_a_400_and_the_connection_goes_on(client: Client) -> None:
    """Refused at its headers, the body is still read (and dropped): the next request on the
    same connection is answered."""
    refused_request = post().replace(b"application/json", b"text/plain")
    client.send(refused_request[:-10])
    assert client.conn.chunks == [], "a refused body is kept"
    client.send(refused_request[-10:] + post())
    refused, answered = client.answers()
    assert refused[0] == 400 and b"Content-Type must be application/json" in refused[2]
    assert reviewed(answered) == UID and not client.transport.closed


async def test_expect_100_continue_comes_only_for_an_admitted_body(client: Client) -> None:
    head, body = post().split(b"\r\n\r\n", 1)
    client.send(head.replace(b"Host:", b"Expect: 100-continue\r\nHost:") + b"\r\n\r\n")
    assert client.answers() == [(100, {}, b"")]
    client.send(body)
    assert reviewed(client.answers()[1]) == UID

    wrong = connect()
    wrong.send(
        head.replace(b"Host:", b"Expect: 100-continue\r\nHost:").replace(
            b"application/json", b"text/plain"
        )
        + b"\r\n\r\n"
    )
    [(status, headers, _)] = wrong.answers()
    assert status == 400 and headers["connection"] == "close"


async def test_head_answers_with_the_length_and_no_body(client: Client) -> None:
    client.send(b"HEAD /healthz HTTP/1.1\r\n\r\nGET /healthz HTTP/1.1\r\n\r\n")
    written = bytes(client.transport.written)
    assert written.count(b"HTTP/1.1 200 OK") == 2
    first, second = written.split(b"HTTP/1.1 200 OK")[1:]
    assert b"Content-Length: 3\r\n" in first and first.endswith(b"\r\n\r\n")
    assert second.endswith(b"\r\n\r\nok\n")


async def test_an_upgrade_is_answered_then_the_connection_closes(client: Client) -> None:
    client.send(b"GET /healthz HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n")
    [(status, _, _)] = client.answers()
    assert status == 200 and client.transport.closed


async def test_a_client_that_does_not_read_is_not_read_from(client: Client) -> None:
    client.conn.pause_writing()
    assert not client.transport.reading
    client.conn.resume_writing()
    assert client.transport.reading


async def test_a_connection_lost_mid_body_leaves_nothing_in_flight(client: Client) -> None:
    client.send(post()[:-10])
    assert client.in_flight.count == 1
    client.conn.connection_lost(None)
    assert client.in_flight.count == 0
    client.send(b"0123456789")  # late bytes after the loss are ignored
    assert client.answers() == []


async def test_a_scrape_does_not_count_itself_in_flight() -> None:
    """GETs are answered in the callback that completes them: the in-flight gauge a scrape
    reads counts the reviews being received, not the scrape."""
    client = connect(metrics=True)
    client.send(b"GET /metrics HTTP/1.1\r\n\r\n")
    [(status, _, body)] = client.answers()
    assert status == 200
    assert b"\nstszone_in_flight_requests 0.0\n" in body


@dataclass
class Clock:
    """The connection's loop, as far as its timers go: time moves when the test says."""

    now: float = 0.0
    timers: list[tuple[float, Callable[[], None], Handle]] = field(default_factory=list)

    def time(self) -> float:
        return self.now

    def call_at(self, when: float, callback: Callable[[], None]) -> Handle:
        handle = Handle()
        self.timers.append((when, callback, handle))
        return handle

    def due(self) -> float:
        """When the one live timer is due."""
        [when] = [when for when, _, handle in self.timers if not handle.cancelled]
        return when

    def advance(self, to: float) -> None:
        """Move to ``to``, running the timers due by then, in order."""
        while True:
            live = sorted(
                (t for t in self.timers if not t[2].cancelled and t[0] <= to), key=lambda t: t[0]
            )
            if not live:
                break
            when, callback, handle = live[0]
            handle.cancelled = True
            self.now = when
            callback()
        self.now = to


@dataclass
class Handle:
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True


async def test_a_stalled_body_gets_408_at_the_body_timeout_not_the_idle_one() -> None:
    clock = Clock()
    client = connect(clock=clock)
    clock.advance(10)
    client.send(post()[:-10])
    assert clock.due() == 40, "the body timer was not brought forward"
    clock.advance(39.9)
    assert client.answers() == [] and not client.transport.closed
    clock.advance(40)
    [(status, headers, body)] = client.answers()
    assert status == 408 and b"within 30s" in body and headers["connection"] == "close"
    assert client.transport.closed and client.in_flight.count == 0


async def test_an_idle_connection_is_closed_idle_timeout_after_its_last_answer() -> None:
    clock = Clock()
    client = connect(clock=clock)
    clock.advance(100)
    client.send(post())  # answered at 100: the idle clock starts again
    clock.advance(219.9)  # the first timer (due at 120) found the connection answered since
    assert [reviewed(a) for a in client.answers()] == [UID] and not client.transport.closed
    clock.advance(220)
    assert client.transport.closed and len(client.answers()) == 1


async def test_a_body_arriving_in_time_is_answered_and_the_idle_clock_follows() -> None:
    clock = Clock()
    client = connect(clock=clock)
    request = post()
    client.send(request[:-10])
    clock.advance(29)
    client.send(request[-10:])
    assert [reviewed(a) for a in client.answers()] == [UID]
    clock.advance(148.9)  # the body timer (due at 30) moved on to the idle deadline, 149
    assert not client.transport.closed
    clock.advance(149)
    assert client.transport.closed and len(client.answers()) == 1


async def test_observers_run_after_the_answer_is_written(client: Client) -> None:
    """Metrics and the decision log cost the API server nothing: the answer is on the
    transport before they run, and they run before the loop takes anything else."""
    seen: list[tuple[str, str, int, int, float]] = []
    client.runtime.observers.append(
        lambda endpoint, request, _, seconds, status: seen.append(
            (endpoint, request.uid if request else "", status, len(client.answers()), seconds)
        )
    )
    client.send(post() + post(b"{", path="/validate"))  # pipelined: one read, two answers
    assert len(client.answers()) == 2 and seen == []
    await asyncio.sleep(0)
    assert [s[:4] for s in seen] == [("mutate", UID, 200, 2), ("validate", "", 400, 2)]
    assert all(s[4] > 0 for s in seen)  # the handler's own duration


async def test_an_observer_that_fails_is_logged_and_the_others_still_run(
    client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    """An observer runs after the answer is written, so its failure cannot reach the client:
    it is logged (the loop's own handler logs through asyncio's logger, which serve silences)."""
    seen: list[str] = []

    def broken(*_: object) -> None:
        raise RuntimeError("a bug in an observer")

    client.runtime.observers[:] = [broken, lambda endpoint, *_: seen.append(endpoint)]
    client.send(post())
    assert reviewed(client.answers()[0]) == UID
    with caplog.at_level("ERROR", logger="stszone.server"):
        await asyncio.sleep(0)
    assert seen == ["mutate"]
    assert "internal error observing a request to /mutate" in caplog.text
    assert "a bug in an observer" in caplog.text
