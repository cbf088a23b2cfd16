"""A trivial TLS HTTP/1.1 server for checking the load generators: no framework, fixed answer.

An ``asyncio.Protocol`` that splits requests by ``Content-Length`` and writes a constant
response, with stszone's hardened TLS context. It does far less per request than any aiohttp
server, so a generator that drives it much faster than the floor is not what limits the floor.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from webhook.server.tls import hardened_context

_BODY = (
    b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview",'
    b'"response":{"uid":"x","allowed":true}}'
)
_RESPONSE = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
    + str(len(_BODY)).encode()
    + b"\r\n\r\n"
    + _BODY
)


class Trivial(asyncio.Protocol):
    def __init__(self) -> None:
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[:end].lower()
            at = head.find(b"content-length:")
            length = int(head[at + 15 :].split(b"\r\n", 1)[0]) if at >= 0 else 0
            total = end + 4 + length
            if len(self.buffer) < total:
                return
            self.buffer = self.buffer[total:]
            assert self.transport is not None
            self.transport.write(_RESPONSE)


async def main(args: argparse.Namespace) -> None:
    ctx = hardened_context()
    ctx.load_cert_chain(args.cert, args.key)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(Trivial, args.host, args.port, ssl=ctx)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    server.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="trivial TLS server for generator checks")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    asyncio.run(main(parser.parse_args()))
