"""Facts in motion: pods going away, nodes not Ready, ordinals.start moved, claims deleted.

Zones a, b, c on nodes na, nb, nc (tests/test_guard.py). The rule puts ordinal i in
``zones[(i - start) mod 3]``: with start 0, 0 a, 1 b, 2 c, 3 a.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import builders as b
from tests.test_guard import ABC, ALLOW, NODES, scale
from webhook.cli import main
from webhook.cli.audit import render_json, render_text
from webhook.cluster.clusterfile import store_from_objects
from webhook.config import Defaults
from webhook.model.extract import node_info, pod_info
from webhook.model.store import Store
from webhook.rules.audit import audit, audit_set
from webhook.rules.risk import RiskScan
from webhook.wire import review

JSON = dict[str, Any]
FORCE = 'set stszone.io/allow-zone-loss: "true" on the StatefulSet to force it'


def cluster(
    pods: list[JSON],
    *,
    nodes: list[JSON] | None = None,
    extra: list[JSON] | None = None,
    **sts: Any,
) -> Store:
    """``db`` (zones a,b,c unless told) with ``pods`` on ``nodes`` (na, nb, nc unless told)."""
    sts.setdefault("annotations", ABC)
    sts.setdefault("replicas", len(pods))
    made = b.statefulset(**sts)
    everything = [*(NODES if nodes is None else nodes), made, *pods, *(extra or [])]
    return store_from_objects(everything)


def placed(*nodes: str | None, **going: dict[str, Any]) -> list[JSON]:
    """Pods db-0, db-1, ... on the given nodes; ``going``: ``db2={"phase": "Failed"}`` ..."""
    return [b.sts_pod(ordinal=o, node=n, **going.get(f"db{o}", {})) for o, n in enumerate(nodes)]


def sts_update(store: Store, before: JSON, after: JSON) -> review.Answer:
    body = b.review(after, operation="UPDATE", old=before)
    return review.answer("validate", review.from_dict(body), store=store, defaults=Defaults())


# --- a pod that is going away holds no zone ---------------------------------------------------

GOING = [
    pytest.param({"deleting": True}, "is Terminating", id="Terminating"),
    pytest.param({"phase": "Failed"}, "has Failed", id="Failed (evicted)"),
    pytest.param({"phase": "Succeeded"}, "has Succeeded", id="Succeeded"),
    pytest.param({"phase": "Failed", "deleting": True}, "is Terminating", id="Failed, deleted"),
]


@pytest.mark.parametrize(("how", "says"), GOING)
def test_a_kept_pod_going_away_does_not_hold_the_zone_it_sits_in(
    how: dict[str, Any], says: str
) -> None:
    """db-0 sits in c (placed before stszone) and is going away: its replacement goes to a,
    the rule's zone. 4 -> 3 removes db-3, the last pod in c that stays: refused, naming db-0."""
    store = cluster(placed("nc", "nb", "na", "nc", db0=how))
    outcome = scale(store, 4, 3)
    assert (outcome.allowed, outcome.reason) == (False, "ZoneLoss")
    assert outcome.message == (
        "scale-down of db from 4 to 3 would drop zone c (ordinal 3 is its only pod not going "
        f"away; db-0 {says} on node nc in c; its replacement goes to a); the smallest replica "
        f"count that keeps every zone is 4; {FORCE}"
    )


@pytest.mark.parametrize("phase", [None, "Pending", "Running", "Unknown"])
def test_a_pod_in_any_other_phase_holds_its_zone(phase: str | None) -> None:
    """Pending (scheduled, starting), Running and Unknown (its node stopped reporting) pods are
    not being replaced: db-0 holds c, and 4 -> 3 keeps every zone."""
    store = cluster(placed("nc", "nb", "na", "nc", db0={"phase": phase}))
    assert scale(store, 4, 3).allowed


def test_a_removed_pod_going_away_counts_where_its_replacement_goes() -> None:
    """db-2 has Failed on na (zone a); the controller would re-create it in c, its rule zone.
    So the set holds c through ordinal 2 alone, and 3 -> 2 drops c."""
    store = cluster(placed("na", "nb", "na", db2={"phase": "Failed"}))
    outcome = scale(store, 3, 2)
    assert outcome.message == (
        "scale-down of db from 3 to 2 would drop zone c (ordinal 2 is the only one there; db-2 "
        "has Failed on node na in a; its replacement goes to c); the smallest replica count "
        f"that keeps every zone is 3; {FORCE}"
    )


