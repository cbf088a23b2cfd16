"""Secondary indexes of the Store: records grouped by a key, each group summarised as it changes.

An index answers "the records of this set / this claim / this namespace" with one lookup. An
index with a summary (a set's ordinals, its pods by ordinal) works out a group's summary from
that group alone whenever the view changes the group: a request reads it and never builds it,
so a scale-down of a 1,000-pod set does not visit 1,000 pods. Pure: only the view's own writes
(put, delete, a list folded in) change an index.

Most groups of some indexes hold one record (a volume's claim names one claim): such a group
is held as the record itself, not as a dict of one -- 100,000 volumes would otherwise hold
100,000 one-entry dicts (about 20 MB).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, Generic, TypeVar

from webhook.model.namespaces import NamespaceInfo
from webhook.model.nodepools import KafkaNodePoolInfo, PoolPodInfo
from webhook.model.records import (
    ClaimInfo,
    Info,
    Key,
    NodeInfo,
    PodInfo,
    StatefulSetInfo,
    VolumeInfo,
)
from webhook.model.tables import Table

R = TypeVar(
    "R",
    NodeInfo,
    VolumeInfo,
    ClaimInfo,
    StatefulSetInfo,
    PodInfo,
    NamespaceInfo,
    KafkaNodePoolInfo,
    PoolPodInfo,
)
S = TypeVar("S")


class Index(Generic[R, S]):
    """A secondary index over one table: group key -> its records by primary key.

    With ``summarise``, :meth:`summary` answers a question about one group's records.
    """

    def __init__(
        self,
        group: Callable[[R], Hashable | None],
        *,
        summarise: Callable[[Iterable[R]], S] | None = None,
    ) -> None:
        self._group: Callable[[R], Hashable | None] = group
        #: A group of one is the record itself (records are never dicts); larger ones a dict.
        self._groups: dict[Hashable, dict[Key, R] | R] = {}
        self._summarise: Callable[[Iterable[R]], S] | None = summarise
        #: Each group's summary, kept in step with the group; that of a group with no record.
        self._summaries: dict[Hashable, S] = {}
        self._empty: S | None = summarise(()) if summarise is not None else None

    @property
    def summarises(self) -> bool:
        return self._summarise is not None

    def add(self, info: R, *, key: Key, summarise: bool = True) -> Hashable | None:
        """Add ``info``, held under ``key`` (its primary key) in its group; the group's key.

        ``summarise=False`` leaves the group's summary for :meth:`resummarise` to bring up to
        date (a caller adding many records to one group at once).
        """
        group = self._group(info)
        if group is None:
            return None
        members = self._groups.get(group)
        if members is None or (not isinstance(members, dict) and members.key == key):
            self._groups[group] = info
        elif isinstance(members, dict):
            members[key] = info
        else:
            self._groups[group] = {members.key: members, key: info}
        if summarise:
            self.resummarise(group)
        return group

    def remove(self, info: R, *, summarise: bool = True) -> Hashable | None:
        """Remove ``info`` (by its primary key) from its group, if it is there; the group's key."""
        group = self._group(info)
        members = self._groups.get(group) if group is not None else None
        if members is None:
            return group
        if isinstance(members, dict):
            members.pop(info.key, None)
            if not members:
                del self._groups[group]
        elif members.key == info.key:
            del self._groups[group]
        if summarise:
            self.resummarise(group)
        return group

    def resummarise(self, group: Hashable | None) -> None:
        """Work out the summary of ``group`` again from its records (none for an empty one)."""
        if self._summarise is None or group is None:
            return
        if group in self._groups:
            self._summaries[group] = self._summarise(self.get(group).values())
        else:
            self._summaries.pop(group, None)

    def empty(self) -> Index[R, S]:
        """A new, empty index grouping and summarising the same way."""
        return Index(self._group, summarise=self._summarise)

    def adopt(self, other: Index[R, S]) -> None:
        """Take ``other``'s groups and summaries (built for a staging table) as this index's own."""
        self._groups, self._summaries = other._groups, other._summaries

    def summary(self, key: Hashable) -> S:
        """The summary of one group's records (an empty group included)."""
        found = self._summaries.get(key, self._empty)
        if found is None:
            raise TypeError("this index summarises nothing")
        return found

    def groups(self) -> Iterable[Hashable]:
        """The keys of the groups that hold a record."""
        return self._groups.keys()

    def get(self, key: Hashable) -> Mapping[Key, R]:
        """The records of one group (empty when none)."""
        members = self._groups.get(key)
        if members is None:
            return {}
        if isinstance(members, dict):
            return members
        return {members.key: members}


class Staging:
    """A table being filled (a list in progress) and its indexes; see :meth:`Store.staging`."""

    def __init__(self, name: Table, indexes: tuple[Index[Any, Any], ...]) -> None:
        self.name: Table = name
        self.table: dict[Any, Any] = {}
        self.indexes = indexes

    def add(self, infos: Iterable[Info]) -> None:
        """Add records (a key seen before is replaced: the last one wins, as in a dict)."""
        table, indexes = self.table, self.indexes
        # The groups each index's records went to: summarised once each, after the last record,
        # rather than again for every record a group gains.
        touched = tuple(
            (index, set[Hashable | None]() if index.summarises else None) for index in indexes
        )
        for info in infos:
            # One key tuple for the table and every index: a namespaced record's key is built
            # anew by each call of its property, and 100k pods would hold two copies each.
            key = info.key
            old = table.get(key)
            for index, groups in touched:
                gone = index.remove(old, summarise=False) if old is not None else None
                group = index.add(info, key=key, summarise=False)
                if groups is not None:
                    groups.update((gone, group))
            table[key] = info
        for index, groups in touched:
            for group in groups or ():
                index.resummarise(group)

    def __len__(self) -> int:
        return len(self.table)
