"""The Python floor: bare aiohttp over TLS that parses an AdmissionReview, answers a fixed patch.

What any aiohttp admission webhook must do at the least, on the stack stszone runs: a
``web.Application`` on ``AppRunner``/``TCPSite`` over stszone's own TLS context (a
``CertReloader``: hardened, every handshake through its ``sni_callback``) and certificate; read
the body, ``json.loads`` it, echo the uid with a fixed zone patch, ``json.dumps`` the answer; on
asyncio's own event loop (``--loop uvloop`` for the loop ``stszone serve`` runs by default), one
process, no access log. The benchmark runs it beside ``stszone serve``, so the ratio between them
is what stszone's own work costs (its view, its rules, its patch), less what its choice of JSON
library saves.

    python bench/floor.py --port 9443 --cert certs/tls.crt --key certs/tls.key
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from webhook.server.tls import CertReloader

_PATCH = base64.b64encode(
    json.dumps(
        [
            {"op": "add", "path": "/metadata/annotations/stszone.io~1zone", "value": "zone-a"},
            {
                "op": "add",
                "path": "/spec/affinity",
                "value": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {
                                            "key": "topology.kubernetes.io/zone",
                                            "operator": "In",
                                            "values": ["zone-a"],
                                        }
                                    ]
                                }
                            ]
                        }
                    }
                },
            },
        ],
        separators=(",", ":"),
    ).encode()
).decode()


async def answer(request: web.Request) -> web.Response:
    review = json.loads(await request.read())
    body = {
        "apiVersion": review["apiVersion"],
        "kind": "AdmissionReview",
        "response": {
            "uid": review["request"]["uid"],
            "allowed": True,
            "patchType": "JSONPatch",
            "patch": _PATCH,
        },
    }
    return web.Response(body=json.dumps(body).encode(), content_type="application/json")


async def healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok\n")


async def main(args: argparse.Namespace) -> None:
    ctx = CertReloader(args.cert, args.key).context
    app = web.Application(client_max_size=7 * 1024 * 1024)
    app.add_routes(
        [web.post("/mutate", answer), web.post("/validate", answer), web.get("/healthz", healthz)]
    )
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    await web.TCPSite(runner, args.host, args.port, ssl_context=ctx).start()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="bare aiohttp TLS admission floor")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument(
        "--loop",
        choices=("asyncio", "uvloop"),
        default="asyncio",
        help="event loop (default asyncio's own, as a bare aiohttp webhook runs)",
    )
    return parser.parse_args(argv)


if __name__ == "__main__":
    arguments = parse()
    factory: Callable[[], asyncio.AbstractEventLoop]
    if arguments.loop == "uvloop":
        import uvloop

        factory = uvloop.new_event_loop
    else:
        factory = asyncio.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(main(arguments))
