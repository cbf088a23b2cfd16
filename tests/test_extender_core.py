"""The extender's pure core: properties over random clusters, and the storage-health rules."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests import builders as b
from webhook.cli import build_parser, settings_from
from webhook.cluster.clusterfile import store_from_objects
from webhook.config import Defaults, Settings
from webhook.errors import BadObject, Denied
from webhook.model.store import Store
from webhook.model.tables import TABLES
from webhook.rules import extender
from webhook.wire import extender as extender_wire

LABEL = "storage.example.io/unhealthy"
ZONES = ("zone-a", "zone-b", "zone-c")
DEFAULTS = Defaults(
    storage_unhealthy_condition="DiskFailing", storage_unhealthy_label=(LABEL, "true")
)


def node(name: str, zone: str | None, label: str | None, failing: bool) -> dict[str, Any]:
    """A full Node (as in ExtenderArgs.Nodes) with an optional zone, label and condition."""
    obj = b.node(name, zone, labels={LABEL: label} if label is not None else {})
    obj["status"] = {"conditions": [{"type": "DiskFailing", "status": str(failing)}]}
    return obj


nodes_st = st.lists(
    st.tuples(
        st.sampled_from((*ZONES, None)), st.sampled_from((None, "true", "false")), st.booleans()
    ),
    max_size=8,
).map(lambda specs: [node(f"n{i}", *spec) for i, spec in enumerate(specs)])


def parse(pod: dict[str, Any], nodes: list[dict[str, Any]], *, cache: bool, store: Store) -> Any:
    if cache:
        body = {"Pod": pod, "Nodes": None, "NodeNames": [n["metadata"]["name"] for n in nodes]}
    else:
        body = {"Pod": pod, "Nodes": {"items": nodes}, "NodeNames": None}
    return extender_wire.parse_args(json.dumps(body), store=store)


@given(nodes=nodes_st, zone=st.sampled_from(ZONES), cache=st.booleans())
def test_filter_partitions_and_agrees_with_prioritize(
    nodes: list[dict[str, Any]], zone: str, cache: bool
) -> None:
    """Kept and failed split the candidates; kept = in zone and healthy = the top score."""
    # Conditions reach the view only as full nodes (a cluster file), so give it full nodes.
    store = store_from_objects(nodes)
    args = parse(b.sts_pod(annotations={"stszone.io/zone": zone}), nodes, cache=cache, store=store)
    result = extender_wire.filter_result(
        args, extender.filter_nodes(args.pod, args.candidates, store=store, defaults=DEFAULTS)
    )
    names = [n["metadata"]["name"] for n in nodes]
    if cache:
        kept = result["NodeNames"]
        assert kept is not None  # exactly one of NodeNames and Nodes is set
    else:
        assert result["Nodes"] is not None
        kept = [n["metadata"]["name"] for n in result["Nodes"]["items"]]
    failed = result["FailedAndUnresolvableNodes"]
    assert kept == [n for n in names if n not in failed], "kept keeps the request's order"
    assert set(kept) | set(failed) == set(names) and result["FailedNodes"] == {}
    for n in nodes:
        labels, conditions = n["metadata"]["labels"], n["status"]["conditions"]
        fine = (
            labels.get("topology.kubernetes.io/zone") == zone
            and labels.get(LABEL) != "true"
            and conditions[0]["status"] != "True"
        )
        assert (n["metadata"]["name"] in kept) == fine
        assert failed.get(n["metadata"]["name"], "node(s)").startswith("node(s)")
    scores = extender_wire.host_priorities(
        extender.prioritize(args.pod, args.candidates, store=store, defaults=DEFAULTS)
    )
    assert [s["Host"] for s in scores] == names
    # kube-scheduler decodes Score as an int64: 5.0 would fail to decode.
    assert all(type(s["Score"]) is int for s in scores)
    assert all(0 <= s["Score"] <= extender.MAX_SCORE for s in scores)
    assert {s["Host"] for s in scores if s["Score"] == extender.MAX_SCORE} == set(kept)


@pytest.mark.parametrize(
    ("flag", "value", "unhealthy"),
    [
        (LABEL, "true", True),
        (LABEL, "false", True),  # KEY alone: any value marks it
        (LABEL, "", True),
        (f"{LABEL}=true", "true", True),
        (f"{LABEL}=true", "false", False),
        (f"{LABEL}=", "", True),
        (f"{LABEL}=true", None, False),
    ],
)
def test_label_rule_from_the_command_line(flag: str, value: str | None, unhealthy: bool) -> None:
    """--storage-unhealthy-label KEY matches any value, KEY=VALUE only that value."""
    defaults = Settings(storage_unhealthy_label=flag).defaults()
    labels = {LABEL: value} if value is not None else {}
    candidate = extender.Candidate(name="n", labels=labels, true_conditions=frozenset())
    assert (extender.storage_problem(candidate, defaults=defaults) is not None) == unhealthy


def test_nothing_configured_means_every_node_is_healthy() -> None:
    """No flags: storage is never the reason, whatever the node says."""
    candidate = extender.Candidate(
        name="n", labels={LABEL: "true"}, true_conditions=frozenset({"DiskFailing"})
    )
    assert extender.storage_problem(candidate, defaults=Defaults()) is None


def test_serve_flags_reach_the_engine() -> None:
    """`stszone serve --storage-unhealthy-*` ends up in the Defaults the extender reads."""
    argv = [
        "serve",
        "--storage-unhealthy-condition",
        "DiskFailing",
        "--storage-unhealthy-label",
        f"{LABEL}=true",
    ]
    defaults = settings_from(build_parser().parse_args(argv)).defaults()
    assert defaults.storage_unhealthy_condition == "DiskFailing"
    assert defaults.storage_unhealthy_label == (LABEL, "true")
    plain = settings_from(build_parser().parse_args(["serve"])).defaults()
    assert plain.storage_unhealthy_condition is None and plain.storage_unhealthy_label is None


@pytest.mark.parametrize(
    "argv",
    [
        ["--storage-unhealthy-label", "not a key"],
        ["--storage-unhealthy-label", f"{LABEL}=not a value"],
        ["--storage-unhealthy-condition", "Disk Failing"],
    ],
)
def test_malformed_storage_flags_are_refused(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A typo is a usage error (exit 2) with an example, not a rule that never matches."""
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["serve", *argv])
    assert exited.value.code == 2
    assert "e.g. --storage-unhealthy-" in capsys.readouterr().err


