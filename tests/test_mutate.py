"""Mutations through the engine: the patch, applied to the original, gives the right object."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import builders as b
from webhook.cluster.clusterfile import store_from_objects
from webhook.config import Defaults
from webhook.model.store import Store
from webhook.model.tables import TABLES
from webhook.rules.admission import Endpoint
from webhook.wire import review
from webhook.wire.patch import apply

ZONE_KEY = "topology.kubernetes.io/zone"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
#: A nodeSelector asking for zone-b, in the pod and (where the refusal names it) its template.
ASKS_B = {ZONE_KEY: "zone-b"}
DEFAULTS = Defaults()


def run(obj: dict[str, Any], store: Store, **kw: Any) -> tuple[review.Answer, dict[str, Any]]:
    """Send ``obj`` through /mutate; return the outcome and the patched object."""
    request = review.from_dict(b.review(obj, **kw))
    outcome = review.answer("mutate", request, store=store, defaults=DEFAULTS)
    return outcome, apply(obj, outcome.patch)


def reinvoke(obj: dict[str, Any], store: Store) -> list[dict[str, Any]]:
    """The patch a second invocation over the already-mutated object produces."""
    return run(obj, store)[0].patch


def node_terms(pod: dict[str, Any]) -> list[dict[str, Any]]:
    aff = pod["spec"]["affinity"]["nodeAffinity"]
    terms: list[dict[str, Any]] = aff["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    return terms


ZONES_ABC = store_from_objects([], zones=("zone-a", "zone-b", "zone-c"))


@pytest.mark.parametrize(
    ("ordinal", "zone"),
    [(0, "zone-a"), (1, "zone-b"), (2, "zone-c"), (3, "zone-a"), (13, "zone-b")],
)
def test_affinity_mode_pins_ordinal_to_its_zone(ordinal: int, zone: str) -> None:
    """No existing affinity: one new term with the zone requirement, and the zone annotation."""
    pod = b.sts_pod(ordinal=ordinal)
    outcome, mutated = run(pod, ZONES_ABC)
    assert outcome.allowed
    assert node_terms(mutated) == [
        {"matchExpressions": [{"key": ZONE_KEY, "operator": "In", "values": [zone]}]}
    ]
    assert mutated["metadata"]["annotations"]["stszone.io/zone"] == zone
    assert reinvoke(mutated, ZONES_ABC) == []


def test_requirement_is_anded_into_every_term_and_the_rest_is_untouched() -> None:
    """nodeSelectorTerms are ORed: the zone goes into each of them; preferred/tolerations stay."""
    aff = b.zone_affinity([("disk", "In", ["ssd"])], [("gpu", "Exists", [])])
    aff["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] = [
        {
            "weight": 5,
            "preference": {
                "matchExpressions": [{"key": ZONE_KEY, "operator": "In", "values": ["zone-c"]}]
            },
        }
    ]
    pod = b.sts_pod(ordinal=1, affinity=aff)
    pod["spec"]["topologySpreadConstraints"] = [
        {
            "maxSkew": 1,
            "topologyKey": ZONE_KEY,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {},
        }
    ]
    original = copy.deepcopy(pod)
    _, mutated = run(pod, ZONES_ABC)
    want = {"key": ZONE_KEY, "operator": "In", "values": ["zone-b"]}
    terms = node_terms(mutated)
    assert len(terms) == 2 and all(t["matchExpressions"][-1] == want for t in terms)
    assert terms[0]["matchExpressions"][0] == {"key": "disk", "operator": "In", "values": ["ssd"]}
    assert (
        mutated["spec"]["affinity"]["nodeAffinity"][
            "preferredDuringSchedulingIgnoredDuringExecution"
        ]
        == aff["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    )
    for field in ("tolerations", "topologySpreadConstraints", "containers", "volumes"):
        assert mutated["spec"][field] == original["spec"][field]
    assert pod == original, "the engine must not modify the request object"
    assert reinvoke(mutated, ZONES_ABC) == []


def test_match_fields_only_term_gets_the_requirement() -> None:
    """A term with only matchFields (node name) is ANDed with the zone too."""
    aff = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
                ]
            }
        }
    }
    _, mutated = run(b.sts_pod(ordinal=2, affinity=aff), ZONES_ABC)
    term = node_terms(mutated)[0]
    assert (
        term["matchFields"]
        == aff["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"
        ][0]["matchFields"]
    )
    assert term["matchExpressions"] == [{"key": ZONE_KEY, "operator": "In", "values": ["zone-c"]}]


def test_existing_compatible_zone_requirement_is_kept() -> None:
    """A pod already allowing zone-a or zone-b keeps that and gains the exact zone."""
    pod = b.sts_pod(ordinal=0, affinity=b.zone_affinity([(ZONE_KEY, "In", ["zone-a", "zone-b"])]))
    outcome, mutated = run(pod, ZONES_ABC)
    assert outcome.allowed
    assert node_terms(mutated)[0]["matchExpressions"] == [
        {"key": ZONE_KEY, "operator": "In", "values": ["zone-a", "zone-b"]},
        {"key": ZONE_KEY, "operator": "In", "values": ["zone-a"]},
    ]


@pytest.mark.parametrize(
    ("affinity", "node_selector", "named"),
    [
        (b.zone_affinity([(ZONE_KEY, "In", ["zone-b"])]), None, "zone-b"),
        (b.zone_affinity([(ZONE_KEY, "NotIn", ["zone-a"])]), None, "NotIn [zone-a]"),
        (
            b.zone_affinity([(ZONE_KEY, "In", ["zone-b"])], [(ZONE_KEY, "DoesNotExist", [])]),
            None,
            "DoesNotExist",
        ),
        (None, {ZONE_KEY: "zone-c"}, "nodeSelector topology.kubernetes.io/zone=zone-c"),
    ],
)
def test_own_constraint_excluding_the_zone_is_denied_naming_both(
    affinity: dict[str, Any] | None, node_selector: dict[str, str] | None, named: str
) -> None:
    """Ordinal 0 belongs in zone-a; a pod that rules zone-a out is denied, naming both."""
    outcome, _ = run(
        b.sts_pod(ordinal=0, affinity=affinity, node_selector=node_selector), ZONES_ABC
    )
    assert not outcome.allowed and outcome.code == 403
    assert named in outcome.message and "zone-a" in outcome.message


@pytest.mark.parametrize(
    "required", [{"nodeSelectorTerms": []}, {}], ids=["empty-list", "no-terms"]
)
def test_a_required_affinity_with_no_term_is_refused_as_the_api_server_refuses_it(
    required: dict[str, Any],
) -> None:
    """Kubernetes' ValidateNodeSelector refuses a NodeSelector with no term ("Required value:
    must have at least one node selector term"); the mutating webhook runs before that check,
    and refuses it in the same words, not as a constraint that matches no node."""
    pod = b.sts_pod(ordinal=0, affinity={"nodeAffinity": {REQUIRED: required}})
    outcome, _ = run(pod, ZONES_ABC)
    assert (outcome.allowed, outcome.code) == (False, 400)
    assert (
        f"spec.affinity.nodeAffinity.{REQUIRED}.nodeSelectorTerms: Required value: must have "
        "at least one node selector term"
    ) in outcome.message, outcome.message
    assert "matches no node" not in outcome.message
    # A term with nothing in it is valid, and does match no node.
    empty_term = b.sts_pod(
        ordinal=0, affinity={"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [{}]}}}
    )
    outcome, _ = run(empty_term, ZONES_ABC)
    assert not outcome.allowed and "an empty term (it matches no node)" in outcome.message


@pytest.mark.parametrize(
    ("objects", "zone", "why"),
    [
        ([], "zone-a", "the zone stszone chose for ordinal 0"),
        ([b.pvc("data-db-0", volume="pv-c"), b.pv("pv-c", "zone-c")], "zone-c", "the zone of its volume pv-c"),
    ],
    ids=["rule", "volume"],
)  # fmt: skip
def test_a_refusal_says_where_the_excluded_zone_comes_from(
    objects: list[dict[str, Any]], zone: str, why: str
) -> None:
    """The rule's zone, or the zone its bound volume pins it to: the user fixes one or the
    other (the pod's nodeSelector here asks for zone-b)."""
    store = store_from_objects(objects, zones=("zone-a", "zone-b", "zone-c"))
    outcome, _ = run(b.sts_pod(ordinal=0, node_selector={ZONE_KEY: "zone-b"}), store)
    assert not outcome.allowed
    assert f"which excludes {ZONE_KEY}={zone}, {why}; remove that constraint" in outcome.message


@pytest.mark.parametrize("volume_zone", ["zone-a", "zone-c"], ids=["rule zone", "elsewhere"])
def test_a_pod_held_by_its_data_is_not_told_to_change_the_zone_list(volume_zone: str) -> None:
    """db-0's volume is in zone-a (its rule zone) or zone-c, and its nodeSelector asks for
    zone-b. A zone list that puts ordinal 0 in zone-b changes nothing (the pod follows its
    data), so the refusal says what does: a new claim, which deletes that data."""
    volume = [b.pvc("data-db-0", volume="pv-0"), b.pv("pv-0", volume_zone)]
    pod = b.sts_pod(ordinal=0, node_selector=ASKS_B)
    for zones in ("zone-a,zone-b,zone-c", "zone-b,zone-a,zone-c"):
        sts = b.statefulset(annotations={"stszone.io/zones": zones}, node_selector=ASKS_B)
        outcome, _ = run(pod, store_from_objects([sts, *volume]))
        assert not outcome.allowed and outcome.reason == "ZoneConflict"
        assert f"which excludes {ZONE_KEY}={volume_zone}" in outcome.message
        assert "change its stszone.io/zones" not in outcome.message
        assert outcome.message.endswith(
            "remove that constraint from the StatefulSet's pod template or give the ordinal a "
            "new claim (its data decides its zone, whatever stszone.io/zones says; deleting "
            "claim data-db-0 deletes that data)"
        )


@pytest.mark.parametrize(
    ("annotations", "fix"),
    [
        ({"stszone.io/zones": "zone-a,zone-b,zone-c"}, "change its stszone.io/zones"),
        ({}, "give the StatefulSet stszone.io/zones"),
    ],
    ids=["own list", "server's list"],
)
def test_a_refused_pod_is_told_how_to_change_the_list_that_chose_its_zone(
    annotations: dict[str, str], fix: str
) -> None:
    """db-0 goes to zone-a, the first of the set's list or of --zones; its nodeSelector asks
    for zone-b. A set without stszone.io/zones has none to change: it is given one."""
    store = store_from_objects(
        [b.statefulset(annotations=annotations, node_selector=ASKS_B)],
        zones=("zone-a", "zone-b", "zone-c"),
    )
    outcome, _ = run(b.sts_pod(ordinal=0, node_selector=ASKS_B), store)
    assert (outcome.allowed, outcome.reason) == (False, "ZoneConflict")
    assert outcome.message.endswith(
        f"remove that constraint from the StatefulSet's pod template or {fix}"
    ), outcome.message


def test_a_pod_held_by_its_data_names_the_list_in_force() -> None:
    """db has no stszone.io/zones (--zones stands in); db-0's data in zone-c holds it there
    whatever that list says."""
    volume = [b.pvc("data-db-0", volume="pv-0"), b.pv("pv-0", "zone-c")]
    store = store_from_objects(
        [b.statefulset(annotations={}), *volume], zones=("zone-a", "zone-b", "zone-c")
    )
    outcome, _ = run(b.sts_pod(ordinal=0, node_selector={ZONE_KEY: "zone-b"}), store)
    assert (outcome.allowed, outcome.reason) == (False, "ZoneConflict")
    assert outcome.message.endswith(
        "give the ordinal a new claim (its data decides its zone, whatever the server's zones "
        "(--zones) says; deleting claim data-db-0 deletes that data)"
    ), outcome.message


def test_one_term_still_allowing_the_zone_is_enough() -> None:
    """Terms are ORed: if one term allows the zone the pod is schedulable, so it is allowed."""
    pod = b.sts_pod(
        ordinal=0,
        affinity=b.zone_affinity([(ZONE_KEY, "In", ["zone-b"])], [("disk", "In", ["ssd"])]),
    )
    outcome, _ = run(pod, ZONES_ABC)
    assert outcome.allowed


def test_name_with_dashes_and_no_index_label() -> None:
    """`my-db-cluster-12` without the pod-index label is ordinal 12 of StatefulSet my-db-cluster."""
    pod = b.sts_pod("my-db-cluster", 12, index_label=False)
    _, mutated = run(pod, ZONES_ABC)
    assert mutated["metadata"]["annotations"]["stszone.io/zone"] == "zone-a"


def test_pod_index_label_wins_over_the_name() -> None:
    """The label is what the StatefulSet controller sets; the name is only a fallback."""
    pod = b.sts_pod("db", 4)
    pod["metadata"]["labels"]["apps.kubernetes.io/pod-index"] = "5"
    _, mutated = run(pod, ZONES_ABC)
    assert mutated["metadata"]["annotations"]["stszone.io/zone"] == "zone-c"


def test_ordinals_start_from_the_statefulset() -> None:
    """spec.ordinals.start = 10: ordinal 10 goes to the first zone."""
    store = store_from_objects([b.statefulset(start=10, annotations={"stszone.io/zones": "x,y,z"})])
    _, mutated = run(b.sts_pod(ordinal=11), store)
    assert mutated["metadata"]["annotations"]["stszone.io/zone"] == "y"


def test_data_gravity_overrides_the_rule_with_a_warning() -> None:
    """Ordinal 0's claim is bound to a PV in zone-c: affinity goes to zone-c, and a warning says why."""
    store = store_from_objects(
        [b.pvc("data-db-0", volume="pv-c"), b.pv("pv-c", "zone-c")],
        zones=("zone-a", "zone-b", "zone-c"),
    )
    outcome, mutated = run(b.sts_pod(ordinal=0), store)
    assert node_terms(mutated)[0]["matchExpressions"][0]["values"] == ["zone-c"]
    assert any("pv-c" in w and "zone-c" in w for w in outcome.warnings)
    assert reinvoke(mutated, store) == []


def test_scheduler_mode_sets_scheduler_and_zone() -> None:
    """Scheduler mode: schedulerName from the annotation, zone recorded, no affinity added."""
    store = store_from_objects(
        [
            b.statefulset(
                annotations={
                    "stszone.io/zones": "a,b",
                    "stszone.io/mode": "scheduler",
                    "stszone.io/scheduler-name": "zoned",
                }
            )
        ]
    )
    _, mutated = run(b.sts_pod(ordinal=1), store)
    assert mutated["spec"]["schedulerName"] == "zoned"
    assert mutated["metadata"]["annotations"]["stszone.io/zone"] == "b"
    assert "affinity" not in mutated["spec"]
    assert reinvoke(mutated, store) == []


def test_scheduler_mode_uses_server_default_and_keeps_custom_scheduler() -> None:
    """No scheduler-name annotation: the server's --scheduler-name; a custom scheduler is left alone."""
    store = store_from_objects(
        [b.statefulset(annotations={"stszone.io/zones": "a,b", "stszone.io/mode": "scheduler"})]
    )
    _, mutated = run(b.sts_pod(ordinal=0), store)
    assert mutated["spec"]["schedulerName"] == DEFAULTS.scheduler_name
    outcome, custom = run(b.sts_pod(ordinal=0, scheduler="volcano"), store)
    assert custom["spec"]["schedulerName"] == "volcano" and outcome.warnings


SCHEDULER_AB = {"stszone.io/zones": "a,b", "stszone.io/mode": "scheduler"}


def test_scheduler_mode_fills_a_missing_scheduler_name() -> None:
    """No schedulerName at all (the API server defaults it later) counts as the default one."""
    store = store_from_objects([b.statefulset(annotations=SCHEDULER_AB)])
    pod = b.sts_pod(ordinal=1)
    del pod["spec"]["schedulerName"]
    outcome, mutated = run(pod, store)
    assert mutated["spec"]["schedulerName"] == DEFAULTS.scheduler_name and outcome.warnings == ()


def test_scheduler_mode_warns_of_a_custom_scheduler_and_of_the_volume_it_follows() -> None:
    """An unnamed pod (generateName) of ordinal 1 asking for volcano, its claim in zone a (the
    rule says b): both warnings, the pod named by its set and ordinal."""
    store = store_from_objects(
        [
            b.statefulset(annotations=SCHEDULER_AB),
            b.pvc("data-db-1", volume="pv-1"),
            b.pv("pv-1", "a"),
        ]
    )
    pod = b.sts_pod(ordinal=1, scheduler="volcano")
    del pod["metadata"]["name"]
    outcome, mutated = run(pod, store)
    assert mutated["metadata"]["annotations"]["stszone.io/zone"] == "a"
    assert outcome.warnings == (
        "db-1 follows volume pv-1 (claim data-db-1) to a; the rule says b",
        "pod db-1 asks for scheduler 'volcano'; stszone leaves it and only records "
        "stszone.io/zone=a for it",
    )


def test_scheduler_mode_leaves_a_pod_whose_volume_attaches_nowhere_and_says_why() -> None:
    store = store_from_objects(
        [b.statefulset(annotations=SCHEDULER_AB), b.pvc("data-db-1", volume="pv-1"),
         b.pv("pv-1", "gone", key="kubernetes.io/hostname")]
    )  # fmt: skip
    outcome, _ = run(b.sts_pod(ordinal=1), store)
    assert outcome.allowed and outcome.patch == []
    (warning,) = outcome.warnings
    assert warning.startswith("db-1 cannot run anywhere: volume pv-1 can attach only to nodes")


@pytest.mark.parametrize(
    "pod",
    [
        b.plain_pod(),
        b.sts_pod(labels={"stszone.io/skip": "true"}),
    ],
    ids=["not-owned", "skip-label"],
)
def test_pods_left_alone(pod: dict[str, Any]) -> None:
    """Pods not controlled by a StatefulSet and pods labelled stszone.io/skip=true pass unchanged."""
    outcome, _ = run(pod, ZONES_ABC)
    assert outcome.allowed and outcome.patch == [] and not outcome.warnings


def test_non_create_operations_are_not_mutated() -> None:
    """UPDATE of a pod is allowed unchanged (scheduling constraints are immutable anyway)."""
    pod = b.sts_pod()
    outcome, _ = run(pod, ZONES_ABC, operation="UPDATE", old=pod)
    assert outcome.allowed and outcome.patch == []


def test_statefulset_create_fills_zones_from_server() -> None:
    """A new StatefulSet without stszone.io/zones gets the server's list, in its order."""
    sts = b.statefulset()
    outcome, mutated = run(sts, store_from_objects([], zones=("c", "a", "b")))
    assert mutated["metadata"]["annotations"]["stszone.io/zones"] == "c,a,b"
    assert outcome.warnings == (), "--zones lists the default key's zones: nothing to say"
    discovered = store_from_objects([b.node("n1", "zone-b"), b.node("n2", "zone-a")])
    _, mutated = run(b.statefulset(), discovered)
    assert mutated["metadata"]["annotations"]["stszone.io/zones"] == "zone-a,zone-b"
    assert reinvoke(mutated, discovered) == []


def test_a_node_with_an_empty_zone_label_adds_no_zone() -> None:
    """topology.kubernetes.io/zone="" is a valid label that names no zone: discovery skips it,
    so the list written is one validation accepts, and ordinal 0 keeps the first real zone."""
    nodes = [b.node("n1", "zone-b"), b.node("n2", "zone-a"), b.node("unzoned", "")]
    discovered = store_from_objects(nodes)
    _, mutated = run(b.statefulset(), discovered)
    assert mutated["metadata"]["annotations"]["stszone.io/zones"] == "zone-a,zone-b"
    request = review.from_dict(b.review(mutated))
    assert review.answer("validate", request, store=discovered, defaults=DEFAULTS).allowed
    unlisted = store_from_objects([*nodes, b.statefulset(annotations={})])
    _, pod = run(b.sts_pod(ordinal=0), unlisted)
    assert pod["metadata"]["annotations"]["stszone.io/zone"] == "zone-a"


def test_statefulset_create_fills_only_zones_its_template_allows() -> None:
    """A template pinned to zone-b/zone-c by its own affinity gets only those, in server order."""
    aff = b.zone_affinity([(ZONE_KEY, "In", ["zone-c", "zone-b"])])
    outcome, mutated = run(b.statefulset(affinity=aff), ZONES_ABC)
    assert mutated["metadata"]["annotations"]["stszone.io/zones"] == "zone-b,zone-c"
    assert outcome.warnings
    request = review.from_dict(b.review(mutated))
    assert review.answer("validate", request, store=ZONES_ABC, defaults=DEFAULTS).allowed
    pinned = b.statefulset(node_selector={ZONE_KEY: "elsewhere"})
    outcome, mutated = run(pinned, ZONES_ABC)
    assert "stszone.io/zones" not in mutated["metadata"]["annotations"] and outcome.warnings


def test_a_template_ruling_out_every_zone_is_left_unset_naming_them() -> None:
    """The template's nodeSelector asks for a zone outside the server's list: nothing to write,
    and the warning lists the zones it ruled out."""
    pinned = b.statefulset(node_selector={ZONE_KEY: "elsewhere"})
    outcome, mutated = run(pinned, ZONES_ABC)
    assert "stszone.io/zones" not in mutated["metadata"]["annotations"]
    assert outcome.warnings == (
        "db: its pod template rules out every zone (zone-a,zone-b,zone-c); stszone.io/zones unset",
    )


def test_a_template_naming_its_node_gets_that_node_zone() -> None:
    """Required affinity on matchFields metadata.name In [n2]: the pods can only run on n2,
    which the view holds in zone-b, so the set's list is zone-b."""
    nodes = [b.node("n1", "zone-a"), b.node("n2", "zone-b"), b.node("n3", "zone-c")]
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}
    aff = {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [term]}}}
    outcome, mutated = run(b.statefulset(affinity=aff), store_from_objects(nodes))
    assert mutated["metadata"]["annotations"]["stszone.io/zones"] == "zone-b"
    assert outcome.warnings == (
        "db: stszone.io/zones set to zone-b, the zones its template allows",
    )


