"""The rebalance executor against the fake API server: order, budgets, timeouts, Ctrl-C, data.

The test plays the rest of Kubernetes with one eviction hook (:class:`tests.rebalancerig.
Controller`): once an eviction has deleted a pod, the pod comes back -- new uid, Ready, on a
node of the zone the webhook would pick -- at the executor's next sleep. The clock and the sleep
are fake: waiting costs nothing and no assertion depends on the wall clock.
"""

from __future__ import annotations

import json
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests import rebalancing as r
from tests.fakeapi import Fault, Verb
from tests.rebalancerig import Rig, asked, hold_available, open_rig
from tests.rendered import granted
from webhook.cli.rebalance_text import render_outcome
from webhook.cluster.rebalance import Event, Outcome, Timing
from webhook.cluster.rebalancerun import apply
from webhook.install import deploybase


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    async with open_rig(tmp_path) as made:
        yield made


#: 4 replicas: db-1 (a->b) and db-3 (c->a) move; 0 and 2 are in place.
FOUR = {0: "a1", 1: "a2", 2: "c2", 3: "c1"}


async def test_moves_one_pod_at_a_time_in_plan_order_until_converged(rig: Rig) -> None:
    """Each eviction names the planned pod by uid, happens only with the set whole, and the run
    ends with every ordinal in zones[i mod 3]."""
    rig.load(r.cluster(FOUR))
    result = await rig.plan()
    assert [s.pod for s in result.steps] == ["db-1", "db-3"]
    outcome = await rig.rebalancer().run(result)
    assert outcome.converged and outcome.sets[0].moved == (1, 3)
    assert rig.evictions() == [("db-1", False), ("db-3", False)]
    bodies = [s.body for s in rig.api.seen("pods", "evict")]
    assert [b["deleteOptions"]["preconditions"]["uid"] for b in bodies] == ["uid-db-1", "uid-db-3"]
    assert rig.controller.present_after == [3, 3]  # never more than one of four missing
    assert {p: z for p, (_, z) in rig.where().items()} == {
        "db-0": "zone-a", "db-1": "zone-b", "db-2": "zone-c", "db-3": "zone-a",
    }  # fmt: skip
    assert [e.kind for e in rig.events] == ["step", "evicted", "moved"] * 2


async def test_a_budget_refusal_is_waited_out_with_backoff(rig: Rig) -> None:
    """Two 429s, then the budget allows it: delays 0.5 and 1 (equal jitter pinned low), each
    reported with the budget's own words."""
    rig.load(r.cluster(FOUR))
    result = await rig.plan()
    rig.api.inject("pods", "evict", Fault.status(429), Fault.status(429))
    outcome = await rig.rebalancer().run(result)
    assert outcome.converged
    assert rig.clock.slept[:2] == [0.5, 1.0]
    waiting = [e.message for e in rig.events if e.kind == "waiting"]
    assert waiting == [
        "eviction of db-1 refused (The disruption budget db needs 3 healthy pods and has 3 "
        f"currently); retrying in {delay}s"
        for delay in ("0.5", "1.0")
    ]


async def test_a_budget_that_never_allows_it_stops_that_set_only(rig: Rig) -> None:
    """429s past the step's deadline: db is stopped with the budget named, nothing evicted;
    the next set (web) still moves."""
    web = r.statefulset(1, name="web")
    rig.load([*r.cluster(FOUR), web, r.pod(0, "b1", sts="web")])
    result = await rig.plan()
    assert [s.name for s in result.sets] == ["db", "web"]
    # Delays 0.5, 1, 2, 4 reach t=7.5; the next (4) would pass the deadline at 10: 5 refusals.
    rig.api.inject("pods", "evict", *[Fault.status(429)] * 5)
    outcome = await rig.rebalancer(timeout=10).run(result)
    db, web_done = outcome.sets
    assert db.moved == () and db.left == (1, 3)
    assert db.stopped.startswith("the PodDisruptionBudget did not allow evicting db-1 within 10s")
    assert "needs 3 healthy pods" in db.stopped and not outcome.stopped
    assert rig.where()["db-1"][0] == "uid-db-1"  # untouched
    assert web_done.moved == (0,) and rig.where()["web-0"][1] == "zone-a"


