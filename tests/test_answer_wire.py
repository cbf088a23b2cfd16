"""The JSON answers' own HTTP framing, checked against aiohttp's Response on the same requests.

stszone writes its ``200 application/json`` answers as one piece of bytes instead of going
through aiohttp's Response (``webhook.server.http.encode``). What a client sees must not
change: for each request form below -- HTTP/1.1 and HTTP/1.0, with and without a
``Connection`` header -- the status line, the header names in order and their values (Date
aside: it is checked as a date), and whether the connection stays open are compared with what
aiohttp's own ``web.Response`` sends from a bare low-level server on the same request.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import ssl
from collections.abc import AsyncIterator
from email.utils import parsedate_to_datetime
from pathlib import Path

import pytest
from aiohttp import web

from tests.conftest import ServeFactory
from tests.hang import HANG_GUARD

FIXTURE = Path(__file__).parent / "fixtures" / "admission" / "003-Pod-CREATE.json"

#: (HTTP version, Connection header or None) of the requests compared.
FORMS = [
    ("1.1", None),
    ("1.1", "close"),
    ("1.1", "keep-alive"),
    ("1.0", None),
    ("1.0", "keep-alive"),
]

Answer = tuple[bytes, list[tuple[str, str]], bytes, bool]


def request(version: str, connection: str | None, body: bytes) -> bytes:
    extra = f"Connection: {connection}\r\n" if connection else ""
    return (
        f"POST /mutate HTTP/{version}\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"{extra}Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


async def exchange(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, data: bytes
) -> Answer:
    """Send one request: (status line, headers in order, body, whether a second is answered)."""
    async with asyncio.timeout(HANG_GUARD):
        writer.write(data)
        await writer.drain()
        status = await reader.readline()
        headers: list[tuple[str, str]] = []
        while (line := await reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("ascii").rstrip("\r\n").partition(": ")
            headers.append((name, value))
        length = int(dict(headers)["Content-Length"])
        body = await reader.readexactly(length)
        try:  # a connection that stays open answers the same request again
            writer.write(data)
            await writer.drain()
            again = await reader.readline()
        except (ConnectionResetError, BrokenPipeError, ssl.SSLError):
            again = b""
    return status, headers, body, again.startswith(status.split(b" ")[0])


@contextlib.asynccontextmanager
async def aiohttp_reference(body: bytes) -> AsyncIterator[int]:
    """aiohttp's low-level server answering every request with ``web.Response`` of ``body``."""

    async def handler(request: web.BaseRequest) -> web.Response:
        await request.read()
        return web.Response(body=body, content_type="application/json")

    server = await asyncio.get_running_loop().create_server(web.Server(handler), "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


@pytest.mark.parametrize(("version", "connection"), FORMS)
async def test_json_answer_is_framed_as_aiohttp_frames_it(
    serve: ServeFactory, client_ssl: ssl.SSLContext, version: str, connection: str | None
) -> None:
    app = await serve()
    data = request(version, connection, FIXTURE.read_bytes())
    reader, writer = await asyncio.open_connection("127.0.0.1", app.port, ssl=client_ssl)
    try:
        status, headers, body, open_after = await exchange(reader, writer, data)
    finally:
        writer.close()
    answer = json.loads(body)
    assert answer["response"]["uid"] == json.loads(FIXTURE.read_bytes())["request"]["uid"]

    async with aiohttp_reference(body) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            ref_status, ref_headers, ref_body, ref_open_after = await exchange(reader, writer, data)
        finally:
            writer.close()

    assert ref_body == body
    assert status == ref_status
    assert [n for n, _ in headers] == [n for n, _ in ref_headers]
    ours, theirs = dict(headers), dict(ref_headers)
    assert ours.pop("Server") == "stszone"
    theirs.pop("Server")  # aiohttp's announces its own version
    date = parsedate_to_datetime(ours.pop("Date"))
    theirs.pop("Date")
    assert abs(dt.datetime.now(dt.UTC) - date) < dt.timedelta(seconds=5)
    assert ours == theirs
    assert open_after == ref_open_after
    # and the forms are not all alike: the reference closes exactly these
    assert ref_open_after == (connection == "keep-alive" or (version, connection) == ("1.1", None))