# --- where the extender wants a pod: extender.target ------------------------------------------

ZONE_KEY = "topology.kubernetes.io/zone"
STORE_ABC = [b.node(f"n{z}", z) for z in ZONES]


def standalone(annotations: dict[str, Any], *, name: str | None = "p") -> dict[str, Any]:
    """A pod no StatefulSet owns, with ``annotations`` (and no name: generateName only)."""
    pod = b.sts_pod(annotations=annotations, claims=())
    del pod["metadata"]["ownerReferences"]
    if name is None:
        del pod["metadata"]["name"]
    else:
        pod["metadata"]["name"] = name
    return pod


@pytest.mark.parametrize(("name", "shown"), [("p", "p"), (None, "(unnamed)")])
def test_a_pod_of_no_set_goes_to_its_annotated_zone(name: str | None, shown: str) -> None:
    """stszone.io/zone alone decides, on the default key, with no volumes to weigh."""
    pod = standalone({"stszone.io/zone": "zone-b"}, name=name)
    goal = extender.target(pod, store=store_from_objects(STORE_ABC))
    assert goal == extender.Goal(shown, ZONE_KEY, "zone-b", frozenset())


def test_a_pod_of_no_set_with_malformed_annotations_is_denied() -> None:
    pod = standalone({"stszone.io/zone": "zone-b", "stszone.io/mode": "x"})
    with pytest.raises(Denied, match=r"^pod ns/p has malformed stszone annotations: "):
        extender.target(pod, store=store_from_objects(STORE_ABC))


