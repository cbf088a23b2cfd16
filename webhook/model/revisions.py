"""Which part of the view each change touched, so the zone-risk job audits only what moved. Pure.

One counter, bumped by every change of a record that changed something. What a StatefulSet's
audit reads is its record and pods, its namespace's claims, and cluster-wide records (nodes,
volumes); each of those keeps the revision it last changed at, so :meth:`Revisions.of` tells
whether anything a set's figures read has changed since (a re-list moves every set's). Only
sets that exist and namespaces that hold sets are kept: a set created later starts with a
revision above all before.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from webhook.model.records import ClaimInfo, Info, NodeInfo, PodInfo, StatefulSetInfo, VolumeInfo
from webhook.model.setkinds import KINDS

if TYPE_CHECKING:
    from webhook.model.indexed import IndexedTables


def set_key(namespace: str, name: str, group: str) -> tuple[str, ...]:
    """The key of a set's pods and revision (:attr:`PodInfo.set_key`)."""
    return (namespace, name, group) if group else (namespace, name)


@dataclass
class Revisions:
    """The revision counter and what each set, namespace and the whole view changed at."""

    now: int = 0
    _cluster: int = 0
    _namespaces: dict[str, int] = field(default_factory=dict)
    _sets: dict[tuple[str, ...], int] = field(default_factory=dict)

    def of(self, namespace: str, key: tuple[str, ...]) -> int:
        """The revision at which anything the audit of the set ``key`` reads last changed."""
        return max(self._cluster, self._namespaces.get(namespace, 0), self._sets.get(key, 0))

    def held(self) -> tuple[int, int]:
        """How many sets and namespaces carry a revision (bounded by those the view holds)."""
        return len(self._sets), len(self._namespaces)

    def relisted(self) -> None:
        """A re-list may change anything: every set's revision moves past all earlier ones."""
        self.now += 1
        self._cluster = self.now
        self._namespaces.clear()
        self._sets.clear()

    def changed(self, infos: Iterable[Info], *, view: IndexedTables) -> None:
        """One change touching ``infos``: the revision moves on, and each record's set,
        namespace or the whole view is marked changed at it."""
        self.now += 1
        for info in infos:
            self._mark(info, view=view)

    def _mark(self, info: Info, *, view: IndexedTables) -> None:
        now = self.now
        if isinstance(info, StatefulSetInfo):
            key = set_key(info.namespace, info.name, info.group)
            table = view.table(KINDS[info.group].table)
            if info.key in table:
                self._sets[key] = now
            else:  # deleted: a set created later starts above every revision before
                self._sets.pop(key, None)
                if not view.has_sets(info.namespace):
                    self._namespaces.pop(info.namespace, None)
        elif isinstance(info, PodInfo) and info.owner is not None:
            table = view.table(KINDS[info.group].table)
            if (info.namespace, info.owner) in table:
                self._sets[set_key(info.namespace, info.owner, info.group)] = now
        elif isinstance(info, ClaimInfo):
            if view.has_sets(info.namespace):
                self._namespaces[info.namespace] = now
        elif isinstance(info, (NodeInfo, VolumeInfo)):  # a volume is reached by name from any claim
            self._cluster = now
        # Otherwise a pod no set owns (the audit reads it as none; the live view keeps none) or
        # a namespace (it decides which sets are audited, and every sweep lists them anew).
