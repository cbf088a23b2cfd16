"""Node selection exactly as Kubernetes reads it: empty terms, matchFields, spec.nodeName.

The property tests compare stszone's decisions with a reference evaluator written here from the
Kubernetes API reference, not from stszone's code:

- ``NodeSelector.nodeSelectorTerms``: "A list of node selector terms. The terms are ORed."
- ``NodeSelectorTerm``: "A null or empty node selector term matches no objects. The requirements
  of them are ANDed." ``matchExpressions`` are requirements on node labels, ``matchFields`` on
  node fields (``metadata.name`` is the one supported).
- ``NodeSelectorRequirement.operator``: "In, NotIn, Exists, DoesNotExist. Gt, and Lt." -- "If the
  operator is In or NotIn, the values array must be non-empty. If the operator is Exists or
  DoesNotExist, the values array must be empty. If the operator is Gt or Lt, the values array
  must have a single element, which will be interpreted as an integer." As label selectors do,
  NotIn and DoesNotExist match a node that lacks the key; Gt and Lt need it, with an integer.
- ``nodeSelector``: every key=value must be a label of the node (ANDed with the affinity).
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import product
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import builders as b
from webhook.cluster.clusterfile import store_from_objects
from webhook.config import Defaults
from webhook.model.store import Store
from webhook.rules.admission import Endpoint
from webhook.wire import review
from webhook.wire.patch import apply

ZONE_KEY = "topology.kubernetes.io/zone"
ZONES = ("1", "2", "zone-c")  # numeric zone names let Gt/Lt on the zone key mean something
Node = tuple[str, Mapping[str, str]]


# --- the reference reading ----------------------------------------------------------------------


def ref_requirement(req: Mapping[str, Any], have: Mapping[str, str]) -> bool:
    key, op, values = req["key"], req["operator"], req.get("values") or []
    if op == "In":
        return key in have and have[key] in values
    if op == "NotIn":
        return key not in have or have[key] not in values
    if op == "Exists":
        return key in have
    if op == "DoesNotExist":
        return key not in have
    if key not in have:  # Gt / Lt
        return False
    try:
        number = int(have[key])
    except ValueError:
        return False
    return number > int(values[0]) if op == "Gt" else number < int(values[0])


def ref_term(term: Mapping[str, Any], node: Node) -> bool:
    exprs, fields = term.get("matchExpressions") or [], term.get("matchFields") or []
    if not exprs and not fields:
        return False  # "A null or empty node selector term matches no objects."
    name, labels = node
    return all(ref_requirement(r, labels) for r in exprs) and all(
        ref_requirement(f, {"metadata.name": name}) for f in fields
    )


def ref_schedulable(spec: Mapping[str, Any], node: Node) -> bool:
    """Whether a pod with ``spec`` may run on ``node`` by its own node constraints."""
    if any(node[1].get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    required = (spec.get("affinity") or {}).get("nodeAffinity", {})
    terms = required.get("requiredDuringSchedulingIgnoredDuringExecution", {}).get(
        "nodeSelectorTerms", []
    )
    return not terms or any(ref_term(t, node) for t in terms)


# --- generated pods and nodes -------------------------------------------------------------------

OTHER_KEYS = ("disk", "example.io/rack")
LABEL_VALUES = ("ssd", "hdd", "0", "3", "7", "50")
#: The only other key a generated nodeSelector uses: constraints that contradict each other on a
#: key that is not the zone's make a pod unschedulable anywhere, which is not stszone's to judge.
POOL = "example.io/pool"
VIEW = {"n1": "1", "n2": "2", "n3": "zone-c", "n4": "1"}  # node -> zone, the view's nodes


def requirement(key: str) -> st.SearchStrategy[dict[str, Any]]:
    """One valid NodeSelectorRequirement on ``key`` (as the API server would accept it)."""
    values = ZONES if key == ZONE_KEY else LABEL_VALUES
    listed = st.lists(st.sampled_from(values), min_size=1, max_size=3)
    return st.one_of(
        st.builds(lambda v: {"key": key, "operator": "In", "values": v}, listed),
        st.builds(lambda v: {"key": key, "operator": "NotIn", "values": v}, listed),
        st.just({"key": key, "operator": "Exists"}),
        st.just({"key": key, "operator": "DoesNotExist"}),
        st.builds(
            lambda op, n: {"key": key, "operator": op, "values": [str(n)]},
            st.sampled_from(["Gt", "Lt"]),
            st.sampled_from([1, 5, 10]),
        ),
    )


@st.composite
def terms(draw: st.DrawFn) -> dict[str, Any]:
    """A term: any number of zone-key requirements, at most one per other key, and at most one
    matchFields requirement (one value, as the API server requires for metadata.name)."""
    exprs = draw(st.lists(requirement(ZONE_KEY), max_size=2))
    for key in OTHER_KEYS:
        if draw(st.booleans()):
            exprs.append(draw(requirement(key)))
    term: dict[str, Any] = {}
    if bool(exprs) or draw(st.booleans()):
        term["matchExpressions"] = exprs
    if draw(st.integers(0, 3)) == 0:
        name = draw(st.sampled_from([*VIEW, "ghost"]))
        op = draw(st.sampled_from(["In", "NotIn"]))
        term["matchFields"] = [{"key": "metadata.name", "operator": op, "values": [name]}]
    return term


def universe(zone: str, spec: Mapping[str, Any]) -> list[Node]:
    """Every node that may exist in ``zone``: the view's nodes there (with their labels), and
    nodes not in the view (a fresh name, or a name the pod mentions that the view does not
    hold) with any labels."""
    fields = [
        f["values"][0]
        for t in spec.get("affinity", {})
        .get("nodeAffinity", {})
        .get("requiredDuringSchedulingIgnoredDuringExecution", {})
        .get("nodeSelectorTerms", [])
        for f in t.get("matchFields") or []
    ]
    names = {"fresh", *(n for n in fields if n not in VIEW)}
    keys = (*OTHER_KEYS, POOL)
    options = [(None, *LABEL_VALUES)] * len(OTHER_KEYS) + [(None, "p1", "p2")]
    made: list[Node] = [(n, VIEW_LABELS[n]) for n, z in VIEW.items() if z == zone]
    for name in sorted(names):
        for values in product(*options):
            labels = {k: v for k, v in zip(keys, values, strict=True) if v is not None}
            made.append((name, {ZONE_KEY: zone, **labels}))
    return made


VIEW_NODES = [
    b.node(n, z, labels={"disk": "ssd" if n != "n4" else "hdd", POOL: "p2" if n == "n2" else "p1"})
    for n, z in VIEW.items()
]
VIEW_LABELS = {n["metadata"]["name"]: n["metadata"]["labels"] for n in VIEW_NODES}


def view() -> Store:
    return store_from_objects(VIEW_NODES, zones=ZONES)


def mutate(pod: dict[str, Any], store: Store) -> review.Answer:
    return review.answer(
        "mutate", review.from_dict(b.review(pod)), store=store, defaults=Defaults()
    )


@settings(max_examples=300)
@given(
    required=st.lists(terms(), max_size=3),
    selector=st.fixed_dictionaries(
        {}, optional={ZONE_KEY: st.sampled_from(ZONES), POOL: st.sampled_from(["p1", "p2"])}
    ),
    ordinal=st.integers(0, 5),
)
def test_property_mutation_admits_a_pod_iff_some_node_of_its_zone_can_run_it(
    required: list[dict[str, Any]], selector: dict[str, str], ordinal: int
) -> None:
    """For any valid node constraints (that do not contradict each other on another key):
    where the view holds nodes of the ordinal's zone and the pod may run on some node of the
    view, stszone admits it exactly when the reference finds a node of that zone it may run
    on; where it may run on none (the nodes it waits for are still to come), exactly when some
    node that may yet exist in the zone would do. The mutated pod then runs exactly on the
    nodes of that zone the original allowed (no empty term widened, nothing else changed)."""
    spec: dict[str, Any] = {"nodeSelector": selector} if selector else {}
    affinity = None
    if required:
        affinity = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": required}
            }
        }
        spec["affinity"] = affinity
    zone = ZONES[ordinal % len(ZONES)]
    pod = b.sts_pod(ordinal=ordinal, affinity=affinity, node_selector=selector or None)
    outcome = mutate(pod, view())
    candidates = universe(zone, spec)
    in_view = [(n, VIEW_LABELS[n]) for n in VIEW]
    zone_nodes = [n for n in in_view if n[1][ZONE_KEY] == zone]
    if any(ref_schedulable(spec, n) for n in in_view):
        expected = any(ref_schedulable(spec, n) for n in zone_nodes)
    else:
        expected = any(ref_schedulable(spec, n) for n in candidates)
    assert outcome.allowed == expected, outcome.message
    if outcome.allowed:
        after = apply(pod, outcome.patch)["spec"]
        everywhere = [*candidates, *(n for z in ZONES if z != zone for n in universe(z, spec))]
        for node in everywhere:
            in_zone = node[1].get(ZONE_KEY) == zone
            assert ref_schedulable(after, node) == (in_zone and ref_schedulable(spec, node))


# --- the rules, one by one, through /mutate and /validate --------------------------------------


def terms_affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
        }
    }


ABC = store_from_objects(
    [b.node("na", "zone-a"), b.node("nb", "zone-b"), b.node("nc", "zone-c"), b.node("bare", None)],
    zones=("zone-a", "zone-b", "zone-c"),
)


def test_an_empty_term_is_not_widened_into_a_zone_term() -> None:
    """A pod whose only term is empty matches no node: denied, not turned into `zone In [..]`."""
    outcome = mutate(b.sts_pod(ordinal=0, affinity=terms_affinity({})), ABC)
    assert (outcome.allowed, outcome.reason) == (False, "ZoneConflict")
    assert "an empty term (it matches no node)" in outcome.message


def test_an_empty_term_does_not_hide_a_conflict_elsewhere() -> None:
    """[{}, zone In [zone-b]] for ordinal 0 (zone-a): the empty term admits nothing, the other
    rules zone-a out: denied, naming it."""
    pod = b.sts_pod(
        ordinal=0,
        affinity=terms_affinity(
            {}, {"matchExpressions": [{"key": ZONE_KEY, "operator": "In", "values": ["zone-b"]}]}
        ),
    )
    outcome = mutate(pod, ABC)
    assert not outcome.allowed
    assert outcome.message.startswith(
        "pod db-0 has required nodeAffinity an empty term (it matches no node) / "
        "topology.kubernetes.io/zone In [zone-b], which admits no node of "
        "topology.kubernetes.io/zone=zone-a, the zone stszone chose for ordinal 0; it would run on "
        "node nb in zone-b"
    )


def test_an_empty_term_stays_empty_beside_others() -> None:
    """[{}, disk In [ssd]]: the zone goes into the second term only; validation accepts it."""
    disk = {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}
    pod = b.sts_pod(ordinal=1, affinity=terms_affinity({}, disk))
    outcome = mutate(pod, ABC)
    assert outcome.allowed
    after = apply(pod, outcome.patch)
    required = after["spec"]["affinity"]["nodeAffinity"]
    assert required["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {},
        {"matchExpressions": [*disk["matchExpressions"],
                              {"key": ZONE_KEY, "operator": "In", "values": ["zone-b"]}]},
    ]  # fmt: skip
    checked = review.answer(
        "validate", review.from_dict(b.review(after)), store=ABC, defaults=Defaults()
    )
    assert checked.allowed, checked.message


@pytest.mark.parametrize(
    ("names", "says"),
    [
        (["nb"], "matchFields metadata.name In [nb], which admits no node of"),
        (["bare"], "matchFields metadata.name In [bare], which admits no node of"),
    ],
)
def test_match_fields_naming_known_nodes_outside_the_zone_is_denied(
    names: list[str], says: str
) -> None:
    """Ordinal 0 belongs in zone-a; its only term names node nb (zone-b), or a node without a
    zone label: it could never run in zone-a. Denied, naming both and where it would run."""
    fields = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": names}]}
    outcome = mutate(b.sts_pod(ordinal=0, affinity=terms_affinity(fields)), ABC)
    assert (outcome.allowed, outcome.reason) == (False, "ZoneConflict")
    assert says in outcome.message and "topology.kubernetes.io/zone=zone-a" in outcome.message
    zone = "in zone-b" if names == ["nb"] else "without topology.kubernetes.io/zone"
    assert f"it would run on node {names[0]} {zone};" in outcome.message


def test_match_fields_naming_a_node_the_view_lacks_is_given_the_benefit_of_the_doubt() -> None:
    """A node not in the view (yet) may be in zone-a: allowed, and pinned."""
    fields = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["new-node"]}]}
    assert mutate(b.sts_pod(ordinal=0, affinity=terms_affinity(fields)), ABC).allowed


GEN, SPOT = "example.io/generation", "example.io/spot"


def req(key: str, op: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": op, **({"values": list(values)} if values else {})}


def named(*names: str, op: str = "In") -> list[dict[str, Any]]:
    return [{"key": "metadata.name", "operator": op, "values": [n]} for n in names]


@pytest.mark.parametrize(
    ("labels", "term", "selector", "allowed"),
    [
        ({GEN: "5"}, {"matchFields": named("n1"), "matchExpressions": [req(GEN, "Gt", "3")]}, {}, True),
        ({GEN: "3"}, {"matchFields": named("n1"), "matchExpressions": [req(GEN, "Gt", "3")]}, {}, False),
        ({GEN: "2"}, {"matchFields": named("n1"), "matchExpressions": [req(GEN, "Lt", "3")]}, {}, True),
        ({GEN: "3"}, {"matchFields": named("n1"), "matchExpressions": [req(GEN, "Lt", "3")]}, {}, False),
        ({}, {"matchFields": named("n1"), "matchExpressions": [req(GEN, "Gt", "3")]}, {}, False),
        ({GEN: "new"}, {"matchFields": named("n1"), "matchExpressions": [req(GEN, "Gt", "3")]}, {}, False),
        ({}, {"matchFields": named("n1"), "matchExpressions": [req(SPOT, "DoesNotExist")]}, {}, True),
        ({SPOT: "true"}, {"matchFields": named("n1"), "matchExpressions": [req(SPOT, "DoesNotExist")]}, {}, False),
        ({"disk": "hdd"}, {"matchFields": named("n1"), "matchExpressions": [req("disk", "In", "ssd")]}, {}, False),
        ({"disk": "ssd"}, {"matchFields": named("n1"), "matchExpressions": [req("disk", "In", "ssd")]}, {}, True),
        ({"pool": "p1"}, {"matchFields": named("n1")}, {"pool": "p2"}, False),
        ({"pool": "p2"}, {"matchFields": named("n1")}, {"pool": "p2"}, True),
        ({}, {"matchFields": named("n1", "nc")}, {}, False),
        ({}, {"matchFields": named("n1", op="NotIn")}, {}, False),
        ({GEN: "5"}, {"matchFields": named("n1"), "matchExpressions": [req(GEN, "Gte", "3")]}, {}, False),
    ],
    ids=[
        "gt-above", "gt-at-the-bound", "lt-below", "lt-at-the-bound", "gt-without-the-label",
        "gt-not-a-number", "does-not-exist-absent", "does-not-exist-present",
        "expressions-and-fields-fail", "expressions-and-fields-hold", "node-selector-fails",
        "node-selector-holds", "two-names-no-node", "not-in-avoids-one-node", "unknown-operator",
    ],
)  # fmt: skip
def test_a_term_naming_a_known_node_is_judged_on_that_node(
    labels: dict[str, str], term: dict[str, Any], selector: dict[str, str], allowed: bool
) -> None:
    """Ordinal 0 belongs in zone-a, where node n1 is. A term naming n1 admits the pod exactly
    when n1 meets everything ANDed with the name: each expression (Gt/Lt need an integer label
    beyond the bound, DoesNotExist an absent one, an operator Kubernetes does not know matches
    nothing) and the pod's nodeSelector. Two names in one term select no node; NotIn [n1]
    leaves zone-a without a node it admits while it admits nc elsewhere: denied."""
    store = store_from_objects(
        [b.node("n1", "zone-a", labels=labels), b.node("nc", "zone-c")],
        zones=("zone-a", "zone-b", "zone-c"),
    )
    pod = b.sts_pod(ordinal=0, affinity=terms_affinity(term), node_selector=selector or None)
    outcome = mutate(pod, store)
    assert outcome.allowed == allowed, outcome.message
    assert outcome.allowed or outcome.reason == "ZoneConflict"


@pytest.mark.parametrize(
    ("labels", "term", "selector", "unmet"),
    [
        ({"disk": "hdd"}, {"matchFields": named("n1"), "matchExpressions": [req("disk", "In", "ssd")]}, {}, "disk In [ssd]"),
        ({GEN: "3"}, {"matchFields": named("n1"), "matchExpressions": [req(GEN, "Gt", "3")]}, {}, f"{GEN} Gt [3]"),
        ({"pool": "p1"}, {"matchFields": named("n1")}, {"pool": "p2"}, "nodeSelector pool=p2"),
    ],
    ids=["expression", "gt", "node-selector"],
)  # fmt: skip
def test_a_named_node_inside_the_zone_is_refused_for_what_it_lacks_not_for_its_zone(
    labels: dict[str, str], term: dict[str, Any], selector: dict[str, str], unmet: str
) -> None:
    """n1 is in zone-a, db-0's zone; the term naming it is refused because n1 does not meet the
    rest of it. The message names what n1 lacks; it never says that n1, in zone-a, is what
    excludes zone-a."""
    store = store_from_objects(
        [b.node("n1", "zone-a", labels=labels), b.node("nc", "zone-c")],
        zones=("zone-a", "zone-b", "zone-c"),
    )
    pod = b.sts_pod(ordinal=0, affinity=terms_affinity(term), node_selector=selector or None)
    outcome = mutate(pod, store)
    assert (outcome.allowed, outcome.reason) == (False, "ZoneConflict")
    assert "(node(s) in zone-a)" not in outcome.message
    assert f"node n1 in zone-a does not meet {unmet}), which excludes" in outcome.message


def test_a_term_naming_two_nodes_selects_none_and_the_refusal_says_so() -> None:
    """matchFields requirements are ANDed, and a node has one name: `In [n1]` with `In [nc]`
    selects no node, whatever zones n1 and nc are in."""
    store = store_from_objects(
        [b.node("n1", "zone-a"), b.node("nc", "zone-c")], zones=("zone-a", "zone-b", "zone-c")
    )
    pod = b.sts_pod(ordinal=0, affinity=terms_affinity({"matchFields": named("n1", "nc")}))
    outcome = mutate(pod, store)
    assert outcome.message.startswith(
        "pod db-0 has required nodeAffinity matchFields metadata.name In [] (no node), which "
        "excludes topology.kubernetes.io/zone=zone-a"
    )


def test_a_template_naming_nodes_of_one_zone_is_refused_for_the_others() -> None:
    """The same rule on the StatefulSet: a template pinned by name to na (zone-a) cannot run
    the ordinals of zone-b and zone-c."""
    fields = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["na"]}]}
    sts = b.statefulset(
        annotations={"stszone.io/zones": "zone-a,zone-b,zone-c"}, affinity=terms_affinity(fields)
    )
    outcome = review.answer(
        "validate", review.from_dict(b.review(sts)), store=ABC, defaults=Defaults()
    )
    assert (outcome.allowed, outcome.reason) == (False, "ZoneConflict")
    assert "excludes zone(s) zone-b, zone-c" in outcome.message


@pytest.mark.parametrize("endpoint", ["mutate", "validate"])
@pytest.mark.parametrize(
    ("node", "says"),
    [("nb", "which has zone zone-b"), ("bare", "which has no label topology.kubernetes.io/zone")],
)
def test_node_name_in_another_zone_is_denied(endpoint: str, node: str, says: str) -> None:
    """spec.nodeName bypasses the scheduler; the kubelet would refuse db-0 (zone-a) on nb and the
    controller re-create it in a loop. Denied by both webhooks, naming the node's zone."""
    pod = b.sts_pod(ordinal=0, node=node)
    which: Endpoint = "mutate" if endpoint == "mutate" else "validate"
    outcome = review.answer(which, review.from_dict(b.review(pod)), store=ABC, defaults=Defaults())
    assert (outcome.allowed, outcome.reason) == (False, "NodeNameConflict")
    assert f"names spec.nodeName {node}, {says}; ordinal 0 belongs on zone zone-a" in (
        outcome.message
    )


