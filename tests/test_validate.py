"""/validate for StatefulSet CREATE/UPDATE checks and the final state of pods."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests import builders as b
from tests.work import CountingStore, line_budget
from webhook.cluster.clusterfile import store_from_objects
from webhook.config import Defaults
from webhook.model.store import Store
from webhook.rules.ordinals import WALK_LIMIT
from webhook.wire import review
from webhook.wire.patch import apply

ZONE_KEY = "topology.kubernetes.io/zone"
DEFAULTS = Defaults()
ABC = store_from_objects([], zones=("a", "b", "c"))
#: Lines of webhook code a check on 1000 ordinals may run (~60,000 today): a walk over
#: two billion fails at once (tests.work).
LINES = 1_000_000


def validate(obj: dict[str, Any], store: Store = ABC, **kw: Any) -> review.Answer:
    """Send ``obj`` through /validate alone."""
    return review.answer(
        "validate", review.from_dict(b.review(obj, **kw)), store=store, defaults=DEFAULTS
    )


def chain(obj: dict[str, Any], store: Store = ABC) -> review.Answer:
    """What the API server makes of both webhooks for a CREATE of ``obj``."""
    return review.chain(review.from_dict(b.review(obj)), store=store, defaults=DEFAULTS)


# --- StatefulSet CREATE / UPDATE -------------------------------------------------------------


@pytest.mark.parametrize(
    ("annotations", "says"),
    [
        (
            {"stszone.io/zones": ""},
            'stszone.io/zones is empty; list the zones in order, e.g. stszone.io/zones: "zone-a,zone-b,zone-c"',
        ),
        ({"stszone.io/zones": "a,b,a"}, "stszone.io/zones lists a more than once; each zone once"),
        (
            {"stszone.io/zones": "b,a,b,a"},
            "stszone.io/zones lists a, b more than once; each zone once",
        ),
        (
            {"stszone.io/zones": "a_,b,c_"},
            "stszone.io/zones has invalid zone name(s) 'a_', 'c_'",
        ),
        (
            {"stszone.io/mode": "pinned"},
            "stszone.io/mode 'pinned' is not a mode; use one of affinity, scheduler, node-ordinal",
        ),
        (
            {"stszone.io/storage-class-template": "ssd"},
            'has no {zone} placeholder; e.g. stszone.io/storage-class-template: "ssd-{zone}"',
        ),
        (
            {"stszone.io/allow-zone-loss": "yes"},
            'stszone.io/allow-zone-loss must be "true" or "false", got \'yes\'; e.g. stszone.io/allow-zone-loss: "true"',
        ),
        ({"stszone.io/mode": "node-ordinal"}, "needs stszone.io/node-label"),
        ({"stszone.io/zone": "a"}, "unknown annotation(s) stszone.io/zone"),
        (
            {
                "stszone.io/zones": "A_1,b_2,c_3,d_4,e_5",
                "stszone.io/storage-class-template": "{zone}",
            },
            "stszone.io/storage-class-template '{zone}' does not give a valid StorageClass name (a "
            "lower-case DNS-1123 subdomain) for every zone: A_1 -> 'a_1', b_2 -> 'b_2', c_3 -> "
            "'c_3' and 2 more; e.g.",
        ),
        (
            {"stszone.io/zones": "ok,b_2,c_3,d_4", "stszone.io/storage-class-template": "{zone}"},
            "for every zone: b_2 -> 'b_2', c_3 -> 'c_3', d_4 -> 'd_4'; e.g.",
        ),
        (
            {"stszone.io/zones": "a_1,b_2,c_3,d_4", "stszone.io/storage-class-template": "{zone}"},
            "for every zone: a_1 -> 'a_1', b_2 -> 'b_2', c_3 -> 'c_3' and 1 more; e.g.",
        ),
        (
            {"stszone.io/storage-class-template": "{zone}_ssd"},
            "for every zone: zone-a -> 'zone-a_ssd'; e.g.",
        ),
    ],
)
@pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
def test_malformed_annotations_are_denied_with_an_example(
    annotations: dict[str, str], says: str, operation: str
) -> None:
    """Each malformed annotation is refused with what is wrong and an example of right."""
    sts = b.statefulset(annotations=annotations)
    old = b.statefulset() if operation == "UPDATE" else None
    outcome = validate(sts, operation=operation, old=old)
    assert not outcome.allowed
    assert (outcome.code, outcome.reason) == (422, "Invalid")
    assert outcome.message.startswith("StatefulSet db: ") and says in outcome.message


def test_update_leaving_broken_annotations_as_they_were_is_allowed_with_a_warning() -> None:
    """Ratcheting: an image bump on a set whose annotations were already broken is not blocked."""
    old = b.statefulset(annotations={"stszone.io/zones": "a,,b"})
    new = copy.deepcopy(old)
    new["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox:1.37"
    outcome = validate(new, operation="UPDATE", old=old)
    assert outcome.allowed
    assert any("empty entry" in w and "unchanged by this update" in w for w in outcome.warnings)
    changed = b.statefulset(annotations={"stszone.io/zones": "a,,c"})
    assert not validate(changed, operation="UPDATE", old=old).allowed


def test_update_keeping_an_excluding_template_is_allowed_with_a_warning() -> None:
    """Ratcheting for the template check: only a change to zones or constraints is refused."""
    selector = {ZONE_KEY: "a"}
    old = b.statefulset(annotations={"stszone.io/zones": "a,b,c"}, node_selector=selector)
    new = copy.deepcopy(old)
    new["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox:1.37"
    outcome = validate(new, operation="UPDATE", old=old)
    assert outcome.allowed and any("excludes zone(s) b, c" in w for w in outcome.warnings)
    widened = b.statefulset(
        annotations={"stszone.io/zones": "a,b,c"}, node_selector={ZONE_KEY: "b"}
    )
    assert not validate(widened, operation="UPDATE", old=old).allowed


@pytest.mark.parametrize(
    ("replicas", "warned"), [(0, False), (1, True), (2, True), (3, False), (7, False)]
)
def test_fewer_replicas_than_zones_is_warned(replicas: int, warned: bool) -> None:
    """Below one pod per zone, some zone holds none: a warning, not a denial; at zero no zone
    is held, so none is left empty (tests/test_stopped_warnings.py)."""
    outcome = validate(b.statefulset(replicas=replicas, annotations={"stszone.io/zones": "a,b,c"}))
    assert outcome.allowed
    assert bool(outcome.warnings) == warned
    if warned:
        assert outcome.warnings[0].startswith(f"db: {replicas} replica(s) for 3 zones")


@pytest.mark.parametrize(
    ("affinity", "selector", "excluded", "constraint"),
    [
        (None, {ZONE_KEY: "b"}, "a, c", f"nodeSelector {ZONE_KEY}=b"),
        (
            b.zone_affinity([(ZONE_KEY, "NotIn", ["c"])]),
            None,
            "c",
            f"required nodeAffinity {ZONE_KEY} NotIn [c]",
        ),
        (
            b.zone_affinity([(ZONE_KEY, "In", ["a"])], [(ZONE_KEY, "In", ["b"])]),
            None,
            "c",
            "In [a] / ",
        ),
        (
            b.zone_affinity([("disk", "In", ["ssd"]), (ZONE_KEY, "DoesNotExist", [])]),
            None,
            "a, b, c",
            "DoesNotExist",
        ),
    ],
)
def test_template_that_excludes_listed_zones_is_denied(
    affinity: dict[str, Any] | None, selector: dict[str, str] | None, excluded: str, constraint: str
) -> None:
    """The template's own constraints rule out some zones: those ordinals could never run."""
    sts = b.statefulset(
        annotations={"stszone.io/zones": "a,b,c"}, affinity=affinity, node_selector=selector
    )
    outcome = validate(sts)
    assert not outcome.allowed and outcome.reason == "ZoneConflict"
    assert f"excludes zone(s) {excluded} of stszone.io/zones (a,b,c)" in outcome.message
    assert constraint in outcome.message


