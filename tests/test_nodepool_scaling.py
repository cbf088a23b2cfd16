"""KafkaNodePool scale-downs: the guard, and the balanced ``strimzi.io/remove-node-ids``."""

from __future__ import annotations

import copy
import itertools
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import builders as b
from tests import poolsim as sim
from tests import strimzi_ref as ref
from webhook.model.extract import claim_info, volume_info
from webhook.model.nodepools import nodepool_info, poolpod_info
from webhook.model.store import Store

REMOVE = "strimzi.io/remove-node-ids"
SKIP = "stszone.io/skip"


def skewed() -> tuple[Store, sim.Cluster]:
    """Six brokers placed 0a 1a 2b 3b 4c 5c: brokers 1 and 3 have data in zones a and b."""
    view = sim.store()
    for node_id, zone in ((1, "zone-a"), (3, "zone-b")):
        claim = ("kafka", f"data-my-cluster-pool-{node_id}")
        view.put("volumes", volume_info(b.pv(f"pv-{node_id}", zone, claim=claim)))
    cluster = sim.Cluster(view)
    cluster.create_pool("pool", 6)
    cluster.reconcile()
    assert cluster.zones("pool") == {
        0: "zone-a",
        1: "zone-a",
        2: "zone-b",
        3: "zone-b",
        4: "zone-c",
        5: "zone-c",
    }
    return view, cluster


def pool(view: Store, **annotations: str) -> sim.JSON:
    info = view.nodepool("kafka", "pool")
    assert info is not None
    made = sim.pool_object("pool", replicas=info.replicas, node_ids=list(info.node_ids or ()))
    made["metadata"]["annotations"] = {**info.annotations, **annotations}
    return made


def test_scale_that_empties_a_zone_is_refused_with_the_annotate_command() -> None:
    view, _ = skewed()
    new, old = sim.scale("pool", old=6, new=4)
    refused = sim.admit(view, new, old=old, operation="UPDATE")
    assert not refused.allowed and refused.reason == "ZoneLoss"
    assert "my-cluster-pool-5 and my-cluster-pool-4" in refused.message
    assert "zone-c" in refused.message
    command = "kubectl annotate kafkanodepool pool -n kafka strimzi.io/remove-node-ids='[5, 3]' --overwrite"
    assert command in refused.message
    (told,) = refused.decision.notices  # an Event on the pool: the operator drops warnings
    assert told.reason == "ScaleDownRefused" and told.note == refused.message
    assert told.regarding.kind == "KafkaNodePool" and told.regarding.name == "pool"
    # After that command (an UPDATE the guard allows: nothing is removed yet), the same scale passes.
    annotated = pool(view, **{REMOVE: "[5, 3]"})
    assert sim.admit(view, annotated, old=pool(view), operation="UPDATE").allowed
    view.put("nodepools", nodepool_info(annotated))
    again = sim.admit(view, new, old=old, operation="UPDATE")
    assert again.allowed and not again.warnings


def test_an_annotation_left_by_an_earlier_scale_down_does_not_hide_the_command() -> None:
    """After an earlier scale-down ``remove-node-ids`` stays on the pool (client-side apply
    keeps it), naming an ID the pool no longer holds: the operator removes the highest, as
    with none. A /scale that drops a zone is refused with the command that keeps them all."""
    view, _ = skewed()
    left = pool(view, **{REMOVE: "[7]"})
    view.put("nodepools", nodepool_info(left))
    new, old = sim.scale("pool", old=6, new=4)
    refused = sim.admit(view, new, old=old, operation="UPDATE")
    assert not refused.allowed and refused.reason == "ZoneLoss"
    command = "kubectl annotate kafkanodepool pool -n kafka strimzi.io/remove-node-ids='[5, 3]' --overwrite"
    assert command in refused.message
    annotated = pool(view, **{REMOVE: "[5, 3]"})
    assert sim.admit(view, annotated, old=left, operation="UPDATE").allowed
    view.put("nodepools", nodepool_info(annotated))
    assert sim.admit(view, new, old=old, operation="UPDATE").allowed


def test_a_pool_labelled_skip_is_left_alone_on_its_scale_subresource() -> None:
    """The objectSelector keeps a pool labelled stszone.io/skip=true from stszone, but it is
    matched against the Scale, which carries none of the pool's labels: /scale still comes."""
    view, _ = skewed()
    new, old = sim.scale("pool", old=6, new=4)
    labelled = pool(view)
    labelled["metadata"]["labels"] = {**labelled["metadata"].get("labels", {}), SKIP: "true"}
    view.put("nodepools", nodepool_info(labelled))
    allowed = sim.admit(view, new, old=old, operation="UPDATE")
    assert allowed.allowed and not allowed.warnings, allowed.message


