"""The removable nodes of ``stszone audit`` hold their promise when the nodes are removed.

On random clusters of StatefulSets, Advanced StatefulSets and KafkaNodePools
(:mod:`tests.removalsim`): removing any node the audit lists as removable alone, or the set it
lists as removable together, and re-creating the pods that ran there through stszone's own
admission, loses no pod's node, no local data and no zone a workload held; removing a node it
does not list loses something, of the workloads the audit says it would cost.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from tests import builders as b
from tests import guardref
from tests import poolsim as sim
from tests.removalsim import HOST, KEY, Cluster, Member, clusters, remove
from webhook.rules.audit import audit


def _picker(data: Any) -> Any:
    def pick(nodes: list[str]) -> str:
        return str(data.draw(st.sampled_from(nodes), label="scheduled on"))

    return pick


@settings(max_examples=10 * settings().max_examples)
@given(cluster=clusters(), data=st.data())
def test_removable_nodes_lose_nothing_when_removed(cluster: Cluster, data: Any) -> None:
    """Each node removable alone, and the set removable together, lose nothing when removed;
    each other node loses something (a pod's node, its data or a zone), or a pod re-created
    from it goes where removal does not foresee (a zone left to the scheduler, the pool's
    fewest as the pool is then). A broker the pool balances is not held to keep a home: its
    zone moves with the brokers re-created (removal weighs a broker that stays against the
    pool as it is, and places the brokers drained together in turn). Removing every node is
    left out: a view with no nodes cannot tell a deleted node from one it does not hold, so a
    pod's zone becomes unknown."""
    report = audit(guardref.view(cluster.objects))
    event(f"workloads: {sorted({m.workload[0] for m in cluster.members})}")
    alone, together = len(report.removable), len(report.removable_together)
    event(
        f"removable alone: {('none', 'some', 'all')[bool(alone) + (alone == len(cluster.nodes))]}"
    )
    event(f"removable together: {min(together, 3)}{'+' if together >= 3 else ''}")
    pick = _picker(data)
    # What the audit says each other node would cost: every workload that loses something
    # when it goes is named (what goes wrong starts with a pod's name, or its workload's).
    costs = {node: {c.workload.name for c in each} for node, each in report.unremovable}
    owner = {m.key[1]: m.workload[2] for m in cluster.members}
    for node in cluster.nodes if len(cluster.nodes) > 1 else ():
        wrong, loose = remove(cluster, [node], pick)
        if node in report.removable:
            assert not wrong, (node, wrong)
        else:
            assert wrong or loose, node
            hurt = {owner.get(w.split(":")[0], w.split(":")[0]) for w in wrong}
            assert hurt <= costs[node], (node, wrong, costs[node])
    if len(report.removable_together) < len(cluster.nodes):
        wrong, _ = remove(cluster, report.removable_together, pick)
        assert not wrong, (report.removable_together, wrong)


def test_a_node_whose_ordinal_label_alone_holds_a_zone_is_not_removable() -> None:
    """db in node-ordinal mode, 1 replica, its template only for disk=ssd nodes: a0 (zone-a)
    carries its label 0 but no ssd, b0 (zone-b) is the ssd node. db-0 has no pod, so the
    guard counts it in a0's zone; without a0 it is in no zone the guard can tell, and zone-a
    is lost. a0 stays; b0, which nothing needs, may go."""
    mode = {
        "stszone.io/zones": "zone-a,zone-b,zone-c",
        "stszone.io/mode": "node-ordinal",
        "stszone.io/node-label": "example.io/node",
    }
    labelled = b.node("a0", "zone-a", labels={"example.io/node": "0"})
    ssd = b.node("b0", "zone-b", labels={"disk": "ssd"})
    sts = b.statefulset(replicas=1, annotations=mode, node_selector={"disk": "ssd"})
    report = audit(guardref.view([labelled, ssd, sts]))
    assert [s.held for s in report.sets] == [("zone-a",)]
    assert [s.held for s in audit(guardref.view([ssd, sts])).sets] == [()]
    assert report.removable == ("b0",)
    assert report.removable_together == ("b0",)


def test_an_ordinal_label_on_a_node_with_no_zone_holds_no_zone() -> None:
    """db in node-ordinal mode: its label 1 is on a1 (zone-a) and on bare (no zone label);
    db-1 runs on a0 (zone-a, no ordinal label), the only pod in zone-a. Re-created, db-1 may
    land on bare, a zone no one can read, and zone-a is lost: a0 is not removable. a1 and
    bare, on which no pod runs, are, one at a time: db-1 needs a node labelled 1."""
    mode = {
        "stszone.io/zones": "zone-a,zone-b,zone-c",
        "stszone.io/mode": "node-ordinal",
        "stszone.io/node-label": "example.io/node",
    }
    nodes = [
        b.node("a0", "zone-a"),
        b.node("a1", "zone-a", labels={"example.io/node": "1"}),
        b.node("bare", None, labels={"example.io/node": "1"}),
        b.node("b0", "zone-b", labels={"example.io/node": "0"}),
    ]
    sts = b.statefulset(replicas=2, annotations=mode)
    pods = [b.sts_pod(ordinal=0), b.sts_pod(ordinal=1)]
    fresh = copy.deepcopy(pods)
    pods[0]["spec"]["nodeName"], pods[1]["spec"]["nodeName"] = "b0", "a0"
    cluster = Cluster(
        [*nodes, sts, *pods],
        [Member(("sts", "ns", "db"), pod) for pod in fresh],
        [str(n["metadata"]["name"]) for n in nodes],
    )
    wrong, _ = remove(cluster, ["a0"], lambda left: "bare" if "bare" in left else left[0])
    assert wrong == ["db: lost ['zone-a']"]
    report = audit(guardref.view(cluster.objects))
    assert report.removable == ("a1", "bare")
    assert report.removable_together == ("a1",)
    assert remove(cluster, ["a1"], lambda left: left[0])[0] == []


def _pool_cluster(
    nodes: list[str], brokers: dict[int, str | None], *, data_of_11: tuple[str, str]
) -> Cluster:
    """KafkaNodePool p1 over zone-a,zone-b,zone-c with brokers 10-12: each on its node of
    ``brokers`` (None: no pod), broker 11's data a volume pinned by ``data_of_11`` (its key,
    its value), the others without data. Each node is in the zone its first letter names."""
    objects = [b.node(n, f"zone-{n[0]}") for n in nodes]
    objects.append(sim.pool_object("p1", replicas=3, node_ids=sorted(brokers)))
    found = []
    for node_id, on in sorted(brokers.items()):
        pod = copy.deepcopy(sim.pod_object("my-cluster", "p1", node_id))
        pod["spec"].pop("nodeName", None)
        pod.pop("status", None)
        found.append(Member(("pool", "kafka", "p1"), pod, balanced=node_id != 11))
        if on is not None:
            placed = copy.deepcopy(pod)
            placed["spec"]["nodeName"] = on
            objects.append(placed)
    key, value = data_of_11
    objects.append(b.pvc("data-my-cluster-p1-11", namespace="kafka", volume="pv-11"))
    objects.append(b.pv("pv-11", value, key=key))
    if key == HOST:
        found[1].local.append("pv-11")
    return Cluster(objects, found, nodes)


def test_brokers_drained_together_are_placed_in_turn() -> None:
    """a0 (zone-a), b0 and b1 (zone-b), no node in zone-c; brokers 10 and 12 of p1 run on b1,
    broker 11's data is in zone-b. Each of 10 and 12, re-created alone, goes to zone-a; draining
    b1 re-creates both, 10 to zone-a, then 12 to the pool's fewest, zone-c, where no node is:
    b1 is not removable. b0, on which nothing runs, is."""
    cluster = _pool_cluster(
        ["a0", "b0", "b1"], {10: "b1", 11: None, 12: "b1"}, data_of_11=(KEY, "zone-b")
    )
    wrong, _ = remove(cluster, ["b1"], lambda left: left[0])
    assert wrong == ["my-cluster-p1-12: no node"]
    report = audit(guardref.view(cluster.objects))
    assert report.removable == ("b0",)
    assert report.removable_together == ("b0",)


def test_a_node_a_drained_broker_goes_to_stays_out_of_the_set_removable_together() -> None:
    """Brokers 10 on b1 and 12 on b2 (zone-b), broker 11's data local to b0; c0 (zone-c) runs
    only a Terminating pod of db (listed zone-a, re-created on a0). Each node but a0 and b0 is
    removable alone. Together, b1 and b2 re-create 10 in zone-a and 12 in zone-c, on c0, which
    no broker runs on or returns to alone: c0 cannot join them."""
    cluster = _pool_cluster(
        ["a0", "b0", "b1", "b2", "c0"], {10: "b1", 11: None, 12: "b2"}, data_of_11=(HOST, "b0")
    )
    sts = b.statefulset("db", replicas=1, annotations={"stszone.io/zones": "zone-a"})
    pod = b.sts_pod("db", 0)
    going = copy.deepcopy(pod)
    going["spec"]["nodeName"] = "c0"
    going["metadata"]["deletionTimestamp"] = "2026-12-01T10:00:00Z"
    cluster.objects += [sts, going]
    cluster.members.append(Member(("sts", "ns", "db"), pod))
    wrong, _ = remove(cluster, ["b1", "b2", "c0"], lambda left: left[0])
    assert wrong == ["my-cluster-p1-12: no node"]
    report = audit(guardref.view(cluster.objects))
    assert report.removable == ("b1", "b2", "c0")
    assert report.removable_together == ("b1", "b2")
    assert remove(cluster, report.removable_together, lambda left: left[0])[0] == []