@pytest.mark.parametrize(
    ("nodes", "named"),
    [
        ([], "the server's zones (--zones) (a,b,c)"),
        ([b.node(f"n{z}", z) for z in "abc"], f"the nodes' zones ({ZONE_KEY}) (a,b,c)"),
    ],
    ids=["--zones", "nodes"],
)
def test_a_template_excluding_zones_of_the_servers_list_names_that_list(
    nodes: list[dict[str, Any]], named: str
) -> None:
    """db, without stszone.io/zones, gets its zones from --zones (else its nodes); an update
    pinning its template to zone b is refused naming that list, which the set does not carry
    as an annotation, and told how to give it one."""
    store = store_from_objects(nodes, zones=("a", "b", "c") if not nodes else None)
    old = b.statefulset(annotations={})
    sts = b.statefulset(annotations={}, node_selector={ZONE_KEY: "b"})
    outcome = validate(sts, store, operation="UPDATE", old=old)
    assert (outcome.allowed, outcome.reason) == (False, "ZoneConflict")
    assert f"excludes zone(s) a, c of {named}, so the ordinals" in outcome.message
    assert outcome.message.endswith(
        'list only the zones it allows in stszone.io/zones, e.g. stszone.io/zones: "b"'
    ), outcome.message


def test_a_template_labelled_skip_may_exclude_zones() -> None:
    """stszone places no pod of a skipped template, so its constraints contradict no zone."""
    sts = b.statefulset(annotations={"stszone.io/zones": "a,b,c"}, node_selector={ZONE_KEY: "b"})
    assert not validate(sts).allowed
    sts["spec"]["template"]["metadata"].setdefault("labels", {})["stszone.io/skip"] = "true"
    outcome = validate(sts)
    assert outcome.allowed and not any("excludes" in w for w in outcome.warnings)


@pytest.mark.parametrize(
    "affinity",
    [
        b.zone_affinity([(ZONE_KEY, "In", ["a", "b", "c"])]),
        b.zone_affinity([("disk", "In", ["ssd"])], [(ZONE_KEY, "In", ["c"])]),
        b.zone_affinity([(ZONE_KEY, "Exists", [])]),
    ],
)
def test_template_constraints_that_allow_every_zone_pass(affinity: dict[str, Any]) -> None:
    """ORed terms that together reach every listed zone are fine."""
    assert validate(
        b.statefulset(annotations={"stszone.io/zones": "a,b,c"}, affinity=affinity)
    ).allowed