def test_scale_keeping_every_zone_passes_and_warns_when_a_better_choice_exists() -> None:
    view = sim.store()
    view.put(
        "nodepools", nodepool_info(sim.pool_object("pool", replicas=6, node_ids=list(range(6))))
    )
    for node_id, zone in enumerate(["zone-a", "zone-b", "zone-c", "zone-a", "zone-a", "zone-c"]):
        pod = sim.pod_object("my-cluster", "pool", node_id)
        pod["metadata"]["annotations"]["stszone.io/zone"] = zone
        view.put("poolpods", poolpod_info(pod))
    new, old = sim.scale("pool", old=6, new=5)
    answered = sim.admit(view, new, old=old, operation="UPDATE")
    assert answered.allowed
    assert any("strimzi.io/remove-node-ids='[4]'" in w for w in answered.warnings)
    # Through the pool itself, stszone names broker 4 (zone-a holds three).
    lowered = pool(view)
    lowered["spec"]["replicas"] = 5
    rewritten = sim.admit(view, lowered, old=pool(view), operation="UPDATE")
    assert rewritten.allowed
    assert rewritten.edited["metadata"]["annotations"][REMOVE] == "[4]"
    assert any("my-cluster-pool-4 (zone-a)" in w for w in rewritten.warnings)


def test_apply_with_fewer_replicas_gets_the_fullest_zones_ids() -> None:
    view, cluster = skewed()
    lowered = pool(view)
    lowered["spec"]["replicas"] = 4
    answered = sim.admit(view, lowered, old=pool(view), operation="UPDATE")
    assert answered.allowed
    assert answered.edited["metadata"]["annotations"][REMOVE] == "[5, 3]"
    # Reinvocation and dry run give the same answer; the rewritten object needs no patch.
    assert sim.admit(view, lowered, old=pool(view), operation="UPDATE", dry_run=True).edited == (
        answered.edited
    )
    again = sim.admit(view, answered.edited, old=pool(view), operation="UPDATE", endpoint="mutate")
    assert again.allowed and not again.patch
    # The played operator removes 5 then 3: every zone held, counts even.
    cluster.set_pool("pool", replicas=4, remove_node_ids="[5, 3]")
    cluster.reconcile()
    assert Counter(cluster.zones("pool").values()) == {"zone-a": 2, "zone-b": 1, "zone-c": 1}


def test_a_put_is_judged_by_the_brokers_the_pool_has_not_by_the_status_it_sends() -> None:
    """A PUT need not carry status (``kubectl replace`` of an edited export), or may carry a
    stale one: the status stored is the old one all the same (the CRD's status subresource),
    so the brokers are read from it and the balanced choice is written either way."""
    view, _ = skewed()
    lowered = pool(view)
    lowered["spec"]["replicas"] = 4
    bare = copy.deepcopy(lowered)
    del bare["status"]
    stale = copy.deepcopy(lowered)
    stale["status"] = {"nodeIds": [0, 1, 2, 3]}
    for sent in (bare, stale):
        answered = sim.admit(view, sent, old=pool(view), operation="UPDATE", endpoint="mutate")
        assert answered.allowed
        assert answered.edited["metadata"]["annotations"][REMOVE] == "[5, 3]", sent.get("status")


def test_an_apply_dropping_the_written_annotation_mid_scale_down_gets_it_back() -> None:
    """Server-side apply removes the annotation the webhook wrote for the same manager: while
    the operator has not removed the brokers yet, the same IDs are written again."""
    view, _ = skewed()
    pending = pool(view, **{REMOVE: "[5, 3]"})
    pending["spec"]["replicas"] = 4
    view.put("nodepools", nodepool_info(pending))
    dropped = copy.deepcopy(pending)
    del dropped["metadata"]["annotations"][REMOVE]
    answered = sim.admit(view, dropped, old=pending, operation="UPDATE")
    assert answered.allowed
    assert answered.edited["metadata"]["annotations"][REMOVE] == "[5, 3]"
    # Once the operator is done (status.nodeIds at 4), dropping it changes nothing.
    done = pool(view, **{REMOVE: "[5, 3]"})
    done["spec"]["replicas"] = 4
    done["status"] = {"nodeIds": [0, 1, 2, 4]}
    after = copy.deepcopy(done)
    del after["metadata"]["annotations"][REMOVE]
    quiet = sim.admit(view, after, old=done, operation="UPDATE")
    assert quiet.allowed and not quiet.patch