async def test_a_step_that_does_not_converge_stops_the_whole_run(rig: Rig) -> None:
    """The evicted pod never comes back: stop after --timeout with what was seen; the next
    step is never started."""
    rig.load(r.cluster(FOUR))
    result = await rig.plan()
    rig.controller.zone = lambda ordinal: None
    outcome = await rig.rebalancer(timeout=30).run(result)
    assert not outcome.converged and outcome.sets[0].left == (1, 3)
    assert outcome.stopped == (
        "db-1 was not Ready in zone-b within 30s: no pod db-1 yet: the StatefulSet controller "
        "has not re-created it"
    )
    assert rig.evictions() == [("db-1", False)]
    assert rig.clock.now >= 30


async def test_a_pod_placed_in_the_wrong_zone_stops_at_once(rig: Rig) -> None:
    """The re-created pod lands in zone-c (no webhook placed it): stop, naming the likely cause."""
    rig.load(r.cluster(FOUR))
    result = await rig.plan()
    rig.controller.zone = lambda ordinal: "zone-c"
    outcome = await rig.rebalancer().run(result)
    assert "db-1 was re-created on c1 in zone-c, not zone-b: stszone did not place it" in (
        outcome.stopped
    )
    assert rig.evictions() == [("db-1", False)]


async def test_a_pod_the_webhook_pinned_elsewhere_stops_before_it_is_scheduled(rig: Rig) -> None:
    """The new pod carries stszone.io/zone: zone-a (its volume pulled it back): stop at once,
    without waiting out the timeout for a pod that can only go there."""
    rig.load(r.cluster(FOUR))
    result = await rig.plan()
    rig.controller.zone = lambda ordinal: None  # never scheduled

    def placed_elsewhere(namespace: str, name: str) -> None:
        pod = r.pod(1, None, uid="db-1-again", ready=False)
        pod["metadata"]["annotations"] = {"stszone.io/zone": "zone-a"}
        rig.api.put("pods", pod)

    rig.api.on_evict.append(placed_elsewhere)
    outcome = await rig.rebalancer(timeout=300).run(result)
    assert outcome.stopped.startswith("stszone placed the new db-1 in zone-a, not zone-b")
    assert rig.clock.now < 300


async def test_ctrl_c_between_steps_stops_after_the_current_one(rig: Rig) -> None:
    """The interrupt arrives while step 1 waits for its pod: step 1 completes, step 2 never
    starts, and the outcome says interrupted with db-3 left."""
    rig.load(r.cluster(FOUR))
    result = await rig.plan()
    outcome = await rig.interrupted_on("evicted").run(result)
    assert outcome.interrupted and not outcome.converged
    assert outcome.sets[0].moved == (1,) and outcome.sets[0].left == (3,)
    assert rig.evictions() == [("db-1", False)]
    assert rig.where()["db-1"][1] == "zone-b"  # the step in progress was finished


async def test_ctrl_c_while_the_budget_refuses_drops_the_step_untouched(rig: Rig) -> None:
    """Interrupted while waiting out a 429: nothing was evicted, so the step is dropped at once
    rather than waiting for the budget."""
    rig.load(r.cluster(FOUR))
    result = await rig.plan()
    rig.api.inject("pods", "evict", *[Fault.status(429)] * 3)
    outcome = await rig.interrupted_on("waiting").run(result)
    assert outcome.interrupted and outcome.sets[0].left == (1, 3)
    assert rig.evictions() == [("db-1", False), ("db-1", False)]
    assert rig.where()["db-1"][0] == "uid-db-1"
    assert rig.events[-1].message == "interrupted before acting"


