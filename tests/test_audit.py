"""`stszone audit` on a saved cluster file, checked against a table worked out by hand."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

import pytest

from tests import builders as b
from tests.fakeapi import FakeApi
from tests.kubeconfig import write_kubeconfig
from webhook.cli import main
from webhook.cluster.clusterfile import load_store, store_from_objects
from webhook.rules.audit import audit

# Nodes: zone-a a1 a2 | zone-b b1 k2 | zone-c c1 c2 k1 k3.  Brokers: k1 has example.io/broker=0,
# k2 and k3 both =1 (duplicate), nobody =2 (missing).
#
# shop/db (affinity, zones zone-a,zone-b,zone-c, 4 replicas, claim template "data"):
#   0  expected zone-a (rule)            runs on a1 (zone-a)  ok
#   1  expected zone-b (rule)            runs on c1 (zone-c)  MISPLACED
#   2  expected zone-b (volume pv-db-2; the rule says zone-c) pod without a node: pending
#   3  expected zone-a (rule)            no pod
#   held now (pod, else volume, else rule): a, c, b, a -> zone-a, zone-b, zone-c; lowest 3
# shop/kafka (node-ordinal on example.io/broker, 3 replicas, no volumes):
#   0  expected k1 -> zone-c             runs on k1            ok
#   1  expected k2 or k3 (zone-b/zone-c: no single zone)  runs on k2 (a pinned node)  ok
#   2  no node labelled 2                no pod; label missing
#   held now: zone-c, zone-b; ordinal 2's zone is unknown and zone-a (listed: the server's
#   zones) is held by no known ordinal, so removing 2 may drop it: lowest 3
# lab/cache: namespace not opted in, not audited (its pod on a2 does not count).
#
# Homes (where an ordinal may be re-created): db 0,3 -> {a1,a2}; db 1,2 -> {b1,k2};
# kafka 0 -> {k1}; kafka 1 -> {k2,k3}; kafka 2 -> {}.
# One node at a time:
#   a1  db-0 moves to a2, zones kept                          removable
#   a2  db-0/db-3 keep a1                                     removable
#   b1  db-1/db-2 keep k2                                     removable
#   c1  db-1 is re-created in zone-b: db loses zone-c         NOT
#   c2  nothing runs or belongs there                         removable
#   k1  kafka-0 has no other node labelled 0                  NOT
#   k2  kafka-1 moves to k3 (zone-c): kafka loses zone-b      NOT
#   k3  kafka-1 keeps k2                                      removable
# Together, from the emptiest (a2, b1, c2, k3 hold no audited pod; then a1, c1, k1, k2):
#   a2, b1, c2, k3 fit; then a1 would leave db-0 no node in zone-a; c1, k1 as above;
#   k2 would leave db-1/db-2 no node in zone-b.            -> a2, b1, c2, k3

CLUSTER = """\
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Namespace, metadata: {name: shop, labels: {stszone.io/enabled: "true"}}}
- {apiVersion: v1, kind: Namespace, metadata: {name: lab}}
- {apiVersion: v1, kind: Node, metadata: {name: a1, labels: {topology.kubernetes.io/zone: zone-a}}}
- {apiVersion: v1, kind: Node, metadata: {name: a2, labels: {topology.kubernetes.io/zone: zone-a}}}
- {apiVersion: v1, kind: Node, metadata: {name: b1, labels: {topology.kubernetes.io/zone: zone-b}}}
- {apiVersion: v1, kind: Node, metadata: {name: c1, labels: {topology.kubernetes.io/zone: zone-c}}}
- {apiVersion: v1, kind: Node, metadata: {name: c2, labels: {topology.kubernetes.io/zone: zone-c}}}
- apiVersion: v1
  kind: Node
  metadata: {name: k1, labels: {topology.kubernetes.io/zone: zone-c, example.io/broker: "0"}}
- apiVersion: v1
  kind: Node
  metadata: {name: k2, labels: {topology.kubernetes.io/zone: zone-b, example.io/broker: "1"}}
