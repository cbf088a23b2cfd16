"""Mode ``node-ordinal``: ordinal N pinned to the node labelled N, the way sts-scheduler does it.

The scheduler plugin's pitfalls (a missing label leaves the pod Pending, a duplicate label
lets it flap) surface as admission warnings; a pod that rules its own node out is denied.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests import builders as b
from webhook.cluster.clusterfile import store_from_objects
from webhook.config import Defaults
from webhook.model.store import Store
from webhook.rules.removal import removable_nodes
from webhook.wire import review
from webhook.wire.patch import apply

NODE_LABEL = "example.io/node"
ZONE_KEY = "topology.kubernetes.io/zone"
ANNOTATIONS = {
    "stszone.io/zones": "zone-a,zone-b,zone-c",
    "stszone.io/mode": "node-ordinal",
    "stszone.io/node-label": NODE_LABEL,
}


def kafka(
    *nodes: dict[str, Any], annotations: dict[str, str] | None = None, extra: Any = ()
) -> Store:
    """A store with the ``db`` StatefulSet in node-ordinal mode and the given nodes."""
    sts = b.statefulset(annotations=annotations or ANNOTATIONS)
    return store_from_objects([sts, *nodes, *extra])


def broker(name: str, zone: str | None, ordinal: str) -> dict[str, Any]:
    return b.node(name, zone, labels={NODE_LABEL: ordinal})


def mutate(pod: dict[str, Any], store: Store) -> tuple[review.Answer, dict[str, Any]]:
    outcome = review.answer(
        "mutate", review.from_dict(b.review(pod)), store=store, defaults=Defaults()
    )
    return outcome, apply(pod, outcome.patch) if outcome.allowed else pod


def terms(pod: dict[str, Any]) -> list[dict[str, Any]]:
    node_affinity = pod["spec"]["affinity"]["nodeAffinity"]
    found: list[dict[str, Any]] = node_affinity["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    return found


PIN_2 = {"key": NODE_LABEL, "operator": "In", "values": ["2"]}


def test_one_labelled_node_pins_the_pod_and_records_its_zone() -> None:
    """Ordinal 2 -> `example.io/node In [2]`; the node's zone (not the rule's) is recorded."""
    store = kafka(broker("n0", "zone-c", "0"), broker("n2", "zone-a", "2"))
    outcome, pod = mutate(b.sts_pod(ordinal=2), store)
    assert outcome.allowed and not outcome.warnings
    assert terms(pod) == [{"matchExpressions": [PIN_2]}]
    # The rule would say zone-c for ordinal 2; the pinned node is in zone-a, and that wins.
    assert pod["metadata"]["annotations"]["stszone.io/zone"] == "zone-a"


def test_requirement_is_anded_into_every_term() -> None:
    """nodeSelectorTerms are ORed, so the node requirement goes into each of them."""
    store = kafka(broker("n2", "zone-a", "2"))
    own = b.zone_affinity([("disk", "In", ["ssd"])], [("gpu", "Exists", [])])
    _, pod = mutate(b.sts_pod(ordinal=2, affinity=own), store)
    assert [t["matchExpressions"][-1] for t in terms(pod)] == [PIN_2, PIN_2]
    assert terms(pod)[0]["matchExpressions"][0] == {
        "key": "disk",
        "operator": "In",
        "values": ["ssd"],
    }


def test_second_invocation_gives_an_empty_patch() -> None:
    """reinvocationPolicy IfNeeded: the mutated pod comes back and nothing changes."""
    store = kafka(broker("n2", "zone-a", "2"), broker("n2b", "zone-b", "2"))
    first, pod = mutate(b.sts_pod(ordinal=2), store)
    assert first.patch
    again, _ = mutate(pod, store)
    assert again.allowed and again.patch == []


def test_missing_label_warns_that_the_pod_will_stay_pending() -> None:
    """No node carries example.io/node=1: allowed (a node may be labelled later), with a warning."""
    store = kafka(broker("n0", "zone-a", "0"), broker("n2", "zone-c", "2"))
    outcome, pod = mutate(b.sts_pod(ordinal=1), store)
    assert outcome.allowed
    assert terms(pod) == [{"matchExpressions": [{**PIN_2, "values": ["1"]}]}]
    (warning,) = outcome.warnings
    assert "no node carries example.io/node=1" in warning and "Pending" in warning
    assert "stszone.io/zone" not in pod["metadata"].get("annotations", {})


def test_missing_label_is_the_only_warning_even_with_a_zoned_volume() -> None:
    """No node carries example.io/node=1 and data-db-1 is bound in zone-b: with no node there
    is no node zone to compare the volume with, so the one warning is the missing label."""
    store = kafka(
        broker("n0", "zone-a", "0"),
        extra=[b.pvc("data-db-1", volume="pv-b"), b.pv("pv-b", "zone-b")],
    )
    outcome, _ = mutate(b.sts_pod(ordinal=1), store)
    assert outcome.warnings == (
        "no node carries example.io/node=1; db-1 will stay Pending until one does "
        "(kubectl label node NODE example.io/node=1)",
    )


def test_without_a_node_view_there_is_no_false_missing_warning() -> None:
    """--zones only (no node list loaded): stszone cannot know, so it does not claim a node is missing."""
    store = Store(zones=("zone-a", "zone-b"))
    store.replace(
        "statefulsets", []
    )  # the set is unknown too; the pod's annotations carry the mode
    pod = b.sts_pod(ordinal=1, annotations=ANNOTATIONS)
    outcome, mutated = mutate(pod, store)
    assert outcome.allowed and not outcome.warnings
    assert terms(mutated)[0]["matchExpressions"] == [{**PIN_2, "values": ["1"]}]


@pytest.mark.parametrize(
    ("zones", "annotated"),
    [(("zone-a", "zone-b"), None), (("zone-b", "zone-b"), "zone-b")],
    ids=["different-zones", "same-zone"],
)
def test_duplicate_label_warns_naming_both_nodes(
    zones: tuple[str, str], annotated: str | None
) -> None:
    """Two nodes with example.io/node=2: the pod may flap; the zone is recorded only if they agree."""
    store = kafka(broker("left", zones[0], "2"), broker("right", zones[1], "2"))
    outcome, pod = mutate(b.sts_pod(ordinal=2), store)
    assert outcome.allowed
    (warning,) = outcome.warnings
    assert "nodes left and right" in warning and "example.io/node=2" in warning
    assert pod["metadata"].get("annotations", {}).get("stszone.io/zone") == annotated


@pytest.mark.parametrize(
    ("affinity", "node_selector", "named"),
    [
        (None, {NODE_LABEL: "5"}, "nodeSelector example.io/node=5"),
        (b.zone_affinity([(NODE_LABEL, "NotIn", ["2"])]), None, "NotIn [2]"),
        (b.zone_affinity([(NODE_LABEL, "Gt", ["4"])]), None, "Gt [4]"),
        (
            b.zone_affinity([(NODE_LABEL, "In", ["7"])], [(NODE_LABEL, "DoesNotExist", [])]),
            None,
            "DoesNotExist",
        ),
    ],
    ids=["nodeSelector", "NotIn", "Gt", "every-term"],
)
def test_own_constraint_excluding_the_node_is_denied(
    affinity: dict[str, Any] | None, node_selector: dict[str, str] | None, named: str
) -> None:
    """The pod's own affinity/nodeSelector rules out example.io/node=2: denied, naming both."""
    store = kafka(broker("n2", "zone-a", "2"))
    outcome, _ = mutate(b.sts_pod(ordinal=2, affinity=affinity, node_selector=node_selector), store)
    assert not outcome.allowed and outcome.code == 403 and outcome.reason == "NodeConflict"
    assert named in outcome.message and "example.io/node=2" in outcome.message
    assert "stszone.io/node-label" in outcome.message  # the fix names the right annotation