async def test_sigint_from_the_terminal_is_the_same_stop(rig: Rig) -> None:
    """`apply` turns a real SIGINT into that stop (the signal is raised while step 1 waits)."""
    rig.load(r.cluster(FOUR))
    result = await rig.plan()
    rig.api.on_evict.append(lambda namespace, name: rig.controller.tick())
    events: list[Event] = []

    def report(event: Event) -> None:
        events.append(event)
        if event.kind == "evicted":
            signal.raise_signal(signal.SIGINT)

    outcome: Outcome = await apply(
        result,
        kubeconfig=str(rig.kubeconfig),
        timing=Timing(timeout=30, poll=0.01),
        report=report,
    )
    assert outcome.interrupted and outcome.sets[0].moved == (1,)
    assert rig.evictions() == [("db-1", False)]
    assert any("Ctrl-C: stopping after the current step" in e.message for e in events)


async def test_move_data_deletes_the_claim_between_a_dry_run_and_the_eviction(rig: Rig) -> None:
    """Dry-run eviction (budget check), DELETE of the claim by uid (protected: it waits for the
    pod), eviction; the pod comes back in its rule zone with a fresh claim."""
    extra = [r.claim("data-db-1", "pv-1"), r.volume("pv-1", "zone-a", "data-db-1")]
    extra[0]["metadata"]["finalizers"] = ["kubernetes.io/pvc-protection"]
    sts = r.statefulset(4, templates=("data",))
    rig.load(r.cluster(FOUR, sts=sts, extra=extra))
    result = await rig.plan(move_data=True)
    assert [(s.pod, [c.name for c in s.claims]) for s in result.steps] == [
        ("db-1", ["data-db-1"]), ("db-3", []),
    ]  # fmt: skip
    outcome = await rig.rebalancer().run(result)
    assert outcome.converged
    verbs = [
        (s.verb, s.name, s.query.get("dryRun"))
        for s in rig.api.requests
        if s.verb in ("evict", "delete")
    ]
    assert verbs[:3] == [
        ("evict", "db-1", "All"),
        ("delete", "data-db-1", None),
        ("evict", "db-1", None),
    ]
    (deletion,) = rig.api.seen("persistentvolumeclaims", "delete")
    assert deletion.body["preconditions"] == {"uid": "uid-data-db-1"}
    claim = json.loads(rig.api.objects.tables["persistentvolumeclaims"][("shop", "data-db-1")].body)
    assert claim["metadata"]["uid"] == "uid-data-db-1-new"


async def test_move_data_refused_after_the_claim_went_says_what_is_half_done(rig: Rig) -> None:
    """The dry run passes, then the budget refuses for good: the run stops and says the claims
    are marked for deletion."""
    extra = [r.claim("data-db-1", "pv-1"), r.volume("pv-1", "zone-a", "data-db-1")]
    sts = r.statefulset(4, templates=("data",))
    rig.load(r.cluster(FOUR, sts=sts, extra=extra))
    result = await rig.plan(move_data=True)
    rig.api.inject("pods", "evict", Fault.slow(0), *[Fault.status(429)] * 20)
    outcome = await rig.rebalancer(timeout=5).run(result)
    assert outcome.stopped.startswith("the PodDisruptionBudget did not allow evicting db-1")
    assert "claim(s) data-db-1 are marked for deletion" in outcome.stopped


@pytest.mark.parametrize(
    ("resource", "verb", "deleted"),
    [
        ("persistentvolumeclaims", "delete", ["data-db-1"]),
        ("pods", "evict", ["data-db-1", "logs-db-1"]),
    ],
    ids=["second-claim-delete-fails", "eviction-fails-after-the-claims"],
)
async def test_any_failure_after_a_claim_went_says_what_is_half_done(
    rig: Rig, resource: str, verb: Verb, deleted: list[str]
) -> None:
    """Two claims (two templates): once one is deleted, any failure before the eviction went
    through leaves it Terminating until the pod next stops; the stop says so, naming them."""
    extra = [r.claim("data-db-1", "pv-1"), r.volume("pv-1", "zone-a", "data-db-1")]
    extra += [r.claim("logs-db-1", "pv-2"), r.volume("pv-2", "zone-a", "logs-db-1")]
    rig.load(r.cluster(FOUR, sts=r.statefulset(4, templates=("data", "logs")), extra=extra))
    result = await rig.plan(move_data=True)
    assert [c.name for c in result.steps[0].claims] == ["data-db-1", "logs-db-1"]
    failures = [Fault.status(500)]
    if verb == "evict":
        failures.insert(0, Fault.slow(0))  # the dry run passes; the real eviction fails
    else:
        rig.api.inject(resource, verb, Fault.slow(0))  # the first claim goes
    rig.api.inject(resource, verb, *failures)
    outcome = await rig.rebalancer().run(result)
    assert f"; claim(s) {', '.join(deleted)} are marked for deletion" in outcome.stopped
    assert "delete pod db-1 to finish" in outcome.stopped, outcome.stopped


