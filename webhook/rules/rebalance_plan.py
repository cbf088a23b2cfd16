"""What a ``stszone rebalance`` plan is: per set, a row for each member and the steps (moves)
in order, with what each step must find unchanged before it evicts. Pure data.

:mod:`webhook.rules.rebalance` fills it; the executor (:mod:`webhook.cluster.rebalance`), its
progress words (:mod:`webhook.cluster.moves`) and the command's text and JSON
(:mod:`webhook.cli.rebalance_text`) read it, needing none of the planning.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from webhook.model.kruise import Intervals
from webhook.rules.policy import workload_kind

#: How a member stands: in its rule zone, free to move, held elsewhere by its data, or stuck.
Kind = Literal["in place", "movable", "pinned by data", "blocked"]


@dataclass(frozen=True, slots=True)
class Claim:
    """A claim deleted with its pod under ``--move-data``: its uid guards against a newer one."""

    name: str
    uid: str
    volume: str


@dataclass(frozen=True, slots=True)
class Row:
    """One ordinal of the plan."""

    ordinal: int
    pod: str
    node: str
    #: The zone its pod runs in (None: no pod, not scheduled, or unknown).
    zone: str | None
    target: str
    kind: Kind
    #: 1-based place in the set's order when it moves, else None.
    step: int | None = None
    #: Why it is blocked or pinned, and what moving it costs, in words.
    notes: tuple[str, ...] = ()
    claims: tuple[Claim, ...] = ()


@dataclass(frozen=True, slots=True)
class Step:
    """One move: evict ``pod`` (deleting ``claims`` first when moving data) and wait for it.

    The set is named by group too, and its members as planned (``replicas``, ``spec_start``,
    ``reserved``): the executor re-reads the set before the move and stops when they changed.
    """

    namespace: str
    statefulset: str
    ordinal: int
    pod: str
    uid: str
    node: str
    source: str
    target: str
    topology_key: str
    replicas: int
    claims: tuple[Claim, ...] = ()
    #: Ordinals that hold ``source`` while the pod is away (none: nobody else belongs there).
    company: tuple[int, ...] = ()
    #: "" for an ``apps/v1`` StatefulSet, ``apps.kruise.io`` for an Advanced StatefulSet.
    group: str = ""
    #: The set's uid, when known (Advanced StatefulSets): its pods' owner references name it.
    set_uid: str = ""
    #: The first live ordinal (``spec.ordinals.start``, or 0 for an Advanced StatefulSet
    #: without ``--kruise-start-ordinal``), and ``spec.ordinals.start`` as it was read.
    start: int = 0
    spec_start: int = 0
    #: ``spec.reserveOrdinals`` (Advanced StatefulSets) as merged intervals.
    reserved: Intervals = ()

    @property
    def kind(self) -> str:
        """How messages name the set's kind."""
        return workload_kind(self.group)


@dataclass(frozen=True, slots=True)
class SetPlan:
    """The plan of one set: a StatefulSet, or an Advanced StatefulSet (``group``)."""

    namespace: str
    name: str
    zones: tuple[str, ...]
    replicas: int
    rows: tuple[Row, ...] = ()
    steps: tuple[Step, ...] = ()
    #: Why the set cannot be planned at all (malformed annotations, no zone list).
    problem: str = ""
    #: Why there is nothing to plan although the set is opted in (node-ordinal mode).
    note: str = ""
    group: str = ""

    @property
    def kind(self) -> str:
        """How messages name the set's kind."""
        return workload_kind(self.group)

    @property
    def left(self) -> tuple[int, ...]:
        """Ordinals that stay outside their rule zone after this plan."""
        return tuple(r.ordinal for r in self.rows if r.kind != "in place" and r.step is None)


@dataclass(frozen=True, slots=True)
class Plan:
    """Every planned set."""

    sets: tuple[SetPlan, ...]
    move_data: bool

    @property
    def steps(self) -> tuple[Step, ...]:
        return tuple(step for s in self.sets for step in s.steps)

    @property
    def complete(self) -> bool:
        """Whether applying it would leave every ordinal in its rule zone."""
        return not any(s.left or s.problem for s in self.sets)