- apiVersion: v1
  kind: Node
  metadata: {name: k3, labels: {topology.kubernetes.io/zone: zone-c, example.io/broker: "1"}}
- apiVersion: apps/v1
  kind: StatefulSet
  metadata:
    name: db
    namespace: shop
    annotations: {stszone.io/zones: "zone-a,zone-b,zone-c"}
  spec:
    replicas: 4
    selector: {matchLabels: {app: db}}
    template: {metadata: {labels: {app: db}}, spec: {containers: [{name: db, image: db}]}}
    volumeClaimTemplates: [{metadata: {name: data}}]
- apiVersion: apps/v1
  kind: StatefulSet
  metadata:
    name: kafka
    namespace: shop
    annotations: {stszone.io/mode: node-ordinal, stszone.io/node-label: example.io/broker}
  spec:
    replicas: 3
    selector: {matchLabels: {app: kafka}}
    template: {metadata: {labels: {app: kafka}}, spec: {containers: [{name: k, image: k}]}}
- apiVersion: apps/v1
  kind: StatefulSet
  metadata: {name: cache, namespace: lab}
  spec:
    replicas: 1
    selector: {matchLabels: {app: cache}}
    template: {metadata: {labels: {app: cache}}, spec: {containers: [{name: c, image: c}]}}
- apiVersion: v1
  kind: PersistentVolume
  metadata: {name: pv-db-2}
  spec:
    claimRef: {namespace: shop, name: data-db-2}
    nodeAffinity:
      required:
        nodeSelectorTerms:
        - matchExpressions:
          - {key: topology.kubernetes.io/zone, operator: In, values: [zone-b]}
- apiVersion: v1
  kind: PersistentVolumeClaim
  metadata: {name: data-db-2, namespace: shop}
  spec: {volumeName: pv-db-2}
  status: {phase: Bound}
