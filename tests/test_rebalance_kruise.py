"""``stszone rebalance`` moves OpenKruise Advanced StatefulSet members like StatefulSet members.

The set, its pods and claims are the recorded ones of ``tests/fixtures/kruise`` (the lab, with a
test playing kruise-manager v1.8.4), copied per ordinal and scheduled on the nodes of
:mod:`tests.rebalancing`. The members and their rank zones come from ``tests/kruise_ref.py``
(written from the controller's source, never from stszone's), and so does the stand-in
controller: after an eviction it re-creates exactly the ordinals the reference's
:func:`~tests.kruise_ref.change` creates, under the same name.
"""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests import rebalancing as r
from tests.kruise_ref import change, live_ordinals
from tests.rebalancerig import Controller, Rig, asked, hold_available, open_rig
from tests.rendered import granted
from webhook.cli import main
from webhook.cli.rebalance_text import render_json, render_outcome, render_plan
from webhook.cluster.snapshot import from_objects
from webhook.errors import BadObject
from webhook.install import deploybase
from webhook.model.state import set_state
from webhook.rules.rebalance import chosen, plan
from webhook.rules.rebalance_plan import Plan

FIXTURES = Path(__file__).parent / "fixtures" / "kruise" / "objects"
JSON = dict[str, Any]
GROUP = "apps.kruise.io"


def _recorded(name: str) -> JSON:
    items: list[JSON] = json.loads((FIXTURES / name).read_text())["items"]
    return copy.deepcopy(items[0])


#: The recorded set's uid: its pods' owner references name it.
SET_UID = _recorded("statefulsets.v1beta1.json")["metadata"]["uid"]


def kruise_set(replicas: int, reserve: Sequence[int | str]) -> JSON:
    """The recorded Advanced StatefulSet ``web`` listing zone-a,b,c, settled (one revision)."""
    obj = _recorded("statefulsets.v1beta1.json")
    obj["metadata"]["annotations"] = {"stszone.io/zones": ",".join(r.ZONES)}
    obj["spec"]["replicas"] = replicas
    obj["spec"]["reserveOrdinals"] = list(reserve)
    obj["status"].update(replicas=replicas, readyReplicas=replicas, availableReplicas=replicas)
    return obj


def member(ordinal: int, node: str, *, uid: str = "", owner_uid: str = SET_UID) -> JSON:
    """Pod ``web-<ordinal>`` as kruise-manager makes it (the recorded ``web-0`` renamed),
    bound to ``node`` and Ready."""
    pod = _recorded("pods.json")
    name = f"web-{ordinal}"
    meta = pod["metadata"]
    meta.update(name=name, uid=uid or f"uid-{name}")
    meta["labels"].update(
        {"statefulset.kubernetes.io/pod-name": name, "apps.kubernetes.io/pod-index": str(ordinal)}
    )
    meta["ownerReferences"][0]["uid"] = owner_uid
    pod["spec"].update(hostname=name, nodeName=node)
    pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] = f"data-{name}"
    pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    return pod


def claim(ordinal: int) -> JSON:
    """Claim ``data-web-<ordinal>`` as the controller makes it (unbound: no data pins it)."""
    obj = _recorded("pvcs.json")
    obj["metadata"].update(name=f"data-web-{ordinal}", uid=f"uid-data-web-{ordinal}")
    return obj


def cluster(replicas: int, reserve: Sequence[int | str], where: dict[int, str]) -> list[JSON]:
    """Namespace, nodes, the set, and for each live ordinal its claim and its pod on
    ``where[ordinal]``."""
    objects = [r.namespace(), *(r.node(n) for n in r.NODES), kruise_set(replicas, reserve)]
    for ordinal, node in where.items():
        objects += [claim(ordinal), member(ordinal, node)]
    return objects


def rank_zone(ordinal: int, replicas: int, reserve: Sequence[int | str]) -> str:
    """The reference's rank of a live ordinal, as a zone: ``zones[rank mod 3]``."""
    return r.ZONES[live_ordinals(replicas, reserve=reserve).index(ordinal) % 3]


def planned(objects: list[JSON]) -> Plan:
    snap = from_objects(objects)
    return plan(snap.store, snap.state, sets=chosen(snap.store))


# --- the plan -------------------------------------------------------------------------------

#: replicas 3, reserveOrdinals [1]: live 0, 2, 3 in a, b, c by rank; web-2 runs in c.
MISPLACED = {0: "a1", 2: "c2", 3: "c1"}

#: replicas 4, reserveOrdinals [1, 3-4]: live 0, 2, 5, 6, whose ranks put them in a, b, c, a.
GAPS: tuple[int, list[int | str]] = (4, [1, "3-4"])
#: web-2 sits in a (its rank's zone is b), web-5 in b (c), web-6 in c (a).
ROTATED = {0: "a1", 2: "a2", 5: "b1", 6: "c1"}