def test_node_name_in_its_own_zone_passes() -> None:
    """nodeName na is in zone-a, where ordinal 0 belongs."""
    outcome = review.chain(
        review.from_dict(b.review(b.sts_pod(ordinal=0, node="na"))), store=ABC, defaults=Defaults()
    )
    assert outcome.allowed, outcome.message


def test_node_name_without_the_ordinal_label_is_denied_in_node_ordinal_mode() -> None:
    """node-ordinal: db-2 must run on the node labelled example.io/node=2, not on k1 (named
    by db's template, so every re-created db-2 names it too)."""
    spec = {"stszone.io/mode": "node-ordinal", "stszone.io/node-label": "example.io/node"}
    nodes = [
        b.node("k1", "zone-a", labels={"example.io/node": "1"}),
        b.node("k2", "zone-a", labels={"example.io/node": "2"}),
        b.node("k0", "zone-a"),
    ]
    for node, has in (("k1", "example.io/node=1"), ("k0", "no label example.io/node")):
        sts = b.statefulset(annotations={**spec, "stszone.io/zones": "zone-a"})
        sts["spec"]["template"]["spec"]["nodeName"] = node
        store = store_from_objects([sts, *nodes])
        outcome = mutate(b.sts_pod(ordinal=2, node=node), store)
        assert (outcome.allowed, outcome.reason) == (False, "NodeNameConflict")
        assert outcome.message == (
            f"pod db-2 names spec.nodeName {node}, which has {has}; ordinal 2 belongs on the "
            "node labelled example.io/node=2, so the kubelet would refuse it and the "
            "StatefulSet controller re-create it there in a loop; remove spec.nodeName from the "
            "pod template"
        )
    store = store_from_objects(
        [b.statefulset(annotations={**spec, "stszone.io/zones": "zone-a"}), *nodes]
    )
    assert mutate(b.sts_pod(ordinal=2, node="k2"), store).allowed