async def test_a_pod_changed_since_the_plan_stops_before_any_eviction(rig: Rig) -> None:
    """Someone re-created db-1 (new uid, same wrong zone) after the plan: fresh plan needed."""
    rig.load(r.cluster(FOUR))
    result = await rig.plan()
    rig.api.put("pods", r.pod(1, "a1", uid="someone-else"))
    outcome = await rig.rebalancer().run(result)
    assert outcome.stopped.startswith("db-1 changed since the plan (now uid someone-else")
    assert rig.evictions() == []


async def test_a_set_that_never_becomes_whole_stops_with_the_pods_named(rig: Rig) -> None:
    """db-2 turns not Ready after the plan and stays so: no eviction, the stop names it."""
    rig.load(r.cluster(FOUR))
    result = await rig.plan()
    rig.api.put("pods", r.pod(2, "c2", ready=False))
    outcome = await rig.rebalancer(timeout=20).run(result)
    assert (
        outcome.stopped == "before moving db-1: shop/db was not whole within 20s (db-2 not Ready)"
    )
    assert rig.evictions() == []


async def test_every_request_is_granted_by_the_rebalance_cluster_role(rig: Rig) -> None:
    """The one list, the reads before each step, the evictions and a claim deletion: each is
    allowed by deploy/components/rebalance's ClusterRole (what a Job would run with)."""
    extra = [r.claim("data-db-1", "pv-1"), r.volume("pv-1", "zone-a", "data-db-1")]
    rig.load(r.cluster(FOUR, sts=r.statefulset(4, templates=("data",)), extra=extra))
    assert (await rig.rebalancer().run(await rig.plan(move_data=True))).converged
    (role,) = [
        o for o in deploybase.rebalance_rbac(deploybase.Install()) if o["kind"] == "ClusterRole"
    ]
    requests = asked(rig.api)
    assert {verb for _, _, verb in requests} == {"list", "get", "create", "delete"}
    assert requests <= granted(role)


async def test_a_set_deleted_while_its_pod_is_away_stops_at_once_saying_so(rig: Rig) -> None:
    """`kubectl delete sts db` while db-1 is away: nothing will re-create it. The run stops at
    the next look, naming the deletion, instead of waiting out --timeout for a controller that
    is gone and blaming it (seen on the lab: 45 s, "the StatefulSet controller has not
    re-created it")."""
    rig.load(r.cluster(FOUR))
    result = await rig.plan()
    rig.controller.zone = lambda ordinal: None  # its controller is gone: nobody brings it back

    def deleted(namespace: str, name: str) -> None:
        rig.api.delete("statefulsets", "db", namespace=namespace)

    rig.api.on_evict.append(deleted)
    outcome = await rig.rebalancer(timeout=300).run(result)
    assert outcome.stopped.startswith(
        "StatefulSet shop/db was deleted while db-1 was away, so nothing re-creates it"
    ), outcome.stopped
    assert "has not re-created it" not in outcome.stopped
    assert rig.clock.now < 300


