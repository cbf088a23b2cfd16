"""`stszone audit` says why a node cannot be removed: for each workload it touches, the members
left no node to run on, those whose local data goes with it, and each zone left empty with the
members that hold it now; on saved clusters, each worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests import builders as b
from tests.markdown import ROOT, console
from webhook.cli import main

OPTED_IN = {
    "apiVersion": "v1",
    "kind": "Namespace",
    "metadata": {"name": "shop", "labels": {"stszone.io/enabled": "true"}},
}


def _one_node_in_zone_c(tmp_path: Path) -> Path:
    """Zones a (a1, a2), b (b1, b2), c (c1 alone). Five sets over zones a,b,c, every pod where
    the rule puts it (ordinal i in zone i mod 3, on a1, b1 or c1): big (12 replicas: 2, 5, 8
    and 11 in zone c) and s1-s4 (3 replicas: 2 in zone c). c1 holds every member of zone c."""
    zones = {"stszone.io/zones": "a,b,c"}
    docs: list[Any] = [OPTED_IN]
    docs += [b.node(n, n[0]) for n in ("a1", "a2", "b1", "b2", "c1")]
    for name, replicas in (("big", 12), ("s1", 3), ("s2", 3), ("s3", 3), ("s4", 3)):
        docs.append(b.statefulset(name, namespace="shop", replicas=replicas, annotations=zones))
        for o in range(replicas):
            node = ("a1", "b1", "c1")[o % 3]
            docs.append(b.sts_pod(name, ordinal=o, namespace="shop", node=node))
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
    return path


def _why(name: str, *, nowhere: list[str], zones: dict[str, list[str]]) -> dict[str, Any]:
    return {
        "apiGroup": "apps",
        "kind": "StatefulSet",
        "namespace": "shop",
        "name": name,
        "noNodeLeft": nowhere,
        "noNodeForVolumes": [],
        "zonesLeftEmpty": zones,
    }


def test_the_only_node_of_a_zone_names_every_workload_and_member_it_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Removing c1 leaves each set's zone-c members nowhere to run and zone c empty; every
    other node has a twin in its zone. The JSON names every workload and member."""
    path = _one_node_in_zone_c(tmp_path)
    assert main(["audit", "--cluster", str(path), "-o", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["removableNodes"] == ["a1", "a2", "b1", "b2"]
    big = ["big-2", "big-5", "big-8", "big-11"]
    assert report["unremovableNodes"] == {
        "c1": [
            _why("big", nowhere=big, zones={"c": big}),
            *(_why(f"s{i}", nowhere=[f"s{i}-2"], zones={"c": [f"s{i}-2"]}) for i in range(1, 5)),
        ]
    }


def test_the_text_names_the_first_few_and_counts_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same cluster as people read it: three workloads of five, three members of four."""
    path = _one_node_in_zone_c(tmp_path)
    assert main(["audit", "--cluster", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    start = lines.index("Nodes that cannot be removed, and why:")
    assert lines[start - 2 : start + 5] == [
        "Nodes that can be removed one at a time: a1, a2, b1, b2",
        "Nodes that can be removed together: a2, b2",
        "Nodes that cannot be removed, and why:",
        "  c1: StatefulSet shop/big: big-2, big-5, big-8 and 1 more have no node left to go "
        "to; zone c left empty (big-2, big-5, big-8 and 1 more are its only members there)",
        "  c1: StatefulSet shop/s1: s1-2 has no node left to go to; zone c left empty (s1-2 "
        "is its only member there)",
        "  c1: StatefulSet shop/s2: s2-2 has no node left to go to; zone c left empty (s2-2 "
        "is its only member there)",
        "  c1: 2 more workload(s); -o json lists them all",
    ]


def test_a_node_holding_a_local_volume_says_whose_data_goes_with_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """db-0's volume is local to a1 (hostname affinity): a2, in zone a too, cannot mount it, so
    db-0 has no node left, its data goes with a1, and zone a is left without db's member."""
    local = b.pv("pv-local", "a1", claim=("shop", "data-db-0"), key="kubernetes.io/hostname")
    docs: list[Any] = [OPTED_IN, b.node("a1", "a"), b.node("a2", "a"), b.node("b1", "b")]
    docs.append(
        b.statefulset(namespace="shop", replicas=2, annotations={"stszone.io/zones": "a,b"})
    )
    docs += [b.sts_pod(ordinal=0, namespace="shop", node="a1"), local]
    docs += [b.sts_pod(ordinal=1, namespace="shop", node="b1")]
    docs.append(b.pvc("data-db-0", namespace="shop", volume="pv-local"))
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
    assert main(["audit", "--cluster", str(path), "-o", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["unremovableNodes"] == {
        "a1": [
            {
                **_why("db", nowhere=["db-0"], zones={"a": ["db-0"]}),
                "noNodeForVolumes": ["db-0"],
            }
        ],
        "b1": [_why("db", nowhere=["db-1"], zones={"b": ["db-1"]})],
    }
    assert main(["audit", "--cluster", str(path)]) == 0
    assert (
        "  a1: StatefulSet shop/db: db-0 has no node left to go to or to mount its volumes; "
        "zone a left empty (db-0 is its only member there)"
    ) in capsys.readouterr().out.splitlines()


def test_the_kafka_example_says_which_brokers_keep_each_node(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """deploy/examples/kafka: node-b1 runs broker 3 and controller 7, each its pool's only
    member in zone-b; node-b1 is zone-b's only node, so neither has a node left to run on, nor
    its volume (pinned to zone-b) a node to attach to."""
    example = ROOT / "deploy" / "examples" / "kafka" / "cluster.yaml"
    assert main(["audit", "--cluster", str(example), "-o", "json"]) == 0
    why = json.loads(capsys.readouterr().out)["unremovableNodes"]
    assert why["node-b1"] == [
        {
            "apiGroup": "kafka.strimzi.io",
            "kind": "KafkaNodePool",
            "namespace": "kafka",
            "name": pool,
            "noNodeLeft": [f"my-cluster-{pool}-{node_id}"],
            "noNodeForVolumes": [f"my-cluster-{pool}-{node_id}"],
            "zonesLeftEmpty": {"zone-b": [f"my-cluster-{pool}-{node_id}"]},
        }
        for pool, node_id in (("broker", 3), ("controller", 7))
    ]


def test_data_left_on_a_node_its_member_no_longer_needs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """node-ordinal: example.io/node=1 moved from a2 to b1, and db-1, not running, still has
    its data on a volume local to a2. db-1 has a node to go to (b1), but no node left would
    mount its volume, and that volume alone holds zone a for db: a2 costs both."""
    spec = {"stszone.io/mode": "node-ordinal", "stszone.io/node-label": "example.io/node"}
    local = b.pv("pv-local", "a2", claim=("shop", "data-db-1"), key="kubernetes.io/hostname")
    docs: list[Any] = [OPTED_IN, b.node("a1", "a"), b.node("a2", "a"), local]
    docs.append(b.node("b1", "b", labels={"example.io/node": "1"}))
    docs.append(b.node("b0", "b", labels={"example.io/node": "0"}))
    docs.append(b.statefulset(namespace="shop", replicas=2, annotations=spec))
    docs.append(b.sts_pod(ordinal=0, namespace="shop", node="b0"))
    docs.append(b.pvc("data-db-1", namespace="shop", volume="pv-local"))
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
    assert main(["audit", "--cluster", str(path)]) == 0
    assert (
        "  a2: StatefulSet shop/db: no node left can mount the volumes of db-1; zone a left "
        "empty (db-1 is its only member there)"
    ) in capsys.readouterr().out.splitlines()


GUARD_EXAMPLE = "deploy/examples/guard/cluster.yaml"


def test_the_guard_page_shows_what_audit_prints(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/guard.md's node lines of the guard example, and its JSON for node-c1, as printed."""
    page = (ROOT / "docs" / "guard.md").read_text()
    grep = "grep -e '^Nodes' -e '^  node-'"
    shown = console(page, f"stszone audit --cluster {GUARD_EXAMPLE} | {grep}")
    main(["audit", "--cluster", str(ROOT / GUARD_EXAMPLE)])
    printed = capsys.readouterr().out.splitlines()
    assert shown == [line for line in printed if line.startswith(("Nodes", "  node-"))]
    jq = "jq -c '.unremovableNodes[\"node-c1\"][]'"
    shown = console(page, f"stszone audit --cluster {GUARD_EXAMPLE} -o json | {jq}")
    main(["audit", "--cluster", str(ROOT / GUARD_EXAMPLE), "-o", "json"])
    report = json.loads(capsys.readouterr().out)
    assert [json.loads(line) for line in shown] == report["unremovableNodes"]["node-c1"]
