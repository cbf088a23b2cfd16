"""The Strimzi cluster operator's node-ID bookkeeping, written again from its Java for property tests.

Read from strimzi-kafka-operator 0.49.1, ``cluster-operator/.../model/nodepools/``
(``NodeIdAssignor.java``, ``NodeIdRange.java``), not from stszone's code, and imports nothing of
``webhook``:

- Node IDs are shared by every KafkaNodePool of a cluster. The IDs in use are the union of the
  pools' ``status.nodeIds`` (a duplicate is an error); the pools are visited in the order the
  API server lists them (by name), and an ID handed out to one pool is in use for the next.
- A pool with fewer ``status.nodeIds`` than ``spec.replicas`` scales up: each new ID is the next
  unused one of ``strimzi.io/next-node-ids`` (one iterator for the whole scale-up), else the
  lowest ID no pool uses. IDs being removed from another pool in the same pass stay in use.
- A pool with more scales down: each removed ID is the next one of ``strimzi.io/remove-node-ids``
  that the pool still holds, in the order listed (ranges run either way: ``[5-3]`` is 5, 4, 3),
  else the pool's highest remaining ID.
- A pool without ``status.nodeIds`` is new: all of its replicas are a scale-up.
- An annotation the operator cannot read (not ``[...]`` of IDs and ``a-b`` ranges, or an ID
  beyond Java's ``int``) is ignored as a whole, as is a blank one or ``[]``.
- After the pass ``status.nodeIds`` is the desired set, ascending, and ``status.replicas`` its
  size (``KafkaPool.generateNodePoolStatus``). The operator never writes either annotation.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

#: Java's ``Integer.MAX_VALUE``: ``Integer.parseInt`` refuses anything larger.
JAVA_INT_MAX = 2**31 - 1

_SINGLE = r"([0-9]+)"
_RANGE = r"([0-9]+\s*-\s*[0-9]+)"
_EITHER = "(" + _SINGLE + "|" + _RANGE + ")"
# NodeIdRange.NODE_ID_RANGE_PATTERN and EMPTY_RANGE_PATTERN; re.ASCII makes \s Java's [ \t\n\x0B\f\r].
_WHOLE = re.compile(r"\s*\[(\s*" + _EITHER + r"\s*,)*\s*" + _EITHER + r"\s*]\s*", re.ASCII)
_EMPTY = re.compile(r"\s*\[\s*]\s*", re.ASCII)
_SINGLE_ITEM = re.compile(_SINGLE, re.ASCII)
_RANGE_ITEM = re.compile(_RANGE, re.ASCII)

#: Characters ``Character.isWhitespace`` accepts outside the Unicode separator categories.
_JAVA_CONTROL_WHITESPACE = frozenset("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f")
#: Separators ``Character.isWhitespace`` leaves out (the non-breaking spaces).
_JAVA_NON_BREAKING = frozenset("\u00a0\u2007\u202f")


def _java_is_blank(text: str) -> bool:
    """``String.isBlank()``: empty or only characters ``Character.isWhitespace`` accepts."""
    return all(
        ch in _JAVA_CONTROL_WHITESPACE
        or (unicodedata.category(ch) in ("Zs", "Zl", "Zp") and ch not in _JAVA_NON_BREAKING)
        for ch in text
    )


def _java_int(digits: str) -> int | None:
    """``Integer.parseInt`` of ASCII digits, or None where it throws (beyond ``int``)."""
    value = int(digits)
    return value if value <= JAVA_INT_MAX else None


@dataclass(frozen=True, slots=True)
class IdRange:
    """One item of an annotation: a single ID (``first == last``) or a range, in listed order."""

    first: int
    last: int

    def ids(self) -> Iterator[int]:
        """The IDs in the order ``NodeIdRange.IdRange.getNextNodeId`` returns them."""
        step = 1 if self.last >= self.first else -1
        yield from range(self.first, self.last + step, step)


def parse_node_ids(annotation: str) -> tuple[IdRange, ...] | None:
    """The items of a ``next-node-ids`` / ``remove-node-ids`` value; None when the operator ignores it.

    A blank value and ``[]`` are valid and empty. Nothing is expanded, so ``[0-2000000000]`` is cheap.
    """
    if _java_is_blank(annotation) or _EMPTY.fullmatch(annotation):
        return ()
    if not _WHOLE.fullmatch(annotation):
        return None
    inner = re.sub(
        r"\s*]\s*$", "", re.sub(r"^\s*\[\s*", "", annotation, flags=re.ASCII), flags=re.ASCII
    )
    items: list[IdRange] = []
    for item in re.split(r"\s*,\s*", inner, flags=re.ASCII):
        if _SINGLE_ITEM.fullmatch(item):
            value = _java_int(item)
            if value is None:
                return None
            items.append(IdRange(value, value))
        elif _RANGE_ITEM.fullmatch(item):
            first, last = (_java_int(part) for part in re.split(r"\s*-\s*", item, flags=re.ASCII))
            if first is None or last is None:
                return None
            items.append(IdRange(first, last))
        else:  # unreachable after the whole-value pattern matched; kept as the Java has it
            return None
    return tuple(items)


def node_id_order(annotation: str | None) -> Iterator[int]:
    """The IDs an annotation hands out, in order (nothing when absent or ignored)."""
    items = parse_node_ids(annotation) if annotation is not None else None
    for item in items or ():
        yield from item.ids()


@dataclass(frozen=True, slots=True)
class Pool:
    """What the assignor reads of a KafkaNodePool."""

    name: str
    replicas: int
    #: ``status.nodeIds``; None for a pool the operator has not reconciled yet.
    node_ids: tuple[int, ...] | None = None
    #: ``metadata.annotations["strimzi.io/next-node-ids"]``
    next_node_ids: str | None = None
    #: ``metadata.annotations["strimzi.io/remove-node-ids"]``
    remove_node_ids: str | None = None


@dataclass(frozen=True, slots=True)
class Assignment:
    """``NodeIdAssignment`` of one pool; ``added`` and ``removed`` keep the order they were chosen."""

    current: frozenset[int]
    desired: frozenset[int]
    added: tuple[int, ...]
    removed: tuple[int, ...]


class DuplicateNodeIdError(ValueError):
    """Two pools' ``status.nodeIds`` hold the same ID (the operator throws and stops)."""