async def test_a_set_scaled_below_the_moving_ordinal_stops_at_once_saying_so(rig: Rig) -> None:
    """`kubectl scale sts db --replicas=1` while db-1 is away: ordinal 1 is no longer a member,
    so it never comes back; the stop says the set changed, without waiting out --timeout."""
    rig.load(r.cluster(FOUR))
    result = await rig.plan()
    rig.controller.zone = lambda ordinal: None

    def scaled(namespace: str, name: str) -> None:
        rig.api.put("statefulsets", r.statefulset(1))

    rig.api.on_evict.append(scaled)
    outcome = await rig.rebalancer(timeout=300).run(result)
    assert outcome.stopped.startswith("StatefulSet shop/db now has 1 replicas, not 4 as planned"), (
        outcome.stopped
    )
    assert rig.clock.now < 300


async def test_a_set_scaled_that_keeps_the_moving_ordinal_waits_for_it(rig: Rig) -> None:
    """4 -> 2 while db-1 is away: ordinal 1 is still a member and comes back, so step 1 ends
    moved; step 2 (db-3, no longer a member) is where the run stops."""
    rig.load(r.cluster(FOUR))
    result = await rig.plan()
    rig.api.on_evict.append(lambda namespace, name: rig.api.put("statefulsets", r.statefulset(2)))
    outcome = await rig.rebalancer(timeout=300).run(result)
    assert outcome.sets[0].moved == (1,)
    assert outcome.stopped.startswith("StatefulSet shop/db now has 2 replicas, not 4 as planned")


async def test_a_step_someone_else_made_is_not_reported_as_moved(rig: Rig) -> None:
    """db-1 reaches zone-b after the plan by another hand (a second `rebalance --apply`, seen
    on the lab): this run skips it and moves only db-3, and its summary says exactly that."""
    rig.load(r.cluster(FOUR))
    result = await rig.plan()
    rig.api.put("pods", r.pod(1, "b1", uid="moved-by-someone-else"))
    outcome = await rig.rebalancer().run(result)
    assert outcome.converged
    assert rig.evictions() == [("db-3", False)]
    (done,) = outcome.sets
    assert (done.moved, done.skipped) == ((3,), (1,))
    assert render_outcome(result, outcome).splitlines()[1] == (
        "shop/db: moved ordinal(s) 3; already in their zone: 1"
    )


async def test_a_set_with_min_ready_seconds_waits_for_the_moved_pod_to_be_available(
    rig: Rig,
) -> None:
    """With ``minReadySeconds: 30`` the StatefulSet controller counts a pod available only 30 s
    after it turned Ready, and writes so in ``status.availableReplicas``; its own rollouts wait
    for that (isUnavailable in kubernetes' pkg/controller/statefulset/stateful_set_control.go).
    Seen on the lab: a pod re-created Ready left readyReplicas 3, availableReplicas 2 for the
    whole minReadySeconds. The PodDisruptionBudget counts Ready pods only (countHealthyPods),
    so it does not stop the next eviction: the executor must not evict db-3 while db-1, just
    moved, is not yet available."""
    sts = r.statefulset(4)
    sts["spec"]["minReadySeconds"] = 30
    sts["status"]["availableReplicas"] = 4
    rig.load(r.cluster(FOUR, sts=sts))
    result = await rig.plan()
    came_back = hold_available(rig, table="statefulsets", name="db", replicas=4, after=30)
    evicted_at: list[float] = []

    def evicted(namespace: str, name: str) -> None:
        evicted_at.append(rig.clock.now)

    rig.api.on_evict.append(evicted)
    outcome = await rig.rebalancer().run(result)
    assert outcome.converged and outcome.sets[0].moved == (1, 3)
    assert len(evicted_at) == 2 and evicted_at[1] >= came_back[0] + 30


