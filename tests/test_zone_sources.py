"""Zones, topology keys and annotation values, as the API server will judge what stszone writes.

``--zones`` lists values of the default topology key: a set with its own topology key gets the
values nodes carry under it. A listed zone with no node is a warning (a node pool at zero),
never a denial. Annotation values are checked whole-string on StatefulSet CREATE and UPDATE
(scheduler names and storage classes are DNS-1123 subdomains, label keys qualified names, zones
label values), not left for the API server to refuse on every pod.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests import builders as b
from tests.conftest import ServeFactory
from webhook.cli import main
from webhook.cluster.clusterfile import store_from_objects
from webhook.config import Defaults
from webhook.model.annotations import parse_annotations
from webhook.model.store import Store
from webhook.wire import review
from webhook.wire.patch import apply

RACK = "example.io/rack"
RACKS = [b.node("n1", "zone-a", labels={RACK: "r2"}), b.node("n2", "zone-b", labels={RACK: "r1"})]


def chain(obj: dict[str, Any], store: Store, **kw: Any) -> review.Answer:
    """What the API server makes of both webhooks for ``obj``."""
    return review.chain(review.from_dict(b.review(obj, **kw)), store=store, defaults=Defaults())


def zones_written(outcome: review.Answer, sts: dict[str, Any]) -> str | None:
    annotations: dict[str, str] = apply(sts, outcome.patch)["metadata"]["annotations"]
    return annotations.get("stszone.io/zones")


# --- --zones and topology keys -----------------------------------------------------------------


def test_zones_flag_is_for_the_default_key_only() -> None:
    """--zones zone-a,zone-b,zone-c; a set keyed on example.io/rack gets the racks nodes carry
    (sorted), with a warning saying where they came from; a default-keyed set gets --zones."""
    store = store_from_objects(RACKS, zones=("zone-a", "zone-b", "zone-c"))
    racked = b.statefulset(annotations={"stszone.io/topology-key": RACK})
    outcome = chain(racked, store)
    assert outcome.allowed and zones_written(outcome, racked) == "r1,r2"
    assert outcome.warnings[0] == (
        "db: stszone.io/zones from the nodes' example.io/rack values (--zones is for "
        "topology.kubernetes.io/zone)"
    )
    plain = b.statefulset(annotations={})
    assert zones_written(chain(plain, store), plain) == "zone-a,zone-b,zone-c"


def test_a_key_no_node_carries_gives_a_warning_and_no_list() -> None:
    """No node carries example.io/rack: no list is written (stszone never pins pods to values no
    node carries without saying so), and the pods are refused until one does."""
    store = store_from_objects([b.node("n1", "zone-a")], zones=("zone-a", "zone-b"))
    racked = b.statefulset(annotations={"stszone.io/topology-key": RACK})
    outcome = chain(racked, store)
    assert outcome.allowed and zones_written(outcome, racked) is None
    assert (
        "db: no node carries example.io/rack yet, so stszone.io/zones is left unset; set it"
        in outcome.warnings
    )
    pod_store = store_from_objects(
        [b.node("n1", "zone-a"), b.statefulset(annotations={"stszone.io/topology-key": RACK})],
        zones=("zone-a", "zone-b"),
    )
    pod = chain(b.sts_pod(ordinal=0), pod_store)
    assert (pod.allowed, pod.reason) == (False, "NoZones")


def test_pods_of_a_set_with_its_own_key_and_no_list_use_the_nodes_values() -> None:
    """A set keyed on racks without a list: its pods are pinned to rack values nodes carry."""
    sts = b.statefulset(annotations={"stszone.io/topology-key": RACK})
    store = store_from_objects([*RACKS, sts], zones=("zone-a", "zone-b"))
    outcome = chain(b.sts_pod(ordinal=1), store)
    assert outcome.allowed and outcome.edited is not None
    assert outcome.edited["metadata"]["annotations"]["stszone.io/zone"] == "r2"


@pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
def test_a_listed_zone_without_nodes_is_a_warning_not_a_denial(operation: str) -> None:
    """zone-c has no node now (a node pool scaled to zero): the set is allowed, warned."""
    nodes = [b.node("n1", "zone-a"), b.node("n2", "zone-b")]
    sts = b.statefulset(annotations={"stszone.io/zones": "zone-a,zone-b,zone-c"})
    old = sts if operation == "UPDATE" else None
    outcome = chain(sts, store_from_objects(nodes), operation=operation, old=old)
    assert outcome.allowed
    assert outcome.warnings == (
        "db: no node in zone(s) zone-c (topology.kubernetes.io/zone) yet; its pods there wait "
        "for one",
    )


def test_many_listed_zones_without_nodes_are_summarised() -> None:
    """Three of five listed zones have no node: the warning names two and counts the third,
    so it stays short whatever the list."""
    nodes = [b.node("n1", "zone-a"), b.node("n2", "zone-b")]
    sts = b.statefulset(replicas=5, annotations={"stszone.io/zones": "zone-a,zone-b,zone-c,zone-d,zone-e"})  # fmt: skip
    outcome = chain(sts, store_from_objects(nodes))
    assert outcome.warnings == (
        "db: no node in zone(s) zone-c, zone-d and 1 more (topology.kubernetes.io/zone) yet; its "
        "pods there wait for one",
    )


@pytest.mark.parametrize(
    ("replicas", "start", "with_nodes", "waiting"),
    [
        (1, None, "ab", ""),
        (2, 4, "ab", ""),
        (2, None, "ac", "zone-b"),
        (1, 7, "bc", "zone-a"),
    ],
    ids=["one-replica", "two-from-start-4", "second-zone-empty", "first-zone-empty-from-7"],
)
def test_only_a_zone_a_member_goes_to_is_said_to_make_pods_wait(
    replicas: int, start: int | None, with_nodes: str, waiting: str
) -> None:
    """db over zone-a,zone-b,zone-c, nodes in only two of them. Ordinal i of start s goes to
    zones[(i - s) mod 3], so fewer than 3 replicas fill the first zones of the list, whatever
    the start: a zone without nodes that no member goes to keeps no pod waiting and is not
    named; one a member goes to is. The warning of a zone left empty stays."""
    nodes = [b.node(f"n-{z}", f"zone-{z}") for z in with_nodes]
    annotations = {"stszone.io/zones": "zone-a,zone-b,zone-c"}
    sts = b.statefulset(replicas=replicas, start=start, annotations=annotations)
    outcome = chain(sts, store_from_objects(nodes))
    thin = (
        f"db: {replicas} replica(s) for 3 zones leaves a zone empty; 3 or more survive the loss "
        "of any zone"
    )
    wait = (
        f"db: no node in zone(s) {waiting} (topology.kubernetes.io/zone) yet; its pods there "
        "wait for one"
    )
    assert outcome.warnings == ((thin, wait) if waiting else (thin,))


# --- annotation values, whole-string ---------------------------------------------------------


def test_only_spaces_around_zone_entries_are_dropped() -> None:
    """Zone names keep every other character, including an X at either end."""
    declared = parse_annotations({"stszone.io/zones": " X-zone , zone-X,zone-y "})
    assert declared.zones == ("X-zone", "zone-X", "zone-y")


@pytest.mark.parametrize(
    ("annotations", "says"),
    [
        ({"stszone.io/zones": "zone-a,zone-b,zone-c\n"}, "invalid zone name(s) 'zone-c\\n'"),
        (
            {
                "stszone.io/zones": "zone-a,zone_b_",
            },
            "invalid zone name(s) 'zone_b_'",
        ),
        ({"stszone.io/topology-key": "topology.kubernetes.io/zone\n"}, "is not a node label key"),
        ({"stszone.io/topology-key": " topology.kubernetes.io/zone"}, "is not a node label key"),
        ({"stszone.io/mode": "affinity\n"}, "is not a mode"),
        ({"stszone.io/scheduler-name": "stszone-scheduler\n"}, "is not a valid scheduler name"),
        ({"stszone.io/scheduler-name": "stszone..scheduler"}, "is not a valid scheduler name"),
        ({"stszone.io/scheduler-name": "-stszone"}, "is not a valid scheduler name"),
        ({"stszone.io/scheduler-name": "s" * 254}, "is not a valid scheduler name"),
        (
            {"stszone.io/mode": "node-ordinal", "stszone.io/node-label": "example.io/node\n"},
            "is not a node label key",
        ),
        (
            {"stszone.io/mode": "node-ordinal", "stszone.io/node-label": "a/b/node"},
            "is not a node label key",
        ),
        (
            {
                "stszone.io/zones": "zone-a,Zone_B",
                "stszone.io/storage-class-template": "ssd-{zone}",
            },
            "for every zone: Zone_B -> 'ssd-zone_b'",
        ),
        (
            {"stszone.io/zones": "a,b", "stszone.io/storage-class-template": "ssd-{zone}\n"},
            "for every zone: a -> 'ssd-a\\n', b -> 'ssd-b\\n'",
        ),
    ],
)
@pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
def test_values_the_api_server_would_refuse_are_refused_on_the_statefulset(
    annotations: dict[str, str], says: str, operation: str
) -> None:
    """Refused with 422 on the StatefulSet, whole-string (a YAML `|` block's trailing newline
    included), rather than by the API server on every pod stszone writes them into."""
    sts = b.statefulset(annotations=annotations)
    old = b.statefulset() if operation == "UPDATE" else None
    request = review.from_dict(b.review(sts, operation=operation, old=old))
    store = store_from_objects([], zones=("a", "b", "c"))
    outcome = review.answer("validate", request, store=store, defaults=Defaults())
    assert (outcome.allowed, outcome.code, outcome.reason) == (False, 422, "Invalid")
    assert says in outcome.message, outcome.message


def test_the_template_is_checked_against_the_servers_zones_without_a_list() -> None:
    """No stszone.io/zones: the template is filled in for the server's zones (--zones)."""
    sts = b.statefulset(annotations={"stszone.io/storage-class-template": "ssd-{zone}"})
    store = store_from_objects([], zones=("zone-a", "Zone_B"))
    outcome = review.answer(
        "validate", review.from_dict(b.review(sts)), store=store, defaults=Defaults()
    )
    assert not outcome.allowed and "Zone_B -> 'ssd-zone_b'" in outcome.message
    assert "(the server's zones)" in outcome.message


