"""Decoding a list page: the fields the records read, and nothing of the rest.

A list of 100,000 StatefulSet pods is 500 MB of JSON, and almost none of it is read:
:mod:`webhook.model.records` keeps a pod's name, namespace, labels, owner, node, claims and
whether it is going away, while
``managedFields`` alone are 40-50% of every object, and the containers, volumes and status most
of the rest. Decoding all of it builds a Python object for every field of every item, only for
the garbage collector to free them again. msgspec decodes a page against a *shape* --
TypedDicts naming exactly the fields an extractor reads, with the types a well-formed object
carries there -- and steps over everything else without building an object for it: the cost
is the page's bytes scanned once, and nothing is left to free.

The records must be those a full decode gives, and they are:

* A page that fits its shape decodes to the same dicts as ``json.loads`` gives, less the fields
  no extractor reads (``tests/test_pages.py`` checks that every key an extractor reads is in its
  shape, and compares the records built both ways).
* A page that does not fit -- a ``null`` or a number where a string belongs, a lone surrogate
  escape, ``NaN``, nesting past msgspec's limit -- is decoded whole by
  :func:`webhook.wire.codec.loads`, which reads it as ``json.loads`` does: the extractors then
  see what the stdlib reads, and skip (and log) an unreadable object.
* Stepping over a string does not check its UTF-8, which ``json.loads`` does for the whole page;
  a page that is not pure ASCII is therefore checked as the stdlib decodes it, and one that fails
  goes to :func:`~webhook.wire.codec.loads`, which raises what ``json.loads`` raises.

Only the big collections have a shape (nodes, volumes, claims, pods). StatefulSets are few, and
their record keeps raw nodeSelectorTerms, which a shape could only pass through as they are.
"""

from __future__ import annotations

from typing import Any, Final, Generic, TypedDict, TypeVar

import msgspec

from webhook.model.tables import Table
from webhook.wire import codec

Item = TypeVar("Item")


class _Phase(TypedDict, total=False):
    phase: str


class _Owner(TypedDict, total=False):
    apiVersion: str
    kind: str
    name: str
    controller: bool
    uid: str


class _Meta(TypedDict, total=False):
    # uid and namespace on every kind: the skipped-object log names them (resources.describe).
    name: str
    namespace: str
    uid: str
    labels: dict[str, str]


class _PodMeta(_Meta, total=False):
    ownerReferences: list[_Owner]
    # Set once the pod's deletion has begun (Terminating): its ordinal holds no zone.
    deletionTimestamp: str


class _ClaimSource(TypedDict, total=False):
    claimName: str


class _PodVolume(TypedDict, total=False):
    name: str
    persistentVolumeClaim: _ClaimSource


class _PodSpec(TypedDict, total=False):
    nodeName: str
    volumes: list[_PodVolume]


class _Pod(TypedDict, total=False):
    metadata: _PodMeta
    spec: _PodSpec
    status: _Phase


class _Condition(TypedDict, total=False):
    type: str
    status: str


class _NodeStatus(TypedDict, total=False):
    conditions: list[_Condition]


class _Taint(TypedDict, total=False):
    key: str


class _NodeSpec(TypedDict, total=False):
    taints: list[_Taint]


class _Node(TypedDict, total=False):
    # Metadata-only nodes (PartialObjectMetadata) have no spec or status; full ones are read for
    # their readiness (the Ready condition, the not-ready and unreachable taints) and the
    # conditions the extender filters on.
    metadata: _Meta
    spec: _NodeSpec
    status: _NodeStatus


class _Expression(TypedDict, total=False):
    key: str
    operator: str
    values: list[str]


class _Term(TypedDict, total=False):
    matchExpressions: list[_Expression]
    # Read too: a term of fields alone is no empty term (kube-scheduler: it admits any node).
    matchFields: list[_Expression]


class _Selector(TypedDict, total=False):
    nodeSelectorTerms: list[_Term]


class _VolumeAffinity(TypedDict, total=False):
    required: _Selector


class _ClaimRef(TypedDict, total=False):
    namespace: str
    name: str
    uid: str


class _VolumeSpec(TypedDict, total=False):
    nodeAffinity: _VolumeAffinity
    claimRef: _ClaimRef
    persistentVolumeReclaimPolicy: str


class _Volume(TypedDict, total=False):
    metadata: _Meta
    spec: _VolumeSpec
    status: _Phase


class _ClaimSpec(TypedDict, total=False):
    volumeName: str


# Of a claim's annotations, only the zone a pool broker's claim was given before its pod exists
# (webhook.model.annotations.ZONE): the rest (the binder's, the provisioner's) are stepped over.
_ClaimAnnotations = TypedDict("_ClaimAnnotations", {"stszone.io/zone": str}, total=False)


class _ClaimMeta(_Meta, total=False):
    annotations: _ClaimAnnotations
    # A claim being deleted, or owned by a pod (whenScaled: Delete), goes with that pod.
    ownerReferences: list[_Owner]
    deletionTimestamp: str


class _Claim(TypedDict, total=False):
    metadata: _ClaimMeta
    spec: _ClaimSpec


# "continue" is a Python keyword: the functional form names it.
_ListMeta = TypedDict("_ListMeta", {"resourceVersion": str, "continue": str}, total=False)


class _List(TypedDict, Generic[Item], total=False):
    metadata: _ListMeta
    items: list[Item]


#: The shape of one item of each table that has one (tests read it to check the extractors).
SHAPES: Final[dict[Table, type]] = {
    "nodes": _Node,
    "volumes": _Volume,
    "claims": _Claim,
    "pods": _Pod,
}

_DECODERS: Final[dict[Table, msgspec.json.Decoder[Any]]] = {
    table: msgspec.json.Decoder(_List[shape])  # type: ignore[valid-type]
    for table, shape in SHAPES.items()
}


def read_page(body: bytes, *, table: Table) -> tuple[list[Any], dict[str, Any]]:
    """The items and the list metadata of one page of ``table``.

    Raises what :func:`webhook.wire.codec.loads` raises on a body it cannot read, and
    ``ValueError`` when the body is JSON but no list.
    """
    decoder = _DECODERS.get(table)
    if decoder is not None and _utf8(body):
        try:
            page = decoder.decode(body)
        # ValidationError is a DecodeError; msgspec before 0.23 raises UnicodeDecodeError on a
        # string holding a surrogate's UTF-8 bytes (which _utf8 lets through, as json.loads does).
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
            pass  # does not fit the shape: decode it whole, as the extractors always saw it
        else:
            return page.get("items") or [], page.get("metadata") or {}
    return _page(codec.loads(body))


def _utf8(body: bytes) -> bool:
    """Whether ``json.loads`` would decode ``body`` as UTF-8 (it passes surrogates through)."""
    if body.isascii():
        return True
    try:
        body.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return False
    return True


def _page(page: Any) -> tuple[list[Any], dict[str, Any]]:
    if not isinstance(page, dict):
        raise ValueError("list response is not a JSON object")
    items, meta = page.get("items") or [], page.get("metadata") or {}
    if not isinstance(items, list) or not isinstance(meta, dict):
        raise ValueError("list response has no items list or no metadata")
    return items, meta
