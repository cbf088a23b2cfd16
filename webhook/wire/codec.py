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

from webhook.errors import BadRequest


def request_body(body: bytes | str, *, expected: str) -> Any:
    """Decode a request body; :class:`BadRequest` (HTTP 400) saying what to send instead."""
    try:
        return orjson.loads(body)
    except (ValueError, RecursionError) as err:
        raise BadRequest(f"request body is not valid JSON ({err}); send {expected}") from None


def dumps(obj: Any) -> bytes:
    """Compact UTF-8 JSON of ``obj`` (keys in insertion order, like ``json.dumps``)."""
    try:
        return orjson.dumps(obj)
    except TypeError:
        # orjson refuses what UTF-8 cannot hold (a lone surrogate in a str) and integers beyond
        # 64 bits; the stdlib escapes the one and writes the other, which is still valid JSON.
        return json.dumps(obj, separators=(",", ":")).encode()