def test_node_in_a_zone_the_pod_excludes_is_a_warning() -> None:
    """The node is reachable by label but the template requires another zone: Pending, say so."""
    store = kafka(broker("n2", "zone-a", "2"))
    own = b.zone_affinity([(ZONE_KEY, "In", ["zone-b"])])
    outcome, _ = mutate(b.sts_pod(ordinal=2, affinity=own), store)
    assert outcome.allowed
    assert outcome.warnings == (
        "db-2 stays Pending: node example.io/node=2 is in zone-a; its own: "
        "topology.kubernetes.io/zone In [zone-b]",
    )


def test_volume_in_another_zone_than_the_node_is_a_warning() -> None:
    """Claim data-db-2 is bound to a PV in zone-b, the labelled node is in zone-a."""
    store = kafka(
        broker("n2", "zone-a", "2"),
        extra=[b.pvc("data-db-2", volume="pv-b"), b.pv("pv-b", "zone-b")],
    )
    outcome, _ = mutate(b.sts_pod(ordinal=2), store)
    assert outcome.allowed
    assert outcome.warnings == (
        "db-2 stays Pending: its volume pv-b is in zone-b, node example.io/node=2 in zone-a",
    )


def test_every_reason_to_stay_pending_is_its_own_warning() -> None:
    """Four nodes carry example.io/node=2, all in zone-a; the template wants zone-b; claim
    data-db-2's regional volume is in zone-b and zone-c, logs-db-2's node is gone: one warning
    each, in that order."""
    nodes = [broker(f"n{i}", "zone-a", "2") for i in range(4)]
    volumes = [
        *(b.pvc("data-db-2", volume="pv-bc"), b.pv("pv-bc", "zone-b", "zone-c")),
        *(
            b.pvc("logs-db-2", volume="pv-gone"),
            b.pv("pv-gone", "gone", key="kubernetes.io/hostname"),
        ),
    ]
    own = b.zone_affinity([(ZONE_KEY, "In", ["zone-b"])])
    pod = b.sts_pod(ordinal=2, affinity=own, claims=("data", "logs"))
    outcome, _ = mutate(pod, kafka(*nodes, extra=volumes))
    assert outcome.allowed
    assert outcome.warnings == (
        "db-2 may land on any of nodes n0, n1, n2 and 1 more (all carry example.io/node=2); "
        "keep one node per value",
        "db-2 stays Pending: node example.io/node=2 is in zone-a; its own: "
        "topology.kubernetes.io/zone In [zone-b]",
        "db-2 stays Pending: its volume pv-bc is in zone-b, zone-c, node example.io/node=2 in "
        "zone-a",
        "db-2 stays Pending: volume pv-gone can attach only to nodes with kubernetes.io/hostname "
        "In [gone], and no such node is in stszone's view",
    )


