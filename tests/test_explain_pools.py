"""`stszone explain` of Strimzi KafkaNodePools (knp/NAME) and their brokers' pods.

The objects are the operator's own (``tests/poolsim.py`` renames the recorded claim and pod of
``tests/fixtures/strimzi``); where each broker is, is set here by hand. The IDs a scale-down
removes come from ``tests/strimzi_ref.py`` (the operator's assignor written again from its
Java), and the zones a size loses from the hand layout, never from stszone's code.

Layouts (pool ``broker`` of cluster ``my-cluster``, namespace ``kafka``):
  EVEN     0 a, 1 b, 2 c, 3 a, 4 b, 5 c   (each broker's pod on a node of its zone, claims too)
  CROWDED  0 a, 1 a, 2 a, 3 b, 4 c, 5 c   (zone-a holds three)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests import builders as b
from tests import poolsim as sim
from tests import strimzi_ref as ref
from tests.markdown import ROOT, explain_and_page
from webhook.cli import main, plugin
from webhook.cluster.clusterfile import store_from_objects
from webhook.model.store import Store
from webhook.rules.explain_pools import explain_broker_pod, explain_pool

A, B, C = sim.ZONES
EVEN = {0: A, 1: B, 2: C, 3: A, 4: B, 5: C}
CROWDED = {0: A, 1: A, 2: A, 3: B, 4: C, 5: C}


def _items(
    layout: dict[int, str],
    *,
    pool: str = "broker",
    annotations: dict[str, str] | None = None,
    node_ids: list[int] | None = None,
) -> list[sim.JSON]:
    """Nodes, the pool, and per broker of ``layout`` its claim (with the zone stszone gave it)
    and its pod running on a node of that zone."""
    items: list[sim.JSON] = [b.node(f"n-{z}", z, ready="True") for z in sim.ZONES]
    ids = sorted(layout) if node_ids is None else node_ids
    items.append(sim.pool_object(pool, replicas=len(ids), node_ids=ids, annotations=annotations))
    for node_id, zone in layout.items():
        claim = sim.claim_object("my-cluster", pool, node_id)
        claim["metadata"].setdefault("annotations", {})["stszone.io/zone"] = zone
        pod = sim.pod_object("my-cluster", pool, node_id)
        pod["spec"]["nodeName"] = f"n-{zone}"
        pod["metadata"].setdefault("annotations", {})["stszone.io/zone"] = zone
        items += [claim, pod]
    return items


def _view(items: list[sim.JSON]) -> Store:
    return store_from_objects(items)


def _lost(layout: dict[int, str], removed: tuple[int, ...]) -> set[str]:
    """The zones held now and by none of the brokers kept."""
    kept = [i for i in layout if i not in removed]
    return set(layout.values()) - {layout[i] for i in kept}


def test_each_broker_its_zone_and_the_counts() -> None:
    explained = explain_pool(_view(_items(EVEN)), "kafka", "broker")
    assert explained is not None and not explained.problem
    assert explained.pool.zones == sim.ZONES
    got = [(m.node_id, m.zone, m.zone_by, m.guard_zone, m.row.status) for m in explained.brokers]
    assert got == [(i, z, "data", z, "ok") for i, z in EVEN.items()]
    assert explained.brokers[3].claim == "data-my-cluster-broker-3"
    assert dict(explained.counts) == {A: 2, B: 2, C: 2}


@pytest.mark.parametrize(
    "annotation",
    [None, "[2, 5]", "[4-3]"],
    ids=["highest-first", "remove-node-ids", "remove-node-ids-range"],
)
def test_each_smaller_size_removes_what_the_operator_removes(annotation: str | None) -> None:
    extra = {"strimzi.io/remove-node-ids": annotation} if annotation else None
    explained = explain_pool(_view(_items(EVEN, annotations=extra)), "kafka", "broker")
    assert explained is not None
    ids = sorted(EVEN)
    assert [s.replicas for s in explained.sizes] == [5, 4, 3, 2, 1, 0]
    for size in explained.sizes:
        removed = ref.removed_ids(ids, size.replicas, annotation)
        assert size.removed == removed, size.replicas
        lost = _lost(EVEN, removed)
        # Scaling to 0 stops the pool and is allowed; any other loss of a zone is refused.
        assert size.scale.allowed is (size.replicas == 0 or not lost), size
        if not size.scale.allowed:
            assert size.scale.reason == "ZoneLoss"
            for zone in lost:
                assert f"{zone} (my-cluster-broker-" in size.scale.message, size


def test_remove_node_ids_that_empty_a_zone_are_refused_naming_brokers_and_zone() -> None:
    """[2, 5] removes both zone-c brokers: 4 replicas keep 0, 1, 3, 4 (a, b, a, b)."""
    extra = {"strimzi.io/remove-node-ids": "[2, 5]"}
    explained = explain_pool(_view(_items(EVEN, annotations=extra)), "kafka", "broker")
    assert explained is not None
    sizes = {s.replicas: s for s in explained.sizes}
    assert sizes[5].removed == (2,) and sizes[5].scale.allowed
    four = sizes[4]
    assert four.removed == (2, 5) and not four.scale.allowed
    assert four.scale.reason == "ZoneLoss"
    assert "removes my-cluster-broker-2 and my-cluster-broker-5" in four.scale.message
    assert (
        "would drop zone zone-c (my-cluster-broker-2 and my-cluster-broker-5 are its only brokers)"
    ) in four.scale.message
    # The annotation is there: an UPDATE is judged by the same IDs, and nothing is written.
    assert four.written is None
    assert (four.update.allowed, four.update.reason) == (False, "ZoneLoss")


def test_a_scale_down_naming_no_brokers_gets_the_balanced_choice_on_update() -> None:
    """CROWDED (a3 b1 c2): the highest first would leave a3 b1 c1 at 5 and lose zone-c at 4.
    One at a time from the fullest zone, the highest ID there: 5 -> remove 2 (a3 -> a2);
    4 -> then a2 and c2 are fullest, the highest of 0, 1, 4, 5 is 5: [2, 5], keeping a2 b1 c1."""
    explained = explain_pool(_view(_items(CROWDED)), "kafka", "broker")
    assert explained is not None
    sizes = {s.replicas: s for s in explained.sizes}
    five, four = sizes[5], sizes[4]
    assert five.removed == (5,) and five.scale.allowed
    assert any("strimzi.io/remove-node-ids='[2]'" in w for w in five.scale.warnings)
    assert five.written == (2,) and five.update.allowed
    assert four.removed == (5, 4) and _lost(CROWDED, four.removed) == {C}
    assert not four.scale.allowed and four.scale.reason == "ZoneLoss"
    assert "strimzi.io/remove-node-ids='[2, 5]'" in four.scale.message
    assert four.written == (2, 5) and not _lost(CROWDED, (2, 5)) and four.update.allowed


def test_the_answers_are_the_webhooks_own() -> None:
    """Each size sent through both webhooks as kubectl scale and kubectl patch send it."""
    view = _view(_items(CROWDED))
    explained = explain_pool(view, "kafka", "broker")
    assert explained is not None
    pool = sim.pool_object("broker", replicas=6, node_ids=sorted(CROWDED))
    for size in explained.sizes:
        new, old = sim.scale("broker", old=6, new=size.replicas)
        scaled = sim.admit(view, new, old=old, operation="UPDATE")
        assert (scaled.allowed, scaled.decision.message) == (size.scale.allowed, size.scale.message)
        patched = json.loads(json.dumps(pool))
        patched["spec"]["replicas"] = size.replicas
        answered = sim.admit(view, patched, old=pool, operation="UPDATE")
        assert answered.allowed is size.update.allowed, size.replicas
        assert answered.decision.message == size.update.message
        written = answered.edited["metadata"]["annotations"].get("strimzi.io/remove-node-ids")
        expected = None if size.written is None else "[" + ", ".join(map(str, size.written)) + "]"
        assert written == expected, size.replicas


def test_a_pool_labelled_skip_is_not_judged_by_either_path() -> None:
    """The objectSelector keeps a pool labelled stszone.io/skip=true from both webhooks, and its
    /scale is left alone too: explain names no written annotation and no refusal for it."""
    items = _items(CROWDED)
    pool = next(i for i in items if i.get("kind") == "KafkaNodePool")
    pool["metadata"]["labels"]["stszone.io/skip"] = "true"
    explained = explain_pool(_view(items), "kafka", "broker")
    assert explained is not None
    unjudged = ("not judged: the KafkaNodePool is labelled stszone.io/skip=true",)
    for size in explained.sizes:
        assert size.scale.allowed and size.scale.warnings == unjudged, size.replicas
        assert size.written is None and size.update.allowed, size.replicas


@pytest.mark.parametrize("excluded", [False, True])
def test_a_pool_in_a_namespace_stszone_never_hears_from_has_every_size_allowed(
    excluded: bool,
) -> None:
    """The webhooks' namespaceSelector sends nothing of a namespace not opted in (or of
    kube-system, stszone's own): the API server lets every scale-down of its pools through,
    so explain calls none refused and names no annotation written."""
    items = _items(CROWDED)
    judged = explain_pool(_view(items), "kafka", "broker")
    assert judged is not None and not all(s.scale.allowed for s in judged.sizes)
    if not excluded:
        labels = {"stszone.io/enabled": "false"}
        off = {"apiVersion": "v1", "kind": "Namespace"}
        items.append({**off, "metadata": {"name": "kafka", "labels": labels}})
    view = _view(items)
    explained = explain_pool(view, "kafka", "broker", excluded={"kafka"} if excluded else ())
    assert explained is not None
    why = "never intercepted" if excluded else "namespace kafka is not opted in"
    for size in explained.sizes:
        assert size.scale.allowed and size.update.allowed, size.replicas
        assert why in size.scale.warnings[0] and size.written is None, size.replicas


def test_a_broker_pod_follows_its_data() -> None:
    """Broker 3 not scheduled yet; its claim is bound to a volume in zone-b, while the pool's
    fewest would be zone-a (the others: zone-a holds 0, zone-b 1 and 4, zone-c 2 and 5)."""
    items = _items({i: z for i, z in EVEN.items() if i != 3}, node_ids=sorted(EVEN))
    claim = sim.claim_object("my-cluster", "broker", 3)
    claim["spec"]["volumeName"] = "pv-3"
    items += [
        claim,
        b.pv("pv-3", B, claim=("kafka", "data-my-cluster-broker-3")),
        sim.pod_object("my-cluster", "broker", 3),
    ]
    view = _view(items)
    explained = explain_broker_pod(view, "kafka", "my-cluster-broker-3")
    assert explained is not None and explained.broker is not None
    assert explained.choice is not None
    assert (explained.choice.zone, explained.choice.why, explained.choice.claim) == (
        B,
        "data",
        "data-my-cluster-broker-3",
    )
    assert explained.broker.row.status == "pending"
    assert explained.broker.guard_zone == B
    assert (
        explained.broker.guard_why
        == "not running: the guard counts it in zone-b, where its data is"
    )
    # The webhook pins the same pod there.
    pinned = sim.admit(view, sim.pod_object("my-cluster", "broker", 3), endpoint="mutate")
    assert pinned.edited["metadata"]["annotations"]["stszone.io/zone"] == B


def test_a_broker_without_data_goes_where_its_pool_has_fewest() -> None:
    """Controllers 6 (zone-a) and 7 (zone-b) run; 8 is in status.nodeIds with a claim of no
    zone and no pod yet: zone-c is the only zone with none of the others."""
    items = _items({6: A, 7: B}, pool="controller", node_ids=[6, 7, 8])
    items.append(sim.claim_object("my-cluster", "controller", 8))
    view = _view(items)
    pool = explain_pool(view, "kafka", "controller")
    assert pool is not None
    eight = pool.brokers[-1]
    assert (eight.node_id, eight.zone, eight.zone_by, eight.guard_zone) == (8, C, "balance", None)
    assert dict(pool.counts) == {A: 1, B: 1, C: 1}
    # Removing 8, whose zone is unknown, may empty zone-c: refused.
    two = pool.sizes[0]
    assert (two.replicas, two.removed, two.scale.allowed) == (2, (8,), False)
    assert two.scale.reason == "ZoneUnknown"
    pod = explain_broker_pod(view, "kafka", "my-cluster-controller-8")
    assert pod is not None and pod.choice is not None
    assert (pod.choice.zone, pod.choice.why, pod.recorded) == (C, "fewest", "")


def _file(tmp_path: Path, items: list[sim.JSON]) -> str:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": items}))
    return str(path)


@pytest.mark.parametrize(
    "target",
    ["knp/broker", "kafkanodepool/broker", "kafkanodepools.kafka.strimzi.io/broker", "broker"],
)
def test_cli_names_a_pool_the_way_kubectl_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str
) -> None:
    path = _file(tmp_path, _items(EVEN, annotations={"strimzi.io/remove-node-ids": "[2, 5]"}))
    assert main(["explain", "--cluster", path, target, "-o", "json"]) == 0
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert (report["kind"], report["namespace"], report["name"]) == (
        "KafkaNodePool",
        "kafka",
        "broker",
    )
    assert [m["expectedZone"] for m in report["members"]] == list(EVEN.values())
    assert report["brokersPerZone"] == {A: 2, B: 2, C: 2}
    assert report["removeNodeIds"] == "[2, 5]"
    four = next(s for s in report["sizes"] if s["replicas"] == 4)
    assert (four["removedNodeIds"], four["allowed"], four["reason"]) == ([2, 5], False, "ZoneLoss")


def test_cli_text_of_a_pool_and_a_broker_pod(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _file(tmp_path, _items(EVEN, annotations={"strimzi.io/remove-node-ids": "[2, 5]"}))
    assert main(["explain", "--cluster", path, "knp/broker"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        "KafkaNodePool kafka/broker (cluster my-cluster): zones zone-a,zone-b,zone-c, "
        "replicas 6, node IDs [0, 1, 2, 3, 4, 5]"
    )
    header = "NODE ID  POD  ZONE  SET BY  DATA IN  NODE  RUNS IN  STATUS  GUARD"
    assert lines[1].split() == header.split()
    assert lines[4].split() == f"2 my-cluster-broker-2 {C} data {C} n-{C} {C} ok holds {C}".split()
    assert "  brokers per zone: zone-a 2, zone-b 2, zone-c 2" in lines
    assert "    6 -> 5: removes 2 (zone-c): allowed" in lines
    assert any(
        line.startswith("    6 -> 4: removes 2 (zone-c) and 5 (zone-c): refused (ZoneLoss)")
        for line in lines
    )
    assert main(["explain", "--cluster", path, "pod/my-cluster-broker-4", "-o", "json"]) == 0
    pod: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert pod["workload"]["kind"] == "KafkaNodePool" and pod["member"]["nodeId"] == 4
    assert pod["chosen"] == {"zone": B, "why": "data", "claim": "data-my-cluster-broker-4"}
    assert pod["recordedZone"] == B
    assert main(["explain", "--cluster", path, "my-cluster-broker-4"]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0].startswith(
        "Pod kafka/my-cluster-broker-4: node ID 4 of KafkaNodePool kafka/broker"
    )
    assert text[1] == (
        "  stszone's zone: zone-b (data gravity: its claim data-my-cluster-broker-4 is in zone-b)"
    )
    status, err = main(["explain", "--cluster", path, "knp/nope"]), capsys.readouterr().err
    assert (
        status == 1
        and err == "stszone explain: no kafkanodepool nope in any namespace of the view\n"
    )


def test_kubectl_stszone_explain_passes_a_pool_through(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _file(tmp_path, _items(EVEN))
    assert plugin.main(["explain", "--cluster", path, "-n", "kafka", "knp/broker"], environ={}) == 0
    assert capsys.readouterr().out.startswith("KafkaNodePool kafka/broker (cluster my-cluster)")


EXAMPLE = "deploy/examples/kafka/cluster.yaml"


@pytest.mark.parametrize("target", ["knp/broker", "pod/my-cluster-broker-4"])
def test_docs_kafka_shows_what_explain_prints(
    capsys: pytest.CaptureFixture[str], target: str
) -> None:
    status, printed, shown = explain_and_page("kafka.md", EXAMPLE, target, capsys)
    assert status == 0
    assert printed == shown


def test_the_example_pool_is_crowded_as_its_header_says(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["explain", "--cluster", str(ROOT / EXAMPLE), "knp/broker", "-o", "json"]) == 0
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert [m["expectedZone"] for m in report["members"]] == list(CROWDED.values())
    assert {m["expectedBy"] for m in report["members"]} == {"data"}
    four = next(s for s in report["sizes"] if s["replicas"] == 4)
    assert four["removedNodeIds"] == list(ref.removed_ids(sorted(CROWDED), 4, None))
    assert (four["allowed"], four["update"]["removeNodeIdsWritten"]) == (False, [2, 5])
