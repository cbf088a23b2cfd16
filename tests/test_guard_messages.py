"""What a refused scale-down says: which ordinals hold the lost zone and why each counts, the
unknown zones and their reasons, the lowest safe count; and warnings that stay short.

Each case goes through ``/validate`` as ``kubectl scale`` (the recorded review) or a
StatefulSet UPDATE sends it; the sets are ``ns/db`` on nodes na, nb, nc (zones a, b, c), nx
(zone x, outside the list) and nbare (no zone label).
"""

from __future__ import annotations

from typing import Any

from tests import builders as b
from tests.test_guard_motion import sts_update
from webhook.cluster.clusterfile import store_from_objects
from webhook.config import Defaults
from webhook.model.store import Store
from webhook.wire import review

ZONE_KEY = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
ABC = {"stszone.io/zones": "a,b,c"}
NODES = [b.node(f"n{z}", z) for z in "abcx"] + [b.node("nbare", None)]
FORCE = 'set stszone.io/allow-zone-loss: "true" on the StatefulSet to force it'


def cluster(
    placed: dict[int, str],
    *extra: dict[str, Any],
    annotations: dict[str, str] = ABC,
    nodes: list[dict[str, Any]] = NODES,
) -> Store:
    """``db`` with the pod of each ordinal of ``placed`` on that node, and ``extra`` objects."""
    pods = [b.sts_pod(ordinal=o, node=n, claims=("data", "logs")) for o, n in placed.items()]
    sts = b.statefulset(annotations=annotations, templates=("data", "logs"))
    return store_from_objects([*nodes, sts, *pods, *extra])


def volume(claim: str, zone: str) -> list[dict[str, Any]]:
    """Claim ``claim`` bound to a volume of the same name in ``zone``."""
    return [b.pvc(claim, volume=claim), b.pv(claim, zone)]


def scale(store: Store, old: int, new: int) -> review.Answer:
    body = b.recorded_scale("db", namespace="ns", old=old, new=new)
    return review.answer("validate", review.from_dict(body), store=store, defaults=Defaults())


def test_a_pod_its_own_label_locates_is_a_running_pod() -> None:
    """db-2's node lost its zone label but the pod keeps the zone c label Kubernetes copied
    onto it: it is zone c's only pod, with nothing to explain."""
    pod = b.sts_pod(ordinal=2, node="nbare", claims=("data", "logs"))
    pod["metadata"]["labels"][ZONE_KEY] = "c"
    outcome = scale(cluster({0: "na", 1: "nb"}, pod), 3, 2)
    assert outcome.message.startswith(
        "scale-down of db from 3 to 2 would drop zone c (ordinal 2 is its only pod); "
    )


def test_each_kind_of_holder_says_why_it_counts() -> None:
    """Zone c is held by db-2, running on nbare (no zone label) where its volume puts it; by
    ordinal 5, not running, whose two volumes are in c; and by ordinal 8, not running, that the
    rule puts in c. Scaling 9 -> 2 drops c; every holder says why it counts."""
    store = cluster(
        {0: "na", 1: "nb", 2: "nbare"},
        *volume("data-db-2", "c"),
        *volume("data-db-5", "c"),
        *volume("logs-db-5", "c"),
    )
    outcome = scale(store, 9, 2)
    assert (outcome.allowed, outcome.reason) == (False, "ZoneLoss")
    assert outcome.message == (
        "scale-down of db from 9 to 2 would drop zone c (ordinals 2, 5 and 8 are the only ones "
        "there; ordinal 2 runs on nbare, whose zone its volume data-db-2 gives; ordinal 5 is not "
        "running but its volume data-db-5, logs-db-5 is there; ordinal 8 is not running but the "
        "placement rule puts it there); the smallest replica count that keeps every zone is 3; "
        f"{FORCE}"
    )