def test_a_volume_outside_the_zones_of_several_labelled_nodes_names_them_all() -> None:
    """Nodes labelled 2 in zone-a and zone-b (no zone recorded), the volume in zone-c."""
    store = kafka(
        broker("n2a", "zone-a", "2"),
        broker("n2b", "zone-b", "2"),
        extra=[b.pvc("data-db-2", volume="pv-c"), b.pv("pv-c", "zone-c")],
    )
    outcome, _ = mutate(b.sts_pod(ordinal=2), store)
    assert outcome.warnings[1:] == (
        "db-2 stays Pending: its volume pv-c is in zone-c, node example.io/node=2 in zone-a, "
        "zone-b",
    )


def test_a_zone_pinned_volume_and_a_node_without_a_zone_label_is_a_warning() -> None:
    """The node labelled 2 has no zone label, the claim's volume is pinned to zone-b: the
    volume's node affinity never matches that node, so the pod stays Pending; say so."""
    store = kafka(
        broker("n2", None, "2"),
        extra=[b.pvc("data-db-2", volume="pv-b"), b.pv("pv-b", "zone-b")],
    )
    outcome, _ = mutate(b.sts_pod(ordinal=2), store)
    assert outcome.allowed
    assert outcome.warnings == (
        "db-2 stays Pending: its volume pv-b is in zone-b, node example.io/node=2 has no "
        "topology.kubernetes.io/zone label",
    )


