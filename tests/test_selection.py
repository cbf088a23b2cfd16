"""The node selection evaluator against Kubernetes' own, read again from its Go source.

tests/selectionref.py is that reading (it imports nothing of webhook/). Generated here: node
sets with labels (integers as Go's ParseInt reads them or refuses them), pods' nodeSelector on
any key, required terms with every operator and with requirements Kubernetes refuses to parse,
empty terms, matchFields on names and on other fields, ``spec.nodeName``; PersistentVolumes
with every kind of node affinity and with zone and region labels. Each is checked node by node
against the reference; a volume's zones in a view against the product's rule
(tests/guardref.py); and the pod-side judgement of :mod:`webhook.rules.fit` against the rule it
states, on the reference's reading.
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests import builders as b
from tests import guardref
from tests import selectionref as ref
from webhook.errors import BadObject
from webhook.model.extract import volume_info
from webhook.model.selection import go_int, parse_term, pod_selection
from webhook.rules import fit

JSON = dict[str, Any]
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
ZONE = "topology.kubernetes.io/zone"
BETA = "failure-domain.beta.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
HOST = "kubernetes.io/hostname"
GEN = "example.io/gen"
EBS = "topology.ebs.csi.aws.com/zone"

#: Keys: label keys nodes carry, and ones Kubernetes refuses in a requirement.
KEYS = [ZONE, HOST, GEN, "disk", EBS, BETA]
BAD_KEYS = ["", "Bad Key", "a/b/c", "-lead", "x" * 64, "Example.io/x", "/x"]
#: Values: zones, integers (leading zeros, signs, past int64) and invalid label values.
VALUES = ["a", "b", "c", "n1", "n2", "ssd", "0", "4", "007", "10", "-5", "+5", "", "x y", "x" * 64]
VALUES += ["9223372036854775807", "9223372036854775808"]
OPERATORS = ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
NAMES = ["n1", "n2", "n3", "n4"]


@st.composite
def requirements(draw: st.DrawFn) -> JSON:
    """A matchExpression: mostly well formed for its operator, sometimes not."""
    expr: JSON = {}
    if draw(st.integers(0, 12)):
        expr["operator"] = draw(st.sampled_from(OPERATORS) | st.sampled_from(["Gte", "in", ""]))
    op, shape = expr.get("operator"), draw(st.integers(0, 5))
    if draw(st.integers(0, 12)):
        # Gt and Lt mostly on the key whose values are numbers.
        good = st.just(GEN) if op in ("Gt", "Lt") and draw(st.booleans()) else st.sampled_from(KEYS)
        expr["key"] = draw(st.sampled_from(BAD_KEYS) if draw(st.integers(0, 4)) == 0 else good)
    if shape == 0:
        return expr  # values left out
    if op in ("Gt", "Lt") and shape < 4:
        expr["values"] = [draw(st.sampled_from(["0", "4", "007", "10", "-5", "x", "+5"]))]
    elif op in ("Exists", "DoesNotExist") and shape < 4:
        expr["values"] = []
    else:
        expr["values"] = draw(st.lists(st.sampled_from(VALUES), max_size=3))
    return expr


FIELDS = st.fixed_dictionaries(
    {
        "key": st.sampled_from(["metadata.name", "metadata.namespace", ""]),
        "operator": st.sampled_from(["In", "NotIn", "Exists"]),
        "values": st.lists(st.sampled_from([*NAMES, ""]), max_size=2),
    }
)


@st.composite
def terms(draw: st.DrawFn) -> JSON:
    """A nodeSelectorTerm, empty ones included (no key, null, or empty lists)."""
    term: JSON = {}
    for key, items in (("matchExpressions", requirements()), ("matchFields", FIELDS)):
        shape = draw(st.integers(0, 3))
        if shape == 1:
            term[key] = None
        elif shape >= 2:
            term[key] = draw(st.lists(items, max_size=3 if key == "matchExpressions" else 2))
    return term


NODE_LABELS = st.dictionaries(
    st.sampled_from([*KEYS, REGION]),
    st.sampled_from(["a", "b", "c", "n1", "ssd", "0", "4", "007", "10", "+5", "-5", "x"]),
    max_size=5,
)
NODES = st.dictionaries(st.sampled_from(NAMES), NODE_LABELS, min_size=1, max_size=4)


@st.composite
def pod_specs(draw: st.DrawFn) -> JSON:
    """A pod spec's node constraints: nodeSelector on any key, required terms, nodeName."""
    spec: JSON = {}
    if draw(st.booleans()):
        spec["nodeSelector"] = draw(
            st.dictionaries(st.sampled_from(KEYS), st.sampled_from(["a", "b", "n1", "ssd"]))
        )
    shape = draw(st.integers(0, 4))
    if shape == 1:
        spec["affinity"] = {"nodeAffinity": {}}
    elif shape >= 2:
        required = {"nodeSelectorTerms": draw(st.lists(terms(), max_size=3))}
        spec["affinity"] = {"nodeAffinity": {REQUIRED: required}}
    if draw(st.integers(0, 3)) == 0:
        spec["nodeName"] = draw(st.sampled_from(NAMES))
    return spec


