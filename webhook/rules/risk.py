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

A set whose inputs have not changed since its figures were made is not audited again: the view
keeps, per set, the revision at which anything its audit reads last changed (its record and
pods, its namespace's claims, any node or volume: :meth:`Store.revision_of`), and the sweep
compares it with the one the figures were made at. On a quiet cluster a refresh then costs the
listing and one comparison per set; a pod that moves re-audits its set alone, a claim its
namespace's sets, a node or a volume every set.

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
from webhook.rules.audit import SetReport, audit_steps
from webhook.rules.auditscope import audits
from webhook.rules.policy import walked_members

#: Ordinals one refresh cycle visits (plus at most one set's worth beyond it).
BUDGET: Final = 20_000
#: StatefulSets a sweep lists between pauses (finding the opted-in ones).
LIST_SLICE: Final = 256

#: (namespace, name) of a StatefulSet; (namespace, name, group) of another kind's set.
Key = tuple[str, ...]


def key_of(sts: StatefulSetInfo) -> Key:
    """The scan's key of a set: its kind's sets of one name are apart."""
    return (*sts.key, sts.group) if sts.group else sts.key


def _held(store: Store, key: Key) -> StatefulSetInfo | None:
    return store.statefulset(key[0], key[1], key[2] if len(key) > 2 else "")


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
    #: The set's group: "" for ``apps/v1``, ``apps.kruise.io`` for an Advanced StatefulSet.
    group: str = ""
    #: Its pod template is labelled ``stszone.io/skip=true``: stszone places none of its pods.
    skipped: bool = False
    #: ``metadata.deletionTimestamp`` is set: its pods go with it, so none is alerted on.
    deleting: bool = False

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
            group=report.group,
            skipped=report.skipped,
            deleting=report.deleting,
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
        #: Sets a sweep found unchanged since their figures were made, so did not audit again.
        self.unchanged = 0
        #: The view's revision (:meth:`Store.revision_of`) each set's figures were made at.
        self._revisions: dict[Key, int] = {}
        self._queue: deque[Key] = deque()
        self._queued: set[Key] = set()

    def sweep(self) -> Iterator[None]:
        """One refresh cycle; yields at each pause (await there), a set's figures replacing its
        last ones when its audit is done."""
        # The opted-in sets, in the order listed (keys only: a set's record is read when its
        # audit starts, as the view has it then).
        present: dict[Key, None] = {}
        # A copy: the view may change at a pause. StatefulSets, then Advanced StatefulSets.
        listed = [*self.store.statefulsets.values(), *self.store.kruisesets.values()]
        for first in range(0, len(listed), LIST_SLICE):
            if first:
                yield
            for each in listed[first : first + LIST_SLICE]:
                if audits(self.store, each, excluded=self.excluded):
                    present[key_of(each)] = None
        for key in [key for key in self.sets if key not in present]:
            del self.sets[key]  # its series go at once, not at the end of a pass
            self._revisions.pop(key, None)
        # In the order listed (the API lists by namespace and name): a few simple steps per
        # set, where sorting thousands of keys would hold the loop for milliseconds.
        starting = not self._queue  # the last pass is done: this sweep starts the next
        new = [key for key in present if key not in self.sets and key not in self._queued]
        for key in reversed(new):
            self._enqueue(key, first=True)  # new sets are audited before the others
        if starting:
            for count, key in enumerate(present, 1):
                if key not in self._queued:
                    self._enqueue(key)
                if count % LIST_SLICE == 0:
                    yield
            if not present:
                self.passes += 1  # nothing to refresh: every set (none) is current
        spent = unchanged = 0
        while self._queue and (spent == 0 or spent < self.budget):
            key = self._queue.popleft()
            self._queued.discard(key)
            sts = _held(self.store, key) if key in present else None
            if sts is None:
                continue
            revision = self.store.revision_of(*key)
            if key in self.sets and self._revisions.get(key) == revision:
                unchanged += 1  # nothing its figures read has changed since: they stand
                pause = unchanged % LIST_SLICE == 0
            else:
                spent += self._cost(sts, self.store)
                report = yield from audit_steps(sts, store=self.store)
                if _held(self.store, key) is not None:
                    self.sets[key] = SetRisk.of(report)
                    # The revision before the audit: a change at one of its pauses is newer.
                    self._revisions[key] = revision
                else:  # deleted at a pause: no figures for a set that is gone
                    self.sets.pop(key, None)
                    self._revisions.pop(key, None)
                pause = True
            if not self._queue:
                self.passes += 1
            if pause:
                yield
        self.visited += spent
        self.unchanged += unchanged

    @property
    def catching_up(self) -> bool:
        """Whether sets wait for their first figures (new sets are queued first, so the head
        of the queue tells): the job then refreshes again soon rather than a whole interval
        later, so a restart or a new set is not without gauges for minutes on a big cluster."""
        return bool(self._queue) and self._queue[0] not in self.sets

    def _enqueue(self, key: Key, *, first: bool = False) -> None:
        if first:
            self._queue.appendleft(key)
        else:
            self._queue.append(key)
        self._queued.add(key)

    @staticmethod
    def _cost(sts: StatefulSetInfo, store: Store) -> int:
        # What audit_steps visits; a set of zero replicas still costs its policy lookup.
        return max(1, len(walked_members(sts, store=store)))