@pytest.mark.parametrize(
    ("affinity", "selector", "excluded"),
    [
        (b.zone_affinity([("example.io/node", "NotIn", ["2"])]), None, "2"),
        (None, {"example.io/node": "1"}, "0, 2"),
    ],
    ids=["affinity", "nodeSelector"],
)
def test_node_ordinal_template_excluding_an_ordinal_label_is_denied(
    affinity: dict[str, Any] | None, selector: dict[str, str] | None, excluded: str
) -> None:
    """In node-ordinal mode the template must not rule out the node labels of its ordinals,
    by its affinity or by a nodeSelector copied from one pod."""
    spec = {"stszone.io/mode": "node-ordinal", "stszone.io/node-label": "example.io/node"}
    sts = b.statefulset(annotations=spec, affinity=affinity, node_selector=selector, replicas=3)
    outcome = validate(sts)
    assert not outcome.allowed
    assert f"excludes example.io/node value(s) {excluded}, so those" in outcome.message


def test_a_node_ordinal_set_is_not_warned_about_zones() -> None:
    """Node-ordinal pins ordinals to nodes, not zones: two replicas for three listed zones, or
    a listed zone without nodes, are no reason to warn."""
    spec = {"stszone.io/zones": "a,b,c", "stszone.io/mode": "node-ordinal",
            "stszone.io/node-label": "example.io/node"}  # fmt: skip
    store = store_from_objects([b.node("n0", "a", labels={"example.io/node": "0"})])
    assert validate(b.statefulset(annotations=spec, replicas=2), store).warnings == ()


@pytest.mark.parametrize(
    ("selector", "fix"),
    [
        ({ZONE_KEY: "b"}, 'list only the zones it allows in stszone.io/zones, e.g. stszone.io/zones: "b"'),
        ({ZONE_KEY: "elsewhere"}, "list only the zones it allows in stszone.io/zones"),
    ],
    ids=["some-allowed", "none-allowed"],
)  # fmt: skip
def test_a_refused_template_is_told_the_zone_list_that_would_pass(
    selector: dict[str, str], fix: str
) -> None:
    """The refusal ends with what to do: the list of the zones the template allows, when it
    allows some."""
    outcome = validate(
        b.statefulset(annotations={"stszone.io/zones": "a,b,c"}, node_selector=selector)
    )
    assert not outcome.allowed and outcome.message.endswith(fix)


def test_an_unnamed_statefulset_is_called_unnamed() -> None:
    """A set created with generateName is validated without a name: the warnings say
    (unnamed)."""
    sts = b.statefulset(replicas=2, annotations={"stszone.io/zones": "a,b,c"})
    del sts["metadata"]["name"]
    outcome = validate(sts)
    assert outcome.allowed
    assert outcome.warnings == (
        "(unnamed): 2 replica(s) for 3 zones leaves a zone empty; 3 or more survive the loss of "
        "any zone",
    )


def test_zone_list_change_warns_with_the_ordinals_that_move() -> None:
    """a,b,c -> c,b,a moves ordinals 0 and 2 (swap); ordinal 3's volume keeps it in a."""
    store = store_from_objects(
        [b.pvc("data-db-3", volume="pv-3"), b.pv("pv-3", "a")], zones=("a", "b", "c")
    )
    old = b.statefulset(replicas=4, annotations={"stszone.io/zones": "a,b,c"})
    new = b.statefulset(replicas=4, annotations={"stszone.io/zones": "c,b,a"})
    outcome = validate(new, store, operation="UPDATE", old=old)
    assert outcome.allowed
    assert outcome.warnings == (
        "db: new stszone.io/zones moves 2 ordinal(s) when re-created: 0 (a->c) and 2 (c->a)",
        "db: ordinal(s) 3 (a, pv-3) stay with their volumes",
    )


def test_a_topology_key_change_warns_that_every_ordinal_is_placed_by_the_new_label() -> None:
    """The same zone names under another label are other places: the warning says every
    ordinal follows the new label, not that none moves (compared name by name, a,b,c under
    either key would look unchanged)."""
    store = store_from_objects([], zones=("a", "b", "c"))
    zones = {"stszone.io/zones": "a,b,c"}
    old = b.statefulset(replicas=3, annotations=zones)
    new = b.statefulset(replicas=3, annotations={**zones, "stszone.io/topology-key": "rack"})
    outcome = validate(new, store, operation="UPDATE", old=old)
    assert outcome.allowed
    assert outcome.warnings == (
        "db: new stszone.io/topology-key rack places every ordinal by its node's rack label "
        "when re-created (was topology.kubernetes.io/zone); `stszone rebalance` can move its "
        "existing pods",
    )
    unchanged = validate(new, store, operation="UPDATE", old=new)
    assert unchanged.warnings == ()


def test_a_zone_list_change_lists_the_moves_past_an_ordinal_it_cannot_place() -> None:
    """Ordinal 0's two volumes sit in different zones (it cannot be placed at all, and its pod
    creation says so): the others that move are still listed."""
    store = store_from_objects(
        [b.pvc("data-db-0", volume="pv-a"), b.pv("pv-a", "a"),
         b.pvc("logs-db-0", volume="pv-b"), b.pv("pv-b", "b")],
        zones=("a", "b", "c"),
    )  # fmt: skip
    old = b.statefulset(templates=("data", "logs"), annotations={"stszone.io/zones": "a,b,c"})
    new = b.statefulset(templates=("data", "logs"), annotations={"stszone.io/zones": "b,c,a"})
    outcome = validate(new, store, operation="UPDATE", old=old)
    assert outcome.warnings == (
        "db: new stszone.io/zones moves 2 ordinal(s) when re-created: 1 (b->c) and 2 (c->a)",
    )


