"""The words of a rebalance run: progress events, outcomes, timings, and the ways a step ends
early (:class:`Stop` the run, :class:`SetStop` one set, :class:`Halted` by Ctrl-C) with what
is said of them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from webhook.rules.rebalance_plan import SetPlan, Step

EventKind = Literal["step", "waiting", "claims", "evicted", "moved", "skipped", "stopped"]


@dataclass(frozen=True, slots=True)
class Event:
    """One progress event: a line on a terminal, a JSON log line otherwise."""

    kind: EventKind
    namespace: str
    statefulset: str
    message: str
    ordinal: int | None = None
    #: 1-based step of the set, and the set's number of steps.
    step: int = 0
    steps: int = 0


@dataclass(frozen=True, slots=True)
class SetOutcome:
    """What became of one set's steps."""

    namespace: str
    name: str
    moved: tuple[int, ...] = ()
    #: Planned moves found already made when their turn came (by another hand): not this run's.
    skipped: tuple[int, ...] = ()
    #: Planned moves not made (after a stop or an interrupt).
    left: tuple[int, ...] = ()
    stopped: str = ""
    #: The set's group: "" for ``apps/v1``, ``apps.kruise.io`` for an Advanced StatefulSet.
    group: str = ""


@dataclass(frozen=True, slots=True)
class Outcome:
    """The whole run."""

    sets: tuple[SetOutcome, ...]
    #: Why the whole run stopped ("" when it did not).
    stopped: str = ""
    interrupted: bool = False

    @property
    def converged(self) -> bool:
        """Every planned move made."""
        return not self.stopped and not self.interrupted and not any(s.left for s in self.sets)


@dataclass(frozen=True, slots=True, kw_only=True)
class Timing:
    """How long a step may take, and how often to look."""

    #: Seconds one step may take in all: waiting for the set to be whole, for the budget, for
    #: Ready and for available share one deadline.
    timeout: float = 300.0
    poll: float = 1.0
    backoff_initial: float = 1.0
    backoff_cap: float = 15.0


class Stop(Exception):
    """A step did not converge: the whole run stops here."""


class Unsettled(Stop):
    """The step's pod moved, but the set never counted it available: the run stops here, the
    move counted as made."""


class SetStop(Exception):
    """This set cannot go on (its budget never allowed the eviction); the next set may."""


class Halted(Exception):
    """Ctrl-C while a step was still only waiting (nothing changed yet): it is dropped."""


def left_over(
    set_plan: SetPlan,
    steps: tuple[Step, ...],
    moved: list[int] | None = None,
    why: str = "",
    *,
    skipped: list[int] | None = None,
) -> SetOutcome:
    """The outcome of a set whose ``steps`` were not made (``why``: what stopped it)."""
    return SetOutcome(
        set_plan.namespace,
        set_plan.name,
        moved=tuple(moved or ()),
        skipped=tuple(skipped or ()),
        left=tuple(s.ordinal for s in steps),
        stopped=why,
        group=set_plan.group,
    )


def half_done(deleted: list[str], step: Step) -> str:
    """What a step stopped between deleting its claims and evicting its pod leaves."""
    return (
        f"claim(s) {', '.join(deleted)} are marked for deletion and go when the pod next stops "
        f"(evict it with `kubectl drain` or delete pod {step.pod} to finish)"
    )


def stop_reason(err: Exception) -> str:
    """A stop's reason: our own words, or what the API client raised."""
    return str(err) if isinstance(err, Stop | SetStop) else f"the API server failed us: {err!r}"