def test_a_misplaced_member_with_reserved_gaps_is_planned_to_its_rank_zone() -> None:
    """Each member's target is ``zones[rank mod 3]`` among the live ordinals (ordinal mod 3
    would send 2 and 5 to c), and the moves go one at a time, never emptying a zone: 2 to b
    first (a keeps 0), then 5 (b keeps 2), then 6 (c keeps 5)."""
    assert live_ordinals(GAPS[0], reserve=GAPS[1]) == (0, 2, 5, 6)
    (web,) = planned(cluster(*GAPS, ROTATED)).sets
    assert web.group == GROUP and not web.problem and not web.note
    assert {row.ordinal: row.target for row in web.rows} == {
        o: rank_zone(o, *GAPS) for o in (0, 2, 5, 6)
    }
    assert [(s.pod, s.source, s.target) for s in web.steps] == [
        ("web-2", "zone-a", "zone-b"),
        ("web-5", "zone-b", "zone-c"),
        ("web-6", "zone-c", "zone-a"),
    ]
    step = web.steps[0]
    assert (step.group, step.set_uid, step.reserved, step.uid) == (
        GROUP,
        SET_UID,
        ((1, 1), (3, 4)),
        "uid-web-2",
    )
    assert web.left == ()


def test_the_plan_names_the_kind() -> None:
    """The table and the JSON say which kind of set a plan is for."""
    result = planned(cluster(*GAPS, ROTATED))
    text = render_plan(result, timeout=60, apply=False)
    assert "Advanced StatefulSet shop/web: zones zone-a,zone-b,zone-c, replicas 4" in text
    (data,) = render_json(result, timeout=60)["statefulsets"]
    assert (data["apiGroup"], data["kind"], len(data["steps"])) == (GROUP, "StatefulSet", 3)


def test_a_pod_of_an_earlier_set_of_that_name_is_no_member_and_blocks_the_moves() -> None:
    """web-3's owner reference names another uid (a set deleted and created again): the set
    is not whole (web-3 missing), so web-2 is blocked, not moved."""
    objects = cluster(3, [1], MISPLACED)
    objects[-1] = member(3, "c1", owner_uid="uid-of-an-earlier-web")
    (web,) = planned(objects).sets
    rows = {row.ordinal: row for row in web.rows}
    assert rows[2].kind == "blocked" and not web.steps
    assert "not every replica is Ready (2/3: web-3 missing)" in rows[2].notes[0]


def test_an_apps_statefulset_of_the_same_name_is_not_planned_with_its_pods() -> None:
    """An apps/v1 StatefulSet ``web`` beside the Advanced one: the members' pods are never
    taken for its pods (it has none, so nothing of it moves), and the Advanced StatefulSet's
    plan is the same as without it."""
    objects = cluster(3, [1], MISPLACED)
    alone = planned(objects).sets
    apps, kruise = planned([*objects, r.statefulset(2, name="web")]).sets
    assert (apps.group, kruise.group) == ("", GROUP)
    assert not apps.steps and all(not row.node for row in apps.rows)
    assert kruise == alone[0]
    assert [(s.pod, s.target) for s in kruise.steps] == [("web-2", "zone-b")]