def test_a_removed_pod_of_a_set_being_deleted_is_not_replaced_and_not_judged() -> None:
    """db is being deleted (foreground) and db-2 has Failed on na: nothing re-creates it, and
    the audit says so rather than naming a replacement. Its controller creates and deletes no
    pod any more, so admission judges no scale-down of it: 3 -> 2 is allowed with a warning."""
    sts = b.statefulset(annotations=ABC, replicas=3)
    sts["metadata"]["deletionTimestamp"] = "2026-12-07T12:00:00Z"
    store = store_from_objects([*NODES, sts, *placed("na", "nb", "na", db2={"phase": "Failed"})])
    (report,) = audit(store).sets
    assert report.rows[2].why == (
        "db-2 has Failed on node na in a; nothing replaces it: its StatefulSet is being deleted"
    )
    outcome = scale(store, 3, 2)
    assert outcome.allowed
    assert any("being deleted" in w for w in outcome.warnings)


def test_the_replacement_goes_where_its_volume_is() -> None:
    """db-1 is Terminating on na, and its claim is bound to a volume in c: its replacement will
    run in c, so 3 -> 2 (removing db-2, in c) keeps c, and a, and b was never held."""
    volume = [b.pvc("data-db-1", volume="pv-1"), b.pv("pv-1", "c")]
    store = cluster(placed("na", "na", "nc", db1={"deleting": True}), extra=volume)
    assert scale(store, 3, 2).allowed
    # Through the audit: db-1 is going, and where its replacement goes says why.
    (report,) = audit(store).sets
    row = report.rows[1]
    assert (row.status, row.node, row.zone) == ("going", "na", "a")
    assert (
        row.why
        == "db-1 is Terminating on node na in a; its replacement goes to c with its volume pv-1"
    )
    assert report.held == ("a", "c")


def test_a_pending_pod_going_away_has_no_node_to_name() -> None:
    """db-1 never ran (no node) and is being deleted: its replacement goes to b, its rule zone."""
    store = cluster(placed("na", None, "nc", db1={"deleting": True}))
    (report,) = audit(store).sets
    assert report.rows[1].why == "db-1 is Terminating; its replacement goes to b"


@pytest.mark.parametrize(
    ("node", "says"),
    [
        ("nbare", "db-1 is Terminating on node nbare in c; its replacement goes to b"),
        (None, "db-1 is Terminating; its replacement goes to b"),
    ],
)
def test_a_pod_going_away_from_a_node_without_a_zone_says_its_own_zone_label(
    node: str | None, says: str
) -> None:
    """db-1 carries topology.kubernetes.io/zone=c (Kubernetes copies it from the node at
    binding). On node nbare, which has no zone label, it sits in c by its own label; a pod
    that never got a node sits nowhere yet, whatever its labels say."""
    nodes = [*NODES, b.node("nbare", None)]
    going = {"deleting": True, "labels": {"topology.kubernetes.io/zone": "c"}}
    store = cluster(placed("na", node, "nc", db1=going), nodes=nodes)
    (report,) = audit(store).sets
    assert report.rows[1].why == says


def test_a_replacement_whose_volume_attaches_nowhere_is_in_an_unknown_zone() -> None:
    """db-1 is Terminating on na; its claim is bound to a volume of a node that is gone."""
    volume = [b.pvc("data-db-1", volume="pv-1"), b.pv("pv-1", "gone", key="kubernetes.io/hostname")]
    store = cluster(placed("na", "na", "nc", db1={"deleting": True}), extra=volume)
    (report,) = audit(store).sets
    row = report.rows[1]
    assert row.why.startswith(
        "db-1 is Terminating on node na in a; its replacement's zone is unknown: volume pv-1 can "
        "attach only to nodes with kubernetes.io/hostname In [gone]"
    )
    assert report.unknown == (1,)
    refused = scale(store, 3, 1)
    assert (refused.allowed, refused.reason) == (False, "ZoneUnknown")


