"""JSON on the hot paths: msgspec, with the stdlib where exactness needs it, in one place.

msgspec does every decode and encode at run time: request bodies (against a shape when the
caller has one: the AdmissionReview envelope, :mod:`webhook.wire.review`), the answers, the live
view's watch events and the list pages that do not fit their table's shape
(:mod:`webhook.cluster.pages` decodes the others). It
reads every document it accepts as ``json.loads`` does: the same values of the same types in
the same key order, an integer an ``int`` however long (up to the 4300 digits the interpreter
reads), the last of duplicate keys kept (tests/test_live_decode.py holds it to that). Where it
differs is in what it accepts, and each use settles that its own way:

* A request body (:func:`request_body`) must be valid UTF-8 JSON: a lone surrogate escape such
  as ``"\\ud800"``, ``NaN`` or ``Infinity``, a number beyond a float's range, nesting past the
  interpreter's recursion limit (under 1000 levels) or trailing data is refused with a one-line
  400 that says what to send. The API server never sends any of them: it decodes every object
  into Go types before it calls a webhook.
* The API server's own JSON (:func:`loads`) is read exactly as the stdlib reads it: whatever
  msgspec refuses goes to ``json.loads``, which reads it or raises its own error.
* An answer (:func:`dumps`) that msgspec cannot write (a lone surrogate in a string, a ``str``
  subclass) is written by ``json.dumps``, which escapes the one and writes the other.
"""

from __future__ import annotations

import json
from typing import Any, Final

import msgspec

from webhook.errors import BadRequest

#: A decode into plain Python objects (dicts, lists, str, int, float, bool, None).
_WHOLE: Final[msgspec.json.Decoder[Any]] = msgspec.json.Decoder()


def request_body(
    body: bytes | str, *, expected: str, decoder: msgspec.json.Decoder[Any] = _WHOLE
) -> Any:
    """Decode a request body; :class:`BadRequest` (HTTP 400) saying what to send instead.

    ``decoder`` may step over what its shape leaves out; stepping over a string does not check
    its UTF-8, so a body that is not ASCII is checked as UTF-8 first, whatever the decoder. JSON
    that does not fit a typed shape raises :class:`msgspec.ValidationError`, for the caller to
    word (it knows the shape).
    """
    try:
        if not body.isascii():
            if isinstance(body, bytes):
                body.decode("utf-8")
            else:
                body.encode("utf-8")  # a str holding a lone surrogate cannot be UTF-8
        return decoder.decode(body)
    except (msgspec.DecodeError, UnicodeError, RecursionError) as err:
        # ValidationError is a DecodeError: JSON off a typed shape, or, decoded whole, past
        # one of JSON's limits (an integer of more digits than the interpreter reads).
        if isinstance(err, msgspec.ValidationError) and decoder is not _WHOLE:
            raise
        raise BadRequest(f"request body is not valid JSON ({err}); send {expected}") from None


def loads(data: bytes) -> Any:
    """Decode JSON from the API server exactly as ``json.loads`` does, at msgspec's speed.

    msgspec refuses what the stdlib reads (lone surrogates, escaped or as UTF-8 bytes; ``NaN``
    and ``Infinity``; numbers beyond a float's range, read as infinities; a byte order mark,
    UTF-16 and UTF-32) and some of what it refuses: all of it goes to the stdlib. Nesting is
    the one difference left: each stops at the interpreter's recursion limit, counted its own
    way (msgspec reads a few levels deeper), far beyond any object the API server holds.
    """
    try:
        return _WHOLE.decode(data)
    # ValidationError is a DecodeError; msgspec before 0.23 raises UnicodeDecodeError on a
    # string holding a surrogate's UTF-8 bytes.
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return json.loads(data)


def dumps(obj: Any) -> bytes:
    """Compact UTF-8 JSON of ``obj`` (keys in insertion order, like ``json.dumps``)."""
    try:
        return msgspec.json.encode(obj)
    except (TypeError, UnicodeEncodeError):
        # msgspec refuses what UTF-8 cannot hold (a lone surrogate in a str) and subclasses of
        # str; the stdlib escapes the one and writes the other, which is still valid JSON.
        return json.dumps(obj, separators=(",", ":")).encode()
