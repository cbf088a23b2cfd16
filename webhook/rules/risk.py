"""Zone risk of every opted-in StatefulSet, refreshed in bounded slices off the request path. Pure.

The figures are those of ``stszone audit`` (:func:`webhook.rules.audit.audit_set`, which asks
the scale-down guard where each ordinal is), reduced to numbers a Prometheus gauge can hold.
Nothing here re-implements placement: a stricter guard or audit changes these figures too.

Cost. A :meth:`RiskScan.sweep` is one refresh cycle. It lists the opted-in sets (one pass over
the StatefulSet table), drops the sets that went, then audits sets round robin until it has
visited ``budget`` ordinals (at least one set, so every cycle makes progress). A set's audit
visits ``min(replicas, WALK_LIMIT)`` ordinals, each a few dictionary lookups. So a
cycle costs at most ``budget + WALK_LIMIT`` ordinal visits whatever the cluster's size; on a
cluster with more ordinals than the budget, a full refresh takes several cycles, and each set
keeps its last figures until its turn comes. The sweep yields after each set, so the server's
job awaits between sets and admission requests are answered in between.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Final

from webhook.model.records import StatefulSetInfo
from webhook.model.store import Store
from webhook.rules import guard
from webhook.rules.audit import SetReport, audit_set, audited

#: Ordinals one refresh cycle visits (plus at most one set's worth beyond it).
BUDGET: Final = 20_000

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

    def sweep(self) -> Iterator[SetRisk]:
        """One refresh cycle; yields each set's new figures as it is audited (await between)."""
        present = {sts.key: sts for sts in audited(self.store, excluded=self.excluded)}
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
            risk = self.sets[key] = SetRisk.of(audit_set(sts, store=self.store))
            if not self._queue:
                self.passes += 1
            yield risk
        self.visited += spent

    def _enqueue(self, key: Key, *, first: bool = False) -> None:
        if first:
            self._queue.appendleft(key)
        else:
            self._queue.append(key)
        self._queued.add(key)

    @staticmethod
    def _cost(sts: StatefulSetInfo) -> int:
        # What audit_set visits; a set of zero replicas still costs its policy lookup.
        return max(1, len(guard.audited_ordinals(sts)))
