"""JSON Patch between an object and its mutated copy, via ``jsonpatch.make_patch``.

Mutations copy on write: every dict or list they change is a fresh copy, every subtree they
leave alone is the *same object* as in the original. :func:`diff` uses that to hand
``make_patch`` only the branches that can differ, which keeps the hot path from walking
``managedFields`` and every container on each request. The patch is still ``make_patch``'s
own output, with paths escaped by jsonpatch (``~1`` for ``/`` in annotation keys).

``make_patch`` is also the most expensive step of a mutation (it deep-copies both sides and
walks them), while the pruned inputs repeat: every pod of a StatefulSet gets the same affinity
and annotation in the same zone. So the patch, and its base64 wire form, are memoised by the
JSON text of the pruned pair, which determines ``make_patch``'s output exactly (key order
included) for a pair of JSON values (string keys: decoded objects and what mutations write).
A memoised patch is shared between requests: treat every patch as read-only.
"""

from __future__ import annotations

from base64 import b64encode
from itertools import compress, repeat
from operator import is_not
from typing import Any

import jsonpatch
import msgspec

from webhook.wire import codec

Patch = list[dict[str, Any]]
_MISSING: Any = object()
#: Memoised patches (JSON text of the pruned pair -> the patch and its wire form), oldest first.
_PATCHES: dict[bytes, tuple[Patch, str]] = {}
#: Bounds of the memo: entries, and the key size above which a pair is diffed but not kept.
_MEMO_ENTRIES = 1024
_MEMO_KEY_BYTES = 8192


def _prune(original: Any, mutated: Any) -> tuple[Any, Any]:
    """Drop the keys whose values are identical objects on both sides, recursively."""
    if not (isinstance(original, dict) and isinstance(mutated, dict)) or original is mutated:
        return original, mutated
    left: dict[str, Any] = {}
    right: dict[str, Any] = {}
    # The keys whose values are not the very objects of the original, found in one C-level
    # pass (map, compress): every key of a pod, its metadata and its spec is looked at on
    # every mutation, and only the few the mutation copied need more.
    differs = map(is_not, map(original.get, mutated, repeat(_MISSING)), mutated.values())
    added = 0
    for key in compress(mutated, differs):
        a, b = original.get(key, _MISSING), mutated[key]
        if a is _MISSING:
            right[key] = b
            added += 1
        else:
            left[key], right[key] = _prune(a, b)
    if len(original) != len(mutated) - added:  # the mutation removed keys
        for key, a in original.items():
            if key not in mutated:
                left[key] = a
    return left, right


def diff(original: dict[str, Any], mutated: dict[str, Any]) -> Patch:
    """The JSON Patch that turns ``original`` into ``mutated`` (empty when they are equal)."""
    return diff_encoded(original, mutated)[0]


def diff_encoded(original: dict[str, Any], mutated: dict[str, Any]) -> tuple[Patch, str]:
    """:func:`diff`, with the patch's base64 wire form (``""`` for an empty patch)."""
    left, right = _prune(original, mutated)
    if not left and not right:
        return [], ""
    try:
        key = msgspec.json.encode([left, right])
    except (TypeError, UnicodeEncodeError, RecursionError):  # not JSON (a caller's own structure)
        key = b""
    hit = _PATCHES.get(key) if key else None
    if hit is not None:
        return hit
    ops: Patch = jsonpatch.make_patch(left, right).patch
    result = (ops, encode(ops))
    if key and len(key) <= _MEMO_KEY_BYTES:
        if len(_PATCHES) >= _MEMO_ENTRIES:
            del _PATCHES[next(iter(_PATCHES))]
        _PATCHES[key] = result
    return result


def encode(patch: Patch) -> str:
    """Base64 of the patch's JSON, as ``AdmissionResponse.patch`` carries it."""
    return b64encode(codec.dumps(patch)).decode("ascii")


def apply(obj: dict[str, Any], patch: Patch) -> dict[str, Any]:
    """Apply a patch to a copy of ``obj`` (used by ``stszone review`` and the tests)."""
    result: dict[str, Any] = jsonpatch.apply_patch(obj, patch, in_place=False)
    return result