def _lowest_unused(in_use: set[int]) -> int:
    """``NodeIdAssignor.nextUnusedId``: its three branches, which differ only for negative IDs."""
    if not in_use:
        return 0
    highest = max(in_use)
    if len(in_use) == highest + 1:
        return highest + 1
    candidate = 0
    while candidate in in_use:
        candidate += 1
    return candidate


def _scale_up(count: int, in_use: set[int], next_ids: Iterator[int]) -> tuple[int, ...]:
    added: list[int] = []
    for _ in range(count):
        chosen = next((i for i in next_ids if i not in in_use), None)
        if chosen is None:
            chosen = _lowest_unused(in_use)
        in_use.add(chosen)
        added.append(chosen)
    return tuple(added)


def _scale_down(count: int, desired: set[int], remove_ids: Iterator[int]) -> tuple[int, ...]:
    removed: list[int] = []
    for _ in range(count):
        chosen = next((i for i in remove_ids if i in desired), None)
        if chosen is None:
            chosen = max(desired)
        desired.discard(chosen)
        removed.append(chosen)
    return tuple(removed)


def assign(pools: Sequence[Pool]) -> dict[str, Assignment]:
    """The assignment of every pool of one cluster, pools in the order given (the API's, by name)."""
    in_use: set[int] = set()
    for pool in pools:
        for node_id in pool.node_ids or ():
            if node_id in in_use:
                raise DuplicateNodeIdError(
                    f"Found duplicate node ID {node_id} in node pool {pool.name}"
                )
            in_use.add(node_id)
    result: dict[str, Assignment] = {}
    for pool in pools:
        current = set(pool.node_ids) if pool.node_ids is not None else set()
        desired = set(current)
        added: tuple[int, ...] = ()
        removed: tuple[int, ...] = ()
        if pool.node_ids is not None and pool.replicas < len(current):
            removed = _scale_down(
                len(current) - pool.replicas, desired, node_id_order(pool.remove_node_ids)
            )
        elif pool.replicas > len(current):
            added = _scale_up(
                pool.replicas - len(current), in_use, node_id_order(pool.next_node_ids)
            )
            desired.update(added)
        result[pool.name] = Assignment(frozenset(current), frozenset(desired), added, removed)
    return result


def reconcile(pools: Sequence[Pool]) -> tuple[Pool, ...]:
    """The pools after one reconciliation: ``status.nodeIds`` set to the desired IDs, ascending."""
    assignments = assign(pools)
    return tuple(
        replace(pool, node_ids=tuple(sorted(assignments[pool.name].desired))) for pool in pools
    )


def removed_ids(
    node_ids: Sequence[int], replicas: int, remove_node_ids: str | None
) -> tuple[int, ...]:
    """The IDs one pool loses when ``spec.replicas`` drops below ``len(node_ids)``, in order.

    Removal reads only the pool itself, so no other pool is needed.
    """
    if replicas >= len(node_ids):
        return ()
    return _scale_down(len(node_ids) - replicas, set(node_ids), node_id_order(remove_node_ids))