def test_a_volume_on_a_node_without_a_zone_label_is_no_warning() -> None:
    """A local volume pinned by hostname to the labelled node, which has no zone label: the
    volume is in no known zone, yet the pod can run there."""
    store = kafka(
        broker("n2", None, "2"),
        extra=[
            b.pvc("data-db-2", volume="pv-n2"),
            b.pv("pv-n2", "n2", key="kubernetes.io/hostname"),
        ],
    )
    outcome, _ = mutate(b.sts_pod(ordinal=2), store)
    assert outcome.allowed and outcome.warnings == ()


def test_cluster_without_zones_still_pins() -> None:
    """On-prem nodes with no zone label and no --zones: node-ordinal does not need a zone."""
    annotations = {k: v for k, v in ANNOTATIONS.items() if k != "stszone.io/zones"}
    store = kafka(broker("n0", None, "0"), annotations=annotations)
    outcome, pod = mutate(b.sts_pod(ordinal=0), store)
    assert outcome.allowed, outcome.message
    assert terms(pod)[0]["matchExpressions"] == [{**PIN_2, "values": ["0"]}]
    checked = review.answer(
        "validate", review.from_dict(b.review(pod)), store=store, defaults=Defaults()
    )
    assert checked.allowed, checked.message


def test_claims_follow_the_pinned_node_zone_not_the_rule() -> None:
    """The node labelled 0 is in zone-c: claim data-db-0 gets zone-c and its StorageClass, not
    the rule's zone-a (an Immediate class would otherwise provision the volume out of reach)."""
    store = kafka(
        broker("n0", "zone-c", "0"),
        annotations={**ANNOTATIONS, "stszone.io/storage-class-template": "ssd-{zone}"},
    )
    outcome, claim = mutate(b.pvc("data-db-0"), store)
    assert outcome.allowed
    assert claim["metadata"]["annotations"]["stszone.io/zone"] == "zone-c"
    assert claim["spec"]["storageClassName"] == "ssd-zone-c"


@pytest.mark.parametrize(
    "nodes",
    [
        (),
        (broker("n0", None, "0"),),
        (broker("n0", "zone-a", "0"), broker("m0", "zone-b", "0")),
        (broker("n0", "zone-a", "0"), broker("m0", None, "0")),
    ],
    ids=["no-node", "no-zone-label", "two-zones", "one-without-a-zone-label"],
)
def test_claims_without_one_node_zone_are_left_alone(nodes: tuple[dict[str, Any], ...]) -> None:
    """No labelled node, no zone labels, nodes in two zones or one of them with no zone label
    (its pod may run there): nothing to record, never a denial."""
    no_zones = {k: v for k, v in ANNOTATIONS.items() if k != "stszone.io/zones"}
    outcome, _ = mutate(b.pvc("data-db-0"), kafka(*nodes, annotations=no_zones))
    assert outcome.allowed and outcome.patch == []


@pytest.mark.parametrize(
    ("op", "bound", "ordinal", "allowed"),
    [("Lt", "3", 2, True), ("Lt", "3", 3, False), ("Gt", "2", 3, True), ("Gt", "3", 3, False)],
)
def test_a_bound_on_the_ordinal_label_admits_the_ordinals_within_it(
    op: str, bound: str, ordinal: int, allowed: bool
) -> None:
    """A template that keeps brokers 0-2 on their own machines says `example.io/node Lt 3`:
    ordinals below the bound are pinned to their node, the others refused (Gt alike)."""
    store = kafka(broker(f"n{ordinal}", "zone-a", str(ordinal)))
    pod = b.sts_pod(ordinal=ordinal, affinity=b.zone_affinity([(NODE_LABEL, op, [bound])]))
    outcome, mutated = mutate(pod, store)
    assert outcome.allowed == allowed, outcome.message
    if allowed:
        pin = {"key": NODE_LABEL, "operator": "In", "values": [str(ordinal)]}
        assert terms(mutated) == [{"matchExpressions": [{"key": NODE_LABEL, "operator": op, "values": [bound]}, pin]}]  # fmt: skip
    else:
        assert outcome.reason == "NodeConflict"
        assert (
            f"has required nodeAffinity {NODE_LABEL} {op} [{bound}], which excludes"
            in outcome.message
        )


