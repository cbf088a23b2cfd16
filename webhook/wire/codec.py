"""JSON on the hot paths: orjson, with its differences from the stdlib in one place.

Every admission request is decoded and answered as JSON, and the stdlib's decoder is the
largest single cost of a request after aiohttp itself; orjson halves it. What changes for a
client: bodies must be valid UTF-8 JSON (a lone surrogate escape such as ``"\\ud800"``, ``NaN``
or a number beyond a float's range is refused as not valid JSON -- the API server never sends
any of them), nesting is capped at 1024 levels, and an integer beyond 64 bits is read as a float
(orjson does so without an error), so a field that must be an integer is refused as malformed.
An AdmissionReview that fits :func:`webhook.wire.review.decode`'s shape is decoded by msgspec
without what no rule reads (managedFields, a pod's containers), and only falls back to
:func:`request_body`; what that changes is said there.

The live view's watch events, and list pages that do not fit their table's shape
(:mod:`webhook.cluster.pages` decodes the others), are decoded by orjson too (:func:`loads`),
but read exactly as the stdlib reads them: whatever orjson refuses or would read differently
goes to ``json.loads``, which then accepts it or raises what it always raised.
"""

from __future__ import annotations

import json
from typing import Any, Final

import orjson

from webhook.errors import BadRequest


def request_body(body: bytes | str, *, expected: str) -> Any:
    """Decode a request body; :class:`BadRequest` (HTTP 400) saying what to send instead."""
    try:
        return orjson.loads(body)
    except (ValueError, RecursionError) as err:
        raise BadRequest(f"request body is not valid JSON ({err}); send {expected}") from None


#: Every digit to "0", every other byte to a space: 19 zeros in a row then mark an integer (or
#: a string) that orjson may read as a float where the stdlib reads an int (2**63 has 19 digits).
_DIGITS: Final = bytes([0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256)])
_LONG_NUMBER: Final = b"0" * 19


def loads(data: bytes) -> Any:
    """Decode JSON from the API server exactly as ``json.loads`` does, at orjson's speed.

    orjson raises on what it refuses (lone surrogates, ``NaN``, nesting over 1024 levels,
    invalid UTF-8) and reads integers beyond 64 bits as floats; both go to the stdlib. The
    digit scan costs about a tenth of the decode (a list page of pods), the fallback only runs
    on such input.
    """
    if _LONG_NUMBER not in data.translate(_DIGITS):
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    return json.loads(data)


def dumps(obj: Any) -> bytes:
    """Compact UTF-8 JSON of ``obj`` (keys in insertion order, like ``json.dumps``)."""
    try:
        return orjson.dumps(obj)
    except TypeError:
        # orjson refuses what UTF-8 cannot hold (a lone surrogate in a str) and integers beyond
        # 64 bits; the stdlib escapes the one and writes the other, which is still valid JSON.
        return json.dumps(obj, separators=(",", ":")).encode()