def test_an_explicit_annotation_is_judged_as_it_stands() -> None:
    view, _ = skewed()
    lowered = pool(view, **{REMOVE: "[4, 5]"})
    lowered["spec"]["replicas"] = 4
    refused = sim.admit(view, lowered, old=pool(view), operation="UPDATE")
    assert not refused.allowed
    assert "my-cluster-pool-4 and my-cluster-pool-5" in refused.message
    assert "zone-c" in refused.message and "stszone.io/allow-zone-loss" in refused.message
    forced = pool(view, **{REMOVE: "[4, 5]", "stszone.io/allow-zone-loss": "true"})
    forced["spec"]["replicas"] = 4
    allowed = sim.admit(view, forced, old=pool(view), operation="UPDATE")
    assert allowed.allowed and not allowed.patch
    assert any("allow-zone-loss" in w for w in allowed.warnings)
    validated = sim.admit(view, forced, old=pool(view), operation="UPDATE", endpoint="validate")
    assert [n.reason for n in validated.decision.notices] == ["ZoneLossAllowed"]


def test_an_update_naming_brokers_that_drop_a_zone_is_told_which_keep_them_all() -> None:
    """remove-node-ids [4, 5] with replicas 4 empties zone-c. stszone never rewrites a choice
    the update makes, so the refusal names the brokers that keep every zone (5 and 3), and
    the update naming them instead is allowed."""
    view, _ = skewed()
    lowered = pool(view, **{REMOVE: "[4, 5]"})
    lowered["spec"]["replicas"] = 4
    refused = sim.admit(view, lowered, old=pool(view), operation="UPDATE")
    assert not refused.allowed and refused.reason == "ZoneLoss"
    assert refused.message.endswith(
        "; name brokers that keep every zone in the same update: strimzi.io/remove-node-ids: "
        "'[5, 3]', or set stszone.io/allow-zone-loss: \"true\" on KafkaNodePool pool to force it"
    )
    instead = pool(view, **{REMOVE: "[5, 3]"})
    instead["spec"]["replicas"] = 4
    assert sim.admit(view, instead, old=pool(view), operation="UPDATE").allowed


def test_an_update_naming_brokers_when_none_keep_every_zone_is_told_only_to_force_it() -> None:
    """Three brokers, one per zone: any one removed empties its zone, so the refusal of
    remove-node-ids [2] with replicas 2 names no other brokers, only the override."""
    view = sim.store()
    cluster = sim.Cluster(view)
    cluster.create_pool("pool", 3)
    cluster.reconcile()
    assert sorted(cluster.zones("pool").values()) == ["zone-a", "zone-b", "zone-c"]
    lowered = pool(view, **{REMOVE: "[2]"})
    lowered["spec"]["replicas"] = 2
    refused = sim.admit(view, lowered, old=pool(view), operation="UPDATE")
    assert not refused.allowed and refused.reason == "ZoneLoss"
    assert refused.message.endswith(
        '; set stszone.io/allow-zone-loss: "true" on KafkaNodePool pool to force it'
    )
    assert "name brokers" not in refused.message


def test_the_default_order_when_already_balanced_writes_nothing() -> None:
    view = sim.store()
    cluster = sim.Cluster(view)
    cluster.create_pool("pool", 6)
    cluster.reconcile()
    lowered = pool(view)
    lowered["spec"]["replicas"] = 3
    answered = sim.admit(view, lowered, old=pool(view), operation="UPDATE")
    assert answered.allowed and not answered.patch and not answered.warnings


zones_st = st.lists(st.sampled_from(sim.ZONES), min_size=3, max_size=18)


def _placed(zones: list[str], ids: list[int]) -> Store:
    view = sim.store()
    view.put("nodepools", nodepool_info(sim.pool_object("pool", replicas=len(ids), node_ids=ids)))
    for node_id, zone in zip(ids, zones, strict=True):
        pod = sim.pod_object("my-cluster", "pool", node_id)
        pod["metadata"]["annotations"]["stszone.io/zone"] = zone
        view.put("poolpods", poolpod_info(pod))
    return view


def _spread(zones: dict[int, str], kept: list[int]) -> int:
    counts = Counter(zones[i] for i in kept)
    values = [counts.get(z, 0) for z in sim.ZONES]
    return max(values) - min(values)


