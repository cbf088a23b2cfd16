"""Carrying out a rebalance plan against the API server: one pod at a time, each step verified.

Each :class:`~webhook.rules.rebalance_plan.Step` of a set, in the plan's order:

1. **Whole set.** Wait (up to ``timeout``) until the set (a StatefulSet, or an Advanced
   StatefulSet, read at its own group's path) has the members the plan saw (replicas, start,
   reserved ordinals, uid), no rollout under way, and every member's pod Ready and none
   terminating (and, with ``minReadySeconds``, every replica available) -- read from the API,
   not the plan. The pod must be the planned one (same uid)
   in its source zone, and the ordinals the plan counted on to keep that zone held
   (``company``) must still be there.
2. **Claims** (``--move-data`` only). First a dry-run eviction until the PodDisruptionBudget
   allows it, then the claims are deleted (with their uid as a precondition). The pod still
   mounts them, so the ``kubernetes.io/pvc-protection`` finalizer keeps them, Terminating, until
   the pod is gone; neither the StatefulSet controller nor OpenKruise's re-creates a pod while
   one of its claims is terminating ("pvc ... is being deleted", "pvc ... is to be deleted")
   and, once it is gone, creates a fresh claim and then the pod (same name, same ordinal),
   which the webhook places in its rule zone. Deleting the claim *after* the
   eviction would race the controller: a pod re-created on the old claim follows it back.
3. **Eviction** through the Eviction API (policy/v1), so PodDisruptionBudgets are respected, with
   the pod's uid as a precondition. A 429 is waited out with capped, jittered backoff until the
   step's deadline; a budget that never allows it stops that set (the others go on).
4. **Convergence.** Wait until a new pod (another uid) is Ready on a node of the target zone.
   A new pod scheduled elsewhere, the set deleted or scaled below the ordinal while the pod is
   away (nothing re-creates it), or the deadline, stops the whole run, saying what was seen.
   With ``minReadySeconds``, wait then until the set counts every replica available, as the
   next step would before it evicts anything: the last step has no next one, and the run says
   it converged only after it. The pod is in its zone by then: a
   wait that times out or fails (an API error, the set deleted) stops the run with the move
   counted as made.

One deadline, ``timeout`` after the step starts, bounds all four waits together (the set, the
budget, Ready, available): ``--timeout`` is how long a step may take, so a run of n steps ends
within about n times it.

``stop`` (Ctrl-C: :mod:`webhook.cluster.rebalancerun`) ends the run after the step in
progress, or drops that step while it is only waiting (for the set, or for the budget) before
anything was evicted or deleted: a step is never left half done. The clock and the sleep are
injectable: tests wait without waiting.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from webhook.cluster.api import Api, ApiError
from webhook.cluster.backoff import Backoff
from webhook.cluster.moves import (
    Event,
    EventKind,
    Halted,
    Outcome,
    SetOutcome,
    SetStop,
    Stop,
    Timing,
    Unsettled,
    half_done,
    left_over,
    stop_reason,
)
from webhook.cluster.podreads import Reads, meta, pod_path, spec
from webhook.errors import BadObject
from webhook.rules.rebalance_plan import Plan, SetPlan, Step

__all__ = ["Event", "Outcome", "Rebalancer", "Timing"]


@dataclass(slots=True)
class Rebalancer:
    """Applies a plan through ``api``; ``report`` receives progress, ``stop`` asks to stop."""

    api: Api
    timing: Timing = field(default_factory=Timing)
    report: Callable[[Event], None] = lambda event: None
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    clock: Callable[[], float] = time.monotonic
    rand: Callable[[], float] = random.random
    reads: Reads = field(init=False)

    def __post_init__(self) -> None:
        self.reads = Reads(self.api)

    async def run(self, plan: Plan) -> Outcome:
        """Every set's steps in order; stops at the first step that does not converge."""
        outcomes: list[SetOutcome] = []
        stopped = ""
        for set_plan in plan.sets:
            if stopped or self.stop.is_set():
                outcomes.append(left_over(set_plan, set_plan.steps))
                continue
            outcome, stopped = await self._set(set_plan)
            outcomes.append(outcome)
        return Outcome(tuple(outcomes), stopped=stopped, interrupted=self.stop.is_set())

    async def _set(self, set_plan: SetPlan) -> tuple[SetOutcome, str]:
        moved: list[int] = []
        skipped: list[int] = []
        for index, step in enumerate(set_plan.steps, start=1):
            rest = set_plan.steps[index - 1 :]
            if self.stop.is_set():
                self._say("stopped", step, index, len(set_plan.steps), "interrupted: stopping")
                return left_over(set_plan, rest, moved, skipped=skipped), ""
            try:
                made = await self._step(step, index=index, steps=len(set_plan.steps))
            except Unsettled as err:  # moved, but not yet available: the run stops here
                self._say("stopped", step, index, len(set_plan.steps), str(err))
                moved.append(step.ordinal)
                return left_over(set_plan, rest[1:], moved, str(err), skipped=skipped), str(err)
            except Halted:
                self._say("stopped", step, index, len(set_plan.steps), "interrupted before acting")
                return left_over(set_plan, rest, moved, skipped=skipped), ""
            except SetStop as err:
                self._say("stopped", step, index, len(set_plan.steps), str(err))
                return left_over(set_plan, rest, moved, str(err), skipped=skipped), ""
            except (Stop, BadObject, aiohttp.ClientError, OSError, TimeoutError) as err:
                why = stop_reason(err)
                self._say("stopped", step, index, len(set_plan.steps), why)
                return left_over(set_plan, rest, moved, why, skipped=skipped), why
            (moved if made else skipped).append(step.ordinal)
        done = SetOutcome(
            set_plan.namespace,
            set_plan.name,
            tuple(moved),
            tuple(skipped),
            group=set_plan.group,
        )
        return done, ""

    def _say(self, kind: EventKind, step: Step, index: int, steps: int, message: str) -> None:
        self.report(
            Event(kind, step.namespace, step.statefulset, message, step.ordinal, index, steps)
        )

    async def _step(self, step: Step, *, index: int, steps: int) -> bool:
        """One step; False when its pod was already in its target zone (nothing to do)."""
        deadline = self.clock() + self.timing.timeout
        move = f"{step.pod} {step.source} -> {step.target}"
        self._say("step", step, index, steps, f"{move}: waiting for the set to be whole")
        if await self._ready_to_move(step, deadline=deadline):
            self._say("skipped", step, index, steps, f"{step.pod} is already in {step.target}")
            return False
        if step.claims:
            await self._evict(step, deadline=deadline, dry_run=True)
            if self.stop.is_set():
                raise Halted
        deleted: list[str] = []
        try:
            await self._delete_claims(step, deleted=deleted)
            if deleted:
                names = ", ".join(deleted)
                self._say(
                    "claims", step, index, steps, f"claims {names} deleted (kept until evicted)"
                )
            await self._evict(step, deadline=deadline, dry_run=False)
        except (Stop, SetStop, aiohttp.ClientError, OSError, TimeoutError) as err:
            if not deleted:
                raise
            # Claims are going: whatever failed, say exactly what is left half done.
            raise Stop(f"{stop_reason(err)}; {half_done(deleted, step)}") from err
        except asyncio.CancelledError:
            if deleted:  # aborted (a second Ctrl-C): the last word is what is left half done
                self._say("stopped", step, index, steps, f"aborted; {half_done(deleted, step)}")
            raise
        self._say("evicted", step, index, steps, f"{move}: evicted, waiting for it to be Ready")
        try:
            node = await self._converged(step, deadline=deadline)
        except asyncio.CancelledError:
            names = ", ".join(deleted)
            claims = f" and claim(s) {names} deleted" if deleted else ""
            once = f" once claim(s) {names} are gone" if deleted else ""
            self._say(
                "stopped",
                step,
                index,
                steps,
                f"aborted while {step.pod} was away (evicted{claims}): its {step.kind} brings it "
                f"back{once}; run rebalance again when every replica is Ready",
            )
            raise
        here = f"{step.pod} is Ready on {node} in {step.target}"
        await self._available(step, here=here, deadline=deadline, index=index, steps=steps)
        self._say("moved", step, index, steps, here)
        return True

    # --- 1. the set is whole ------------------------------------------------------------------

    async def _ready_to_move(self, step: Step, *, deadline: float) -> bool:
        """Wait until the set is whole; True when the pod is already in its target zone."""
        while True:
            missing = await self.reads.whole(step)
            if not missing:
                break
            if self.clock() >= deadline:
                raise Stop(
                    f"before moving {step.pod}: {step.namespace}/{step.statefulset} was not "
                    f"whole within {self.timing.timeout:g}s ({missing})"
                )
            if self.stop.is_set():
                raise Halted
            await self.sleep(self.timing.poll)
        pod = await self.reads.get(pod_path(step))
        if pod is None:
            raise Stop(f"{step.pod} disappeared just after the set was whole; run rebalance again")
        uid, node = meta(pod).get("uid"), spec(pod).get("nodeName")
        zone = await self.reads.zone(str(node or ""), step.topology_key)
        if zone == step.target:
            return True
        if uid != step.uid or zone != step.source:
            raise Stop(
                f"{step.pod} changed since the plan (now uid {uid} on {node or 'no node'} in "
                f"{zone or 'no zone'}); run rebalance again for a fresh plan"
            )
        return False

    # --- 2. and 3. claims and eviction -------------------------------------------------------

    async def _delete_claims(self, step: Step, *, deleted: list[str]) -> None:
        """Delete the step's claims in turn, each added to ``deleted`` once the API took it."""
        for claim in step.claims:
            path = f"/api/v1/namespaces/{step.namespace}/persistentvolumeclaims/{claim.name}"
            options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
            if claim.uid:
                options["preconditions"] = {"uid": claim.uid}
            try:
                await self.api.call("DELETE", path, body=options)
            except ApiError as err:
                if err.status != 404:
                    raise Stop(f"deleting claim {claim.name} failed: {err}") from err
                continue  # gone already: nothing of this step's doing
            deleted.append(claim.name)

    async def _evict(self, step: Step, *, deadline: float, dry_run: bool) -> None:
        body: dict[str, Any] = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": step.pod, "namespace": step.namespace},
        }
        if step.uid:  # evict this pod, never a newer one of the same name
            body["deleteOptions"] = {"preconditions": {"uid": step.uid}}
        params = {"dryRun": "All"} if dry_run else {}
        backoff = Backoff(
            initial=self.timing.backoff_initial, cap=self.timing.backoff_cap, rand=self.rand
        )
        while True:
            try:
                await self.api.call("POST", pod_path(step, "/eviction"), params=params, body=body)
                return
            except ApiError as err:
                if err.status == 404 and not dry_run:
                    return  # gone already (deleted meanwhile): wait for its successor
                if err.status != 429:
                    raise Stop(f"evicting {step.pod} failed: {err}") from err
                if self.stop.is_set() and (dry_run or not step.claims):
                    raise Halted from err  # nothing evicted or deleted in this step yet
                why = "; ".join(err.causes) or err.message
                delay = backoff.next(at_least=err.retry_after)
                if self.clock() + delay > deadline:
                    raise SetStop(
                        f"the PodDisruptionBudget did not allow evicting {step.pod} within "
                        f"{self.timing.timeout:g}s ({why}); nothing was evicted in this step"
                    ) from err
                self.report(
                    Event(
                        "waiting",
                        step.namespace,
                        step.statefulset,
                        f"eviction of {step.pod} refused ({why}); retrying in {delay:.1f}s",
                        step.ordinal,
                    )
                )
                await self.sleep(delay)

    # --- 4. convergence -------------------------------------------------------------------------

    async def _converged(self, step: Step, *, deadline: float) -> str:
        """Wait for the re-created pod to be Ready in the target zone; its node."""
        while True:
            pod = await self.reads.get(pod_path(step))
            seen = await self.reads.seen(step, pod)
            if seen is None:
                return str(spec(pod).get("nodeName"))
            if self.clock() >= deadline:
                raise Stop(
                    f"{step.pod} was not Ready in {step.target} within "
                    f"{self.timing.timeout:g}s: {seen}"
                )
            await self.sleep(self.timing.poll)

    async def _available(
        self, step: Step, *, here: str, deadline: float, index: int, steps: int
    ) -> None:
        """Wait, until the step's ``deadline`` (``--timeout`` bounds the whole step, this wait
        included), until the set counts every replica available. With ``minReadySeconds`` the
        moved pod counts that long after it turned Ready: the next step would wait for it
        (:meth:`Reads.whole`), and the last has no next step. Whatever ends the wait, the pod
        is in its zone: the move is made (:class:`Unsettled`)."""
        said = False
        while short := await self._settling(step, here=here):
            if self.clock() >= deadline:
                raise Unsettled(
                    f"{here}, but {step.namespace}/{step.statefulset} did not count every "
                    f"replica available before the step's --timeout of {self.timing.timeout:g}s "
                    f"ran out ({short}); run rebalance again once every replica is available"
                )
            if not said:
                self._say("waiting", step, index, steps, f"{here}; waiting for {short}")
                said = True
            await self.sleep(self.timing.poll)

    async def _settling(self, step: Step, *, here: str) -> str:
        """:meth:`Reads.settling`, a failure to read it (an API error, the set deleted) made
        :class:`Unsettled`: it ends the wait, not the move."""
        try:
            return await self.reads.settling(step)
        except (Stop, BadObject, aiohttp.ClientError, OSError, TimeoutError) as err:
            raise Unsettled(
                f"{here}, but waiting for {step.namespace}/{step.statefulset} to count every "
                f"replica available stopped: {stop_reason(err)}; run rebalance again once every "
                "replica is available"
            ) from err