def test_a_template_naming_its_node_in_spec_node_name_gets_that_node_zone() -> None:
    """spec.nodeName n2 in the template binds every pod to n2, in zone-b, as matchFields on
    metadata.name does: the set's list is zone-b, not ordinals 0 and 2 refused for ever."""
    nodes = [b.node("n1", "zone-a"), b.node("n2", "zone-b"), b.node("n3", "zone-c")]
    sts = b.statefulset()
    sts["spec"]["template"]["spec"]["nodeName"] = "n2"
    outcome, mutated = run(sts, store_from_objects(nodes))
    assert mutated["metadata"]["annotations"]["stszone.io/zones"] == "zone-b"
    assert outcome.warnings == (
        "db: stszone.io/zones set to zone-b, the zones its template allows",
    )


def test_own_topology_key_and_zones_flag_warn_of_the_source_and_of_the_cut() -> None:
    """--zones names default-key zones; a set keyed on example.io/rack gets the racks nodes
    carry (r1, r2, r3), cut to r2 by its template: both facts are warned, in that order."""
    racks = [b.node(f"n{i}", "zone-a", labels={"example.io/rack": f"r{i}"}) for i in (1, 2, 3)]
    store = store_from_objects(racks, zones=("zone-a",))
    sts = b.statefulset(
        annotations={"stszone.io/topology-key": "example.io/rack"},
        node_selector={"example.io/rack": "r2"},
    )
    outcome, mutated = run(sts, store)
    assert mutated["metadata"]["annotations"]["stszone.io/zones"] == "r2"
    assert outcome.warnings == (
        "db: stszone.io/zones from the nodes' example.io/rack values (--zones is for "
        "topology.kubernetes.io/zone)",
        "db: stszone.io/zones set to r2, the zones its template allows",
    )