@pytest.mark.parametrize(
    ("old_annotations", "new_annotations", "store"),
    [
        ({"stszone.io/zones": "a,b,c", "stszone.io/mode": "node-ordinal", "stszone.io/node-label": "example.io/node"},
         {"stszone.io/zones": "c,b,a", "stszone.io/mode": "node-ordinal", "stszone.io/node-label": "example.io/node"},
         ABC),
        ({}, {"stszone.io/zones": "a,b,c"}, store_from_objects([])),
    ],
    ids=["node-ordinal", "first-list-where-no-zone-was-known"],
)  # fmt: skip
def test_a_zone_list_change_that_moves_nothing_gives_no_warning(
    old_annotations: dict[str, str], new_annotations: dict[str, str], store: Store
) -> None:
    """Zones pin nothing in node-ordinal mode; and a set that had no zone at all (no list, no
    --zones, no labelled node) had no ordinal placed by one."""
    old = b.statefulset(annotations=old_annotations)
    new = b.statefulset(annotations=new_annotations)
    outcome = validate(new, store, operation="UPDATE", old=old)
    assert outcome.allowed and outcome.warnings == ()


def test_a_switch_out_of_node_ordinal_mode_names_the_ordinals_leaving_their_nodes_zones() -> None:
    """Ordinals 0, 1, 2 run on the nodes labelled 0, 1, 2, in zones b, c, c. Back in affinity
    mode with the same list a,b,c the rule puts them in a, b, c: 0 and 1 move, 2 stays. With
    b,c,a only 2 moves. Each is compared with where its labelled node put it, never with a
    rule the node-ordinal set was never placed by (which would have 2 and 3 moves)."""
    label = "example.io/node"
    store = store_from_objects(
        [b.node("n0", "b", labels={label: "0"}), b.node("n1", "c", labels={label: "1"}),
         b.node("n2", "c", labels={label: "2"}), b.node("n3", "a")]
    )  # fmt: skip
    pinned = {"stszone.io/zones": "a,b,c", "stszone.io/mode": "node-ordinal",
              "stszone.io/node-label": label}  # fmt: skip
    old = b.statefulset(annotations=pinned)
    same_list = b.statefulset(annotations={**pinned, "stszone.io/mode": "affinity"})
    outcome = validate(same_list, store, operation="UPDATE", old=old)
    assert outcome.allowed
    # The label kept for the way back is read no more, and the client is told so.
    assert outcome.warnings == (
        NODE_LABEL_TEXT.format(mode="affinity"),
        "db: new stszone.io/mode affinity moves 2 ordinal(s) when re-created: 0 (b->a) and 1 "
        "(c->b)",
    )
    assert [n.reason for n in outcome.notices] == ["MembersMoved"]
    new_list = b.statefulset(
        annotations={**pinned, "stszone.io/mode": "affinity", "stszone.io/zones": "b,c,a"}
    )
    outcome = validate(new_list, store, operation="UPDATE", old=old)
    assert outcome.warnings == (
        NODE_LABEL_TEXT.format(mode="affinity"),
        "db: new stszone.io/mode affinity moves 1 ordinal(s) when re-created: 2 (c->a)",
    )


def test_unchanged_or_equivalent_zone_list_gives_no_warning() -> None:
    """Writing down the server's list on a set that had none changes no ordinal's zone."""
    old = b.statefulset(annotations={})
    new = b.statefulset(annotations={"stszone.io/zones": "a,b,c"})
    assert validate(new, operation="UPDATE", old=old).warnings == ()
    assert validate(new, operation="UPDATE", old=new).warnings == ()


def test_every_malformed_annotation_is_named_in_one_refusal() -> None:
    outcome = validate(
        b.statefulset(
            annotations={"stszone.io/mode": "pinned", "stszone.io/allow-zone-loss": "yes"}
        )
    )
    assert (outcome.allowed, outcome.reason) == (False, "Invalid")
    assert outcome.message == (
        "StatefulSet db: stszone.io/mode 'pinned' is not a mode; use one of affinity, scheduler, "
        'node-ordinal (e.g. stszone.io/mode: "affinity"); stszone.io/allow-zone-loss must be '
        '"true" or "false", got \'yes\'; e.g. stszone.io/allow-zone-loss: "true"'
    )


def test_an_update_keeping_old_faults_is_warned_of_each() -> None:
    """Broken annotations, a template pinned to zone a and two replicas, none changed by an
    image bump: allowed, with one warning for each, in that order."""
    old = b.statefulset(
        replicas=2, annotations={"stszone.io/zones": "a,,b"}, node_selector={ZONE_KEY: "a"}
    )
    new = copy.deepcopy(old)
    new["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox:1.37"
    outcome = validate(new, operation="UPDATE", old=old)
    assert outcome.allowed
    ratchet, excluded, replicas = outcome.warnings
    assert ratchet == (
        "StatefulSet db: stszone.io/zones has an empty entry (unchanged by this update; fix it)"
    )
    # The malformed list is not read: --zones stands in, and the warning names it.
    assert excluded.startswith(
        "StatefulSet db: its pod template's nodeSelector topology.kubernetes.io/zone=a excludes "
        "zone(s) b, c of the server's zones (--zones) (a,b,c)"
    )
    assert replicas.startswith("db: 2 replica(s) for 3 zones leaves a zone empty")


def test_a_template_naming_its_node_is_refused_naming_that_nodes_zone() -> None:
    """matchFields metadata.name In [n1]: its pods only ever run on n1, in a, so b and c are
    ruled out, and the refusal says where n1 is."""
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
    aff = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}  # fmt: skip
    store = store_from_objects([b.node("n1", "a"), b.node("n2", "b"), b.node("n3", "c")])
    outcome = validate(
        b.statefulset(annotations={"stszone.io/zones": "a,b,c"}, affinity=aff), store
    )
    assert not outcome.allowed
    assert outcome.message.startswith(
        "StatefulSet db: its pod template's required nodeAffinity matchFields metadata.name In "
        "[n1] (its pods would run on node n1 in a) excludes zone(s) b, c of stszone.io/zones "
        "(a,b,c)"
    )