@settings(max_examples=150, deadline=None)
@given(zones_st, st.data())
def test_the_choice_is_never_worse_than_the_default_and_reinvocation_agrees(
    zones: list[str], data: st.DataObject
) -> None:
    ids = sorted(data.draw(st.sets(st.integers(0, 60), min_size=len(zones), max_size=len(zones))))
    replicas = data.draw(st.integers(1, len(ids) - 1))
    view = _placed(zones, ids)
    where = dict(zip(ids, zones, strict=True))
    before = pool(view)
    lowered = copy.deepcopy(before)
    lowered["spec"]["replicas"] = replicas
    answered = sim.admit(view, lowered, old=before, operation="UPDATE", endpoint="mutate")
    written = answered.edited["metadata"]["annotations"].get(REMOVE)
    removed = ref.removed_ids(ids, replicas, written)
    default = ref.removed_ids(ids, replicas, None)
    kept = [i for i in ids if i not in removed]
    assert _spread(where, kept) <= _spread(where, [i for i in ids if i not in default])
    if len(ids) <= 9:  # the most even any choice of brokers could leave, by brute force
        best = min(
            _spread(where, [i for i in ids if i not in gone])
            for gone in itertools.combinations(ids, len(ids) - replicas)
        )
        assert _spread(where, kept) == best
    again = sim.admit(view, answered.edited, old=before, operation="UPDATE", endpoint="mutate")
    assert not again.patch


@settings(max_examples=100, deadline=None)
@given(zones_st, st.lists(st.integers(0, 20), max_size=4), st.data())
def test_the_users_choice_is_never_rewritten(
    zones: list[str], chosen: list[int], data: st.DataObject
) -> None:
    ids = list(range(len(zones)))
    replicas = data.draw(st.integers(1, len(ids) - 1))
    view = _placed(zones, ids)
    before = pool(view)
    annotation = "[" + ", ".join(map(str, chosen)) + "]"
    lowered = pool(view, **{REMOVE: annotation})
    lowered["spec"]["replicas"] = replicas
    answered = sim.admit(view, lowered, old=before, operation="UPDATE", endpoint="mutate")
    assert not answered.patch


def test_a_broker_of_unknown_zone_may_hold_the_zone_no_kept_one_holds() -> None:
    """Brokers 0 (zone-a) and 1 (zone-b) known, 2's pod unscheduled and never placed: 3 -> 2
    removes 2, and no kept broker is known to hold zone-c: refused as may-drop (facts only)."""
    view = _placed(["zone-a", "zone-b"], [0, 1])
    view.put("nodepools", nodepool_info(sim.pool_object("pool", replicas=3, node_ids=[0, 1, 2])))
    view.put("poolpods", poolpod_info(sim.pod_object("my-cluster", "pool", 2)))
    new, old = sim.scale("pool", old=3, new=2)
    refused = sim.admit(view, new, old=old, operation="UPDATE")
    assert not refused.allowed and refused.reason == "ZoneUnknown"
    assert "may drop zone zone-c" in refused.message and "my-cluster-pool-2" in refused.message


def test_while_a_brokers_zone_is_unknown_a_refusal_names_no_other_brokers() -> None:
    """Brokers 0-3 in a, b, c, a and 4's pod never placed: remove-node-ids [2] with replicas 4
    empties zone-c. stszone makes no choice while a broker's zone is unknown (as /mutate
    writes none then), so the refusal offers only the override."""
    view = _placed(["zone-a", "zone-b", "zone-c", "zone-a"], [0, 1, 2, 3])
    before = sim.pool_object("pool", replicas=5, node_ids=[0, 1, 2, 3, 4])
    view.put("nodepools", nodepool_info(before))
    view.put("poolpods", poolpod_info(sim.pod_object("my-cluster", "pool", 4)))
    lowered = pool(view, **{REMOVE: "[2]"})
    lowered["spec"]["replicas"] = 4
    refused = sim.admit(view, lowered, old=pool(view), operation="UPDATE")
    assert not refused.allowed and refused.reason == "ZoneLoss"
    assert "name brokers" not in refused.message
    assert refused.message.endswith(
        '; set stszone.io/allow-zone-loss: "true" on KafkaNodePool pool to force it'
    )