def test_a_malformed_topology_key_is_read_as_the_default_one() -> None:
    """Validation refuses the key with its own message; mutation meanwhile fills the default
    key's zones and warns of nothing about a key no node could carry."""
    sts = b.statefulset(annotations={"stszone.io/topology-key": "not a key!"})
    outcome, mutated = run(sts, ZONES_ABC)
    assert mutated["metadata"]["annotations"]["stszone.io/zones"] == "zone-a,zone-b,zone-c"
    assert outcome.warnings == ()


def test_an_unnamed_statefulset_gets_its_zones_and_is_called_unnamed() -> None:
    """A set created with generateName arrives without a name: its template is still read, and
    the warnings call it (unnamed)."""
    sts = b.statefulset(affinity=b.zone_affinity([(ZONE_KEY, "In", ["zone-b", "zone-c"])]))
    del sts["metadata"]["name"]
    sts["metadata"]["generateName"] = "db-"
    outcome, mutated = run(sts, ZONES_ABC)
    assert mutated["metadata"]["annotations"]["stszone.io/zones"] == "zone-b,zone-c"
    assert outcome.warnings == (
        "(unnamed): stszone.io/zones set to zone-b,zone-c, the zones its template allows",
    )


def test_statefulset_with_zones_is_left_alone() -> None:
    """An explicit list is the user's choice."""
    outcome, _ = run(b.statefulset(annotations={"stszone.io/zones": "q"}), ZONES_ABC)
    assert outcome.patch == []