def test_a_template_with_spec_node_name_is_refused_naming_that_nodes_zone() -> None:
    """spec.nodeName n1 in the template: every pod is bound to n1, in a, so the ordinals of b
    and c would be refused at every create; the set is refused first, saying where n1 is, once."""
    sts = b.statefulset(annotations={"stszone.io/zones": "a,b,c"})
    sts["spec"]["template"]["spec"]["nodeName"] = "n1"
    store = store_from_objects([b.node("n1", "a"), b.node("n2", "b"), b.node("n3", "c")])
    outcome = validate(sts, store)
    assert not outcome.allowed
    assert outcome.message.startswith(
        "StatefulSet db: its pod template's spec.nodeName n1 (a node in a) excludes zone(s) b, "
        "c of stszone.io/zones (a,b,c)"
    )


#: Only ordinal-labelled nodes, and bound to n1 (example.io/node=1) by spec.nodeName.
ON_N1 = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "example.io/node", "operator": "Exists"}]}]}}}  # fmt: skip


@pytest.mark.parametrize(
    "labelled",
    [("0", "1", "2"), ("1",)],
    ids=["nodes-of-each-ordinal", "only-n1-in-the-view"],
)
def test_a_node_ordinal_template_with_spec_node_name_says_the_nodes_label(
    labelled: tuple[str, ...],
) -> None:
    """Node-ordinal mode: spec.nodeName n1 in the template, n1 labelled example.io/node=1. The
    refusal names n1 by that label, which is no zone: "a node in 1" read as if 1 were one.
    Judged on the nodes of each ordinal, and by name alone where the view holds none."""
    spec = {"stszone.io/mode": "node-ordinal", "stszone.io/node-label": "example.io/node"}
    sts = b.statefulset(annotations=spec, affinity=ON_N1, replicas=3)
    sts["spec"]["template"]["spec"]["nodeName"] = "n1"
    nodes = [b.node(f"n{v}", "a", labels={"example.io/node": v}) for v in labelled]
    outcome = validate(sts, store_from_objects(nodes))
    assert not outcome.allowed
    assert outcome.message == (
        "StatefulSet db: its pod template's spec.nodeName n1 (a node with example.io/node=1) "
        "excludes example.io/node value(s) 0, 2, so those ordinals could never run on the "
        "nodes pinned to them; remove that constraint from spec.template"
    )


def test_a_node_ordinal_refusal_says_what_to_remove() -> None:
    spec = {"stszone.io/mode": "node-ordinal", "stszone.io/node-label": "example.io/node"}
    sts = b.statefulset(annotations=spec, node_selector={"example.io/node": "1"}, replicas=3)
    assert validate(sts).message == (
        "StatefulSet db: its pod template's nodeSelector example.io/node=1 excludes "
        "example.io/node value(s) 0, 2, so those ordinals could never run on the nodes pinned to "
        "them; remove that constraint from spec.template"
    )


def test_a_refusal_suggests_every_zone_the_template_allows() -> None:
    aff = b.zone_affinity([(ZONE_KEY, "NotIn", ["c"])])
    outcome = validate(b.statefulset(annotations={"stszone.io/zones": "a,b,c"}, affinity=aff))
    assert outcome.message.endswith('e.g. stszone.io/zones: "a,b"')


def test_a_lower_start_names_only_the_ordinals_the_set_had() -> None:
    """start 2 -> 0 with 3 -> 5 replicas: 0 and 1 are new; 2, 3, 4 each move one zone back
    (2 a->c, 3 b->a, 4 c->b), named by the first and a count."""
    old = b.statefulset(replicas=3, start=2, annotations={"stszone.io/zones": "a,b,c"})
    new = b.statefulset(replicas=5, start=0, annotations={"stszone.io/zones": "a,b,c"})
    outcome = validate(new, operation="UPDATE", old=old)
    assert outcome.allowed
    assert outcome.warnings == (
        "db: new spec.ordinals.start 0 moves 3 ordinal(s) when re-created: 2 (a->c) and 2 more",
        "db: `stszone rebalance` can move its existing pods to their zones",
    )


def test_a_new_zone_past_the_replicas_moves_no_ordinal_and_says_so() -> None:
    """a,b,c -> a,b,d with two replicas: ordinals 0 and 1 keep a and b."""
    old = b.statefulset(replicas=2, annotations={"stszone.io/zones": "a,b,c"})
    new = b.statefulset(replicas=2, annotations={"stszone.io/zones": "a,b,d"})
    outcome = validate(new, operation="UPDATE", old=old)
    assert outcome.warnings[1:] == ("db: new stszone.io/zones moves 0 ordinal(s) when re-created",)