def test_a_terminating_broker_holds_its_zone_by_its_data() -> None:
    """Broker 5's pod is Terminating (a rolling update): its claim still puts it in zone-c."""
    view, _ = skewed()
    pod = sim.pod_object("my-cluster", "pool", 5)
    pod["metadata"]["deletionTimestamp"] = "2026-12-05T00:00:00Z"
    pod["metadata"]["annotations"]["stszone.io/zone"] = "zone-c"
    view.put("poolpods", poolpod_info(pod))
    new, old = sim.scale("pool", old=6, new=4)
    refused = sim.admit(view, new, old=old, operation="UPDATE")
    assert not refused.allowed and refused.reason == "ZoneLoss" and "zone-c" in refused.message


def test_malformed_pool_annotations_are_refused_unless_left_as_they_were() -> None:
    view = sim.store()
    broken = sim.pool_object("pool", replicas=3)
    broken["metadata"]["annotations"]["stszone.io/storage-class-template"] = "ssd"  # no {zone}
    refused = sim.admit(view, broken)
    assert not refused.allowed and refused.code == 422
    assert "KafkaNodePool pool" in refused.message and "{zone}" in refused.message
    # An update that leaves them as they were (a replicas bump) is not blocked by them.
    bumped = copy.deepcopy(broken)
    bumped["spec"]["replicas"] = 4
    assert sim.admit(view, bumped, old=broken, operation="UPDATE").allowed


@pytest.mark.parametrize(
    "annotations",
    [
        {"stszone.io/mode": "node-ordinal", "stszone.io/node-label": "example.io/node"},
        {"stszone.io/mode": "node-ordinal"},
        {"stszone.io/mode": "scheduler", "stszone.io/scheduler-name": "sts-scheduler"},
        {"stszone.io/node-label": "example.io/node"},
    ],
    ids=["node-ordinal", "node-ordinal-without-label", "scheduler", "node-label"],
)
def test_statefulset_only_annotations_on_a_pool_are_refused_as_not_applying(
    annotations: dict[str, str],
) -> None:
    """The brokers of a pool are always pinned to a zone by a required node affinity: a pool
    asking for node pinning (sts-scheduler's example.io/node=N) or another scheduler would
    otherwise be admitted and its brokers placed by zone, with nothing said."""
    view = sim.store()
    asked = sim.pool_object("pool", replicas=3, annotations=annotations)
    refused = sim.admit(view, asked)
    assert not refused.allowed and refused.code == 422
    assert "KafkaNodePool pool" in refused.message
    for key in annotations:
        assert key in refused.message and "not apply to a KafkaNodePool" in refused.message
    assert "needs stszone.io/node-label" not in refused.message
    # The mode a pool's brokers get anyway may be written out.
    plain = sim.pool_object("pool", replicas=3, annotations={"stszone.io/mode": "affinity"})
    assert sim.admit(view, plain).allowed
    # A pool that already carries them is not blocked by them on an unrelated UPDATE.
    bumped = copy.deepcopy(asked)
    bumped["spec"]["replicas"] = 4
    assert sim.admit(view, bumped, old=asked, operation="UPDATE").allowed


_TAKES = (
    "a pool takes stszone.io/zones, stszone.io/topology-key, stszone.io/storage-class-template, "
    "stszone.io/allow-zone-loss"
)


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        (
            {"stszone.io/scheduler-name": "sts-scheduler"},
            "KafkaNodePool pool: stszone.io/scheduler-name: 'sts-scheduler' does not apply to a "
            "KafkaNodePool: its brokers are pinned to a zone (their pool's share, or their "
            "data's) by a required node affinity, never to a node by label nor to another "
            f"scheduler; remove it ({_TAKES})",
        ),
        (
            {"stszone.io/node-label": "example.io/node", "stszone.io/mode": "node-ordinal"},
            "KafkaNodePool pool: stszone.io/mode: 'node-ordinal', stszone.io/node-label: "
            "'example.io/node' do not apply to a KafkaNodePool: its brokers are pinned to a zone "
            "(their pool's share, or their data's) by a required node affinity, never to a node "
            f"by label nor to another scheduler; remove them ({_TAKES})",
        ),
        (
            {"stszone.io/mode": "scheduler", "stszone.io/zones": "zone-a,zone-a"},
            "KafkaNodePool pool: stszone.io/mode: 'scheduler' does not apply to a KafkaNodePool: "
            "its brokers are pinned to a zone (their pool's share, or their data's) by a "
            "required node affinity, never to a node by label nor to another scheduler; remove "
            f"it ({_TAKES}); stszone.io/zones lists zone-a more than once; each zone once",
        ),
    ],
    ids=["one", "two", "with-another-problem"],
)
def test_a_pool_asking_for_statefulset_only_annotations_is_told_each_and_what_it_takes(
    annotations: dict[str, str], message: str
) -> None:
    refused = sim.admit(sim.store(), sim.pool_object("pool", replicas=3, annotations=annotations))
    assert (refused.allowed, refused.message) == (False, message)