def test_a_node_pinned_ordinal_names_its_nodes() -> None:
    """Node-ordinal: ordinal 2 has no pod, but nodes p2 and q2 (both zone c) carry its label:
    it is zone c's only holder, there by its nodes."""
    pinned = [b.node(n, "c", labels={"example.io/node": "2"}) for n in ("p2", "q2")]
    mode = {**ABC, "stszone.io/mode": "node-ordinal", "stszone.io/node-label": "example.io/node"}
    labelled = [b.node(f"p{o}", z, labels={"example.io/node": str(o)}) for o, z in ((0, "a"), (1, "b"))]  # fmt: skip
    outcome = scale(cluster({}, annotations=mode, nodes=[*labelled, *pinned]), 3, 2)
    assert outcome.message.startswith(
        "scale-down of db from 3 to 2 would drop zone c (ordinal 2 is the only one there; "
        "ordinal 2 is not running but node p2, q2, pinned to it by label, is there); "
    )


def test_several_lost_zones_are_named_together() -> None:
    """3 -> 1 by the rule alone: zones b and c go."""
    outcome = scale(cluster({0: "na", 1: "nb", 2: "nc"}), 3, 1)
    assert outcome.message.startswith(
        "scale-down of db from 3 to 1 would drop zones b (ordinal 1 is its only pod) and c "
        "(ordinal 2 is its only pod); "
    )


def test_a_lost_zone_held_by_many_idle_ordinals_explains_the_first_three() -> None:
    """Zone c is held by ordinals 2, 5, 8 and 11 that the rule puts there: four reasons would
    be one too many, the list and the count say the rest."""
    outcome = scale(cluster({}), 12, 2)
    assert outcome.message.count("the placement rule puts it there") == 3
    assert (
        "zone c (ordinals 2, 5, 8 and 11 are the only ones there; ordinal 2 is" in outcome.message
    )


def test_several_unknown_zones_are_counted_after_three_reasons() -> None:
    """Ordinals 2 to 5 run on nbare (no zone label): removing them may drop zone c. The
    refusal names three ordinals with their reasons and counts the fourth."""
    outcome = scale(
        cluster({0: "na", 1: "nb", 2: "nbare", 3: "nbare", 4: "nbare", 5: "nbare"}), 6, 2
    )
    assert (outcome.allowed, outcome.reason) == (False, "ZoneUnknown")
    why = f"node nbare has no label {ZONE_KEY}"
    assert outcome.message == (
        "scale-down of db from 6 to 2 may drop zone c, which no kept pod is known to hold: it "
        f"removes ordinals 2, 3, 4 and 1 more, whose zones are unknown (ordinal 2: {why}; ordinal 3: "
        f"{why}; ordinal 4: {why}); the smallest replica count that keeps every zone is 6; label "
        f"the node(s) with their zone, or {FORCE}"
    )


def test_pods_leaving_an_unlisted_zone_are_summarised() -> None:
    """Ordinals 3, 4 and 5 sit in zone x, outside the list: 6 -> 3 lets them go, and the
    warning names two and counts the third."""
    outcome = scale(cluster({0: "na", 1: "nb", 2: "nc", 3: "nx", 4: "nx", 5: "nx"}), 6, 3)
    assert outcome.allowed
    assert outcome.warnings == (
        "db: 6 -> 3 removes zone x (ordinals 3, 4 and 1 more), not in stszone.io/zones",
    )


def test_pods_leaving_two_unlisted_zones_name_both() -> None:
    """Ordinal 3 in zone x and 4, 5 in zone y, neither listed: one warning, both zones."""
    nodes = [*NODES, b.node("ny", "y")]
    placed = {0: "na", 1: "nb", 2: "nc", 3: "nx", 4: "ny", 5: "ny"}
    outcome = scale(cluster(placed, nodes=nodes), 6, 3)
    assert outcome.allowed
    assert outcome.warnings == (
        "db: 6 -> 3 removes zones x (ordinal 3) and y (ordinals 4 and 5), not in stszone.io/zones",
    )


def test_pods_leaving_a_zone_outside_the_servers_list_name_that_list() -> None:
    """db has no stszone.io/zones: it keeps the zones of --zones a,b,c, so the warning about
    zone x names that list, not an annotation the set does not carry."""
    placed = {0: "na", 1: "nb", 2: "nc", 3: "nx"}
    store = cluster(placed, annotations={})
    store.zones_override = ("a", "b", "c")
    outcome = scale(store, 4, 3)
    assert outcome.allowed
    assert outcome.warnings == (
        "db: 4 -> 3 removes zone x (ordinal 3), not in the server's zones (--zones)",
    )


