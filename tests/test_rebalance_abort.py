"""A run aborted by a second Ctrl-C (its task cancelled) in the middle of a step: it ends at
once, and its last progress event says what the step left (the fake API rig of
:mod:`tests.rebalancerig`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests import rebalancing as r
from tests.fakeapi import Fault
from tests.rebalancerig import Rig, open_rig
from webhook.cluster.rebalance import Event
from webhook.rules.rebalance_plan import Plan

#: 4 replicas: db-1 (a->b) and db-3 (c->a) move; 0 and 2 are in place.
FOUR = {0: "a1", 1: "a2", 2: "c2", 3: "c1"}


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    async with open_rig(tmp_path) as made:
        yield made


async def _cancelled_at(rig: Rig, result: Plan, kind: str) -> None:
    """Run ``result`` and cancel the run (a second Ctrl-C) at its first event of ``kind``."""
    executor = rig.rebalancer(timeout=300)
    task = asyncio.ensure_future(executor.run(result))

    def report(event: Event) -> None:
        rig.events.append(event)
        if event.kind == kind:
            task.cancel()

    executor.report = report
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_an_abort_after_the_claims_went_says_what_is_half_done(rig: Rig) -> None:
    """A second Ctrl-C (the task cancelled) while the budget refuses the eviction that follows
    the claims' deletion: the run ends at once, and its last word names the claims marked for
    deletion and the pod to delete to finish (seen on the lab: exit 130 with no word after
    `claims data-kv-0 deleted`)."""
    extra = [r.claim("data-db-1", "pv-1"), r.volume("pv-1", "zone-a", "data-db-1")]
    rig.load(r.cluster(FOUR, sts=r.statefulset(4, templates=("data",)), extra=extra))
    result = await rig.plan(move_data=True)
    rig.api.inject("pods", "evict", Fault.slow(0), *[Fault.status(429)] * 20)
    await _cancelled_at(rig, result, "waiting")
    assert rig.events[-1].kind == "stopped"
    assert "claim(s) data-db-1 are marked for deletion" in rig.events[-1].message
    assert "delete pod db-1 to finish" in rig.events[-1].message


async def test_an_abort_while_the_pod_is_away_says_it_was_evicted(rig: Rig) -> None:
    """The lab's case: claims deleted, pod evicted, a claim's other finalizer keeps the pod from
    coming back; a second Ctrl-C then ends the run with a word on what it left."""
    extra = [r.claim("data-db-1", "pv-1"), r.volume("pv-1", "zone-a", "data-db-1")]
    rig.load(r.cluster(FOUR, sts=r.statefulset(4, templates=("data",)), extra=extra))
    result = await rig.plan(move_data=True)
    rig.controller.zone = lambda ordinal: None
    await _cancelled_at(rig, result, "evicted")
    assert (rig.events[-1].kind, rig.events[-1].message) == (
        "stopped",
        "aborted while db-1 was away (evicted and claim(s) data-db-1 deleted): its StatefulSet "
        "brings it back once claim(s) data-db-1 are gone; run rebalance again when every "
        "replica is Ready",
    )
