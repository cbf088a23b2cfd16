"""Zone risk of every opted-in StatefulSet, refreshed in bounded slices off the request path. Pure.

The figures are those of ``stszone audit`` (:func:`webhook.rules.audit.audit_set`, which asks
the scale-down guard where each ordinal is), reduced to numbers a Prometheus gauge can hold.
Nothing here re-implements placement: a stricter guard or audit changes these figures too.

Cost. A :meth:`RiskScan.sweep` is one refresh cycle. It lists the opted-in sets (one pass over
the StatefulSet table, pausing every :data:`LIST_SLICE` sets), drops the sets that went, then
audits sets round robin until it has visited ``budget`` ordinals (at least one set, so every
cycle makes progress). A set's audit visits ``min(replicas, WALK_LIMIT)`` ordinals, each a few
dictionary lookups. So a cycle costs at most ``budget + WALK_LIMIT`` ordinal visits whatever
the cluster's size; on a cluster with more ordinals than the budget, a full refresh takes
several cycles, and each set keeps its last figures until its turn comes.

The sweep pauses (yields) within each set's audit, every
:data:`~webhook.rules.audit.PAUSE_EVERY` ordinals (:func:`~webhook.rules.audit.audit_steps`),
and after each set; the server's job waits at each pause, so admission requests are answered
in between: a set of 1,000 ordinals is 63 slices, not one hold of the loop.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Final

from webhook.model.records import StatefulSetInfo
from webhook.model.store import Store
from webhook.rules import guard
from webhook.rules.audit import SetReport, audit_steps, audits

#: Ordinals one refresh cycle visits (plus at most one set's worth beyond it).
BUDGET: Final = 20_000
#: StatefulSets a sweep lists between pauses (finding the opted-in ones).
LIST_SLICE: Final = 256

Key = tuple[str, str]


@dataclass(frozen=True, slots=True)
class SetRisk:
    """The zone-risk figures of one StatefulSet (what the gauges export)."""

    namespace: str
    name: str
    replicas: int
    #: Zones the set lists (``stszone.io/zones``, else the server's zone list); 0 when malformed.
    zones: int
    #: Listed zones some ordinal holds now (pod, else volume, else rule: as the guard sees it).
    held: int
    #: Pods running outside their expected zone (or node, in node-ordinal mode).
    misplaced: int
    #: Ordinals whose zone the guard cannot tell.
    unknown: int
    #: Lowest replica count that keeps every zone held now; None when the set is malformed.
    lowest: int | None
    #: Why the set cannot be placed (malformed annotations), or "".
    problem: str = ""

    @classmethod
    def of(cls, report: SetReport) -> SetRisk:
        """The figures of one audited set."""
        listed = set(report.zones)
        return cls(
            namespace=report.namespace,
            name=report.name,
            replicas=report.replicas,
            zones=len(listed),
            held=len(listed.intersection(report.held)),
            misplaced=report.misplaced,
            unknown=len(report.unknown),
            lowest=report.lowest,
            problem=report.problem,
        )


class RiskScan:
    """The latest figures of every opted-in set, refreshed by :meth:`sweep` in bounded slices."""

    def __init__(
        self, store: Store, *, excluded: Collection[str] = (), budget: int = BUDGET
    ) -> None:
        self.store = store
        self.excluded = excluded
        self.budget = budget
        #: (namespace, name) -> the set's latest figures; sets that went are removed.
        self.sets: dict[Key, SetRisk] = {}
        #: Ordinals visited by every sweep so far (the work done, for tests and profiling).
        self.visited = 0
        #: Sweeps that completed a pass over every set (each set refreshed at least once since).
        self.passes = 0
        self._queue: deque[Key] = deque()
        self._queued: set[Key] = set()

    def sweep(self) -> Iterator[None]:
        """One refresh cycle; yields at each pause (await there), a set's figures replacing its
        last ones when its audit is done."""
        present: dict[Key, StatefulSetInfo] = {}
        listed = list(self.store.statefulsets.values())  # a copy: the view may change at a pause
        for first in range(0, len(listed), LIST_SLICE):
            if first:
                yield
            for each in listed[first : first + LIST_SLICE]:
                if audits(self.store, each, excluded=self.excluded):
                    present[each.key] = each
        for key in [key for key in self.sets if key not in present]:
            del self.sets[key]  # its series go at once, not at the end of a pass
        for key in sorted(present.keys() - self.sets.keys() - self._queued, reverse=True):
            self._enqueue(key, first=True)  # new sets are audited before the others
        if not self._queue:
            for key in sorted(present):
                self._enqueue(key)
            if not present:
                self.passes += 1  # nothing to refresh: every set (none) is current
        spent = 0
        while self._queue and (spent == 0 or spent < self.budget):
            key = self._queue.popleft()
            self._queued.discard(key)
            sts = present.get(key)
            if sts is None:
                continue
            spent += self._cost(sts)
            report = yield from audit_steps(sts, store=self.store)
            if key in self.store.statefulsets:
                self.sets[key] = SetRisk.of(report)
            else:  # deleted at a pause: no figures for a set that is gone
                self.sets.pop(key, None)
            if not self._queue:
                self.passes += 1
            yield
        self.visited += spent

    def _enqueue(self, key: Key, *, first: bool = False) -> None:
        if first:
            self._queue.appendleft(key)
        else:
            self._queue.append(key)
        self._queued.add(key)

    @staticmethod
    def _cost(sts: StatefulSetInfo) -> int:
        # What audit_steps visits; a set of zero replicas still costs its policy lookup.
        return max(1, len(guard.audited_ordinals(sts)))