"""

OWNER = "ownerReferences: [{apiVersion: apps/v1, kind: StatefulSet, name: {sts}, controller: true, uid: u}]"
PODS = [("shop", "db", 0, "a1"), ("shop", "db", 1, "c1"), ("shop", "db", 2, ""),
        ("shop", "kafka", 0, "k1"), ("shop", "kafka", 1, "k2"), ("lab", "cache", 0, "a2")]  # fmt: skip


def pod_yaml(namespace: str, sts: str, ordinal: int, node: str) -> str:
    """One StatefulSet pod as `kubectl get -o yaml` lists it (db's pods mount their claim)."""
    fields = [f"nodeName: {node}"] if node else []
    if sts == "db":
        fields.append(
            f"volumes: [{{name: data, persistentVolumeClaim: {{claimName: data-db-{ordinal}}}}}]"
        )
    spec = f"{{{', '.join(fields)}}}"
    return (
        f"- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: {sts}-{ordinal}\n"
        f"    namespace: {namespace}\n    labels: {{apps.kubernetes.io/pod-index: '{ordinal}'}}\n"
        f"    {OWNER.replace('{sts}', sts)}\n  spec: {spec}\n"
    )


@pytest.fixture
def cluster_file(tmp_path: Path) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(CLUSTER + "".join(pod_yaml(*p) for p in PODS))
    return path


def row(
    ordinal: int,
    zone: str | None,
    by: str,
    node: str | None,
    at: str | None,
    status: str,
    why: str | None = None,
) -> dict[str, Any]:
    return {
        "ordinal": ordinal,
        "expectedZone": zone,
        "expectedBy": by,
        "node": node,
        "zone": at,
        "status": status,
        "why": why,
        "nodeReady": True if node else None,
    }


def why(
    name: str, *, nowhere: list[str] | None = None, zones: dict[str, list[str]]
) -> dict[str, Any]:
    """What removing a node costs shop/NAME: members left nowhere, zones left empty."""
    return {
        "apiGroup": "apps",
        "kind": "StatefulSet",
        "namespace": "shop",
        "name": name,
        "noNodeLeft": nowhere or [],
        "noNodeForVolumes": [],
        "zonesLeftEmpty": zones,
    }


EXPECTED = {
    "allNamespaces": False,
    "statefulsets": [
        {
            "apiGroup": "apps",
            "kind": "StatefulSet",
            "namespace": "shop",
            "name": "db",
            "mode": "affinity",
            "zones": ["zone-a", "zone-b", "zone-c"],
            "replicas": 4,
            "start": 0,
            "ordinals": [
                row(0, "zone-a", "rule", "a1", "zone-a", "ok"),
                row(1, "zone-b", "rule", "c1", "zone-c", "MISPLACED"),
                row(2, "zone-b", "volume pv-db-2", None, None, "pending"),
                row(3, "zone-a", "rule", None, None, "no pod"),
            ],
            "zonesHeld": ["zone-a", "zone-b", "zone-c"],
            "lowestSafeReplicas": 3,
            "lowestSafeJudged": True,
            "deleting": False,
            "skipped": False,
            "missingNodeLabels": [],
            "duplicateNodeLabels": {},
            "problem": None,
            "missingNode": None,
            "warnings": [],
            "misplaced": 1,
        },
        {
            "apiGroup": "apps",
            "kind": "StatefulSet",
            "namespace": "shop",
            "name": "kafka",
            "mode": "node-ordinal",
            "zones": ["zone-a", "zone-b", "zone-c"],
            "replicas": 3,
            "start": 0,
            "ordinals": [
                row(0, "zone-c", "nodes k1", "k1", "zone-c", "ok"),
                row(1, None, "nodes k2, k3", "k2", "zone-b", "ok"),
                row(2, None, "no node labelled", None, None, "no pod"),
            ],
            "zonesHeld": ["zone-b", "zone-c"],
            "lowestSafeReplicas": 3,
            "lowestSafeJudged": True,
            "deleting": False,
            "skipped": False,
            "missingNodeLabels": [2],
            "duplicateNodeLabels": {"1": ["k2", "k3"]},
            "problem": None,
            "missingNode": None,
            "warnings": [],
            "misplaced": 0,
        },
    ],
    "removableNodes": ["a1", "a2", "b1", "c2", "k3"],
    "removableTogether": ["a2", "b1", "c2", "k3"],
    # The NOT rows of the table above, each with what removing the node alone costs.
    "unremovableNodes": {
        "c1": [why("db", zones={"zone-c": ["db-1"]})],
        "k1": [why("kafka", nowhere=["kafka-0"], zones={"zone-c": ["kafka-0"]})],
        "k2": [why("kafka", zones={"zone-b": ["kafka-1"]})],
    },
    "problems": True,
    "kafkaNodePools": [],
}


def test_audit_json_matches_the_hand_worked_table(
    cluster_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every cell of the JSON report, and exit 1 because db-1 is misplaced."""
    assert main(["audit", "--cluster", str(cluster_file), "--output", "json"]) == 1
    assert json.loads(capsys.readouterr().out) == EXPECTED


def test_audit_table_for_people(cluster_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The same facts as a table, with the misplaced pod and label problems marked."""
    assert main(["audit", "--cluster", str(cluster_file)]) == 1
    out = capsys.readouterr().out
    lines = [line.rstrip() for line in out.splitlines()]
    head = (
        "StatefulSet shop/db: mode affinity, zones zone-a,zone-b,zone-c, replicas 4 (ordinals 0-3)"
    )
    assert lines[lines.index(head) + 1 :][:6] == [
        "  ORDINAL  EXPECTED  SET BY          NODE  ZONE    STATUS",
        "  0        zone-a    rule            a1    zone-a  ok",
        "  1        zone-b    rule            c1    zone-c  MISPLACED",
        "  2        zone-b    volume pv-db-2  -     -       pending",
        "  3        zone-a    rule            -     -       no pod",
        "  zones held now: zone-a, zone-b, zone-c; lowest replica count that keeps every zone: 3",
    ]
    assert "  PROBLEM: no node carries the ordinal label of ordinal(s) 2" in lines
    assert "  PROBLEM: ordinal 1's label is on several nodes: k2, k3" in lines
    assert "Nodes that can be removed one at a time: a1, a2, b1, c2, k3" in lines
    assert "Nodes that can be removed together: a2, b1, c2, k3" in lines
    start = lines.index("Nodes that cannot be removed, and why:")
    assert lines[start + 1 : start + 4] == [
        "  c1: StatefulSet shop/db: zone zone-c left empty (db-1 is its only member there)",
        "  k1: StatefulSet shop/kafka: kafka-0 has no node left to go to; zone zone-c left empty "
        "(kafka-0 is its only member there)",
        "  k2: StatefulSet shop/kafka: zone zone-b left empty (kafka-1 is its only member there)",
    ]
    assert "cache" not in out and "Audited every StatefulSet" not in out


def test_without_namespace_objects_every_set_is_audited(tmp_path: Path) -> None:
    """A file without Namespace objects: opt-in is unknown, so lab/cache is audited too."""
    path = tmp_path / "cluster.yaml"
    text = CLUSTER + "".join(pod_yaml(*p) for p in PODS)
    path.write_text("\n".join(line for line in text.splitlines() if "kind: Namespace" not in line))
    report = audit(load_store(path))
    assert report.all_namespaces
    assert [(s.namespace, s.name) for s in report.sets] == [
        ("lab", "cache"),
        ("shop", "db"),
        ("shop", "kafka"),
    ]
    # cache-0 (expected zone-a: the server's sorted zones) on a2 makes a2 hold an audited pod,
    # so the greedy order is b1, c2, k3, then a1 before a2 (by name): a1 goes, a2 must stay.
    assert report.removable == ("a1", "a2", "b1", "c2", "k3")
    assert report.removable_together == ("a1", "b1", "c2", "k3")


def test_a_well_placed_cluster_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every pod where expected: exit 0 and a plain statement saying so."""
    path = tmp_path / "ok.yaml"
    pods = [("shop", "db", 0, "a1"), ("shop", "db", 1, "b1"), ("shop", "db", 2, "c1")]
    text = CLUSTER.replace("replicas: 4", "replicas: 3").replace("zone-b]}", "zone-c]}")
    kept = text.split("- apiVersion: apps/v1\n  kind: StatefulSet\n  metadata:\n    name: kafka")[0]
    path.write_text(kept + "".join(pod_yaml(*p) for p in pods))
    assert main(["audit", "--cluster", str(path)]) == 0
    assert (
        capsys.readouterr().out.rstrip().endswith("Every audited pod is where stszone expects it.")
    )


def test_audit_without_a_view_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No --cluster and no cluster to reach: exit 2 with what to give."""
    for name in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST"):
        monkeypatch.delenv(name, raising=False)
    assert main(["audit"]) == 2
    assert "audit needs a view of the cluster: --cluster FILE" in capsys.readouterr().err


def test_unreadable_cluster_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A missing file: exit 2, not a traceback."""
    assert main(["audit", "--cluster", str(tmp_path / "nope.yaml")]) == 2
    assert "cannot read cluster file" in capsys.readouterr().err


def _small(
    *extra: dict[str, Any], annotations: dict[str, str] | None = None, replicas: int = 2
) -> Any:
    """Nodes a1, a2 (zone a) and b1 (zone b); db with 2 replicas and zones a,b."""
    sts = b.statefulset(replicas=replicas, annotations=annotations or {"stszone.io/zones": "a,b"})
    nodes = [b.node("a1", "a"), b.node("a2", "a"), b.node("b1", "b")]
    return audit(store_from_objects([*nodes, sts, *extra]))


def test_last_node_a_pending_pod_can_go_to_is_not_removable() -> None:
    """db-1 waits for zone b; b1 holds nothing, yet removing it strands db-1 for good."""
    report = _small(b.sts_pod(ordinal=0, node="a1"), b.sts_pod(ordinal=1))
    assert report.sets[0].rows[1].status == "pending"
    assert report.removable == ("a1", "a2")
    assert report.removable_together == ("a2",)


def test_node_holding_a_local_volume_is_not_removable() -> None:
    """db-0's volume is local to a1 (hostname affinity): its data dies with a1, a2 or not."""
    local = b.pv("pv-local", "a", claim=("ns", "data-db-0"))
    term = local["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]
    term["matchExpressions"] = [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["a1"]}
    ]
    pods = [b.sts_pod(ordinal=0, node="a1"), b.sts_pod(ordinal=1, node="b1")]
    report = _small(*pods, b.pvc("data-db-0", volume="pv-local"), local)
    assert "a1" not in report.removable and "a2" in report.removable


def test_node_a_template_names_in_spec_node_name_is_not_removable() -> None:
    """db's template binds its pods to a1 (spec.nodeName): db-0, re-created, goes back to a1
    and nowhere else, so a2 in the same zone does not make a1 removable."""
    sts = b.statefulset(replicas=1, annotations={"stszone.io/zones": "a"})
    sts["spec"]["template"]["spec"]["nodeName"] = "a1"
    nodes = [b.node("a1", "a"), b.node("a2", "a"), b.node("b1", "b")]
    report = audit(store_from_objects([*nodes, sts, b.sts_pod(ordinal=0, node="a1")]))
    assert report.removable == ("a2", "b1")


def test_a_terminating_pod_still_holds_its_node_for_the_removal_order() -> None:
    """db-0 is Terminating on a1 (its replacement goes to zone a, a1 or a2): either node alone
    may go, but a1 still holds a pod, so removing together starts from the empty a2, after
    which a1 is db-0's last node in zone a."""
    pods = [b.sts_pod(ordinal=0, node="a1", deleting=True), b.sts_pod(ordinal=1, node="b1")]
    report = _small(*pods)
    assert report.removable == ("a1", "a2")
    assert report.removable_together == ("a2",)


def test_a_terminating_pod_with_nowhere_to_go_keeps_its_node() -> None:
    """db-0 is Terminating on a1 and its volume is local to a node that is gone: its
    replacement can run nowhere, and a node a pod with no home still runs on is not called
    removable."""
    gone = b.pv("pv-gone", "gone", claim=("ns", "data-db-0"), key="kubernetes.io/hostname")
    pods = [b.sts_pod(ordinal=0, node="a1", deleting=True), b.sts_pod(ordinal=1, node="b1")]
    report = _small(*pods, b.pvc("data-db-0", volume="pv-gone"), gone)
    assert report.removable == ("a2",)
    assert report.removable_together == ("a2",)


def test_a_node_holding_the_local_volume_of_an_ordinal_with_no_home_is_not_removable() -> None:
    """node-ordinal: example.io/node=1 moved from a2 to b1, and db-1, not running, still has
    its data on a local volume of a2. The guard counts db-1 in zone a by that volume, the only
    thing holding zone a: removing a2 takes the data and zone a with it, so a2 is not
    removable (the audit of the cluster without a2 holds zone b alone)."""
    spec = {"stszone.io/mode": "node-ordinal", "stszone.io/node-label": "example.io/node"}
    local = b.pv("pv-local", "a2", claim=("ns", "data-db-1"), key="kubernetes.io/hostname")
    nodes = [
        b.node("a1", "a"),
        b.node("a2", "a"),
        b.node("b1", "b", labels={"example.io/node": "1"}),
        b.node("b0", "b", labels={"example.io/node": "0"}),
    ]
    sts = b.statefulset(replicas=2, annotations=spec)
    objs = [*nodes, sts, b.sts_pod(ordinal=0, node="b0"), b.pvc("data-db-1", volume="pv-local")]
    report = audit(store_from_objects([*objs, local]))
    assert report.sets[0].held == ("a", "b")
    without = audit(store_from_objects([o for o in [*objs, local] if o is not nodes[1]]))
    assert without.sets[0].held == ("b",)  # what removing a2 would leave
    assert "a2" not in report.removable
    assert "a2" not in report.removable_together
    assert "a1" in report.removable


def test_a_stopped_set_has_no_ordinal_to_audit() -> None:
    """replicas: 0 (scaled to zero): no row, no zone held; its nodes are all removable."""
    report = _small(replicas=0)
    assert report.sets[0].rows == () and report.sets[0].held == ()
    assert report.removable == ("a1", "a2", "b1")


def test_node_ordinal_pod_on_an_unlabelled_node_is_misplaced() -> None:
    """node-ordinal: db-1 runs on a2, which does not carry example.io/node=1."""
    spec = {"stszone.io/mode": "node-ordinal", "stszone.io/node-label": "example.io/node"}
    labelled = b.node("k1", "b", labels={"example.io/node": "1"})
    pods = [b.sts_pod(ordinal=1, node="a2")]
    report = _small(labelled, *pods, annotations=spec)
    rows = report.sets[0].rows
    assert [(r.ordinal, r.status, r.expected_zone) for r in rows] == [
        (0, "no pod", None),
        (1, "MISPLACED", "b"),
    ]
    assert report.sets[0].missing_labels == (0,) and report.has_problems


async def test_live_audit_lists_the_cluster_and_honours_opt_in(tmp_path: Path) -> None:
    """`stszone audit --kubeconfig` against the fake API server (the recorded cluster): only
    namespaces labelled stszone.io/enabled=true are audited, and nothing is watched."""
    async with FakeApi(token="t0k3n") as api:
        kubeconfig = write_kubeconfig(
            tmp_path / "kubeconfig", server=api.url, token="t0k3n", ca=api.ca
        )
        argv = ["audit", "--kubeconfig", str(kubeconfig), "--output", "json"]
        out = tmp_path / "out.json"

        def run() -> int:
            with out.open("w") as handle, contextlib.redirect_stdout(handle):
                return main(argv)

        assert await asyncio.to_thread(run) == 0  # the recorded cluster opts nothing in
        assert json.loads(out.read_text())["statefulsets"] == []
        labels = {"stszone.io/enabled": "true"}
        api.put("namespaces", {"metadata": {"name": "cap", "labels": labels}})
        assert await asyncio.to_thread(run) == 0
        report = json.loads(out.read_text())
        assert not [s for s in api.requests if s.verb == "watch"]
    (db,) = report["statefulsets"]
    assert (db["namespace"], db["name"], report["allNamespaces"]) == ("cap", "db", False)
    assert [(o["ordinal"], o["expectedZone"], o["node"], o["status"]) for o in db["ordinals"]] == [
        (0, "zone-c", "lab-node-6", "ok"),  # claim data-db-0 is bound to a PV in zone-c
        (1, "zone-a", "lab-node-1", "ok"),
    ]


def test_namespace_flag_audits_one_namespace_but_weighs_every_set_for_node_removal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``-n NS`` (kubectl's meaning) lists only NS's sets; node removal still protects the sets
    of every other namespace, since draining a node affects them all."""
    docs: list[Any] = [b.node(name, zone) for name, zone in (("a1", "a"), ("a2", "a"), ("d1", "d"))]
    cache = b.statefulset(
        "cache", namespace="dev", replicas=2, annotations={"stszone.io/zones": "a"}
    )
    docs += [cache, b.sts_pod("cache", ordinal=0, namespace="dev", node="a1")]
    docs.append(b.sts_pod("cache", ordinal=1, namespace="dev", node="a2"))
    # prod/db's only pod in zone d runs on d1, the only node of zone d.
    db = b.statefulset("db", namespace="prod", replicas=2, annotations={"stszone.io/zones": "a,d"})
    docs += [db, b.sts_pod("db", ordinal=0, namespace="prod", node="a1")]
    docs.append(b.sts_pod("db", ordinal=1, namespace="prod", node="d1"))
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"kind": "List", "items": docs}))
    assert main(["audit", "--cluster", str(path), "-n", "dev", "-o", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [(s["namespace"], s["name"]) for s in report["statefulsets"]] == [("dev", "cache")]
    assert "d1" not in report["removableNodes"]  # dev alone would let it go; prod/db would not
    assert report["removableNodes"] == ["a1", "a2"]


def test_a_set_whose_pod_template_is_skipped_has_no_misplaced_pod(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """stszone expects none of its pods anywhere: each row is `skipped`, with what says so,
    and the audit finds no problem (exit 0), as rebalance has nothing to move; the zones they
    hold and the guard's lowest count are still reported."""
    report = audit(store_from_objects(b.skipped_template_cluster()))
    (db,) = report.sets
    assert [(r.ordinal, r.expected_zone, r.expected_by, r.zone, r.status) for r in db.rows] == [
        (0, None, "stszone.io/skip=true on the pod template", "zone-a", "skipped"),
        (1, None, "stszone.io/skip=true on the pod template", "zone-a", "skipped"),
        (2, None, "stszone.io/skip=true on the pod template", "zone-c", "skipped"),
    ]
    assert (db.misplaced, db.has_problems, db.held, db.lowest) == (
        0,
        False,
        ("zone-a", "zone-c"),
        3,
    )
    path = tmp_path / "skipped.json"
    path.write_text(
        json.dumps({"apiVersion": "v1", "kind": "List", "items": b.skipped_template_cluster()})
    )
    assert main(["audit", "--cluster", str(path)]) == 0
    assert "MISPLACED" not in capsys.readouterr().out


def test_an_empty_zone_label_names_no_zone_held() -> None:
    """node-ordinal: example.io/node=1 is on e1, whose zone label is present but empty. An
    empty value names no zone (discovery leaves it out too): db-1, with no pod, is of unknown
    zone, zone b is held by nobody that is known, so removing db-1 may drop it (lowest 2)."""
    spec = {"stszone.io/mode": "node-ordinal", "stszone.io/node-label": "example.io/node"}
    labelled = [
        b.node("k0", "a", labels={"example.io/node": "0"}),
        b.node("e1", "", labels={"example.io/node": "1"}),
    ]
    report = _small(*labelled, b.sts_pod(ordinal=0, node="k0", claims=()), annotations=spec)
    held = report.sets[0]
    assert held.held == ("a",)
    assert held.unknown == (1,)
    assert held.lowest == 2


def test_a_going_pod_on_a_node_with_an_empty_zone_label_sits_in_no_zone() -> None:
    """db-0 is Terminating on e1, whose zone label is empty; PodTopologyLabels copied that
    empty value onto the pod. Neither names a zone: the row has none, and the reason says
    where the replacement goes without an empty zone name."""
    pod = b.sts_pod(ordinal=0, node="e1", deleting=True, labels={"topology.kubernetes.io/zone": ""})
    report = _small(b.node("e1", ""), pod, b.sts_pod(ordinal=1, node="b1"))
    row = report.sets[0].rows[0]
    assert (row.status, row.zone) == ("going", None)
    assert row.why == "db-0 is Terminating on node e1; its replacement goes to a"


def test_a_namespace_not_opted_in_says_why_nothing_is_audited(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``audit -n prod`` where prod holds a StatefulSet but is not opted in: "No StatefulSet
    to audit." alone reads as if there were none; the audit says it left one out, and why."""
    opted = {"stszone.io/enabled": "true"}
    docs: list[Any] = [b.node("a1", "a")]
    docs.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "prod"}})
    docs.append(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "dev", "labels": opted}}
    )
    docs += [b.statefulset("db", namespace="prod", replicas=1)]
    docs.append(b.sts_pod("db", ordinal=0, namespace="prod", node="a1"))
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"kind": "List", "items": docs}))
    assert main(["audit", "--cluster", str(path), "-n", "prod"]) == 0
    out = capsys.readouterr().out
    assert "No StatefulSet to audit: 1 in namespaces stszone never intercepts" in out, out
    assert main(["audit", "--cluster", str(path), "-n", "dev"]) == 0
    assert "No StatefulSet to audit.\n" in capsys.readouterr().out