def test_annotations_that_are_not_strings_name_their_field() -> None:
    pod = standalone({"stszone.io/zone": "zone-b"})
    pod["metadata"]["annotations"]["count"] = 3
    with pytest.raises(BadObject, match=r"^metadata\.annotations\.count must be a str"):
        extender.target(pod, store=store_from_objects(STORE_ABC))


def test_a_set_pod_without_an_ordinal_is_denied() -> None:
    """Neither the pod-index label nor a -N name: the rule cannot place it."""
    pod = b.sts_pod(index_label=False)
    pod["metadata"]["name"] = "db-x"
    store = store_from_objects([*STORE_ABC, b.statefulset(annotations={"stszone.io/zones": "a"})])
    with pytest.raises(Denied, match=r"^pod ns/db-x of StatefulSet db has no ordinal$"):
        extender.target(pod, store=store)


def test_a_pod_with_several_volumes_may_go_only_where_all_of_them_are() -> None:
    """data-db-0 is on a disk of zone-a or zone-b, logs-db-0 of zone-b or zone-c; scratch-db-0
    is unbound and counts for nothing: zone-b is where both can attach."""
    sts = b.statefulset(annotations={"stszone.io/zones": "zone-a,zone-b,zone-c"})
    store = store_from_objects(
        [*STORE_ABC, sts,
         b.pvc("data-db-0", volume="pv-1"), b.pv("pv-1", "zone-a", "zone-b"),
         b.pvc("logs-db-0", volume="pv-2"), b.pv("pv-2", "zone-b", "zone-c"),
         b.pvc("scratch-db-0")]
    )  # fmt: skip
    goal = extender.target(b.sts_pod(claims=("data", "logs", "scratch")), store=store)
    assert goal is not None
    assert (goal.pod, goal.topology_key, goal.zone) == ("db-0", ZONE_KEY, "zone-b")
    assert goal.volume_zones == {"zone-b"}
    alone = extender.target(b.sts_pod(claims=("logs", "scratch")), store=store)
    assert alone is not None and alone.volume_zones == {"zone-b", "zone-c"}


def test_a_pod_the_filter_refuses_is_scored_on_storage_alone() -> None:
    """A set pod without an ordinal: no zone to prefer, so every zone's nodes score half for
    it and healthy storage adds the other half; the filter reports the refusal."""
    nodes = [node("n1", "zone-a", None, False), node("n2", "zone-b", "true", False)]
    store = store_from_objects([*nodes, b.statefulset(annotations={"stszone.io/zones": "zone-a"})])
    pod = b.sts_pod(index_label=False)
    pod["metadata"]["name"] = "db-x"
    args = parse(pod, nodes, cache=True, store=store)
    assert extender_wire.host_priorities(
        extender.prioritize(args.pod, args.candidates, store=store, defaults=DEFAULTS)
    ) == [
        {"Host": "n1", "Score": 10},
        {"Host": "n2", "Score": 5},
    ]


def test_a_node_failing_both_storage_checks_names_both() -> None:
    candidate = extender.Candidate(
        name="n", labels={LABEL: "true"}, true_conditions=frozenset({"DiskFailing"})
    )
    assert extender.storage_problem(candidate, defaults=DEFAULTS) == (
        "node(s) with unhealthy storage (condition DiskFailing is True, label "
        "storage.example.io/unhealthy=true)"
    )


def test_each_reason_a_node_fails_is_given() -> None:
    """For db-0 (zone-a): nb is in zone-b with failing storage (two reasons, joined), nx is a
    name the view does not hold (its zone is unknown), na passes."""
    nodes = [node("na", "zone-a", None, False), node("nb", "zone-b", "true", False)]
    store = store_from_objects(nodes)
    pod = b.sts_pod(annotations={"stszone.io/zone": "zone-a"})
    body = {"Pod": pod, "Nodes": None, "NodeNames": ["na", "nb", "nx"]}
    args = extender_wire.parse_args(json.dumps(body), store=store)
    result = extender_wire.filter_result(
        args, extender.filter_nodes(args.pod, args.candidates, store=store, defaults=DEFAULTS)
    )
    assert result["NodeNames"] == ["na"]
    assert result["FailedAndUnresolvableNodes"] == {
        "nb": "node(s) in zone zone-b, stszone places db-0 in zone zone-a; node(s) with "
        "unhealthy storage (label storage.example.io/unhealthy=true)",
        "nx": "node(s) not in stszone's node cache yet, zone unknown",
    }


