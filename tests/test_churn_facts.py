"""The churn run's own reading of where ordinals are (``bench/churnfacts.py``), and its checks.

The churn trusts these to tell a wrong answer of the guard from a right one, so each case is a
small cluster written out by hand with the answer docs/guard.md gives for it.
"""

from __future__ import annotations

from typing import Any

import pytest

from bench import churnfacts as facts

ZONES = ("zone-a", "zone-b", "zone-c")
Obj = dict[str, Any]


def node(name: str, zone: str | None) -> Obj:
    labels = {"kubernetes.io/hostname": name}
    if zone:
        labels[facts.ZONE_KEY] = zone
    return {"metadata": {"name": name, "labels": labels}, "spec": {}}


def sts(name: str = "db", replicas: int = 3, *, claims: bool = False) -> Obj:
    spec: Obj = {"replicas": replicas}
    if claims:
        spec["volumeClaimTemplates"] = [{"metadata": {"name": "data"}}]
    annotations = {facts.ZONES_ANNOTATION: ",".join(ZONES)}
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "annotations": annotations},
        "spec": spec,
    }


def pod(
    ordinal: int,
    node_name: str | None,
    *,
    zone_label: str | None = None,
    terminating: bool = False,
    owner: str = "db",
) -> Obj:
    labels = {facts.INDEX_LABEL: str(ordinal)}
    if zone_label:
        labels[facts.ZONE_KEY] = zone_label
    meta: Obj = {
        "name": f"{owner}-{ordinal}",
        "labels": labels,
        "ownerReferences": [{"kind": "StatefulSet", "name": owner, "uid": f"uid-{owner}"}],
    }
    if terminating:
        meta["deletionTimestamp"] = "2026-12-02T00:00:00Z"
    spec = {"nodeName": node_name} if node_name else {}
    return {"metadata": meta, "spec": spec, "status": {"phase": "Running"}}


NODES = [node("a1", "zone-a"), node("b1", "zone-b"), node("c1", "zone-c")]


def snap(
    *pods: Obj, nodes: list[Obj] = NODES, sets: list[Obj] | None = None, **kw: Any
) -> facts.Snapshot:
    return facts.Snapshot.of(nodes=nodes, sets=sets or [sts()], pods=pods, **kw)


def placed(*nodes_of: str) -> list[Obj]:
    return [pod(i, n) for i, n in enumerate(nodes_of)]


def test_pods_in_their_rule_zones_are_not_misplaced() -> None:
    """Ordinal i on a node of zones[i mod 3]: nothing to report."""
    assert facts.misplaced_pods(snap(*placed("a1", "b1", "c1")), ZONES) == []


def test_a_pod_outside_its_rule_zone_is_misplaced() -> None:
    """db-1 belongs in zone-b and runs in zone-c."""
    (problem,) = facts.misplaced_pods(snap(*placed("a1", "c1", "c1")), ZONES)
    assert problem.startswith("db-1 on node c1 in zone-c")


def test_a_pod_on_an_unlabelled_node_is_located_by_its_own_label() -> None:
    """The node lost its zone label; the pod's own (copied at binding) still says zone-a."""
    nodes = [node("a1", None), *NODES[1:]]
    pods = [pod(0, "a1", zone_label="zone-b"), pod(1, "b1"), pod(2, "c1")]
    assert facts.misplaced_pods(snap(*pods, nodes=nodes), ZONES) != []
    ok = [pod(0, "a1", zone_label="zone-a"), pod(1, "b1"), pod(2, "c1")]
    assert facts.misplaced_pods(snap(*ok, nodes=nodes), ZONES) == []


def test_a_pod_of_another_set_with_the_same_name_is_not_this_sets() -> None:
    """Ownership is by uid: a leftover pod of a deleted set of that name is not judged."""
    stray = pod(1, "c1")
    stray["metadata"]["ownerReferences"][0]["uid"] = "uid-old"
    assert facts.misplaced_pods(snap(pod(0, "a1"), stray), ZONES) == []


@pytest.mark.parametrize(
    ("pods", "new", "lost"),
    [
        (placed("a1", "b1", "c1"), 2, True),
        (placed("a1", "b1", "c1", "a1", "b1", "c1"), 3, False),
        # db-1 runs in zone-c: 0 and 1 already hold zone-a and zone-c, zone-b is lost.
        (placed("a1", "c1", "b1"), 2, True),
        (placed("a1", "b1", "c1", "a1"), 3, False),
    ],
)
def test_an_accepted_scale_down_must_keep_every_zone(pods: list[Obj], new: int, lost: bool) -> None:
    """Invariant 2, from the pods' nodes."""
    why = facts.accepted_scale_down([snap(*pods, sets=[sts(replicas=len(pods))])], "db", new, ZONES)
    assert (why is not None) == lost