@pytest.mark.parametrize(("replicas", "refused"), [(3, ""), (5, "3, 4")])
def test_a_template_bounding_the_ordinal_label_is_refused_past_the_bound(
    replicas: int, refused: str
) -> None:
    """The same bound on the StatefulSet: fine for 3 replicas, refused for 5, naming the
    ordinals that could never run."""
    sts = b.statefulset(replicas=replicas, annotations=ANNOTATIONS,
                        affinity=b.zone_affinity([(NODE_LABEL, "Lt", ["3"])]))  # fmt: skip
    request = review.from_dict(b.review(sts))
    outcome = review.answer("validate", request, store=kafka(), defaults=Defaults())
    assert outcome.allowed == (not refused), outcome.message
    if refused:
        assert f"excludes {NODE_LABEL} value(s) {refused}, so those ordinals" in outcome.message


def test_a_node_pinned_pod_may_leave_its_node_for_another_labelled_node_of_its_zone() -> None:
    """removable_nodes in node-ordinal mode: ordinal 0 on n0 (zone-a) also fits n0x (zone-a);
    ordinal 1 on n1 (zone-b) also fits n1bare (no zone); ordinal 2 on n2 (zone-c) also fits
    n2a (zone-a) and n2b (zone-b). Removing n0 keeps zone-a (the pod goes to n0x); removing
    n1 or n2 may lose zone-b or zone-c; every node that runs nothing is removable."""
    nodes = [
        broker("n0", "zone-a", "0"),
        broker("n0x", "zone-a", "0"),
        broker("n1", "zone-b", "1"),
        broker("n1bare", None, "1"),
        broker("n2", "zone-c", "2"),
        broker("n2a", "zone-a", "2"),
        broker("n2b", "zone-b", "2"),
    ]
    pods = [b.sts_pod(ordinal=o, node=n) for o, n in enumerate(["n0", "n1", "n2"])]
    store = kafka(*nodes, extra=pods)
    alone = removable_nodes(store, [store.statefulsets[("ns", "db")]]).alone
    assert alone == ("n0", "n0x", "n1bare", "n2a", "n2b")


def test_a_refusal_says_where_the_pod_would_run_by_its_node_label_not_as_a_zone() -> None:
    """db-0 asks for zone-b by its nodeSelector; the node labelled 0 is in zone-a, those
    labelled 1 in zone-b. The refusal names where it would have run by the ordinal label those
    nodes carry: "in 1" would read as a zone called 1. So does the refusal of a template that
    keeps ordinal 2 off the node labelled 2."""
    labelled = [("a1", "zone-a", "0"), ("b1", "zone-b", "1"), ("b2", "zone-b", "1"), ("c1", "zone-c", "2")]  # fmt: skip
    store = kafka(*(broker(*node) for node in labelled))
    outcome, _ = mutate(b.sts_pod(ordinal=0, node_selector={ZONE_KEY: "zone-b"}), store)
    assert outcome.reason == "NodeConflict"
    assert f"; it would run on nodes b1, b2 with {NODE_LABEL}=1;" in outcome.message
    sts = b.statefulset(annotations=ANNOTATIONS,
                        affinity=b.zone_affinity([(NODE_LABEL, "In", ["0", "1"])]))  # fmt: skip
    request = review.from_dict(b.review(sts))
    checked = review.answer("validate", request, store=store, defaults=Defaults())
    assert f"(its pods would run on node a1 with {NODE_LABEL}=0; " in checked.message