def test_pods_leaving_a_zone_outside_the_nodes_zones_name_the_nodes() -> None:
    """db has no stszone.io/zones and the server no --zones: its zones are its nodes' values
    of its topology key, which zone x of a pod labelled by hand is not among."""
    pod = b.sts_pod(ordinal=3, node="nbare", claims=("data", "logs"))
    pod["metadata"]["labels"][ZONE_KEY] = "x"
    nodes = [n for n in NODES if n["metadata"]["name"] != "nx"]
    outcome = scale(cluster({0: "na", 1: "nb", 2: "nc"}, pod, annotations={}, nodes=nodes), 4, 3)
    assert outcome.allowed
    assert outcome.warnings == (
        f"db: 4 -> 3 removes zone x (ordinal 3), not in the nodes' zones ({ZONE_KEY})",
    )


def test_every_warning_of_a_scale_down_is_given_in_order() -> None:
    """5 -> 3 removes db-3 (zone x, unlisted) and db-4 (b), leaving b to db-1 on nb2, which
    is not Ready: one warning each, the unlisted zone first."""
    nodes = [*NODES, b.node("nb2", "b", ready="False")]
    placed = {0: "na", 1: "nb2", 2: "nc", 3: "nx", 4: "nb"}
    outcome = scale(cluster(placed, nodes=nodes), 5, 3)
    assert outcome.allowed
    assert outcome.warnings == (
        "db: 5 -> 3 removes zone x (ordinal 3), not in stszone.io/zones",
        "db: 5 -> 3 leaves zone b only to db-1 (node nb2), which is not Ready: if it does not "
        "come back, the zone has no pod; check the node before scaling further",
    )


def test_an_unknown_zone_removed_while_every_zone_is_kept_is_a_second_warning() -> None:
    placed = {0: "na", 1: "nb", 2: "nc", 3: "nx", 4: "nbare", 5: "na"}
    outcome = scale(cluster(placed), 6, 3)
    assert outcome.allowed
    assert outcome.warnings == (
        "db: 6 -> 3 removes zone x (ordinal 3), not in stszone.io/zones",
        "db: ordinal 4, whose zone is unknown (node nbare has no label "
        "topology.kubernetes.io/zone); no listed zone is lost",
    )


def test_a_refusal_keeps_the_warnings_of_the_scale_down() -> None:
    """4 -> 2 drops c (refused) and also removes db-3 from the unlisted zone x; 2 replicas for
    three zones leave one empty, as an UPDATE to 2 is told too."""
    outcome = scale(cluster({0: "na", 1: "nb", 2: "nc", 3: "nx"}), 4, 2)
    assert (outcome.allowed, outcome.reason) == (False, "ZoneLoss")
    assert outcome.warnings == (
        "db: 4 -> 2 removes zone x (ordinal 3), not in stszone.io/zones",
        "db: 2 replica(s) for 3 zones leaves a zone empty; 3 or more survive the loss of any zone",
    )


NO_LIST: dict[str, str] = {}
UNLABELLED = [b.node("n0", None), b.node("n1", None), b.node("n2", None)]


def own_label(ordinal: int, zone: str | None) -> dict[str, Any]:
    """The pod of ``ordinal`` on an unlabelled node, with its own zone label (or none)."""
    pod = b.sts_pod(ordinal=ordinal, node=f"n{ordinal}", claims=("data", "logs"))
    if zone is not None:
        pod["metadata"]["labels"][ZONE_KEY] = zone
    return pod


def test_without_any_zone_list_the_zones_the_set_holds_are_kept() -> None:
    """No stszone.io/zones, no --zones, no node with a zone label: the guard protects the zones
    the pods' own labels show. 3 -> 2 keeps a (ordinal 0): allowed; with ordinal 2 the only pod
    in c, refused."""
    kept = cluster({}, own_label(0, "a"), own_label(1, "b"), own_label(2, "a"), annotations=NO_LIST, nodes=UNLABELLED)  # fmt: skip
    assert scale(kept, 3, 2).allowed
    lost = cluster({}, own_label(0, "a"), own_label(1, "b"), own_label(2, "c"), annotations=NO_LIST, nodes=UNLABELLED)  # fmt: skip
    assert scale(lost, 3, 2).reason == "ZoneLoss"