def test_a_scale_down_of_a_pool_with_annotations_left_broken_is_judged_on_defaults() -> None:
    """Broken annotations left as they were do not block a scale-down: the guard runs with
    the server's zones, as for a StatefulSet."""
    view, _ = skewed()
    before = pool(view, **{"stszone.io/storage-class-template": "ssd"})
    lowered = copy.deepcopy(before)
    lowered["spec"]["replicas"] = 4
    answered = sim.admit(view, lowered, old=before, operation="UPDATE")
    assert answered.allowed, answered.message
    assert answered.edited["metadata"]["annotations"][REMOVE] == "[5, 3]"


@pytest.mark.parametrize("version", ["v1", "v1beta2"])
def test_a_refusal_event_names_the_pool_at_the_version_the_cluster_serves(version: str) -> None:
    """Strimzi 1.0 serves KafkaNodePools as ``kafka.strimzi.io/v1`` only (its CRD lists no
    ``v1beta2``), Strimzi before 0.49 as ``v1beta2`` only: the Event's ``regarding`` is the
    version the view read the pool at, so a client that follows the reference finds the pool."""
    view = sim.store()
    served = sim.pool_object("pool", replicas=3, node_ids=[0, 1, 2])
    served["apiVersion"] = f"kafka.strimzi.io/{version}"
    view.put("nodepools", nodepool_info(served))
    for node_id, zone in enumerate(sim.ZONES):
        pod = sim.pod_object("my-cluster", "pool", node_id)
        pod["metadata"]["annotations"]["stszone.io/zone"] = zone
        view.put("poolpods", poolpod_info(pod))
    new, old = sim.scale("pool", old=3, new=2)
    by_scale = sim.admit(view, new, old=old, operation="UPDATE")
    lowered = copy.deepcopy(served)
    lowered["spec"]["replicas"] = 2
    lowered["metadata"]["annotations"][REMOVE] = "[2]"
    by_update = sim.admit(view, lowered, old=served, operation="UPDATE")
    for refused in (by_scale, by_update):
        assert not refused.allowed and refused.reason == "ZoneLoss", refused.message
        (told,) = refused.decision.notices
        assert told.regarding.api_version == f"kafka.strimzi.io/{version}"
        assert (told.regarding.kind, told.regarding.uid) == ("KafkaNodePool", "uid-pool")


def _broker_4_off_its_data(pod_on: str, **labels: str) -> Store:
    """skewed(), broker 4's data given zone-a (a claim stszone gave zone-a, its volume not
    pinned to a zone: Ceph RBD, NFS) and its pod on ``pod_on``, in zone-c."""
    view, _ = skewed()
    claim = b.pvc("data-my-cluster-pool-4", namespace="kafka")
    claim["metadata"]["annotations"] = {"stszone.io/zone": "zone-a"}
    view.put("claims", claim_info(claim))
    pod = sim.pod_object("my-cluster", "pool", 4)
    pod["spec"]["nodeName"] = pod_on
    pod["metadata"]["labels"].update(labels)
    view.put("poolpods", poolpod_info(pod))
    return view


def test_a_broker_on_a_node_that_no_longer_exists_holds_no_zone() -> None:
    """Broker 4 runs in zone-c, away from its data in zone-a, and its node is deleted: PodGC
    deletes the pod, and the StrimziPodSet controller re-creates it with its data, in zone-a.
    Removing broker 5 then leaves zone-c empty, as when broker 4's pod is Terminating."""
    new, old = sim.scale("pool", old=6, new=5)
    running = _broker_4_off_its_data("n-zone-c-0")
    assert sim.admit(running, new, old=old, operation="UPDATE").allowed
    # PodTopologyLabels copied the zone of the node onto the pod when it was bound.
    gone = _broker_4_off_its_data("n-zone-c-9", **{"topology.kubernetes.io/zone": "zone-c"})
    refused = sim.admit(gone, new, old=old, operation="UPDATE")
    assert not refused.allowed and refused.reason == "ZoneLoss"
    assert "would drop zone zone-c (my-cluster-pool-5 is its only broker)" in refused.message