def test_the_command_plans_an_advanced_statefulset_of_a_saved_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``stszone rebalance --cluster FILE --statefulset shop/web``: the dry run finds the
    Advanced StatefulSet by that name and plans web-2's move, its kubectl commands waiting on
    that kind; nothing is left (exit 0)."""
    saved = tmp_path / "cluster.json"
    saved.write_text(json.dumps({"kind": "List", "items": cluster(3, [1], MISPLACED)}))
    argv = ["rebalance", "--cluster", str(saved), "--statefulset", "shop/web", "-o", "json"]
    assert main(argv) == 0
    (data,) = json.loads(capsys.readouterr().out)["statefulsets"]
    assert data["apiGroup"] == GROUP
    assert [(s["pod"], s["from"], s["to"]) for s in data["steps"]] == [
        ("web-2", "zone-c", "zone-b")
    ]
    # Its availability is read at its own group's path, as --apply reads it.
    assert data["steps"][0]["commands"][-1] == (
        "kubectl -n shop wait statefulsets.apps.kruise.io/web "
        "--for=jsonpath='{.status.availableReplicas}'=3 --timeout=300s"
    )


# --- the moves, against the fake API server -------------------------------------------------


class KruiseController(Controller):
    """kruise-manager (+ webhook, scheduler, kubelet): an evicted member comes back under the
    same name, owned by the set, on a node of its rank's zone -- when the reference controller
    creates that ordinal at all."""

    def remake(self, name: str, node: str, *, uid: str) -> JSON:
        stored = json.loads(self.api.objects.tables["kruisesets"][(r.NAMESPACE, "web")].body)
        spec = stored["spec"]
        live = live_ordinals(spec["replicas"], reserve=spec.get("reserveOrdinals") or [])
        existing = [json.loads(p.body)["metadata"]["name"] for p in self.pods()]
        ordinal = int(name.rpartition("-")[2])
        created = change([int(n.rpartition("-")[2]) for n in existing], live).created
        assert ordinal in created, (ordinal, created)
        return member(ordinal, node, uid=uid, owner_uid=stored["metadata"]["uid"])

    def pods(self) -> list[Any]:
        return [p for (ns, n), p in self.api.objects.tables["pods"].items() if ns == r.NAMESPACE]


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    async with open_rig(tmp_path, controller=KruiseController) as made:
        made.controller.zone = lambda ordinal: rank_zone(ordinal, 3, [1])
        yield made


async def test_a_member_is_moved_to_its_rank_zone(rig: Rig) -> None:
    """One eviction, of web-2 by uid, with the set whole (its live members 0, 2, 3 Ready: the
    reserved 1 has no pod and is not waited for); web-2 comes back in zone-b."""
    rig.load(cluster(3, [1], MISPLACED))
    result = await rig.plan()
    outcome = await rig.rebalancer().run(result)
    assert outcome.converged and outcome.sets[0].moved == (2,), outcome
    assert rig.evictions() == [("web-2", False)]
    (evicted,) = rig.api.seen("pods", "evict")
    assert evicted.body["deleteOptions"]["preconditions"]["uid"] == "uid-web-2"
    assert {p: z for p, (_, z) in rig.where().items()} == {
        "web-0": "zone-a", "web-2": "zone-b", "web-3": "zone-c",
    }  # fmt: skip
    assert rig.controller.present_after == [2]  # one of three members away, never more
    assert rig.api.seen("kruisesets", "get") and not rig.api.seen("statefulsets", "get")
    assert render_outcome(result, outcome).splitlines()[1] == (
        "Advanced StatefulSet shop/web: moved ordinal(s) 2"
    )


async def test_an_apps_statefulset_of_the_same_name_is_left_alone(rig: Rig) -> None:
    """With an apps/v1 ``web`` of 2 replicas beside it, the move reads the Advanced
    StatefulSet (3 replicas, as planned) and its own pods: the apps/v1 set is never read by
    name, and none of its (absent) pods is waited for or evicted."""
    rig.load([*cluster(3, [1], MISPLACED), r.statefulset(2, name="web")])
    result = await rig.plan()
    assert [(s.group, s.name, len(s.steps)) for s in result.sets] == [
        ("", "web", 0),
        (GROUP, "web", 1),
    ]
    outcome = await rig.rebalancer().run(result)
    assert outcome.converged, outcome
    assert rig.evictions() == [("web-2", False)]
    assert not rig.api.seen("statefulsets", "get")


async def test_reserved_ordinals_changed_since_the_plan_stop_before_any_eviction(
    rig: Rig,
) -> None:
    """reserveOrdinals [1] -> [2] after the plan: every member's rank moves, so the planned
    target is stale; the run stops before evicting anything."""
    rig.load(cluster(3, [1], MISPLACED))
    result = await rig.plan()
    rig.api.put("kruisesets", kruise_set(3, [2]))
    outcome = await rig.rebalancer().run(result)
    assert outcome.stopped == (
        "the reserveOrdinals of Advanced StatefulSet shop/web changed since the plan (its "
        "members' ranks move); run rebalance again for a fresh plan"
    )
    assert rig.evictions() == []


async def test_a_set_created_again_since_the_plan_stops_before_any_eviction(rig: Rig) -> None:
    """The set was deleted and created again under its name (another uid): stop."""
    rig.load(cluster(3, [1], MISPLACED))
    result = await rig.plan()
    again = kruise_set(3, [1])
    again["metadata"]["uid"] = "uid-web-again"
    rig.api.put("kruisesets", again)
    outcome = await rig.rebalancer().run(result)
    assert outcome.stopped.startswith(
        "Advanced StatefulSet shop/web was deleted and created again (uid uid-web-again)"
    )
    assert rig.evictions() == []


async def test_a_new_pod_another_controller_made_stops_the_run(rig: Rig) -> None:
    """web-2 comes back owned by an apps/v1 StatefulSet ``web``: it is not the member the plan
    moved, so the run stops instead of waiting for it."""
    rig.load(cluster(3, [1], MISPLACED))
    result = await rig.plan()
    rig.controller.zone = lambda ordinal: None  # kruise-manager never re-creates it

    def impostor(namespace: str, name: str) -> None:
        rig.api.put("pods", r.pod(2, "b1", sts="web", uid="uid-impostor"))

    rig.api.on_evict.append(impostor)
    outcome = await rig.rebalancer().run(result)
    assert outcome.stopped.startswith(
        "the new web-2 is not controlled by Advanced StatefulSet shop/web (its owner: apps "
        "StatefulSet web"
    )


async def test_every_request_is_granted_by_the_rebalance_cluster_role(rig: Rig) -> None:
    """The list, the reads of the Advanced StatefulSet before the step, the eviction: each is
    allowed by deploy/components/rebalance's ClusterRole."""
    rig.load(cluster(3, [1], MISPLACED))
    assert (await rig.rebalancer().run(await rig.plan())).converged
    (role,) = [
        o for o in deploybase.rebalance_rbac(deploybase.Install()) if o["kind"] == "ClusterRole"
    ]
    requests = asked(rig.api)
    assert {(GROUP, "statefulsets", "list"), (GROUP, "statefulsets", "get")} <= requests
    assert ("", "pods/eviction", "create") in requests
    assert requests <= granted(role)