def test_a_new_list_and_start_together_are_named_together() -> None:
    """a,b,c from 0 -> c,a,b from 1: ordinal 1 b->c, 2 c->a (0 goes, 3 is new)."""
    old = b.statefulset(replicas=3, annotations={"stszone.io/zones": "a,b,c"})
    new = b.statefulset(replicas=3, start=1, annotations={"stszone.io/zones": "c,a,b"})
    outcome = validate(new, operation="UPDATE", old=old)
    assert outcome.allowed
    assert outcome.warnings[0] == (
        "db: new stszone.io/zones and spec.ordinals.start 1 move 2 ordinal(s) when re-created: "
        "1 (b->c) and 2 (c->a)"
    )


@pytest.mark.parametrize(
    ("before", "after", "change"),
    [
        (0, 0, {"stszone.io/zones": "c,b,a"}),
        (0, 3, {"stszone.io/zones": "c,b,a"}),
        (3, 0, {"stszone.io/zones": "c,b,a"}),
        (0, 0, {"stszone.io/zones": "a,b,c", "stszone.io/topology-key": "rack"}),
    ],
)
def test_a_set_with_no_member_on_one_side_moves_nothing(
    before: int, after: int, change: dict[str, str]
) -> None:
    """A set stopped (replicas 0) before or after the update has no pod that a new zone list or
    topology key could move: no warning of moves and no MembersMoved Event. Nor is one left at
    zero told that its replicas leave a zone empty, as its /scale to zero is not."""
    store = store_from_objects([], zones=("a", "b", "c"))
    old = b.statefulset(replicas=before, annotations={"stszone.io/zones": "a,b,c"})
    new = b.statefulset(replicas=after, annotations=change)
    outcome = validate(new, store, operation="UPDATE", old=old)
    assert outcome.allowed
    assert not [w for w in outcome.warnings if "move" in w or "places every ordinal" in w]
    assert "MembersMoved" not in [n.reason for n in outcome.notices]
    assert not any("leaves a zone empty" in w for w in outcome.warnings), outcome.warnings


def test_ordinals_kept_by_their_volumes_are_named_two_and_counted() -> None:
    """a,b,c -> c,a,b changes every rule zone, but each ordinal's volume keeps it where it is."""
    volumes = [
        x
        for o in range(3)
        for x in (b.pvc(f"data-db-{o}", volume=f"pv-{o}"), b.pv(f"pv-{o}", "abc"[o]))
    ]
    store = store_from_objects(volumes, zones=("a", "b", "c"))
    old = b.statefulset(replicas=3, annotations={"stszone.io/zones": "a,b,c"})
    new = b.statefulset(replicas=3, annotations={"stszone.io/zones": "c,a,b"})
    outcome = validate(new, store, operation="UPDATE", old=old)
    assert outcome.warnings == (
        "db: new stszone.io/zones moves 0 ordinal(s) when re-created",
        "db: ordinal(s) 0 (a, pv-0), 1 (b, pv-1) and 1 more stay with their volumes",
    )


# --- the final state of pods ------------------------------------------------------------------


def test_pod_mutated_by_stszone_passes_validation() -> None:
    """The chain on a fresh pod: mutation pins it, validation accepts the result."""
    outcome = chain(b.sts_pod(ordinal=4))
    assert outcome.allowed and outcome.patch


def _mutated(pod: dict[str, Any], store: Store = ABC) -> dict[str, Any]:
    request = review.from_dict(b.review(pod))
    return apply(pod, review.answer("mutate", request, store=store, defaults=DEFAULTS).patch)


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda p: p["spec"].pop("affinity"), "ZoneRequirementMissing"),
        (  # a later webhook ORs in a term of its own: the pod could land anywhere
            lambda p: p["spec"]["affinity"]["nodeAffinity"][
                "requiredDuringSchedulingIgnoredDuringExecution"
            ]["nodeSelectorTerms"].append(
                {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}
            ),
            "ZoneRequirementMissing",
        ),
        (  # a later webhook widens the requirement
            lambda p: p["spec"]["affinity"]["nodeAffinity"][
                "requiredDuringSchedulingIgnoredDuringExecution"
            ]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"].append("a"),
            "ZoneRequirementMissing",
        ),
        (  # a later webhook turns the requirement around: every zone but b
            lambda p: p["spec"]["affinity"]["nodeAffinity"][
                "requiredDuringSchedulingIgnoredDuringExecution"
            ]["nodeSelectorTerms"][0]["matchExpressions"][0].update(operator="NotIn"),
            "ZoneRequirementMissing",
        ),
    ],
    ids=["removed", "ored-term", "widened", "negated"],
)
def test_pod_that_lost_its_zone_requirement_is_denied(damage: Any, reason: str) -> None:
    """What a later mutating webhook did to the pod is refused at validation, saying why."""
    pod = _mutated(b.sts_pod(ordinal=1))
    damage(pod)
    outcome = validate(pod)
    assert not outcome.allowed and outcome.reason == reason
    assert outcome.message.startswith(
        "pod db-1 reached validation without the required nodeAffinity topology.kubernetes.io/zone "
        "In [b] that stszone sets for ordinal 1: a mutating webhook that ran after stszone "
        "removed it, or stszone's mutating webhook was not called for this pod (check the "
        "MutatingWebhookConfiguration and its namespaceSelector)"
    )