def test_without_any_zone_list_an_unknown_zone_may_be_any() -> None:
    """No list, and db-1's zone unknown: removing it may drop a zone no kept pod holds; with
    allow-zone-loss it goes, warned. Ordinal 2 has no pod at all: nothing says where it is."""
    pods = [own_label(0, "a"), own_label(1, None)]
    outcome = scale(cluster({}, *pods, annotations=NO_LIST, nodes=UNLABELLED), 3, 1)
    assert (outcome.allowed, outcome.reason) == (False, "ZoneUnknown")
    assert outcome.message.startswith(
        "scale-down of db from 3 to 1 may drop a zone, which no kept pod is known to hold: it "
        f"removes ordinals 1 and 2, whose zones are unknown (ordinal 1: node n1 has no label "
        f"{ZONE_KEY}; ordinal 2: no pod, no zone-pinned volume and no zone list); "
    )
    forced = {"stszone.io/allow-zone-loss": "true"}
    allowed = scale(cluster({}, *pods, annotations=forced, nodes=UNLABELLED), 3, 1)
    assert allowed.allowed
    assert allowed.warnings == (
        'db: 3 -> 1 may drop a zone; allowed by stszone.io/allow-zone-loss="true" (remove it to '
        "re-arm the guard)",
    )


def test_a_start_moved_past_the_old_count_names_the_count_that_is_safe() -> None:
    """An UPDATE moves ordinals.start from 2 down to 0 and keeps one replica: ordinals 2 and 3
    go (db-3 in a, db-2 on nbare, zone unknown) and 0 and 1 come. No count up to 2 keeps the
    unknown ordinal 2, but 3 does (0..2, with 0 in a by the rule): the refusal says to set it
    with the start, and that update is allowed."""
    old = b.statefulset(replicas=2, start=2, annotations=ABC)
    store = cluster({2: "nbare", 3: "na"})

    def update(replicas: int) -> review.Answer:
        return sts_update(store, old, b.statefulset(replicas=replicas, start=0, annotations=ABC))

    outcome = update(1)
    assert (outcome.allowed, outcome.reason) == (False, "ZoneUnknown")
    assert outcome.message.startswith("ordinals.start 2 -> 0, replicas 2 -> 1 of db may drop ")
    assert (
        "; with ordinals.start 0, the smallest replica count that keeps every zone is 3: set "
        "spec.replicas to 3 in the same update; label the node(s)"
    ) in outcome.message
    assert update(3).allowed and not update(2).allowed


def test_a_start_move_finds_the_count_past_claims_kept_from_a_larger_size() -> None:
    """0..2 run on b, a, c; claims of 3, 4 and 5, kept from when db had 6 replicas, hold
    volumes in c, a and c. Moving the start to 1 keeps 1..3 (a, c, c): b is lost. The rule,
    counted from 1, puts 6 in c, 7 in a and 8 in b, so 8 replicas (1..8) keep every zone: the
    refusal says so, and that update is allowed."""
    kept = [*volume("data-db-3", "c"), *volume("data-db-4", "a"), *volume("data-db-5", "c")]
    store = cluster({0: "nb", 1: "na", 2: "nc"}, *kept)
    old = b.statefulset(replicas=3, annotations=ABC, templates=("data", "logs"))

    def update(replicas: int) -> review.Answer:
        new = b.statefulset(replicas=replicas, start=1, annotations=ABC, templates=("data", "logs"))
        return sts_update(store, old, new)

    outcome = update(3)
    assert (outcome.allowed, outcome.reason) == (False, "ZoneLoss")
    assert (
        "with ordinals.start 1, the smallest replica count that keeps every zone is 8: set "
        "spec.replicas to 8 in the same update"
    ) in outcome.message
    assert update(8).allowed and not update(7).allowed


def test_a_lost_zone_names_ten_of_its_ordinals_and_counts_the_rest() -> None:
    """Zones a,b and 23 -> 1 replicas: zone b's holders among the removed ordinals are the odd
    ones 1..21, eleven of them, all running. The refusal names the first ten and counts one."""
    placed = {o: "na" if o % 2 == 0 else "nb" for o in range(23)}
    outcome = scale(cluster(placed, annotations={"stszone.io/zones": "a,b"}), 23, 1)
    named = ", ".join(str(o) for o in range(1, 20, 2))
    assert not outcome.allowed
    assert f"would drop zone b (ordinals {named} and 1 more are its only pods)" in outcome.message


