"""The JSON Patch between the object the API server sent and its edited copy. Pure.

The patch is ``jsonpatch.make_patch``'s own, as controller-runtime's ``PatchResponseFromRaw``
answers with the patch of (original, edited): paths escaped by jsonpatch (``~1`` for ``/`` in
annotation keys), never written by hand. The edited copy shares every branch the edits did not
touch with the original (:mod:`webhook.wire.edits`), and a shared branch cannot differ: only
the keys whose values are not the very same objects on both sides are handed to
``make_patch``, which otherwise walks every field of the object (``managedFields``, every
container) on every request. The patch is the same: ``make_patch`` answers nothing for equal
values (tests/test_patch.py holds the two to the same result on random objects and edits).

``make_patch`` costs about 200 microseconds even for the few keys of one pod's edits, more
than the rest of a request; pods of one set differ only in their ordinal, so their pairs, and
patches, repeat. :func:`diff` keeps the patches of the last pairs it saw, by the JSON of the
pair: a pure memo (the patch is a function of that text alone), bounded in entries and in the
size of a pair it keeps, the one memo of the request path (docs/performance.md gives the
figure that keeps it). A patch may be shared between answers: treat every patch as read-only.
"""

from __future__ import annotations

from base64 import b64encode
from typing import Any

import jsonpatch
import msgspec

from webhook.wire import codec

Patch = list[dict[str, Any]]
_MISSING: Any = object()
#: Patches by the JSON of the pair they turn one into the other, oldest first.
_PATCHES: dict[bytes, Patch] = {}
#: Bounds of the memo: entries, and the size of a pair's JSON above which it is not kept.
_MEMO_ENTRIES = 1024
_MEMO_KEY_BYTES = 8192


def _differing(original: Any, edited: Any) -> tuple[Any, Any]:
    """``original`` and ``edited`` less the keys whose values are one object on both sides."""
    if not (isinstance(original, dict) and isinstance(edited, dict)) or original is edited:
        return original, edited
    left: dict[str, Any] = {}
    right: dict[str, Any] = {}
    for key, b in edited.items():
        a = original.get(key, _MISSING)
        if a is _MISSING:
            right[key] = b
        elif a is not b:
            left[key], right[key] = _differing(a, b)
    for key, a in original.items():
        if key not in edited:
            left[key] = a
    return left, right


def diff(original: dict[str, Any], edited: dict[str, Any]) -> Patch:
    """The JSON Patch that turns ``original`` into ``edited`` (empty when they are equal)."""
    if original is edited:
        return []
    left, right = _differing(original, edited)
    try:
        key = msgspec.json.encode([left, right])
    except (TypeError, UnicodeEncodeError, RecursionError):  # not JSON: a caller's own structure
        key = b""
    ops = _PATCHES.get(key) if key else None
    if ops is None:
        ops = jsonpatch.make_patch(left, right).patch
        if key and len(key) <= _MEMO_KEY_BYTES:
            if len(_PATCHES) >= _MEMO_ENTRIES:
                del _PATCHES[next(iter(_PATCHES))]
            _PATCHES[key] = ops
    return ops


def encode(patch: Patch) -> str:
    """Base64 of the patch's JSON, as ``AdmissionResponse.patch`` carries it."""
    return b64encode(codec.dumps(patch)).decode("ascii")


def apply(obj: dict[str, Any], patch: Patch) -> dict[str, Any]:
    """Apply a patch to a copy of ``obj`` (``stszone review``'s chain, and the tests).

    Both are copied through JSON, not ``copy.deepcopy``: an object nested as deep as the review
    decoder reads (close to the recursion limit) would take ``deepcopy`` two frames a level.
    The patch is copied too, so that the result shares nothing with a (shared) patch.
    """
    doc, ops = codec.loads(codec.dumps([obj, patch]))
    result: dict[str, Any] = jsonpatch.apply_patch(doc, ops, in_place=True)
    return result