ANNOTATED = {"example.io/owner": "team-a", "prometheus.io/scrape": "true"}


def owned(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as its owner wrote it: with annotations of its own."""
    obj = copy.deepcopy(obj)
    obj["metadata"]["annotations"] = dict(ANNOTATED)
    return obj


def changed(obj: dict[str, Any], *, spec: dict[str, Any], annotations: dict[str, str]) -> Any:
    """``obj`` with these spec fields and annotations set, and nothing else changed."""
    obj = copy.deepcopy(obj)
    obj["spec"].update(spec)
    obj["metadata"]["annotations"].update(annotations)
    return obj


SCHEDULED = {"stszone.io/zones": "a,b", "stszone.io/mode": "scheduler", "stszone.io/scheduler-name": "zoned"}  # fmt: skip
TEMPLATED = {"stszone.io/zones": "a,b,c", "stszone.io/storage-class-template": "ssd-{zone}"}
ZONE_B = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": ZONE_KEY, "operator": "In", "values": ["zone-b"]}]}]}}}  # fmt: skip


@pytest.mark.parametrize(
    ("obj", "store", "spec", "annotations"),
    [
        (owned(b.sts_pod(ordinal=1)), ZONES_ABC, {"affinity": ZONE_B}, {"stszone.io/zone": "zone-b"}),
        (owned(b.sts_pod(ordinal=1)), store_from_objects([b.statefulset(annotations=SCHEDULED)]), {"schedulerName": "zoned"}, {"stszone.io/zone": "b"}),
        (owned(b.pvc("data-db-2")), store_from_objects([b.statefulset(annotations=TEMPLATED)]), {"storageClassName": "ssd-c"}, {"stszone.io/zone": "c"}),
        (owned(b.statefulset()), ZONES_ABC, {}, {"stszone.io/zones": "zone-a,zone-b,zone-c"}),
    ],
    ids=["pod", "pod-scheduler-mode", "claim", "statefulset"],
)  # fmt: skip
def test_stszone_adds_its_own_and_keeps_everything_else(
    obj: dict[str, Any], store: Store, spec: dict[str, Any], annotations: dict[str, str]
) -> None:
    """The object's own annotations and the rest of its spec come through unchanged: stszone
    adds its annotation and the one field its mode sets, and nothing else."""
    outcome, mutated = run(obj, store)
    assert outcome.allowed
    assert mutated == changed(obj, spec=spec, annotations=annotations)


def test_claim_gets_zone_and_storage_class() -> None:
    """A claim of a StatefulSet with a storage-class template gets the zone and the class."""
    store = store_from_objects(
        [
            b.statefulset(
                annotations={
                    "stszone.io/zones": "a,b,c",
                    "stszone.io/storage-class-template": "ssd-{zone}",
                }
            )
        ]
    )
    claim = b.pvc("data-db-2")
    claim["spec"]["storageClassName"] = "standard"
    outcome, mutated = run(claim, store)
    assert mutated["metadata"]["annotations"]["stszone.io/zone"] == "c"
    assert mutated["spec"]["storageClassName"] == "ssd-c"
    assert any("standard" in w for w in outcome.warnings)
    assert reinvoke(mutated, store) == []


def test_claims_of_other_owners_are_untouched() -> None:
    """A claim whose name matches no StatefulSet template is left alone."""
    store = store_from_objects([b.statefulset(annotations={"stszone.io/zones": "a,b,c"})])
    for name in ("data-other-0", "data-db-x", "scratch"):
        outcome, _ = run(b.pvc(name), store)
        assert outcome.patch == [], name


def test_malformed_object_is_denied_with_reason_not_crash() -> None:
    """A pod whose affinity is a string is refused with the field named (code 400)."""
    pod = b.sts_pod()
    pod["spec"]["affinity"] = "zone-a"
    outcome, _ = run(pod, ZONES_ABC)
    assert not outcome.allowed and outcome.code == 400 and "spec.affinity" in outcome.message


def test_malformed_statefulset_annotations_deny_its_pods() -> None:
    """A pod of a set with a broken zone list is refused, naming the annotation."""
    store = store_from_objects([b.statefulset(annotations={"stszone.io/zones": "a,,a"})])
    outcome, _ = run(b.sts_pod(), store)
    assert not outcome.allowed
    assert outcome.message == (
        "StatefulSet ns/db has malformed stszone annotations: stszone.io/zones has an empty "
        'entry; e.g. stszone.io/zones: "zone-a,zone-b,zone-c"; stszone.io/zones lists a more '
        "than once; each zone once"
    )


expr = st.fixed_dictionaries(
    {
        "key": st.sampled_from([ZONE_KEY, "disk", "example.io/rack"]),
        "operator": st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]),
        "values": st.lists(st.sampled_from(["zone-a", "zone-b", "zone-c", "ssd"]), max_size=3),
    }
)
terms = st.lists(
    st.fixed_dictionaries({"matchExpressions": st.lists(expr, max_size=3)}), max_size=3
)


@settings(max_examples=200)
@given(
    terms=terms,
    ordinal=st.integers(0, 20),
    annotations=st.dictionaries(
        st.sampled_from(["x/y", "stszone.io/zone"]), st.sampled_from(["1", "zone-q"]), max_size=2
    ),
)
def test_patch_property(
    terms: list[dict[str, Any]], ordinal: int, annotations: dict[str, str]
) -> None:
    """For any affinity: the patch applies to the original; the result pins the zone exactly
    when allowed; a second pass produces no patch."""
    aff = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
        }
    }
    pod = b.sts_pod(ordinal=ordinal, affinity=aff, annotations=annotations or None)
    outcome, mutated = run(pod, ZONES_ABC)
    if not outcome.allowed:
        return
    zone = ("zone-a", "zone-b", "zone-c")[ordinal % 3]
    want = {"key": ZONE_KEY, "operator": "In", "values": [zone]}
    # An empty term matches no node: it stays empty rather than become a zone term.
    assert all(
        want in t["matchExpressions"] or (not t["matchExpressions"] and t in terms)
        for t in node_terms(mutated)
    )
    assert any(t["matchExpressions"] for t in node_terms(mutated))
    assert len(node_terms(mutated)) == max(1, len(terms))
    assert mutated["metadata"]["annotations"]["stszone.io/zone"] == zone
    assert reinvoke(mutated, ZONES_ABC) == []


def live_store_without_sets() -> Store:
    """A live view whose watches have all synced, but not delivered the new set yet."""
    store = Store(zones=("zone-a", "zone-b", "zone-c"), live=True)
    for table in TABLES:
        store.replace(table, [])
    return store


def test_pod_of_a_set_the_live_view_has_not_seen_is_refused_for_retry() -> None:
    """Creation races the watch: refusing beats pinning by a possibly wrong policy."""
    outcome, _ = run(b.sts_pod(ordinal=1), live_store_without_sets())
    assert not outcome.allowed and outcome.reason == "StatefulSetNotYetSeen"
    assert outcome.message.endswith(
        "retry in a moment (the StatefulSet controller retries its creates by itself)"
    ), outcome.message
    offline = store_from_objects([], zones=("zone-a", "zone-b", "zone-c"))
    assert run(b.sts_pod(ordinal=1), offline)[0].allowed, "offline views keep the fallback"


def test_controller_claim_of_an_unseen_set_is_refused_for_retry() -> None:
    """Only the StatefulSet controller's claims: a user's claim of no set is left alone."""
    store = live_store_without_sets()
    claim = b.pvc("data-db-0")
    body = b.review(claim)
    recorded = b.fixture_review("001-PersistentVolumeClaim-CREATE")["request"]["userInfo"]
    # The controller's own account (recorded), and kube-controller-manager's when it runs with
    # --use-service-account-credentials=false (its default).
    for controller in (recorded["username"], "system:kube-controller-manager"):
        body["request"]["userInfo"]["username"] = controller
        outcome = review.answer("mutate", review.from_dict(body), store=store, defaults=DEFAULTS)
        assert not outcome.allowed and outcome.reason == "StatefulSetNotYetSeen", controller
        assert outcome.message == (
            "claim ns/data-db-0 comes from the StatefulSet controller, but no StatefulSet in "
            "stszone's view produces it yet (its watch event is usually milliseconds behind); "
            "the StatefulSet controller retries this create"
        )
    outcome, _ = run(claim, store)  # requested by "tester"
    assert outcome.allowed and outcome.patch == []


#: db-1's pin as stszone wrote it when db-1 lived in zone-a: the required term and the zone.
OLD_PIN = {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": ZONE_KEY, "operator": "In", "values": ["zone-a"]}]}]}}}  # fmt: skip


def test_a_pod_created_from_an_old_manifest_is_told_the_pin_is_its_own() -> None:
    """db-1 belongs in zone-b; it is created again from a manifest saved when it was pinned to
    zone-a (kubectl replace --force), so it carries that old pin, which db's template does
    not. The refusal says the constraint is the pod's own, in the manifest applied, rather
    than send the user to a template that does not hold it."""
    store = store_from_objects(
        [b.statefulset(annotations={"stszone.io/zones": "zone-a,zone-b,zone-c"})]
    )
    old = b.sts_pod(ordinal=1, affinity=OLD_PIN, annotations={"stszone.io/zone": "zone-a"})
    outcome, _ = run(old, store)
    assert (outcome.allowed, outcome.reason) == (False, "ZoneConflict")
    assert outcome.message == (
        f"pod db-1 has required nodeAffinity {ZONE_KEY} In [zone-a], which excludes "
        f"{ZONE_KEY}=zone-b, the zone stszone chose for ordinal 1; that constraint is in the "
        "pod's own spec (the manifest applied), not in the StatefulSet's pod template: remove "
        "it from the manifest, or let the StatefulSet controller create the pod from its "
        "template, or change its stszone.io/zones"
    )


def test_a_pod_created_from_a_scheduled_pods_manifest_is_told_its_node_is_its_own() -> None:
    """A manifest saved from a scheduled pod holds its spec.nodeName: db-1, created again from
    one saved when it ran on na (zone-a), names that node; db's template names none. The
    refusal says spec.nodeName is the pod's own, and no re-creation loop: the controller
    creates db-1 from its template, which has no nodeName."""
    store = store_from_objects(
        [
            b.statefulset(annotations={"stszone.io/zones": "zone-a,zone-b,zone-c"}),
            b.node("na", "zone-a"),
            b.node("nb", "zone-b"),
        ]
    )
    outcome, _ = run(b.sts_pod(ordinal=1, node="na"), store)
    assert (outcome.allowed, outcome.reason) == (False, "NodeNameConflict")
    assert outcome.message == (
        "pod db-1 names spec.nodeName na, which has zone zone-a; ordinal 1 belongs on zone "
        "zone-b, so the kubelet would refuse it; spec.nodeName is in the pod's own spec (the "
        "manifest applied), not in the StatefulSet's pod template: remove it from the "
        "manifest, or let the StatefulSet controller create the pod from its template"
    )


def test_a_pod_whose_template_holds_the_constraint_is_told_to_edit_the_template() -> None:
    """The same constraints, held by db's template: the refusal names the template."""
    sts = b.statefulset(annotations={"stszone.io/zones": "zone-a,zone-b,zone-c"}, affinity=OLD_PIN)
    outcome, _ = run(b.sts_pod(ordinal=1, affinity=OLD_PIN), store_from_objects([sts]))
    assert outcome.message.endswith(
        "remove that constraint from the StatefulSet's pod template or change its stszone.io/zones"
    ), outcome.message
    sts = b.statefulset(annotations={"stszone.io/zones": "zone-a,zone-b,zone-c"})
    sts["spec"]["template"]["spec"]["nodeName"] = "na"
    store = store_from_objects([sts, b.node("na", "zone-a"), b.node("nb", "zone-b")])
    outcome, _ = run(b.sts_pod(ordinal=1, node="na"), store)
    assert outcome.message.endswith(
        "so the kubelet would refuse it and the StatefulSet controller re-create it there in a "
        "loop; remove spec.nodeName from the pod template"
    ), outcome.message


#: The account the StatefulSet controller sent a recorded pod create with.
SET_CONTROLLER = b.fixture_review("007-Pod-CREATE")["request"]["userInfo"]["username"]

#: What a refusal says of a constraint db's template lacks on a pod db's controller created.
ADDED_ON_THE_WAY = (
    "is not in the StatefulSet's pod template as stszone's view holds it, yet the StatefulSet "
    "controller created the pod: an admission plugin or webhook added it on the way in "
    "(PodNodeSelector's namespace annotation, a Kyverno or Gatekeeper mutation): remove it "
    "there; or the template changed since: remove it from the template"
)
#: The same, of an affinity or a nodeName: the PodNodeSelector admission plugin writes only
#: spec.nodeSelector (from its namespace's scheduler.alpha.kubernetes.io/node-selector), so
#: only a mutating webhook can have added those.
ADDED_BY_A_WEBHOOK = (
    "is not in the StatefulSet's pod template as stszone's view holds it, yet the StatefulSet "
    "controller created the pod: a mutating webhook added it on the way in (a Kyverno or "
    "Gatekeeper mutation): remove it there; or the template changed since: remove it from the "
    "template"
)


def sent_by(
    username: str, obj: dict[str, Any], store: Store, endpoint: Endpoint = "mutate"
) -> review.Answer:
    """The answer to ``obj``'s CREATE as ``username`` sends it."""
    body = b.review(obj)
    body["request"]["userInfo"]["username"] = username
    return review.answer(endpoint, review.from_dict(body), store=store, defaults=DEFAULTS)


@pytest.mark.parametrize("controller", [SET_CONTROLLER, "system:kube-controller-manager"])
def test_a_constraint_added_to_a_controllers_pod_is_not_blamed_on_a_manifest(
    controller: str,
) -> None:
    """Namespace ns carries PodNodeSelector's annotation for zone-a: the admission plugin, which
    runs before any webhook, adds that nodeSelector to db-1 as the StatefulSet controller creates
    it from db's template, which has none. db-1 belongs in zone-b: refused, and the refusal says
    the constraint came on the pod's way in (or with a template stszone has not seen yet), not
    from a manifest: no manifest was applied. The controller's account is its own, or
    kube-controller-manager's when it runs with one identity (its default)."""
    store = store_from_objects(
        [b.statefulset(annotations={"stszone.io/zones": "zone-a,zone-b,zone-c"})]
    )
    pod = b.sts_pod(ordinal=1, node_selector={ZONE_KEY: "zone-a"})
    outcome = sent_by(controller, pod, store)
    assert (outcome.allowed, outcome.reason) == (False, "ZoneConflict")
    assert outcome.message == (
        f"pod db-1 has nodeSelector {ZONE_KEY}=zone-a, which excludes {ZONE_KEY}=zone-b, the "
        f"zone stszone chose for ordinal 1; that constraint {ADDED_ON_THE_WAY}, or change its "
        "stszone.io/zones"
    )


@pytest.mark.parametrize("endpoint", ["mutate", "validate"])
def test_a_node_name_set_on_a_controllers_pod_is_not_blamed_on_a_manifest(
    endpoint: Endpoint,
) -> None:
    """db-1, created by the StatefulSet controller, names spec.nodeName na (zone-a), which db's
    template (as the view holds it) does not: a webhook set it, or the template changed. Both
    webhooks refuse it saying so, not that a manifest was applied."""
    store = store_from_objects(
        [
            b.statefulset(annotations={"stszone.io/zones": "zone-a,zone-b,zone-c"}),
            b.node("na", "zone-a"),
            b.node("nb", "zone-b"),
        ]
    )
    outcome = sent_by(SET_CONTROLLER, b.sts_pod(ordinal=1, node="na"), store, endpoint)
    assert (outcome.allowed, outcome.reason) == (False, "NodeNameConflict")
    assert outcome.message == (
        "pod db-1 names spec.nodeName na, which has zone zone-a; ordinal 1 belongs on zone "
        f"zone-b, so the kubelet would refuse it; spec.nodeName {ADDED_BY_A_WEBHOOK}"
    )


@pytest.mark.parametrize(
    ("selector", "said"),
    [
        ({}, ADDED_BY_A_WEBHOOK),
        ({"env": "prod"}, ADDED_BY_A_WEBHOOK),
        ({ZONE_KEY: "zone-a"}, ADDED_ON_THE_WAY),
    ],
    ids=["affinity", "beside-a-selector-that-rules-out-nothing", "with-a-selector-that-does"],
)
def test_an_affinity_added_to_a_controllers_pod_is_blamed_on_a_webhook(
    selector: dict[str, str], said: str
) -> None:
    """db-1 (zone-b), created by the StatefulSet controller, carries a required affinity for
    zone-a that db's template lacks. PodNodeSelector writes only spec.nodeSelector, so the
    refusal names a mutating webhook alone, also beside a nodeSelector env=prod that rules
    no zone out; a nodeSelector for zone-a rules zone-b out too, and may be PodNodeSelector's."""
    store = store_from_objects(
        [b.statefulset(annotations={"stszone.io/zones": "zone-a,zone-b,zone-c"})]
    )
    pod = b.sts_pod(ordinal=1, affinity=OLD_PIN, node_selector=selector or None)
    outcome = sent_by(SET_CONTROLLER, pod, store)
    assert (outcome.allowed, outcome.reason) == (False, "ZoneConflict")
    assert outcome.message.endswith(
        f"the zone stszone chose for ordinal 1; that constraint {said}, or change its "
        "stszone.io/zones"
    ), outcome.message


@pytest.mark.parametrize(
    "requester",
    ["tester", "system:serviceaccount:kruise-system:kruise-manager", "system:node:na"],
)
def test_a_pod_its_sets_controller_did_not_send_is_told_the_constraint_is_its_own(
    requester: str,
) -> None:
    """A user, another kind's controller (kruise-manager creates Advanced StatefulSet pods, not
    db's), anyone but db's controller: the constraint db's template lacks is the pod's own."""
    store = store_from_objects(
        [b.statefulset(annotations={"stszone.io/zones": "zone-a,zone-b,zone-c"})]
    )
    outcome = sent_by(requester, b.sts_pod(ordinal=1, node_selector={ZONE_KEY: "zone-a"}), store)
    assert (outcome.allowed, outcome.reason) == (False, "ZoneConflict")
    assert "that constraint is in the pod's own spec (the manifest applied)" in outcome.message
    assert "created the pod" not in outcome.message
