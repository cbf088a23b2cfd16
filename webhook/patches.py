"""JSON Patch between an object and its mutated copy, via ``jsonpatch.make_patch``.

Mutations copy on write: every dict or list they change is a fresh copy, every subtree they
leave alone is the *same object* as in the original. :func:`diff` uses that to hand
``make_patch`` only the branches that can differ, which keeps the hot path from walking
``managedFields`` and every container on each request. The patch is still ``make_patch``'s
own output, with paths escaped by jsonpatch (``~1`` for ``/`` in annotation keys).
"""

from __future__ import annotations

import json
from base64 import b64encode
from typing import Any

import jsonpatch

Patch = list[dict[str, Any]]
_MISSING: Any = object()


def _prune(original: Any, mutated: Any) -> tuple[Any, Any]:
    """Drop the keys whose values are identical objects on both sides, recursively."""
    if not (isinstance(original, dict) and isinstance(mutated, dict)) or original is mutated:
        return original, mutated
    left: dict[str, Any] = {}
    right: dict[str, Any] = {}
    for key in original.keys() | mutated.keys():
        a, b = original.get(key, _MISSING), mutated.get(key, _MISSING)
        if a is b:
            continue
        if a is _MISSING:
            right[key] = b
        elif b is _MISSING:
            left[key] = a
        else:
            left[key], right[key] = _prune(a, b)
    return left, right


def diff(original: dict[str, Any], mutated: dict[str, Any]) -> Patch:
    """The JSON Patch that turns ``original`` into ``mutated`` (empty when they are equal)."""
    left, right = _prune(original, mutated)
    if not left and not right:
        return []
    ops: Patch = jsonpatch.make_patch(left, right).patch
    return ops


def encode(patch: Patch) -> str:
    """Base64 of the patch's JSON, as ``AdmissionResponse.patch`` carries it."""
    return b64encode(json.dumps(patch, separators=(",", ":")).encode()).decode("ascii")


def apply(obj: dict[str, Any], patch: Patch) -> dict[str, Any]:
    """Apply a patch to a copy of ``obj`` (used by ``stszone review`` and the tests)."""
    result: dict[str, Any] = jsonpatch.apply_patch(obj, patch, in_place=False)
    return result