def test_a_terminating_pod_holds_no_zone_but_its_replacement_goes_to_the_rule() -> None:
    """db-0 is Terminating in zone-c: its ordinal counts in zone-a, where its replacement goes."""
    pods = [pod(0, "c1", terminating=True), pod(1, "b1"), pod(2, "c1")]
    found = facts.kept(snap(*pods), sts(), 2, ZONES)
    assert found.held == {"zone-a", "zone-b"}


def test_a_pod_on_a_node_with_no_zone_anywhere_is_unknown() -> None:
    nodes = [node("a1", None), *NODES[1:]]
    found = facts.kept(snap(*placed("a1", "b1", "c1"), nodes=nodes), sts(), 3, ZONES)
    assert found.unknown == (0,) and found.held == {"zone-b", "zone-c"}


def test_a_claim_pinned_by_hostname_is_in_its_nodes_zone() -> None:
    """Ordinal 0 has no pod; its volume can attach only to c1, so it is in zone-c."""
    volume = {
        "metadata": {"name": "pv-0"},
        "spec": {
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": facts.HOSTNAME_KEY, "operator": "In", "values": ["c1"]}
                            ]
                        }
                    ]
                }
            }
        },
    }
    claim = {"metadata": {"name": "data-db-0"}, "spec": {"volumeName": "pv-0"}}
    s = snap(pod(1, "b1"), sets=[sts(claims=True)], claims=[claim], volumes=[volume])
    assert facts.ordinal_zone(s, sts(claims=True), 0, ZONES) == "zone-c"
    assert facts.misplaced_pods(s, ZONES) == []


LOSS = (
    "scale-down of db from 3 to 2 would drop zone zone-c (ordinal 2 is its only pod); the "
    "smallest replica count that keeps every zone is 3; set stszone.io/allow-zone-loss: "
    '"true" on the StatefulSet to force it'
)
UNKNOWN = (
    "scale-down of db from 3 to 2 may drop zones zone-b and zone-c, which no kept pod is known "
    "to hold: it removes ordinal 2, whose zone is unknown (node c1 has no label "
    "topology.kubernetes.io/zone); the smallest replica count that keeps every zone is 3"
)


def test_a_refusal_naming_a_zone_really_lost_is_borne_out() -> None:
    assert facts.refusal([snap(*placed("a1", "b1", "c1"))], "db", 2, LOSS, ZONES) is None


def test_a_refusal_naming_a_zone_the_kept_pods_hold_is_not() -> None:
    """db-1 runs in zone-c, so keeping 0 and 1 keeps zone-c: the refusal is wrong."""
    pods = placed("a1", "c1", "b1")
    assert facts.refusal([snap(*pods)], "db", 2, LOSS, ZONES) is not None


def test_a_refusal_naming_an_unknown_ordinal_is_borne_out_when_it_is_unknown() -> None:
    """No zone named: the refusal stands on ordinal 2 being unknown, and only then."""
    message = "scale-down of db from 3 to 2 may drop a zone: it removes ordinal 2, whose zone is unknown (x)"
    nodes = [*NODES[:2], node("c1", None)]
    pods = placed("a1", "b1", "c1")
    assert facts.refusal([snap(*pods, nodes=nodes)], "db", 2, message, ZONES) is None
    assert facts.refusal([snap(*pods)], "db", 2, message, ZONES) is not None


def test_the_ordinals_a_refusal_names_as_unknown() -> None:
    assert facts.named_ordinals(UNKNOWN) == {2}
    several = "it removes ordinals 2 and 5, whose zones are unknown (ordinal 2: x; ordinal 5: y)"
    assert facts.named_ordinals(several) == {2, 5}
    assert facts.named_ordinals(LOSS) == set()


def test_either_snapshot_may_bear_a_refusal_out() -> None:
    """Facts move while the request is answered: before or after is enough."""
    wrong, right = snap(*placed("a1", "c1", "b1")), snap(*placed("a1", "b1", "c1"))
    assert facts.refusal([wrong, right], "db", 2, LOSS, ZONES) is None
    assert facts.refusal([wrong, wrong], "db", 2, LOSS, ZONES) is not None