async def test_the_last_move_too_is_waited_out_until_available(rig: Rig) -> None:
    """minReadySeconds 30: the last moved pod, db-3, counts as available 30 s after it turned
    Ready, as every earlier one did before the next eviction. The run ends, and says db-3
    moved, only then: a run that ended at Ready would call the set converged while its
    controller still counts a replica unavailable."""
    sts = r.statefulset(4)
    sts["spec"]["minReadySeconds"] = 30
    sts["status"]["availableReplicas"] = 4
    rig.load(r.cluster(FOUR, sts=sts))
    result = await rig.plan()
    came_back = hold_available(rig, table="statefulsets", name="db", replicas=4, after=30)
    executor = rig.rebalancer()
    moved_at: list[float] = []

    def report(event: Event) -> None:
        rig.events.append(event)
        if event.kind == "moved":
            moved_at.append(rig.clock.now)

    executor.report = report
    outcome = await executor.run(result)
    assert outcome.converged and outcome.sets[0].moved == (1, 3)
    assert len(came_back) == 2
    assert rig.clock.now >= came_back[1] + 30, (rig.clock.now, came_back)
    assert moved_at[1] >= came_back[1] + 30, (moved_at, came_back)
    waiting = [e.message for e in rig.events if e.kind == "waiting" and e.ordinal == 3]
    assert waiting == [
        "db-3 is Ready on a1 in zone-a; waiting for 3/4 replicas available (minReadySeconds 30)"
    ]


async def test_a_move_never_counted_available_stops_the_run_with_it_moved(rig: Rig) -> None:
    """db-1 comes back Ready in zone-b, and its controller never counts it available: the run
    stops after the timeout, saying so, with db-1 listed as moved (it is in its zone), db-3 as
    not moved, and no Converged verdict."""
    sts = r.statefulset(4)
    sts["spec"]["minReadySeconds"] = 30
    sts["status"]["availableReplicas"] = 4
    rig.load(r.cluster(FOUR, sts=sts))
    result = await rig.plan()
    hold_available(rig, table="statefulsets", name="db", replicas=4, after=None)
    outcome = await rig.rebalancer(timeout=60).run(result)
    assert outcome.sets[0].moved == (1,) and not outcome.converged
    assert outcome.stopped == (
        "db-1 is Ready on b1 in zone-b, but shop/db did not count every replica available "
        "before the step's --timeout of 60s ran out (3/4 replicas available (minReadySeconds "
        "30)); run rebalance again once every replica is available"
    )
    assert outcome.sets[0].left == (3,)
    assert "Converged" not in render_outcome(result, outcome)


async def test_the_timeout_bounds_the_whole_step_waits_for_availability_included(
    rig: Rig,
) -> None:
    """--timeout 60: db-1 comes back Ready 50 s into its step, and minReadySeconds keeps it
    unavailable for good. The step gives up 60 s after it started, not 60 s after db-1 turned
    Ready: the wait for availability has what is left of the step's time, no fresh timeout."""
    sts = r.statefulset(4)
    sts["spec"]["minReadySeconds"] = 30
    sts["status"]["availableReplicas"] = 4
    rig.load(r.cluster(FOUR, sts=sts))
    result = await rig.plan()
    came_back = hold_available(rig, table="statefulsets", name="db", replicas=4, after=None)
    back_in = rig.controller.zone
    rig.controller.zone = lambda ordinal: back_in(ordinal) if rig.clock.now >= 50 else None
    outcome = await rig.rebalancer(timeout=60).run(result)
    assert came_back and 50 <= came_back[-1] <= 51, came_back
    assert outcome.sets[0].moved == (1,) and outcome.sets[0].left == (3,)
    assert 60 <= rig.clock.now <= 61, rig.clock.now  # one poll past the step's 60 s at most
    assert outcome.stopped == (
        "db-1 is Ready on b1 in zone-b, but shop/db did not count every replica available "
        "before the step's --timeout of 60s ran out (3/4 replicas available (minReadySeconds "
        "30)); run rebalance again once every replica is available"
    )


