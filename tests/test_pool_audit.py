"""``stszone audit`` of KafkaNodePools, from a saved cluster file of the recorded objects."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests import builders as b
from tests import poolsim as sim
from webhook.cli import main
from webhook.cluster.clusterfile import load_store
from webhook.model.extract import claim_info, node_info, volume_info
from webhook.model.nodepools import nodepool_info, poolpod_info
from webhook.model.store import Store
from webhook.rules.audit import audit
from webhook.rules.poolaudit import audit_pool
from webhook.rules.risk import RiskScan
from webhook.server.poolrisk import PoolRiskCollector


def cluster_file(tmp_path: Path, *, misplace: bool = False) -> Path:
    """The recorded pools, pods and claims; broker N's claims and pod in zone a, b, c by N mod 3
    (broker 5's pod on a zone-a node when ``misplace``)."""
    zones = {i: sim.ZONES[i % 3] for i in range(9)}
    items: list[sim.JSON] = [b.node(f"n-{z}", z) for z in sim.ZONES]
    for pool in sim.objects("kafkanodepools.v1beta2.json"):
        pool["apiVersion"], pool["kind"] = "kafka.strimzi.io/v1beta2", "KafkaNodePool"
        items.append(pool)
    for pod in sim.objects("pods.json"):
        node_id = int(pod["metadata"]["name"].rsplit("-", 1)[1])
        zone = "zone-a" if misplace and node_id == 5 else zones[node_id]
        pod["spec"]["nodeName"] = f"n-{zone}"
        items.append(pod)
    for claim in sim.objects("pvcs.json"):
        node_id = int(claim["metadata"]["name"].rsplit("-", 1)[1])
        claim["metadata"].setdefault("annotations", {})["stszone.io/zone"] = zones[node_id]
        items.append(claim)
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


def test_pools_are_audited_broker_by_broker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = cluster_file(tmp_path)
    assert main(["audit", "--cluster", str(path), "--zones", ",".join(sim.ZONES)]) == 0
    text = capsys.readouterr().out
    assert "KafkaNodePool kafka/broker (cluster my-cluster): zones zone-a,zone-b,zone-c" in text
    assert "brokers per zone: zone-a 2, zone-b 2, zone-c 2 (imbalance 0)" in text
    # 6 brokers a b c a b c: the highest leave first; 3 keep every zone, 2 cannot.
    assert "lowest replica count that keeps every zone: 3" in text


def test_a_broker_away_from_its_data_is_misplaced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = cluster_file(tmp_path, misplace=True)
    args = ["audit", "--cluster", str(path), "--zones", ",".join(sim.ZONES), "-o", "json"]
    assert main(args) == 1
    pools = {p["name"]: p for p in json.loads(capsys.readouterr().out)["kafkaNodePools"]}
    broker5 = next(r for r in pools["broker"]["brokers"] if r["nodeId"] == 5)
    assert broker5 == {
        "nodeId": 5,
        "pod": "my-cluster-broker-5",
        "dataZone": "zone-c",
        "node": "n-zone-a",
        "zone": "zone-a",
        "status": "MISPLACED",
    }
    assert pools["broker"]["brokersPerZone"] == {"zone-a": 3, "zone-b": 2, "zone-c": 1}
    assert pools["controller"]["misplaced"] == 0


def test_a_misplaced_broker_is_in_the_summary_and_the_json_problems(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The audit exits 1 for broker 5 away from its data: its last line and the JSON's
    ``problems`` say so too, instead of "Every audited pod is where stszone expects it"."""
    path = cluster_file(tmp_path, misplace=True)
    args = ["audit", "--cluster", str(path), "--zones", ",".join(sim.ZONES)]
    assert main(args) == 1
    last = capsys.readouterr().out.splitlines()[-1]
    assert last == "0 StatefulSet(s) and 1 KafkaNodePool(s) with problems; 1 pod(s) misplaced."
    assert main([*args, "-o", "json"]) == 1
    assert json.loads(capsys.readouterr().out)["problems"] is True


def test_a_misplaced_broker_on_a_node_that_no_longer_exists_is_going(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Broker 5 runs in zone-a, away from its data in zone-c, and its node is deleted: PodGC
    deletes the pod, and the operator re-creates it with its data. It is going, not misplaced
    (exit 0), and counts in no zone, as a Terminating one does."""
    path = cluster_file(tmp_path, misplace=True)
    listed = yaml.safe_load(path.read_text())
    for item in listed["items"]:
        if item["kind"] == "Pod" and item["metadata"]["name"] == "my-cluster-broker-5":
            item["spec"]["nodeName"] = "n-zone-a-deleted"
            item["metadata"]["labels"]["topology.kubernetes.io/zone"] = "zone-a"
    path.write_text(yaml.safe_dump(listed))
    args = ["audit", "--cluster", str(path), "--zones", ",".join(sim.ZONES), "-o", "json"]
    assert main(args) == 0
    pools = {p["name"]: p for p in json.loads(capsys.readouterr().out)["kafkaNodePools"]}
    broker5 = next(r for r in pools["broker"]["brokers"] if r["nodeId"] == 5)
    assert (broker5["node"], broker5["zone"], broker5["status"]) == (
        "n-zone-a-deleted",
        None,
        "going",
    )
    assert pools["broker"]["brokersPerZone"] == {"zone-a": 2, "zone-b": 2, "zone-c": 1}


def test_rebalance_says_why_it_leaves_brokers_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = cluster_file(tmp_path, misplace=True)
    main(["rebalance", "--cluster", str(path), "--zones", ",".join(sim.ZONES)])
    out = capsys.readouterr().out
    assert "KafkaNodePools kafka/broker, kafka/controller: brokers are not moved" in out
    assert "Cruise Control" in out


def test_pool_gauges_are_the_audit_figures(tmp_path: Path) -> None:
    store = load_store(cluster_file(tmp_path, misplace=True), zones=sim.ZONES)
    found = {
        (family.name, sample.labels["kafkanodepool"]): sample.value
        for family in PoolRiskCollector(RiskScan(store)).collect()
        for sample in family.samples
    }
    assert found[("stszone_kafkanodepool_misplaced_brokers", "broker")] == 1
    assert found[("stszone_kafkanodepool_zone_imbalance", "broker")] == 2  # a3 b2 c1
    assert found[("stszone_kafkanodepool_zones_held", "controller")] == 3
    assert found[("stszone_kafkanodepool_lowest_safe_replicas", "controller")] == 3
    assert found[("stszone_kafkanodepool_replicas", "broker")] == 6


@pytest.mark.parametrize("broker2", ["terminating", "unlabelled node"])
def test_the_lowest_safe_count_is_one_the_guard_allows(broker2: str) -> None:
    """Brokers 0 (zone-a) and 1 (zone-b) run; broker 2 is Terminating with its data in
    zone-c (a rolling update), or runs on a node without a zone label. The guard refuses
    3 -> 2 (it drops, or may drop, zone-c): the audit's lowest safe count is 3, not 2."""
    view = sim.store()
    view.put("nodes", node_info(b.node("n-bare", None)))
    view.put("nodepools", nodepool_info(sim.pool_object("pool", replicas=3, node_ids=[0, 1, 2])))
    for node_id, zone in enumerate(sim.ZONES):
        pod = sim.pod_object("my-cluster", "pool", node_id)
        pod["spec"]["nodeName"] = f"n-{zone}-0"
        if node_id == 2 and broker2 == "terminating":
            pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
            claim = sim.claim_object("my-cluster", "pool", node_id)
            claim["metadata"].setdefault("annotations", {})["stszone.io/zone"] = zone
            view.put("claims", claim_info(claim))
        elif node_id == 2:
            pod["spec"]["nodeName"] = "n-bare"
            pod["metadata"]["annotations"].pop("stszone.io/zone", None)
        view.put("poolpods", poolpod_info(pod))
    new, old = sim.scale("pool", old=3, new=2)
    refused = sim.admit(view, new, old=old, operation="UPDATE")
    assert not refused.allowed and "zone-c" in refused.message
    info = view.nodepool("kafka", "pool")
    assert info is not None
    assert audit_pool(info, store=view).lowest == 3


ROOT = Path(__file__).parent.parent


def test_the_example_has_no_node_a_zone_of_kafka_survives_draining(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """deploy/examples/kafka: one node per zone, each running brokers whose data is in its
    zone (node-b1 runs broker 3, zone-b's only one). Draining any node leaves its brokers no
    node to return to, and node-b1 would empty zone-b of the pool: none is removable."""
    example = ROOT / "deploy" / "examples" / "kafka" / "cluster.yaml"
    assert main(["audit", "--cluster", str(example), "-o", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (broker,) = [p for p in report["kafkaNodePools"] if p["name"] == "broker"]
    assert broker["brokersPerZone"]["zone-b"] == 1
    assert report["statefulsets"] == []
    assert report["removableNodes"] == []
    assert report["removableTogether"] == []


def test_removable_nodes_weigh_brokers() -> None:
    """Brokers 0, 1, 2 with data in zone-a, -b, -c run on n-zone-X-0; each zone has a second
    node. Each node alone can go (its broker returns to the other node of its data's zone),
    but not both nodes of a zone: together, the idle -1 nodes first, then none of the -0."""
    view = sim.store()
    view.put("nodepools", nodepool_info(sim.pool_object("pool", replicas=3, node_ids=[0, 1, 2])))
    for node_id, zone in enumerate(sim.ZONES):
        claim = sim.claim_object("my-cluster", "pool", node_id)
        claim["metadata"].setdefault("annotations", {})["stszone.io/zone"] = zone
        view.put("claims", claim_info(claim))
        pod = sim.pod_object("my-cluster", "pool", node_id)
        pod["spec"]["nodeName"] = f"n-{zone}-0"
        view.put("poolpods", poolpod_info(pod))
    report = audit(view)
    assert report.removable == tuple(sorted(f"n-{z}-{i}" for z in sim.ZONES for i in (0, 1)))
    assert report.removable_together == ("n-zone-a-1", "n-zone-b-1", "n-zone-c-1")


def _pool_with_broker_0_on(*hosts: str) -> Store:
    """Brokers 0-2 of a pool, one per zone on each zone's first node, broker 0's data (zone-a)
    a volume pinned by hostname to ``hosts``."""
    view = sim.store()
    view.put("nodepools", nodepool_info(sim.pool_object("pool", replicas=3, node_ids=[0, 1, 2])))
    for node_id, zone in enumerate(sim.ZONES):
        claim = sim.claim_object("my-cluster", "pool", node_id)
        claim["metadata"].setdefault("annotations", {})["stszone.io/zone"] = zone
        if node_id == 0:
            claim["spec"]["volumeName"] = "pv-local"
            claim["status"] = {"phase": "Bound"}
            name = claim["metadata"]["name"]
            local = b.pv("pv-local", *hosts, claim=("kafka", name), key="kubernetes.io/hostname")
            view.put("volumes", volume_info(local))
        view.put("claims", claim_info(claim))
        pod = sim.pod_object("my-cluster", "pool", node_id)
        pod["spec"]["nodeName"] = f"n-{zone}-0"
        view.put("poolpods", poolpod_info(pod))
    return view


def test_a_node_holding_a_brokers_local_volume_is_not_removable() -> None:
    """As above, but broker 0's data is a local volume of n-zone-a-0 (pinned by hostname):
    its data goes with that node, so n-zone-a-0 cannot go, though zone-a has another node."""
    report = audit(_pool_with_broker_0_on("n-zone-a-0"))
    assert "n-zone-a-0" not in report.removable and "n-zone-a-1" in report.removable
    assert "n-zone-a-0" not in report.removable_together


def test_a_broker_is_held_to_the_nodes_of_its_zone_its_volume_reaches() -> None:
    """Broker 0's data (zone-a) is a volume pinned by hostname to n-zone-a-0 and n-zone-b-0:
    re-created in zone-a it can only run on n-zone-a-0, so that node cannot go, though the
    volume also reaches a node of zone-b; n-zone-b-0 can (broker 1 returns to n-zone-b-1)."""
    report = audit(_pool_with_broker_0_on("n-zone-a-0", "n-zone-b-0"))
    assert "n-zone-a-0" not in report.removable and "n-zone-b-0" in report.removable
    assert "n-zone-a-0" not in report.removable_together


@pytest.mark.parametrize("api_version", ["kafka.example.io/v1beta2", "example.io/v1"])
def test_a_saved_kafkanodepool_of_another_group_is_not_audited(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], api_version: str
) -> None:
    """A cluster file holding the recorded pools and, after them, another project's
    KafkaNodePool broker of one replica: the audit reads Strimzi's broker (6 brokers, lowest 3)
    as the live view, which lists kafka.strimzi.io alone, does; the look-alike is no pool."""
    path = cluster_file(tmp_path)
    listed = yaml.safe_load(path.read_text())
    (broker,) = [
        item
        for item in listed["items"]
        if item["kind"] == "KafkaNodePool" and item["metadata"]["name"] == "broker"
    ]
    other = {**broker, "apiVersion": api_version, "spec": {**broker["spec"], "replicas": 1}}
    listed["items"].append(other)
    path.write_text(yaml.safe_dump(listed))
    args = ["audit", "--cluster", str(path), "--zones", ",".join(sim.ZONES), "-o", "json"]
    assert main(args) == 0
    pools = {p["name"]: p for p in json.loads(capsys.readouterr().out)["kafkaNodePools"]}
    assert (pools["broker"]["replicas"], pools["broker"]["lowestSafeReplicas"]) == (6, 3)