def test_a_going_pod_of_a_set_being_deleted_whose_volume_attaches_nowhere_says_why() -> None:
    """db is being deleted and db-1, Terminating on na, has its claim bound to a volume of a
    node that is gone: nothing replaces db-1, and its zone is unknown because of that volume.
    The audit says both, so "label the node(s)" is not the only lead."""
    sts = b.statefulset(annotations=ABC, replicas=3)
    sts["metadata"]["deletionTimestamp"] = "2026-12-07T12:00:00Z"
    volume = [b.pvc("data-db-1", volume="pv-1"), b.pv("pv-1", "gone", key="kubernetes.io/hostname")]
    pods = placed("na", "na", "nc", db1={"deleting": True})
    store = store_from_objects([*NODES, sts, *pods, *volume])
    why = (
        "db-1 is Terminating on node na in a; nothing replaces it: its StatefulSet is being "
        "deleted; its zone is unknown: volume pv-1 can attach only to nodes with "
        "kubernetes.io/hostname In [gone], and no such node is in stszone's view"
    )
    (report,) = audit(store).sets
    row = report.rows[1]
    assert (row.node, row.status, row.why) == ("na", "going", why)
    assert report.unknown == (1,)
    assert scale(store, 3, 1).allowed  # a set being deleted is not judged