def test_an_advanced_statefulsets_min_ready_seconds_is_its_rolling_updates() -> None:
    """kruise-manager reads minReadySeconds from spec.updateStrategy.rollingUpdate
    (getMinReadySeconds in openkruise's pkg/controller/statefulset/stateful_set_utils.go; the
    recorded set carries it there): the executor waits for availableReplicas by that one."""
    obj = kruise_set(3, [])
    obj["spec"]["updateStrategy"]["rollingUpdate"]["minReadySeconds"] = 30
    obj["status"]["availableReplicas"] = 2
    assert (set_state(obj).min_ready, set_state(obj).available) == (30, 2)


async def test_its_only_move_is_waited_out_until_available(rig: Rig) -> None:
    """rollingUpdate.minReadySeconds 30 (where kruise-manager reads it): web-2, the set's one
    and so last move, counts as available 30 s after it turned Ready, and the run ends, and
    says web-2 moved, only then."""
    objects = cluster(3, [1], MISPLACED)
    (obj,) = [o for o in objects if o["kind"] == "StatefulSet"]
    obj["spec"]["updateStrategy"]["rollingUpdate"]["minReadySeconds"] = 30
    rig.load(objects)
    result = await rig.plan()
    came_back = hold_available(rig, table="kruisesets", name="web", replicas=3, after=30)
    outcome = await rig.rebalancer().run(result)
    assert outcome.converged and outcome.sets[0].moved == (2,), outcome
    assert len(came_back) == 1 and rig.clock.now >= came_back[0] + 30, (rig.clock.now, came_back)
    assert [e.message for e in rig.events if e.kind in ("waiting", "moved")] == [
        "web-2 is Ready on b1 in zone-b; waiting for 2/3 replicas available (minReadySeconds 30)",
        "web-2 is Ready on b1 in zone-b",
    ]


def test_an_advanced_statefulsets_malformed_min_ready_seconds_is_named_by_its_path() -> None:
    obj = kruise_set(3, [])
    obj["spec"]["updateStrategy"]["rollingUpdate"]["minReadySeconds"] = "30s"
    with pytest.raises(
        BadObject,
        match=r"^spec\.updateStrategy\.rollingUpdate\.minReadySeconds must be an integer, got str$",
    ):
        set_state(obj)


def test_a_paused_rollout_blocks_the_moves_saying_it_is_paused() -> None:
    """kruise-manager updates no pod while spec.updateStrategy.rollingUpdate.paused is true
    (updateStatefulSet returns before its update loop, openkruise's
    pkg/controller/statefulset/stateful_set_control.go), so such a rollout never finishes by
    itself; a pod re-created meanwhile takes the update revision (isCurrentRevisionNeeded reads
    only the partition), so moving it would carry the paused rollout on. The moves are
    blocked, and the reason says the rollout is paused, not that it will finish."""
    objects = cluster(3, [1], MISPLACED)
    sts = objects[len(r.NODES) + 1]
    sts["spec"]["updateStrategy"]["rollingUpdate"]["paused"] = True
    sts["status"].update(updateRevision="web-2", updatedReplicas=1, currentReplicas=2)
    (web,) = planned(objects).sets
    row = next(row for row in web.rows if row.ordinal == 2)
    assert row.kind == "blocked"
    assert row.notes[0] == (
        "its rolling update is paused (spec.updateStrategy.rollingUpdate.paused) with replicas "
        "left to update, and a re-created pod would take the new revision: resume the rollout "
        "and run rebalance once it has finished"
    )