HOSTS = store_from_objects(
    [
        b.node("na", "zone-a", labels={"kubernetes.io/hostname": "na"}),
        b.node("nb", "zone-b", labels={"kubernetes.io/hostname": "nb"}),
    ],
    zones=("zone-a", "zone-b", "zone-c"),
)


def test_a_node_selector_naming_a_node_of_another_zone_is_denied_saying_where() -> None:
    """nodeSelector kubernetes.io/hostname=nb says nothing of the zone key, but nb is in zone-b:
    ordinal 0 (zone-a) could never run, so it is denied naming the zone, the constraint and
    where it would have run."""
    pod = b.sts_pod(ordinal=0, node_selector={"kubernetes.io/hostname": "nb"})
    outcome = mutate(pod, HOSTS)
    assert (outcome.allowed, outcome.reason) == (False, "ZoneConflict")
    assert outcome.message.startswith(
        "pod db-0 has nodeSelector kubernetes.io/hostname=nb, which admits no node of "
        "topology.kubernetes.io/zone=zone-a, the zone stszone chose for ordinal 0; it would run "
        "on node nb in zone-b;"
    )


def test_a_zone_the_view_has_no_node_of_is_still_pinned() -> None:
    """Ordinal 2 belongs in zone-c, where the view has no node (a pool at zero): its own
    hostname selector cannot be judged there, so it is admitted and pinned, as before."""
    pod = b.sts_pod(ordinal=2, node_selector={"kubernetes.io/hostname": "na"})
    outcome = mutate(pod, HOSTS)
    assert outcome.allowed, outcome.message
    pinned = apply(pod, outcome.patch)
    assert pinned["metadata"]["annotations"]["stszone.io/zone"] == "zone-c"