def test_a_saved_cluster_through_stszone_review(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same refusal from `stszone review --cluster FILE` on the recorded Scale review."""
    pods = placed("nc", "nb", "na", "nc", db0={"deleting": True})
    items = [*NODES, b.statefulset(annotations=ABC, replicas=4), *pods]
    saved = tmp_path / "cluster.yaml"
    saved.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    sent = tmp_path / "scale.json"
    sent.write_text(json.dumps(b.recorded_scale("db", namespace="ns", old=4, new=3)))
    assert main(["review", "--cluster", str(saved), str(sent)]) == 0
    response = json.loads(capsys.readouterr().out)["response"]
    assert response["allowed"] is False
    assert (
        "db-0 is Terminating on node nc in c; its replacement goes to a"
        in (response["status"]["message"])
    )


def test_a_refusal_explains_both_an_idle_holder_and_a_pod_going_away() -> None:
    """db-3 has no pod but its volume is in c; db-0 is Terminating on nc (its replacement goes
    to a): 4 -> 3 drops c, and the refusal says why each of them counts as it does."""
    pods = placed("nc", "nb", "na", db0={"deleting": True})
    extra = [b.pvc("data-db-3", volume="pv-3"), b.pv("pv-3", "c", claim=("ns", "data-db-3"))]
    refused = scale(cluster(pods, extra=extra, replicas=4), 4, 3)
    assert not refused.allowed
    assert (
        "would drop zone c (ordinal 3 is the only one there not going away; ordinal 3 is not "
        "running but its volume pv-3 is there; db-0 is Terminating on node nc in c; its "
        "replacement goes to a);"
    ) in refused.message


# --- a pod on a node that is not Ready still holds its zone, with a warning -------------------

UNREADY = [
    pytest.param({"ready": "False"}, id="NotReady"),
    pytest.param({"ready": "Unknown"}, id="Unknown"),
    pytest.param({"taint": "node.kubernetes.io/unreachable"}, id="unreachable taint"),
    pytest.param({"taint": "node.kubernetes.io/not-ready"}, id="not-ready taint"),
]


@pytest.mark.parametrize("how", UNREADY)
def test_a_scale_down_that_leaves_a_zone_to_a_pod_on_a_node_not_ready_warns(
    how: dict[str, Any],
) -> None:
    """db-2 and db-3 run in c, db-2 on nc2, which is not Ready: 4 -> 3 keeps c through db-2
    alone, so it is allowed with a warning naming the pod and the node."""
    nodes = [*NODES, b.node("nc2", "c", **how)]
    store = cluster(placed("na", "nb", "nc2", "nc"), nodes=nodes)
    outcome = scale(store, 4, 3)
    assert outcome.allowed
    assert outcome.warnings == (
        "db: 4 -> 3 leaves zone c only to db-2 (node nc2), which is not Ready: if it does not "
        "come back, the zone has no pod; check the node before scaling further",
    )
    # The audit marks the row, in the table and in JSON.
    report = audit(store)
    assert "  2        c         rule    nc2   c     ok, node not Ready" in render_text(report)
    ordinals = render_json(report)["statefulsets"][0]["ordinals"]
    assert [o["nodeReady"] for o in ordinals] == [True, True, False, True]


def test_zones_left_to_pods_on_several_nodes_not_ready_are_named_together() -> None:
    """db-1 on nb2 and db-2 on nc2, both not Ready: 6 -> 3 leaves b and c to them alone, and
    the one warning names both zones, both pods and their nodes, in the plural."""
    nodes = [*NODES, b.node("nb2", "b", ready="False"), b.node("nc2", "c", ready="False")]
    store = cluster(placed("na", "nb2", "nc2", "na", "nb", "nc"), nodes=nodes)
    outcome = scale(store, 6, 3)
    assert outcome.allowed
    assert outcome.warnings == (
        "db: 6 -> 3 leaves zones b only to db-1 (node nb2) and c only to db-2 (node nc2), on "
        "nodes that are not Ready: if they do not come back, those zones have no pod; check "
        "the nodes before scaling further",
    )


def test_a_zone_left_to_two_pods_on_one_node_not_ready_names_the_node_once() -> None:
    """db-2 and db-5 both on nc2, not Ready; 9 -> 8 removes db-8, c's pod on a Ready node."""
    nodes = [*NODES, b.node("nc2", "c", ready="False")]
    store = cluster(placed("na", "nb", "nc2", "na", "nb", "nc2", "na", "nb", "nc"), nodes=nodes)
    assert scale(store, 9, 8).warnings == (
        "db: 9 -> 8 leaves zone c only to db-2 (node nc2) and db-5 (node nc2), which is not "
        "Ready: if it does not come back, the zone has no pod; check the node before scaling "
        "further",
    )


def test_no_warning_while_the_zone_keeps_a_pod_on_a_ready_node() -> None:
    """The same with db-3 kept too (4 -> 4 is no scale-down; 5 -> 4 removes db-4 in a, which
    db-0 keeps): c keeps db-3 on a Ready node, a keeps db-0, so nothing relies on nc2."""
    nodes = [*NODES, b.node("nc2", "c", ready="False")]
    store = cluster(placed("na", "nb", "nc2", "nc", "na"), nodes=nodes)
    assert scale(store, 5, 4).warnings == ()
    # Removing db-3 too leaves c to db-2 alone: now it warns.
    assert "leaves zone c only to db-2 (node nc2)" in scale(store, 5, 3).warnings[0]


def test_a_node_heartbeat_changes_no_record_but_readiness_does() -> None:
    """Readiness is one flag of the node's record: a heartbeat (new timestamps) leaves the record
    equal, so the view's caches stay; Ready turning False makes a new record."""
    beat = b.node("nc", "c", ready="True")
    beat["status"]["conditions"][0].update(lastHeartbeatTime="2026-12-01T10:00:00Z")
    later = json.loads(json.dumps(beat))
    later["status"]["conditions"][0]["lastHeartbeatTime"] = "2026-12-01T10:00:40Z"
    assert node_info(beat) == node_info(later) and node_info(beat).ready
    down = json.loads(json.dumps(later))
    down["status"]["conditions"][0]["status"] = "Unknown"
    assert node_info(down) != node_info(later) and not node_info(down).ready


def test_a_pods_status_updates_change_no_record_but_its_deletion_does() -> None:
    """Pending -> Running, a new condition, container restarts: the same record. Deletion
    (deletionTimestamp) and the end of the pod (Failed) each change it."""
    pending = b.sts_pod(ordinal=0, node="na", phase="Pending")
    running = json.loads(json.dumps(pending))
    running["status"] = {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True"}],
        "containerStatuses": [{"name": "db", "restartCount": 3, "ready": True}],
    }
    assert pod_info(pending) == pod_info(running)
    assert pod_info(b.sts_pod(ordinal=0, node="na", deleting=True)).going == "Terminating"
    assert pod_info(b.sts_pod(ordinal=0, node="na", phase="Failed")).going == "Failed"
    assert pod_info(running).going == ""


# --- a change of ordinals.start is a change of which ordinals exist ---------------------------


def test_moving_ordinals_start_up_is_guarded_like_a_scale_down() -> None:
    """3 replicas on a, b, c; start 0 -> 1 removes ordinal 0 (a's only pod) and adds ordinal 3,
    which the rule (counted from 1) puts in c: a is lost, with replicas unchanged. Ordinal 4
    (rule: a) keeps it, so the refusal says to move the start with 4 replicas, and that is
    allowed."""
    store = cluster(placed("na", "nb", "nc"))
    before = b.statefulset(replicas=3, annotations=ABC)
    after = b.statefulset(replicas=3, annotations=ABC, start=1)
    outcome = sts_update(store, before, after)
    assert (outcome.allowed, outcome.reason) == (False, "ZoneLoss")
    assert outcome.message == (
        "ordinals.start 0 -> 1 of db would drop zone a (ordinal 0 is its only pod); with "
        "ordinals.start 1, the smallest replica count that keeps every zone is 4: set "
        f"spec.replicas to 4 in the same update; {FORCE}"
    )
    assert sts_update(store, before, b.statefulset(replicas=4, annotations=ABC, start=1)).allowed
    assert outcome.warnings == (
        "db: new spec.ordinals.start 1 moves 2 ordinal(s) when re-created: 1 (b->a) and 2 (c->b)",
        "db: `stszone rebalance` can move its existing pods to their zones",
    )
    forced = sts_update(store, before, b.statefulset(replicas=3, annotations=ALLOW, start=1))
    assert forced.allowed
    assert forced.warnings[0] == (
        'db: ordinals.start 0 -> 1 drops a; allowed by stszone.io/allow-zone-loss="true" '
        "(remove it to re-arm the guard)"
    )


def test_a_node_ordinal_start_move_names_the_labelled_node_past_the_old_count() -> None:
    """node-ordinal mode, nodes labelled 0-4 in a, b, c, b, a, pods 0-2 on the first three:
    start 0 -> 1 removes 0 (a's only pod) and keeps 1-3 (b, c, b). The node labelled 4 is in
    a, so 4 replicas from 1 keep every zone: the refusal says so, and that update is allowed,
    as 3 with the start moved is not."""
    mode = {**ABC, "stszone.io/mode": "node-ordinal", "stszone.io/node-label": "example.io/node"}
    nodes = [b.node(f"p{v}", z, labels={"example.io/node": str(v)}) for v, z in enumerate("abcba")]
    pods = [b.sts_pod(ordinal=o, node=f"p{o}") for o in range(3)]
    store = cluster(pods, nodes=nodes, annotations=mode)
    before = b.statefulset(replicas=3, annotations=mode)
    outcome = sts_update(store, before, b.statefulset(replicas=3, annotations=mode, start=1))
    assert (outcome.allowed, outcome.reason) == (False, "ZoneLoss")
    assert outcome.message == (
        "ordinals.start 0 -> 1 of db would drop zone a (ordinal 0 is its only pod); with "
        "ordinals.start 1, the smallest replica count that keeps every zone is 4: set "
        f"spec.replicas to 4 in the same update; {FORCE}"
    )
    assert sts_update(store, before, b.statefulset(replicas=4, annotations=mode, start=1)).allowed


def test_moving_ordinals_start_with_replicas_is_judged_on_both_runs() -> None:
    """start 0 -> 2 and replicas 6 -> 3 keep 2, 3, 4: ordinals 0 and 1 (below the new start)
    and 5 (above it) go. Placed 0 a, 1 b, 2 a, 3 a, 4 a, 5 c: b and c are lost."""
    store = cluster(placed("na", "nb", "na", "na", "na", "nc"))
    before = b.statefulset(replicas=6, annotations=ABC)
    after = b.statefulset(replicas=3, annotations=ABC, start=2)
    outcome = sts_update(store, before, after)
    assert outcome.message.startswith(
        "ordinals.start 0 -> 2, replicas 6 -> 3 of db would drop zones b (ordinal 1 is its only "
        "pod) and c (ordinal 5 is its only pod)"
    )


def test_moving_ordinals_start_that_keeps_every_zone_warns_of_the_moved_rule() -> None:
    """0 a, 1 b, 2 c, 3 a; start 0 -> 1 removes 0 (a is kept by 3) and adds 4, which the rule
    puts in a: allowed, and every ordinal's rule zone moved: the warning names them."""
    store = cluster(placed("na", "nb", "nc", "na"))
    before = b.statefulset(replicas=4, annotations=ABC)
    outcome = sts_update(store, before, b.statefulset(replicas=4, annotations=ABC, start=1))
    assert outcome.allowed
    assert outcome.warnings == (
        "db: new spec.ordinals.start 1 moves 3 ordinal(s) when re-created: 1 (b->a) and 2 more",
        "db: `stszone rebalance` can move its existing pods to their zones",
    )


def test_moving_ordinals_start_by_the_zone_count_moves_no_rule_zone() -> None:
    """start 0 -> 3 with 3 replicas: every ordinal is new (3, 4, 5 in a, b, c by the rule
    counted from 3) and none of the old ones' zones is lost: allowed, no zone-change warning."""
    store = cluster(placed("na", "nb", "nc"))
    before = b.statefulset(replicas=3, annotations=ABC)
    outcome = sts_update(store, before, b.statefulset(replicas=3, annotations=ABC, start=3))
    assert outcome.allowed and outcome.warnings == ()


def test_moving_the_start_of_a_stopped_set_stops_nothing() -> None:
    """A set at 0 replicas has no ordinal to remove: moving its start says nothing of stopping
    it ("0 -> 0 stops the set in every zone" was said of a set already stopped)."""
    store = cluster([])
    before = b.statefulset(replicas=0, annotations=ABC)
    outcome = sts_update(store, before, b.statefulset(replicas=0, annotations=ABC, start=1))
    assert outcome.allowed
    assert not any("stops the set" in w for w in outcome.warnings), outcome.warnings


# --- data that a scale-down deletes -----------------------------------------------------------


def claimed(count: int, *, reclaim: str) -> list[JSON]:
    """Claims data-db-0.. bound to volumes in the rule's zones, reclaimed as told."""
    made: list[JSON] = []
    for o in range(count):
        made += [
            b.pvc(f"data-db-{o}", volume=f"pv-{o}"),
            b.pv(f"pv-{o}", "abc"[o % 3], claim=("ns", f"data-db-{o}"), reclaim=reclaim),
        ]
    return made


POLICY = "(persistentVolumeClaimRetentionPolicy.whenScaled: Delete)"


@pytest.mark.parametrize(
    ("reclaim", "tail"),
    [
        ("Delete", "their volumes' reclaim policy is Delete: the data goes with them"),
        ("Retain", "their volumes are kept (reclaim policy not Delete)"),
    ],
)
def test_an_allowed_scale_down_names_the_claims_it_deletes(reclaim: str, tail: str) -> None:
    """whenScaled: Delete: 9 -> 3 deletes the claims of 3-8 (six, named up to three), and says
    whether their data goes too."""
    pods = placed(*["na", "nb", "nc"] * 3)
    store = cluster(pods, extra=claimed(9, reclaim=reclaim), when_scaled="Delete")
    outcome = scale(store, 9, 3)
    assert outcome.allowed
    assert outcome.warnings == (
        f"db: 9 -> 3 deletes claims data-db-3, data-db-4, data-db-5 and 3 more with their pods "
        f"{POLICY}; {tail}",
    )


def test_one_claim_whose_volume_is_kept_is_named_alone() -> None:
    """4 -> 3 deletes data-db-3 only; its volume is reclaimed with Retain, so its data stays."""
    pods = placed("na", "nb", "nc", "na")
    store = cluster(pods, extra=claimed(4, reclaim="Retain"), when_scaled="Delete")
    assert scale(store, 4, 3).warnings == (
        f"db: 4 -> 3 deletes claim data-db-3 with its pod {POLICY}; its volume is kept "
        "(reclaim policy not Delete)",
    )


def test_claims_with_no_volume_yet_are_not_said_to_keep_one() -> None:
    """A claim still Pending (no volume bound: a WaitForFirstConsumer class, a missing
    provisioner) has no volume to keep or to lose. The lab: ``kubectl scale sts vol
    --replicas=0 --dry-run=server`` with data-vol-0 Pending printed "its volume is kept
    (reclaim policy not Delete)"."""
    pods = placed("na", "nb", "nc", "na", "nb")
    unbound = [b.pvc("data-db-3"), b.pvc("data-db-4")]
    store = cluster(pods, extra=unbound, when_scaled="Delete")
    assert scale(store, 5, 4).warnings == (
        f"db: 5 -> 4 deletes claim data-db-4 with its pod {POLICY}; no volume is bound to it yet",
    )
    assert scale(store, 5, 3).warnings == (
        f"db: 5 -> 3 deletes claims data-db-3 and data-db-4 with their pods {POLICY}; no volume "
        "is bound to them yet",
    )
    mixed = cluster(
        pods, extra=[*claimed(4, reclaim="Retain"), b.pvc("data-db-4")], when_scaled="Delete"
    )
    assert scale(mixed, 5, 3).warnings == (
        f"db: 5 -> 3 deletes claims data-db-3 and data-db-4 with their pods {POLICY}; 1 of them "
        "has no volume yet, the others' volumes are kept (reclaim policy not Delete)",
    )


def test_the_claims_warning_counts_the_volumes_whose_data_goes() -> None:
    """Set db has templates data and logs; 5 -> 3 removes ordinals 3 (a pod in a, which db-0
    keeps) and 4 (no pod, no data claim; b is kept by db-1). data-db-3 is bound to a Delete
    volume, logs-db-3 to a Retain one, logs-db-4 to none: three claims, one with data."""
    extra = [
        b.pvc("data-db-3", volume="pv-3"),
        b.pv("pv-3", "a", claim=("ns", "data-db-3"), reclaim="Delete"),
        b.pvc("logs-db-3", volume="pv-l3"),
        b.pv("pv-l3", "a", claim=("ns", "logs-db-3"), reclaim="Retain"),
        b.pvc("logs-db-4"),
    ]
    pods = placed("na", "nb", "nc", "na")
    store = cluster(pods, extra=extra, when_scaled="Delete", templates=("data", "logs"), replicas=5)
    outcome = scale(store, 5, 3)
    assert outcome.allowed
    assert outcome.warnings == (
        f"db: 5 -> 3 deletes claims data-db-3, logs-db-3 and logs-db-4 with their pods {POLICY}; "
        "the data of 1 of them goes too (volume reclaim policy Delete)",
    )


def test_scaling_to_zero_deletes_the_claims_from_ordinals_start_on() -> None:
    """ordinals.start 5, two replicas: 2 -> 0 deletes data-db-5 and data-db-6, not the
    data-db-0 left from before the start moved."""
    pods = [b.sts_pod(ordinal=o, node=n) for o, n in ((5, "nc"), (6, "na"))]
    extra = [b.pvc(f"data-db-{o}", volume=f"pv-{o}") for o in (0, 5, 6)]
    extra += [
        b.pv(f"pv-{o}", "a", claim=("ns", f"data-db-{o}"), reclaim="Delete") for o in (0, 5, 6)
    ]
    store = cluster(pods, extra=extra, when_scaled="Delete", start=5)
    assert scale(store, 2, 0).warnings[1:] == (
        f"db: 2 -> 0 deletes claims data-db-5 and data-db-6 with their pods {POLICY}; their "
        "volumes' reclaim policy is Delete: the data goes with them",
    )


def test_the_claims_warning_of_a_moved_start_names_the_move() -> None:
    """whenScaled: Delete; start 0 -> 3 with 3 replicas removes 0, 1, 2 (3, 4, 5 come in a, b,
    c): allowed, and the claims it deletes are said to go with the move, not with "3 -> 3"; with
    replicas 3 -> 4 as well, the warning names both changes, not a scale-up that deletes."""
    store = cluster(placed("na", "nb", "nc"), extra=claimed(3, reclaim="Retain"))
    before = b.statefulset(replicas=3, annotations=ABC, when_scaled="Delete")
    after = b.statefulset(replicas=3, annotations=ABC, start=3, when_scaled="Delete")
    assert sts_update(store, before, after).warnings == (
        "db: ordinals.start 0 -> 3 deletes claims data-db-0, data-db-1 and data-db-2 with their "
        f"pods {POLICY}; their volumes are kept (reclaim policy not Delete)",
    )
    grown = b.statefulset(replicas=4, annotations=ABC, start=1, when_scaled="Delete")
    assert sts_update(store, before, grown).warnings[0] == (
        "db: ordinals.start 0 -> 1, replicas 3 -> 4 deletes claim data-db-0 with its pod "
        f"{POLICY}; its volume is kept (reclaim policy not Delete)"
    )


def test_the_claims_warning_on_an_update_and_on_scaling_to_zero() -> None:
    """An UPDATE is judged as written (the policy is the new object's); scaling to zero deletes
    every claim; a refused scale-down deletes nothing and says nothing of claims."""
    pods = placed("na", "nb", "nc", "na")
    store = cluster(pods, extra=claimed(4, reclaim="Delete"), when_scaled="Delete")
    before = b.statefulset(replicas=4, annotations=ABC)
    after = b.statefulset(replicas=3, annotations=ABC, when_scaled="Delete")
    assert sts_update(store, before, after).warnings == (
        f"db: 4 -> 3 deletes claim data-db-3 with its pod {POLICY}; its volume's reclaim policy "
        "is Delete: the data goes with it",
    )
    assert (
        "db: 4 -> 0 deletes claims data-db-0, data-db-1, data-db-2 and 1 more"
        in (scale(store, 4, 0).warnings[1])
    )
    refused = scale(store, 4, 2)
    assert not refused.allowed and not any("claim" in w for w in refused.warnings)
    kept = cluster(pods, extra=claimed(4, reclaim="Delete"))  # whenScaled: Retain (the default)
    assert scale(kept, 4, 3).warnings == ()


def test_scaling_to_zero_by_scale_also_makes_the_claims_event() -> None:
    """kubectl scale --replicas=0 deletes every claim as an UPDATE to 0 does: both say it in a
    warning and in a ClaimsDeleted Event on the set."""
    pods = placed("na", "nb", "nc", "na")
    store = cluster(pods, extra=claimed(4, reclaim="Delete"), when_scaled="Delete")
    after = b.statefulset(replicas=0, annotations=ABC, when_scaled="Delete")
    by_update = sts_update(store, b.statefulset(replicas=4, annotations=ABC), after)
    for answer in (by_update, scale(store, 4, 0)):
        (said,) = [w for w in answer.warnings if "deletes claims" in w]
        (notice,) = [n for n in answer.decision.notices if n.reason == "ClaimsDeleted"]
        assert notice.note == said
        assert (notice.regarding.kind, notice.regarding.name) == ("StatefulSet", "db")


def test_the_claims_event_relates_the_one_claim_it_deletes() -> None:
    """docs/events.md: an Event names the claim involved (``related``). 4 -> 3 deletes
    data-db-3 alone: its Event relates it; 9 -> 3 deletes six, and relates none of them."""
    one = cluster(
        placed("na", "nb", "nc", "na"), extra=claimed(4, reclaim="Retain"), when_scaled="Delete"
    )
    (notice,) = scale(one, 4, 3).decision.notices
    assert notice.reason == "ClaimsDeleted"
    assert notice.related is not None
    assert (notice.related.kind, notice.related.namespace, notice.related.name) == (
        "PersistentVolumeClaim",
        "ns",
        "data-db-3",
    )
    several = cluster(
        placed(*["na", "nb", "nc"] * 3), extra=claimed(9, reclaim="Retain"), when_scaled="Delete"
    )
    (notice,) = scale(several, 9, 3).decision.notices
    assert notice.reason == "ClaimsDeleted" and notice.related is None


# --- the same facts in the zone-risk gauges ---------------------------------------------------


def test_zone_risk_counts_a_going_pod_where_its_replacement_goes() -> None:
    """db-0 runs in c (placed before stszone; its rule zone is a): the set holds b and c, 2 of
    3. Its deletion begins (the watch delivers it with a deletionTimestamp): its replacement
    goes to a, so the next refresh counts 3 of 3 -- the record changed, so the set is
    audited again."""
    store = cluster(placed("nc", "nb", "nc"))
    scan = RiskScan(store)
    for _ in scan.sweep():
        pass
    assert scan.sets[("ns", "db")].held == 2
    store.put("pods", pod_info(b.sts_pod(ordinal=0, node="nc", deleting=True)))
    for _ in scan.sweep():
        pass
    assert scan.sets[("ns", "db")].held == 3
    assert audit_set(store.statefulsets[("ns", "db")], store=store).held == ("a", "b", "c")
