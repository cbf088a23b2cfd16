"""The view's nodes by label: key -> value -> the names of the nodes carrying it. Pure.

Every node selection reads one label of every node (a set's zones are the values of its
topology key; a volume pinned by hostname selects the node carrying that value), and a scan of
5,000 nodes per request would cost more than the rest of the request. The index is kept by the
view as its nodes change (:class:`webhook.model.store.Store` adds and removes records, and
rebuilds it when a list replaces the nodes), so a request only reads it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from webhook.model.records import NodeInfo

_NONE: tuple[str, ...] = ()


class NodeLabels:
    """Node names by label key and value, each group a sorted tuple."""

    def __init__(self, nodes: Iterable[NodeInfo] = ()) -> None:
        grouped: dict[str, dict[str, list[str]]] = {}
        for node in nodes:
            for key, value in node.labels.items():
                grouped.setdefault(key, {}).setdefault(value, []).append(node.name)
        self._by_key: dict[str, dict[str, tuple[str, ...]]] = {
            key: {value: tuple(sorted(names)) for value, names in values.items()}
            for key, values in grouped.items()
        }

    def values(self, key: str) -> Mapping[str, tuple[str, ...]]:
        """Value of label ``key`` -> the nodes carrying it (empty when no node has the key)."""
        return self._by_key.get(key, {})

    def nodes(self, key: str, value: str) -> tuple[str, ...]:
        """The nodes whose label ``key`` is ``value`` (sorted)."""
        return self._by_key.get(key, {}).get(value, _NONE)

    def add(self, node: NodeInfo) -> None:
        """Count ``node`` under each of its labels."""
        for key, value in node.labels.items():
            values = self._by_key.setdefault(key, {})
            values[value] = tuple(sorted({*values.get(value, _NONE), node.name}))

    def remove(self, node: NodeInfo) -> None:
        """Forget ``node`` under each of its labels."""
        for key, value in node.labels.items():
            values = self._by_key.get(key)
            if values is None or value not in values:
                continue
            left = tuple(n for n in values[value] if n != node.name)
            if left:
                values[value] = left
                continue
            del values[value]
            if not values:
                del self._by_key[key]