@pytest.mark.parametrize(
    "annotations",
    [
        {"stszone.io/zones": "zone-a, zone-b, zone-c"},  # spaces after commas stay a convenience
        {"stszone.io/scheduler-name": "sched.example.io"},
        {"stszone.io/storage-class-template": "ssd.{zone}", "stszone.io/zones": "us-east-1a"},
        {"stszone.io/mode": "node-ordinal", "stszone.io/node-label": "example.io/node"},
    ],
)
def test_good_values_pass(annotations: dict[str, str]) -> None:
    """Well-formed values, including dotted names and a prefixed label key."""
    sts = b.statefulset(annotations=annotations)
    store = store_from_objects([], zones=("a", "b", "c"))
    outcome = review.answer(
        "validate", review.from_dict(b.review(sts)), store=store, defaults=Defaults()
    )
    assert outcome.allowed, outcome.message


def test_stszone_review_refuses_a_trailing_newline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The recorded StatefulSet UPDATE (024) with a scheduler name pasted from a `|` block."""
    body = b.fixture_review("024-StatefulSet-UPDATE")
    body["request"]["object"]["metadata"]["annotations"] = {
        "stszone.io/mode": "scheduler",
        "stszone.io/scheduler-name": "stszone-scheduler\n",
    }
    path = tmp_path / "review.json"
    path.write_text(json.dumps(body))
    assert main(["review", "--zones", "a,b,c", "--endpoint", "validate", str(path)]) == 0
    status = json.loads(capsys.readouterr().out)["response"]["status"]
    assert status["reason"] == "Invalid"
    assert "'stszone-scheduler\\n' is not a valid scheduler name" in status["message"]


async def test_the_extender_places_by_the_sets_own_key(serve: ServeFactory) -> None:
    """scheduler mode, keyed on racks, no list, --zones given: db-1 belongs on rack r2 (the
    nodes' values r1, r2), so the filter keeps n1 only."""
    sts = b.statefulset(
        annotations={"stszone.io/topology-key": RACK, "stszone.io/mode": "scheduler"}
    )
    served = await serve(store=store_from_objects([*RACKS, sts], zones=("zone-a", "zone-b")))
    args = {"Pod": b.sts_pod(ordinal=1), "Nodes": None, "NodeNames": ["n1", "n2"]}
    status, result = await served.post_json("/extender/filter", args)
    assert status == 200 and result["NodeNames"] == ["n1"], result


def test_node_ordinal_mode_records_the_pinned_nodes_value_of_the_sets_topology_key() -> None:
    """In node-ordinal mode with ``stszone.io/topology-key: example.io/rack``, the node labelled
    2 is in rack r1 (and zone-b by the default key): the pod's zone is r1."""
    annotations = {
        "stszone.io/mode": "node-ordinal",
        "stszone.io/node-label": "example.io/node",
        "stszone.io/topology-key": RACK,
        "stszone.io/zones": "r1,r2",
    }
    node = b.node("n2", "zone-b", labels={RACK: "r1", "example.io/node": "2"})
    store = store_from_objects([b.statefulset(annotations=annotations), node])
    pod = b.sts_pod(ordinal=2)
    outcome = review.answer(
        "mutate", review.from_dict(b.review(pod)), store=store, defaults=Defaults()
    )
    assert outcome.allowed and not outcome.warnings
    assert apply(pod, outcome.patch)["metadata"]["annotations"]["stszone.io/zone"] == "r1"