def namespace(name: str, *, enabled: bool) -> dict[str, Any]:
    labels = {"stszone.io/enabled": "true"} if enabled else {}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


@pytest.mark.parametrize(
    ("where", "annotations"),
    [
        ("other", {}),  # not opted in: the webhook never saw the set or its pods
        ("other", {"stszone.io/zone": "zone-a"}),
        ("kube-system", {}),  # never intercepted, even labelled (as here)
        ("stszone-system", {}),
    ],
    ids=["not-opted-in", "not-opted-in-annotated", "kube-system", "own-namespace"],
)
@pytest.mark.parametrize("cache", [False, True], ids=["full-nodes", "node-names"])
def test_pods_of_namespaces_stszone_leaves_alone_pass_unfiltered(
    where: str, annotations: dict[str, str], cache: bool
) -> None:
    """With the extender in the default scheduler's profile every pod of the cluster comes by.
    A StatefulSet pod of a namespace stszone does not intercept is not held to the rule's zone
    (db-1 would be zone-b) nor to an annotation: every node passes, none is scored down."""
    nodes = [node(f"n-{z}", z, None, False) for z in ZONES]
    store = store_from_objects(
        [*nodes, namespace("ns", enabled=True), namespace(where, enabled=where != "other"),
         b.statefulset(namespace=where), b.statefulset()],
        zones=ZONES,
    )  # fmt: skip
    pod = b.sts_pod(ordinal=1, namespace=where, annotations=annotations)
    args = parse(pod, nodes, cache=cache, store=store)
    filtered = extender.filter_nodes(args.pod, args.candidates, store=store, defaults=DEFAULTS)
    assert filtered == extender.Filtered(("n-zone-a", "n-zone-b", "n-zone-c"))
    scores = extender.prioritize(args.pod, args.candidates, store=store, defaults=DEFAULTS)
    assert {score for _, score in scores} == {extender.MAX_SCORE}
    # The same set in the opted-in namespace is held to zone-b.
    opted = b.sts_pod(ordinal=1, namespace="ns")
    held = extender.filter_nodes(opted, args.candidates, store=store, defaults=DEFAULTS)
    assert held.passed == ("n-zone-b",)


def test_pods_of_advanced_statefulsets_pass_unfiltered_with_the_kind_turned_off() -> None:
    """``serve --no-kruise`` leaves Advanced StatefulSets out: not read, not judged. Their
    pods that come by (the extender in the default scheduler's profile) pass: the live view
    never holds their set, and waiting for it would keep them Pending for good. n-zone-c's
    storage is unhealthy: left alone, they are not steered off it either."""
    nodes = [node(f"n-{z}", z, None, z == "zone-c") for z in ZONES]
    objects = [*nodes, namespace("ns", enabled=True)]
    listed = store_from_objects(objects)
    store = Store(live=True)
    for table in TABLES:  # every table listed; kruisesets empty, as a kind turned off leaves it
        store.replace(table, listed.table(table).values())
    pod = b.sts_pod(ordinal=1)
    pod["metadata"]["ownerReferences"][0]["apiVersion"] = "apps.kruise.io/v1beta1"
    args = parse(pod, objects[:3], cache=True, store=store)
    off = Defaults(kruise=False, storage_unhealthy_condition="DiskFailing")
    filtered = extender.filter_nodes(args.pod, args.candidates, store=store, defaults=off)
    assert filtered == extender.Filtered(("n-zone-a", "n-zone-b", "n-zone-c"))
    scores = extender.prioritize(args.pod, args.candidates, store=store, defaults=off)
    assert {score for _, score in scores} == {extender.MAX_SCORE}
    on = extender.filter_nodes(args.pod, args.candidates, store=store, defaults=Defaults())
    assert "Advanced StatefulSet ns/db has not reached stszone's view" in on.error