async def test_a_spec_change_its_controller_has_not_observed_is_waited_out(rig: Rig) -> None:
    """A new pod template applied after the plan bumps metadata.generation at once, while the
    status the controller wrote for the old spec still shows one revision: no rollout, as far
    as it says. kubectl rollout status waits for status.observedGeneration to catch up; so does
    the executor, and then for the rollout the change started, before it evicts anything."""
    rig.load(r.cluster(FOUR))
    result = await rig.plan()
    evicted_at: list[float] = []

    def stored() -> dict[str, Any]:
        return dict(json.loads(rig.api.objects.tables["statefulsets"][("shop", "db")].body))

    applied = stored()
    applied["metadata"]["generation"] = 2
    applied["status"]["observedGeneration"] = 1
    applied["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox:1.37"
    rig.api.put("statefulsets", applied)

    def tick() -> None:
        current = stored()
        if rig.clock.now >= 10 and current["status"]["observedGeneration"] == 1:
            current["status"].update(observedGeneration=2, updateRevision="db-2")
        elif rig.clock.now >= 20 and current["status"]["currentRevision"] == "db-1":
            current["status"]["currentRevision"] = "db-2"  # its rollout is done
        rig.api.put("statefulsets", current)

    rig.clock.ticks.insert(0, tick)
    rig.api.on_evict.append(lambda namespace, name: evicted_at.append(rig.clock.now))
    outcome = await rig.rebalancer().run(result)
    assert outcome.converged and outcome.sets[0].moved == (1, 3)
    assert evicted_at and evicted_at[0] >= 20, evicted_at


async def test_a_spec_change_never_observed_stops_saying_so(rig: Rig) -> None:
    """Its controller never catches up (kube-controller-manager down): no eviction, and the
    stop says what was waited for."""
    rig.load(r.cluster(FOUR))
    result = await rig.plan()
    current = json.loads(rig.api.objects.tables["statefulsets"][("shop", "db")].body)
    current["metadata"]["generation"] = 2
    current["status"]["observedGeneration"] = 1
    rig.api.put("statefulsets", current)
    outcome = await rig.rebalancer(timeout=20).run(result)
    assert outcome.stopped == (
        "before moving db-1: shop/db was not whole within 20s (its controller has not yet "
        "observed generation 2 of its spec (status.observedGeneration 1))"
    )
    assert rig.evictions() == []


@pytest.mark.parametrize("stops", ["deleted", "server error", "connection dropped"])
async def test_a_wait_for_availability_that_fails_still_counts_the_move(
    rig: Rig, stops: str
) -> None:
    """db-1 comes back Ready in zone-b and minReadySeconds keeps it unavailable; while the
    executor waits for that, the set is deleted, or reading it fails (a 500, or the connection
    cut half-way through the answer, which aiohttp does not retry). db-1 is in its zone all the
    same: the run stops saying what ended the wait, with db-1 listed as moved and db-3 as not."""
    sts = r.statefulset(4)
    sts["spec"]["minReadySeconds"] = 30
    sts["status"]["availableReplicas"] = 4
    rig.load(r.cluster(FOUR, sts=sts))
    result = await rig.plan()
    came_back = hold_available(rig, table="statefulsets", name="db", replicas=4, after=None)
    done: list[bool] = []

    def tick() -> None:  # the first sleep after db-1 came back: the executor is waiting
        if done or not came_back or rig.clock.now <= came_back[0]:
            return
        done.append(True)
        if stops == "deleted":
            rig.api.delete("statefulsets", "db", namespace=r.NAMESPACE)
        elif stops == "server error":
            rig.api.inject("statefulsets", "get", Fault.status(500))
        else:
            rig.api.inject("statefulsets", "get", Fault.drop())

    rig.clock.ticks.append(tick)
    outcome = await rig.rebalancer(timeout=60).run(result)
    assert done and not outcome.converged
    assert outcome.sets[0].moved == (1,) and outcome.sets[0].left == (3,)
    assert outcome.stopped.startswith(
        "db-1 is Ready on b1 in zone-b, but waiting for shop/db to count every replica "
        "available stopped: "
    ), outcome.stopped
    if stops == "deleted":
        assert "StatefulSet shop/db is gone" in outcome.stopped, outcome.stopped
    if stops == "connection dropped":
        assert "ClientPayloadError" in outcome.stopped, outcome.stopped
    said = render_outcome(result, outcome)
    assert "moved ordinal(s) 1" in said, said
