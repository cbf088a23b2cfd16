"""HTTP/1.1 written and read by hand over a TLS stream, for tests that need byte control.

A test that checks what the server does with a request no ordinary client sends (no ``Host``,
pipelined in one write, a body that stops halfway, an ``Expect`` the server must refuse before
the body) writes its bytes itself and reads the answers with :func:`response`, which knows only
what those answers need: a status line, headers, and a ``Content-Length`` body.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from tests.hang import HANG_GUARD

FIXTURE = Path(__file__).parent / "fixtures" / "admission" / "003-Pod-CREATE.json"
Stream = tuple[asyncio.StreamReader, asyncio.StreamWriter]


def request(
    body: bytes = b"",
    *,
    method: str = "POST",
    path: str = "/mutate",
    version: str = "1.1",
    host: bool = True,
    length: int | None = None,
    headers: tuple[str, ...] = (),
) -> bytes:
    """A request's bytes: ``Content-Length`` is ``length`` (default ``len(body)``) for a POST;
    ``headers`` are extra ``"Name: value"`` lines."""
    lines = [f"{method} {path} HTTP/{version}"]
    if host:
        lines.append("Host: 127.0.0.1")
    if method == "POST":
        lines += [
            "Content-Type: application/json",
            f"Content-Length: {len(body) if length is None else length}",
        ]
    lines += headers
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


@dataclass(frozen=True)
class Answer:
    """One response: its status line, headers (names lower-cased) and body."""

    status_line: bytes
    headers: dict[str, str]
    body: bytes

    @property
    def status(self) -> int:
        return int(self.status_line.split()[1])


async def response(reader: asyncio.StreamReader) -> Answer:
    """The next response on the stream (a ``100 Continue`` is a response too)."""
    async with asyncio.timeout(HANG_GUARD):
        status_line = (await reader.readuntil(b"\r\n")).rstrip()
        headers: dict[str, str] = {}
        while (line := await reader.readuntil(b"\r\n")) != b"\r\n":
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0")))
    return Answer(status_line, headers, body)


async def closed(reader: asyncio.StreamReader) -> bytes:
    """Everything the server sends until it closes the connection (EOF or reset)."""
    received = b""
    async with asyncio.timeout(HANG_GUARD):
        try:
            while chunk := await reader.read(65536):
                received += chunk
        except (ConnectionResetError, ssl.SSLError):
            pass
    return received


@contextlib.asynccontextmanager
async def connected(port: int, ctx: ssl.SSLContext) -> AsyncIterator[Stream]:
    """A TLS stream to 127.0.0.1:``port``, closed when the block ends."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx)
    try:
        yield reader, writer
    finally:
        writer.close()
        with contextlib.suppress(OSError, ssl.SSLError):
            await writer.wait_closed()