def test_pod_pinned_by_node_selector_passes() -> None:
    """nodeSelector zone=b is as good as the affinity (nodeSelector is ANDed with everything)."""
    assert validate(b.sts_pod(ordinal=1, node_selector={ZONE_KEY: "b"})).allowed


def test_pod_that_never_met_the_mutating_webhook_is_denied() -> None:
    """A bare StatefulSet pod straight to /validate: refused."""
    outcome = validate(b.sts_pod(ordinal=0))
    assert not outcome.allowed and "stszone's mutating webhook was not called" in outcome.message


def test_scheduler_mode_needs_scheduler_name_and_zone_annotation() -> None:
    """Scheduler mode: schedulerName and stszone.io/zone must both be there after mutation."""
    store = store_from_objects(
        [b.statefulset(annotations={"stszone.io/zones": "a,b,c", "stszone.io/mode": "scheduler"})]
    )
    good = _mutated(b.sts_pod(ordinal=2), store)
    assert good["spec"]["schedulerName"] == "stszone-scheduler"
    assert validate(good, store).allowed
    reset = copy.deepcopy(good)
    reset["spec"]["schedulerName"] = "default-scheduler"
    outcome = validate(reset, store)
    assert not outcome.allowed and outcome.reason == "SchedulerRequirementMissing"
    wrong_zone = copy.deepcopy(good)
    wrong_zone["metadata"]["annotations"]["stszone.io/zone"] = "a"
    assert not validate(wrong_zone, store).allowed
    unset = copy.deepcopy(good)
    del unset["spec"]["schedulerName"]  # the API server's default: default-scheduler
    outcome = validate(unset, store)
    assert not outcome.allowed and outcome.reason == "SchedulerRequirementMissing"
    assert outcome.message.startswith(
        "pod db-2 reached validation with schedulerName 'default-scheduler' and "
        "stszone.io/zone='c'; scheduler mode needs schedulerName 'stszone-scheduler' and "
        "stszone.io/zone='c': "
    )


def test_scheduler_mode_denial_names_the_sets_own_scheduler() -> None:
    """stszone.io/scheduler-name wins over the server's --scheduler-name in what it asks for."""
    annotations = {"stszone.io/zones": "a,b,c", "stszone.io/mode": "scheduler",
                   "stszone.io/scheduler-name": "zoned"}  # fmt: skip
    outcome = validate(
        b.sts_pod(ordinal=2), store_from_objects([b.statefulset(annotations=annotations)])
    )
    assert not outcome.allowed
    assert "scheduler mode needs schedulerName 'zoned' and stszone.io/zone='c'" in outcome.message


@pytest.mark.parametrize("named", ["set", "server"])
def test_scheduler_mode_may_name_the_default_scheduler(named: str) -> None:
    """An extender in the default scheduler's own profile: stszone leaves default-scheduler in
    place and records the zone, and validation admits the pod it mutated."""
    annotations = {"stszone.io/zones": "a,b,c", "stszone.io/mode": "scheduler"}
    defaults = Defaults(scheduler_name="default-scheduler") if named == "server" else DEFAULTS
    if named == "set":
        annotations["stszone.io/scheduler-name"] = "default-scheduler"
    store = store_from_objects([b.statefulset(annotations=annotations)])
    request = review.from_dict(b.review(b.sts_pod(ordinal=2)))
    mutated = review.chain(request, store=store, defaults=defaults)
    assert mutated.allowed, mutated.message
    assert mutated.edited["spec"]["schedulerName"] == "default-scheduler"
    assert mutated.edited["metadata"]["annotations"]["stszone.io/zone"] == "c"
    unzoned = copy.deepcopy(mutated.edited)
    unzoned["metadata"]["annotations"].pop("stszone.io/zone")
    request = review.from_dict(b.review(unzoned))
    outcome = review.answer("validate", request, store=store, defaults=defaults)
    assert not outcome.allowed and outcome.reason == "SchedulerRequirementMissing"


def test_node_ordinal_mode_needs_the_node_pin() -> None:
    """node-ordinal: the pod must be pinned to its ordinal's node label."""
    spec = {
        "stszone.io/mode": "node-ordinal",
        "stszone.io/node-label": "example.io/node",
        "stszone.io/zones": "a,b",
    }
    store = store_from_objects(
        [b.statefulset(annotations=spec), b.node("k3", "a", labels={"example.io/node": "3"})]
    )
    pinned = _mutated(b.sts_pod(ordinal=3), store)
    assert validate(pinned, store).allowed
    pinned["spec"].pop("affinity")
    outcome = validate(pinned, store)
    assert not outcome.allowed and outcome.reason == "NodeRequirementMissing"


@pytest.mark.parametrize(
    "pod",
    [
        b.plain_pod(),
        b.sts_pod(ordinal=0, labels={"stszone.io/skip": "true"}),
    ],
)
def test_exempt_pods_pass_untouched(pod: dict[str, Any]) -> None:
    """Pods no StatefulSet controls and pods labelled stszone.io/skip=true are not checked."""
    outcome = validate(pod)
    assert outcome.allowed and outcome.warnings == ()