ZONE_LABEL_VALUES = ["a", "b", "a__b", " c ", "a____b", "", "d"]


@st.composite
def volumes(draw: st.DrawFn) -> JSON:
    """A PersistentVolume: any node affinity (none, no required, required with any terms) and
    any of the four topology labels VolumeZone reads."""
    pv = b.pv("pv", "a")
    shape = draw(st.integers(0, 4))
    if shape == 0:
        del pv["spec"]["nodeAffinity"]
    elif shape == 1:
        pv["spec"]["nodeAffinity"] = {"required": None}
    else:
        pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"] = draw(
            st.lists(terms(), max_size=3)
        )
    pv["metadata"]["labels"] = draw(
        st.dictionaries(
            st.sampled_from([ZONE, BETA, REGION, "failure-domain.beta.kubernetes.io/region"]),
            st.sampled_from(ZONE_LABEL_VALUES),
            max_size=2,
        )
    )
    return pv


def spec_terms(spec: JSON) -> list[JSON]:
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(REQUIRED) or {}
    found: list[JSON] = required.get("nodeSelectorTerms") or []
    return found


def required(*terms: JSON) -> JSON:
    """A pod spec whose required node affinity has these terms."""
    return {"affinity": {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": list(terms)}}}}


def expressions(*exprs: tuple[str, str, list[str]]) -> JSON:
    return {"matchExpressions": [{"key": k, "operator": op, "values": v} for k, op, v in exprs]}


NUMBERED = {"n1": {GEN: "007"}, "n2": {GEN: "4"}, "n3": {GEN: "+5"}, "n4": {}}
FIELDS_ONLY = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n9"]}]}


@settings(max_examples=400)
@given(nodes=NODES, spec=pod_specs(), pv=volumes())
@example(
    nodes={"n1": {ZONE: "a"}},
    spec={"affinity": {"nodeAffinity": {REQUIRED: {}}}},
    pv=b.pv("pv", "a"),
)
@example(nodes=NUMBERED, spec=required(expressions((GEN, "Gt", ["4"]))), pv=b.pv("pv", "a"))
@example(nodes=NUMBERED, spec=required(expressions((GEN, "Lt", ["5"]))), pv=b.pv("pv", "a"))
@example(nodes=NUMBERED, spec=required(expressions(("disk", "NotIn", ["x y"]))), pv=b.pv("pv", "a"))
@example(
    nodes={"n1": {ZONE: "a"}},
    spec={},
    pv={
        **b.pv("pv", "b"),
        "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [FIELDS_ONLY]}}},
    },
)
def test_property_the_evaluator_reads_nodes_as_kubernetes_does(
    nodes: dict[str, dict[str, str]], spec: JSON, pv: JSON
) -> None:
    """Node by node: every term as ``LazyErrorNodeSelector`` reads it, the pod as
    ``RequiredNodeAffinity`` and the kubelet read it, the volume as VolumeBinding and
    VolumeZone read it."""
    selection = pod_selection(spec)
    pinning = volume_info(pv).pinning
    for name, labels in nodes.items():
        for term in spec_terms(spec):
            empty = not (term.get("matchExpressions") or term.get("matchFields"))
            want = False if empty else ref.term_match(term, labels, name)
            assert parse_term(term).matches(labels, name) == want, term
        assert selection.admits(labels, name) == ref.pod_match(spec, labels, name)
        assert pinning.admits(labels) == ref.volume_admits(pv, labels)


def test_volumes_written_alike_share_a_record_and_no_two_writings_are_confused() -> None:
    """100,000 volumes in three zones hold three records; a value that only looks like another
    (a YAML date beside its text, a number beside its digits) is read as what it is."""
    assert volume_info(b.pv("pv-1", "a")).pinning is volume_info(b.pv("pv-2", "a")).pinning
    for text, other in (("2026-12-05", datetime.date(2026, 12, 5)), ("5", 5)):
        as_text, as_other = b.pv("pv-t", text), b.pv("pv-o", text)
        terms = as_other["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
        terms[0]["matchExpressions"][0]["values"] = [other]
        # Values must be strings: a term with any other matches no node.
        assert volume_info(as_text).pinning.admits({ZONE: text})
        assert not volume_info(as_other).pinning.admits({ZONE: text})


@given(st.sampled_from([*VALUES, "00", "+0", "-0", "1_0", " 1", "\u0661"]))  # an Arabic 1
def test_property_integers_are_read_as_go_parse_int_reads_them(text: str) -> None:
    assert go_int(text) == ref.parse_int(text)


@st.composite
def zoned_nodes(draw: st.DrawFn) -> list[JSON]:
    """Nodes in zones a, b, c (one without a zone label), some carrying EBS's zone key."""
    made = []
    for name in draw(st.lists(st.sampled_from(NAMES), min_size=0, max_size=4, unique=True)):
        zone = draw(st.sampled_from(["a", "b", "c", None]))
        labels = draw(
            st.dictionaries(
                st.sampled_from([GEN, "disk", REGION]),
                st.sampled_from(["4", "5", "10", "ssd", "r1"]),
            )
        )
        if zone is not None and draw(st.booleans()):
            labels[EBS] = zone
        made.append(b.node(name, zone, labels=labels))
    return made


@st.composite
def zone_volumes(draw: st.DrawFn) -> JSON:
    """Volumes whose requirements name zones (on the zone keys, the CSI key and a zone with
    no node yet), nodes, and other labels, with every operator."""
    keys = st.sampled_from([ZONE, EBS, BETA, HOST, GEN, "disk"])
    value_lists = st.lists(
        st.sampled_from(["a", "b", "c", "d", "n1", "n2", "4", "ssd"]), min_size=1, max_size=2
    )
    expr = st.one_of(
        st.builds(
            lambda k, op, v: {"key": k, "operator": op, "values": v},
            keys,
            st.sampled_from(["In", "NotIn"]),
            value_lists,
        ),
        st.builds(
            lambda k, op: {"key": k, "operator": op},
            keys,
            st.sampled_from(["Exists", "DoesNotExist"]),
        ),
        st.builds(
            lambda op, v: {"key": GEN, "operator": op, "values": [v]},
            st.sampled_from(["Gt", "Lt"]),
            st.sampled_from(["5", "x"]),
        ),
    )
    term = st.one_of(
        st.builds(lambda e: {"matchExpressions": e}, st.lists(expr, min_size=0, max_size=3)),
        st.just({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}),
    )
    pv = b.pv("pv", "a")
    if draw(st.integers(0, 5)) == 0:
        del pv["spec"]["nodeAffinity"]
    else:
        pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"] = draw(
            st.lists(term, min_size=0, max_size=3)
        )
    pv["metadata"]["labels"] = draw(
        st.dictionaries(
            st.sampled_from([ZONE, BETA, REGION]),
            st.sampled_from(["a", "b__c", "d", "r1"]),
            max_size=2,
        )
    )
    return pv


@settings(max_examples=300)
@given(nodes=zoned_nodes(), pv=zone_volumes(), key=st.sampled_from([ZONE, EBS, "disk"]))
def test_property_a_volume_is_in_the_zones_of_the_nodes_it_admits(
    nodes: list[JSON], pv: JSON, key: str
) -> None:
    """The view's zones of a volume (any zone, some, or nowhere) are those the product's rule
    gives, on the set's topology key; the nodes it reaches are those Kubernetes admits."""
    store = guardref.view([*nodes, pv])
    want = guardref.volume_where(store, pv, key)
    got = store.volume_zones("pv", key)
    assert (guardref.ANY if got == frozenset() else got) == want
    reached = store.volume_nodes("pv", key)
    if want == guardref.ANY:
        assert reached is None
    else:
        carried = {k for n in store.nodes.values() for k in n.labels}
        zone_keys = guardref.ZONE_KEYS if key in guardref.ZONE_KEYS else (key,)
        admitted = set()
        for node in store.nodes.values():
            zone = node.labels.get(key)
            seen = {k: zone for k in zone_keys if k not in carried} if zone else {}
            if ref.volume_admits(pv, {**seen, **node.labels}):
                admitted.add(node.name)
        assert reached == frozenset(admitted)


@st.composite
def placed_pods(draw: st.DrawFn) -> JSON:
    """Pod constraints that often admit some of :func:`zoned_nodes`: a hostname or another
    label in nodeSelector, well-formed terms on any key, a nodeName; or any of
    :func:`pod_specs`."""
    if draw(st.integers(0, 3)) == 0:
        spec: JSON = draw(pod_specs())
        return spec
    spec = {}
    if draw(st.booleans()):
        key = draw(st.sampled_from([HOST, GEN, "disk", ZONE]))
        value = draw(st.sampled_from([*NAMES, "4", "10", "ssd", "a", "b"]))
        spec["nodeSelector"] = {key: value}
    if draw(st.booleans()):
        pv = draw(zone_volumes())
        required = pv["spec"].get("nodeAffinity", {}).get("required") or {"nodeSelectorTerms": []}
        spec["affinity"] = {"nodeAffinity": {REQUIRED: required}}
    if draw(st.integers(0, 5)) == 0:
        spec["nodeName"] = draw(st.sampled_from(NAMES))
    return spec


@settings(max_examples=300)
@given(nodes=zoned_nodes(), spec=placed_pods(), zone=st.sampled_from(["a", "b", "c"]))
@example(
    nodes=[b.node("n1", "a"), b.node("n2", "b")], spec={"nodeSelector": {HOST: "n2"}}, zone="a"
)
@example(nodes=[b.node("n1", "a"), b.node("n2", "b")], spec={"nodeName": "n2"}, zone="a")
def test_property_the_pods_own_constraints_decide_through_the_zones_nodes(
    nodes: list[JSON], spec: JSON, zone: str
) -> None:
    """When the view holds nodes of the zone and the pod's constraints admit some node: they
    leave it the zone exactly when they admit a node of it, and otherwise name where it would
    have run (the first few nodes per zone, by the reference)."""
    store = guardref.view(nodes)
    admitted = {
        n.name: n.labels.get(ZONE, "")
        for n in store.nodes.values()
        if ref.pod_match(spec, n.labels, n.name)
    }
    in_zone = [n for n in store.nodes.values() if n.labels.get(ZONE) == zone]
    if pod_selection(spec).required == ():  # no term: the API server refuses such a pod
        with pytest.raises(BadObject, match="must have at least one node selector term"):
            fit.fit(pod_selection(spec), key=ZONE, value=zone, view=store)
        return
    got = fit.fit(pod_selection(spec), key=ZONE, value=zone, view=store)
    if not in_zone or not admitted:
        assert not got.by_nodes or got.allowed
        return
    assert got.allowed == (zone in admitted.values())
    # Without constraints of its own there is nothing to judge on the nodes.
    assert got.by_nodes == pod_selection(spec).constrained
    if not got.allowed:
        assert got.conflict
        where: dict[str, list[str]] = {}
        for name, at in sorted(admitted.items()):
            where.setdefault(at, []).append(name)
        assert got.elsewhere == {z: tuple(n[: fit.NAMED]) for z, n in sorted(where.items())}
