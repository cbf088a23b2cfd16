"""The pod's own node constraints against its zone, judged through the view's nodes.

On the guard's example cluster (``deploy/examples/guard/cluster.yaml``: node-a1, node-a2 in
zone-a, node-b1, node-b2 in zone-b, node-c1 in zone-c): db-0 belongs in zone-a. A pod
template's nodeSelector or required affinity naming a node of another zone (by hostname, the
way real templates pin a pod) leaves it no node of zone-a; the judgement says which constraint
and where the pod would have run. A zone the view holds no node of (a pool at zero) is judged
by its name alone, as a pod whose constraints admit no node of the view at all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import builders as b
from webhook.cluster.clusterfile import store_from_objects
from webhook.errors import BadObject
from webhook.model.selection import pod_selection, template_selection
from webhook.model.store import Store
from webhook.rules import affinity, fit

JSON = dict[str, Any]
EXAMPLE = Path(__file__).resolve().parent.parent / "deploy" / "examples" / "guard" / "cluster.yaml"
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def view(*, without: tuple[str, ...] = ()) -> Store:
    items = yaml.safe_load(EXAMPLE.read_text())["items"]
    return store_from_objects([i for i in items if i["metadata"]["name"] not in without])


def required(*exprs: tuple[str, str, list[str]]) -> JSON:
    term = {"matchExpressions": [{"key": k, "operator": op, "values": v} for k, op, v in exprs]}
    return {"affinity": {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [term]}}}}


@pytest.mark.parametrize(
    ("spec", "conflict", "where"),
    [
        (
            {"nodeSelector": {HOST: "node-b1"}},
            "nodeSelector kubernetes.io/hostname=node-b1",
            {"zone-b": ("node-b1",)},
        ),
        (
            required((HOST, "In", ["node-b2", "node-c1"])),
            "required nodeAffinity kubernetes.io/hostname In [node-b2, node-c1]",
            {"zone-b": ("node-b2",), "zone-c": ("node-c1",)},
        ),
        (
            required((HOST, "NotIn", ["node-a1", "node-a2"])),
            "required nodeAffinity kubernetes.io/hostname NotIn [node-a1, node-a2]",
            {"zone-b": ("node-b1", "node-b2"), "zone-c": ("node-c1",)},
        ),
        (
            {"nodeName": "node-c1"},
            "spec.nodeName node-c1 (a node in zone-c)",
            {"zone-c": ("node-c1",)},
        ),
    ],
    ids=["nodeSelector hostname", "In hostnames", "NotIn hostnames", "nodeName"],
)
def test_constraints_that_admit_no_node_of_the_zone_are_named_with_where_it_would_run(
    spec: JSON, conflict: str, where: dict[str, tuple[str, ...]]
) -> None:
    got = fit.fit(pod_selection(spec), key=ZONE, value="zone-a", view=view())
    assert got.by_nodes and not got.allowed
    assert (got.conflict, dict(got.elsewhere)) == (conflict, where)
    assert got.where() == "; ".join(
        f"{'node' if len(n) == 1 else 'nodes'} {', '.join(n)} in {z}" for z, n in where.items()
    )


@pytest.mark.parametrize(
    "spec",
    [
        {},
        {"nodeSelector": {HOST: "node-a2"}},
        required((HOST, "NotIn", ["node-a1"])),
        required((ZONE, "In", ["zone-a", "zone-b"])),
        {"nodeName": "node-a1"},
    ],
)
def test_constraints_that_admit_a_node_of_the_zone_leave_it(spec: JSON) -> None:
    got = fit.fit(pod_selection(spec), key=ZONE, value="zone-a", view=view())
    assert got.allowed and got.elsewhere == {}
    # No constraint of its own: nothing to judge, on nodes or by name.
    assert got.by_nodes == bool(spec)


def test_a_zone_without_nodes_is_judged_by_its_name() -> None:
    """zone-c's only node is gone (a pool at zero): a pod pinned elsewhere by hostname is left
    the zone (pinned, it waits for a node), one whose selector names another zone is not."""
    store = view(without=("node-c1",))
    by_host = fit.fit(
        pod_selection({"nodeSelector": {HOST: "node-b1"}}), key=ZONE, value="zone-c", view=store
    )
    assert (by_host.by_nodes, by_host.allowed) == (False, True)
    by_zone = fit.fit(
        pod_selection({"nodeSelector": {ZONE: "zone-b"}}), key=ZONE, value="zone-c", view=store
    )
    assert (by_zone.by_nodes, by_zone.conflict) == (
        False,
        "nodeSelector topology.kubernetes.io/zone=zone-b",
    )


def test_constraints_no_node_meets_yet_are_judged_by_the_zones_name() -> None:
    """A selector on a node pool no node carries yet (it scales from zero on demand)."""
    got = fit.fit(
        pod_selection({"nodeSelector": {"pool": "nvme"}}), key=ZONE, value="zone-a", view=view()
    )
    assert (got.by_nodes, got.allowed) == (False, True)


def test_a_templates_zones_are_those_some_node_of_it_admits() -> None:
    """A StatefulSet template pinned to zone-b's nodes by hostname leaves it zone-b only."""
    terms = required((HOST, "In", ["node-b1", "node-b2"]))["affinity"]["nodeAffinity"][REQUIRED]
    selection = template_selection(terms["nodeSelectorTerms"], {})
    zones = ("zone-a", "zone-b", "zone-c")
    assert fit.allowed(selection, ZONE, zones, view=view()) == ["zone-b"]


def test_constraints_each_met_in_the_zone_but_never_together_are_named_together() -> None:
    """In zone-a, na1 has the disk the nodeSelector asks for and na2 the GPU the affinity asks
    for; only nb1, in zone-b, has both."""
    store = store_from_objects(
        [
            b.node("na1", "zone-a", labels={"disk": "ssd"}),
            b.node("na2", "zone-a", labels={"gpu": "yes"}),
            b.node("nb1", "zone-b", labels={"disk": "ssd", "gpu": "yes"}),
        ]
    )
    spec = {"nodeSelector": {"disk": "ssd"}, **required(("gpu", "Exists", []))}
    got = fit.fit(pod_selection(spec), key=ZONE, value="zone-a", view=store)
    assert got.conflict == "nodeSelector disk=ssd together with required nodeAffinity gpu Exists"
    assert got.where() == "node nb1 in zone-b"


@pytest.mark.parametrize("without", [(), ("node-a1", "node-a2")], ids=["by-nodes", "by-name"])
@pytest.mark.parametrize(
    "spec",
    [{}, {"nodeSelector": {HOST: "node-b1"}}, {"nodeName": "node-a1"}],
    ids=["alone", "with-selector", "with-node-name"],
)
def test_a_required_affinity_with_no_term_is_malformed_on_every_judgement(
    spec: JSON, without: tuple[str, ...]
) -> None:
    """A pod's required affinity with no term gets the API server's refusal, NO_TERM, before
    any judgement of the zone, whether it has nodes in the view or not and whatever else the
    pod says; and a template's or pod's terms, none, read by name alone
    (:mod:`webhook.rules.affinity`) are no constraint: no judgement meets "no term"."""
    pod = {**spec, "affinity": {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": []}}}}
    with pytest.raises(BadObject) as raised:
        fit.fit(pod_selection(pod), key=ZONE, value="zone-a", view=view(without=without))
    assert raised.value.message == fit.NO_TERM
    assert template_selection([], dict(spec.get("nodeSelector", {}))).required is None
    assert affinity.exclusion(spec, ZONE, "zone-b", terms=[]) is None