def test_excluded_namespaces_are_never_checked() -> None:
    """kube-system is never intercepted, even with a malformed set."""
    sts = b.statefulset(namespace="kube-system", annotations={"stszone.io/mode": "x"})
    assert validate(sts).allowed


def test_checks_stay_bounded_for_int32_replicas() -> None:
    """A zone-list change and a node-ordinal template check on 2147483647 replicas answer at
    once, naming a few ordinals and saying how far they looked: the ordinals placed (counted
    through the Store) are no more than they say, and the work stays far from two billion."""
    store = CountingStore(ABC)
    old = b.statefulset(replicas=2**31 - 1, annotations={"stszone.io/zones": "a,b,c"})
    new = b.statefulset(replicas=2**31 - 1, annotations={"stszone.io/zones": "c,b,a"})
    with line_budget(LINES):
        outcome = validate(new, operation="UPDATE", old=old, store=store)
    assert outcome.allowed
    moved = [w for w in outcome.warnings if "new stszone.io/zones moves" in w]
    assert moved and f"of the first {WALK_LIMIT}" in moved[0] and "more" in moved[0]
    templates = len(new["spec"]["volumeClaimTemplates"])
    # the old and the new zone of each ordinal walked are looked up, no more
    assert 0 < store.lookups <= 2 * WALK_LIMIT * templates
    pinned = b.statefulset(
        replicas=2**31 - 1,
        annotations={"stszone.io/mode": "node-ordinal", "stszone.io/node-label": "example.io/node"},
        affinity=b.zone_affinity([("example.io/node", "Lt", ["500"])]),
    )
    with line_budget(LINES):
        denied = validate(pinned)
    assert not denied.allowed and "500" in denied.message


NODE_LABEL_TEXT = (
    "db: stszone.io/node-label 'example.io/node' does nothing in {mode} mode, it is read only "
    'with stszone.io/mode: "node-ordinal"; set that mode, or remove stszone.io/node-label'
)
SCHEDULER_NAME_TEXT = (
    "db: stszone.io/scheduler-name 'other' does nothing in {mode} mode, it is read only with "
    'stszone.io/mode: "scheduler"; set that mode, or remove stszone.io/scheduler-name'
)


@pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
@pytest.mark.parametrize(
    ("annotations", "warned"),
    [
        ({"stszone.io/node-label": "example.io/node"}, NODE_LABEL_TEXT.format(mode="affinity")),
        (
            {"stszone.io/node-label": "example.io/node", "stszone.io/mode": "scheduler"},
            NODE_LABEL_TEXT.format(mode="scheduler"),
        ),
        ({"stszone.io/node-label": "example.io/node", "stszone.io/mode": "node-ordinal"}, None),
        ({"stszone.io/scheduler-name": "other"}, SCHEDULER_NAME_TEXT.format(mode="affinity")),
        ({"stszone.io/scheduler-name": "other", "stszone.io/mode": "scheduler"}, None),
    ],
    ids=["label-alone", "label-in-scheduler-mode", "label-read", "name-alone", "name-read"],
)
def test_an_annotation_the_mode_does_not_read_is_warned_of(
    operation: str, annotations: dict[str, str], warned: str | None
) -> None:
    """A set given stszone.io/node-label but not node-ordinal mode is placed by zone: its
    pods are never pinned to the labelled nodes. Allowed, and the client is told why, on
    every CREATE and UPDATE (here an image bump)."""
    sts = b.statefulset(annotations={"stszone.io/zones": "a,b,c", **annotations})
    old = copy.deepcopy(sts) if operation == "UPDATE" else None
    sts["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox:1.37"
    outcome = validate(sts, operation=operation, old=old)
    assert outcome.allowed
    assert outcome.warnings == ((warned,) if warned else ())


@pytest.mark.parametrize(
    ("annotations", "warned"),
    [
        (
            {"stszone.io/zones": "a,,b", "stszone.io/node-label": "example.io/node"},
            NODE_LABEL_TEXT.format(mode="affinity"),
        ),
        (
            {
                "stszone.io/zones": "a,,b",
                "stszone.io/mode": "node-ordinal",
                "stszone.io/node-label": "example.io/node",
                "stszone.io/scheduler-name": "other",
            },
            SCHEDULER_NAME_TEXT.format(mode="node-ordinal"),
        ),
        ({"stszone.io/mode": "pinned", "stszone.io/node-label": "example.io/node"}, None),
    ],
    ids=["label-in-affinity", "name-in-node-ordinal", "mode-unreadable"],
)
def test_an_update_keeping_malformed_annotations_still_warns_of_one_its_mode_does_not_read(
    annotations: dict[str, str], warned: str | None
) -> None:
    """An image bump of a set whose stszone.io/zones has an empty entry is allowed with the
    ratchet's warning; the annotation its mode (as written) does not read is warned of too,
    as on any other update. With a mode that is not one, no mode reads anything: only the
    ratchet's warning names what to fix."""
    old = b.statefulset(replicas=3, annotations=annotations)
    new = copy.deepcopy(old)
    new["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox:1.37"
    outcome = validate(new, operation="UPDATE", old=old)
    assert outcome.allowed
    ratchet, *rest = outcome.warnings
    assert ratchet.startswith("StatefulSet db: ") and ratchet.endswith(
        "(unchanged by this update; fix it)"
    )
    assert rest == ([warned] if warned else [])
    assert all(len(w) <= 256 for w in outcome.warnings)
