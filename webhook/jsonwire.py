"""JSON on the hot path: orjson, with its differences from the stdlib in one place.

Every admission request is decoded and answered as JSON, and the stdlib's decoder is the
largest single cost of a request after aiohttp itself; orjson halves it. What changes for a
client: bodies must be valid UTF-8 JSON (a lone surrogate escape such as ``"\\ud800"`` or an
integer beyond 64 bits is refused as not valid JSON -- the API server never sends either),
and nesting is capped at 1024 levels.
"""

from __future__ import annotations

import json
from typing import Any

import orjson


def loads(body: bytes | str) -> Any:
    """Decode ``body``; raises ``ValueError`` (``orjson.JSONDecodeError``) when it is not JSON."""
    return orjson.loads(body)


def dumps(obj: Any) -> bytes:
    """Compact UTF-8 JSON of ``obj`` (keys in insertion order, like ``json.dumps``)."""
    try:
        return orjson.dumps(obj)
    except TypeError:
        # orjson refuses what UTF-8 cannot hold (a lone surrogate in a str) and integers beyond
        # 64 bits; the stdlib escapes the one and writes the other, which is still valid JSON.
        return json.dumps(obj, separators=(",", ":")).encode()