def test_a_kept_ordinal_of_unknown_zone_is_warned_when_every_zone_is_kept() -> None:
    """5 -> 4 removes db-4 (b), and db-1 keeps b; db-0, kept, runs on nbare: its zone is
    unknown, which changes nothing here, and the warning says so."""
    outcome = scale(cluster({0: "nbare", 1: "nb", 2: "nc", 3: "na", 4: "nb"}), 5, 4)
    assert outcome.allowed
    assert outcome.warnings == (
        "db: ordinal 0, whose zone is unknown (node nbare has no label "
        "topology.kubernetes.io/zone); no listed zone is lost",
    )


GONE = [b.pvc("data-db-2", volume="pv-gone"), b.pv("pv-gone", "gone", key="kubernetes.io/hostname")]
NOWHERE = (
    "volume pv-gone can attach only to nodes with kubernetes.io/hostname In [gone], and no such "
    "node is in stszone's view"
)


def test_an_unknown_from_a_volume_attaching_nowhere_asks_for_its_node_back() -> None:
    """db-2 has no pod and its volume's node is gone: 3 -> 2 may drop c, and the way out is to
    restore that node (no label to fix)."""
    outcome = scale(cluster({0: "na", 1: "nb"}, *GONE), 3, 2)
    assert (outcome.allowed, outcome.reason) == (False, "ZoneUnknown")
    assert outcome.message == (
        "scale-down of db from 3 to 2 may drop zone c, which no kept pod is known to hold: it "
        f"removes ordinal 2, whose zone is unknown ({NOWHERE}); the smallest replica count "
        f"that keeps every zone is 3; restore the node(s) the volume(s) can attach to, or {FORCE}"
    )


def test_unknowns_of_both_kinds_ask_for_labels_and_for_the_volumes_nodes() -> None:
    """db-2 as above, and db-3 on nbare (no zone label): 4 -> 2 may drop c; both fixes named."""
    outcome = scale(cluster({0: "na", 1: "nb", 3: "nbare"}, *GONE), 4, 2)
    assert (outcome.allowed, outcome.reason) == (False, "ZoneUnknown")
    assert outcome.message.endswith(
        "; the smallest replica count that keeps every zone is 4; label the node(s) with their "
        f"zone and restore those the volume(s) need, or {FORCE}"
    )
    assert f"(ordinal 2: {NOWHERE}; ordinal 3: node nbare has no label {ZONE_KEY})" in (
        outcome.message
    )


def test_a_volume_on_a_node_without_a_zone_label_asks_for_the_label_not_the_node() -> None:
    """db-2 has no pod and its volume is pinned by hostname to nbare, which is in the view but
    has no zone label: the way out is to label nbare, not to restore a node that is there."""
    pinned = [b.pvc("data-db-2", volume="pv-bare"), b.pv("pv-bare", "nbare", key=HOSTNAME)]
    outcome = scale(cluster({0: "na", 1: "nb"}, *pinned), 3, 2)
    assert (outcome.allowed, outcome.reason) == (False, "ZoneUnknown")
    assert (
        "(volume pv-bare can attach only to node(s) nbare, which have no label "
        f"{ZONE_KEY})" in outcome.message
    )
    assert outcome.message.endswith(f"; label the node(s) with their zone, or {FORCE}")


def test_a_certain_and_a_possible_loss_are_both_named() -> None:
    """Zones a,b,c,x; 4 -> 2 removes db-2 (c, its only pod) and db-3 (on nbare, unknown), and no
    pod is known to hold x: c is lost for certain, and x may be."""
    zones = {"stszone.io/zones": "a,b,c,x"}
    outcome = scale(cluster({0: "na", 1: "nb", 2: "nc", 3: "nbare"}, annotations=zones), 4, 2)
    assert (outcome.allowed, outcome.reason) == (False, "ZoneUnknown")
    assert outcome.message == (
        "scale-down of db from 4 to 2 would drop zone c (ordinal 2 is its only pod); and may "
        "drop zone x, which no kept pod is known to hold: it removes ordinal 3, whose zone is "
        f"unknown (node nbare has no label {ZONE_KEY}); the smallest replica count that keeps "
        f"every zone is 4; label the node(s) with their zone, or {FORCE}"
    )
