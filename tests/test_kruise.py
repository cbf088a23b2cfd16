"""OpenKruise Advanced StatefulSets: live ordinals, placement by rank, owners, the guard.

The objects and reviews are the recorded ones of ``tests/fixtures/kruise`` (the lab, with a test
playing kruise-manager v1.8.4); the live ordinals are checked against ``tests/kruise_ref.py``,
written from the controller's source, never from stszone's.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders import node
from tests.kruise_ref import live_ordinals, reserved
from tests.kruiseobjects import (
    ANNOTATED,
    FIXTURES,
    NODE_ORDINAL,
    ZONES,
    annotated,
    annotated_update,
    answer_to_change,
    kruise_store,
    live_pods,
    recorded_items,
    recorded_request,
)
from webhook.cli.audit import render_json, render_text
from webhook.cli.explain import run_explain
from webhook.cluster.clusterfile import store_from_objects
from webhook.config import Defaults
from webhook.errors import Denied
from webhook.model.extract import kruise_set_info, pod_info, statefulset_info
from webhook.model.kruise import Live, parse_reserve
from webhook.model.state import live_state
from webhook.model.store import Store
from webhook.rules import extender
from webhook.rules.admission import Request, mutate, validate
from webhook.rules.audit import audit
from webhook.rules.decision import StorageClass, ZoneAnnotation, ZonesAnnotation
from webhook.rules.explain import explain_workload
from webhook.rules.rebalance import chosen, plan_set
from webhook.wire.review import from_dict

# --- the model ------------------------------------------------------------------------------

entries = st.lists(
    st.one_of(
        st.integers(-3, 40),
        st.tuples(st.integers(-2, 40), st.integers(0, 12)).map(lambda t: f"{t[0]}-{t[0] + t[1]}"),
        st.sampled_from(["5", "3-1", "1-2-3", " 1-3", "+1-3", "0003-005"]),
    ),
    max_size=5,
)


@given(replicas=st.integers(0, 30), start=st.integers(0, 6), reserve=entries)
def test_live_ordinals_agree_with_the_controller(
    replicas: int, start: int, reserve: list[int | str]
) -> None:
    """The first ``replicas`` unreserved ordinals at or above the start, malformed lists ignored."""
    intervals, readable = parse_reserve(reserve)
    ref = reserved(reserve)
    assert readable == (ref is not None)
    assert intervals == (ref.intervals if ref is not None else ())
    live = Live(replicas=replicas, start=start, reserved=intervals)
    want = live_ordinals(replicas, start=start, reserve=reserve)
    assert tuple(live) == want
    # A member's rank is its place among the live ordinals, whatever the count.
    assert [live.rank(o) for o in want] == list(range(len(want)))
    assert all(live.at(i) == o for i, o in enumerate(want))
    assert all((o in live) == (o in want) for o in range(-2, 80))


def test_three_replicas_with_one_reserved_cover_every_zone() -> None:
    """Live 0, 2, 3 (ordinal 1 reserved): by rank a, b, c; ``ordinal mod 3`` would say a, c, a."""
    store = kruise_store(pods=False)
    got = {}
    for number in ("004", "006", "008"):
        request = recorded_request(number)
        decision = mutate(request, store=store, defaults=Defaults())
        (zone,) = [e.zone for e in decision.edits if isinstance(e, ZoneAnnotation)]
        got[request.object["metadata"]["name"]] = zone
    assert got == {"web-0": "a", "web-2": "b", "web-3": "c"}


def test_claims_get_the_zone_and_class_of_their_member() -> None:
    """``data-web-3`` is rank 2's claim: zone c, class ``ssd-c`` from the template."""
    store = kruise_store(pods=False)
    sts = store.kruisesets[("shop", "web")]
    annotations = {**sts.annotations, "stszone.io/storage-class-template": "ssd-{zone}"}
    store.put("kruisesets", type(sts)(**{**_fields(sts), "annotations": annotations}))
    store.delete("claims", ("shop", "data-web-3"))
    decision = mutate(recorded_request("007"), store=store, defaults=Defaults())
    assert ZoneAnnotation("c") in decision.edits
    assert StorageClass("ssd-c") in decision.edits


def _pod_request(number: str, **spec: Any) -> Request:
    """The recorded pod CREATE ``number`` with ``spec`` laid over its pod spec."""
    request = recorded_request(number)
    pod = copy.deepcopy(request.object)
    pod["spec"].update(spec)
    return request._replace(object=pod)


def test_a_pod_ruling_out_its_zone_is_told_to_edit_the_advanced_statefulset() -> None:
    """web-0 belongs in zone a; its nodeSelector asks for b. The constraint comes from the
    Advanced StatefulSet's template, so that is the kind the refusal names."""
    selector = {"nodeSelector": {"topology.kubernetes.io/zone": "b"}}
    request = _pod_request("004", **selector)
    decision = mutate(
        request, store=kruise_store(pods=False, template=selector), defaults=Defaults()
    )
    assert (decision.allowed, decision.reason) == (False, "ZoneConflict")
    assert (
        "remove that constraint from the Advanced StatefulSet's pod template or change its "
        "stszone.io/zones" in decision.message
    ), decision.message


@pytest.mark.parametrize(
    ("template", "username", "said"),
    [
        ({"nodeName": "n-b"}, "", "the Advanced StatefulSet controller re-create it"),
        ({}, "", "yet kruise-manager created the pod: a mutating webhook added it on the way in"),
        ({}, "tester", "let kruise-manager create the pod from its template"),
    ],
    ids=["from-the-template", "added-on-the-way", "its-own"],
)
def test_a_pod_on_a_node_of_another_zone_names_the_advanced_statefulset_controller(
    template: dict[str, Any], username: str, said: str
) -> None:
    """web-0 (zone a) created with spec.nodeName n-b, from the set's template, or by
    kruise-manager (the recorded request) with a template that has none, or by a user: the
    controller that re-creates it, created it or would create it is the Advanced
    StatefulSet's (kruise-manager), not the StatefulSet controller."""
    request = _pod_request("004", nodeName="n-b")
    decision = mutate(
        request._replace(username=username or request.username),
        store=kruise_store(pods=False, template=template),
        defaults=Defaults(),
    )
    assert (decision.allowed, decision.reason) == (False, "NodeNameConflict")
    assert said in decision.message, decision.message
    assert "the StatefulSet controller" not in decision.message, decision.message


def test_a_template_ruling_out_a_listed_zone_names_the_advanced_statefulset() -> None:
    """The recorded CREATE of web, listing zones a,b,c, with a template pinned to zone b."""
    request = recorded_request("001")
    sts = annotated(request.object)
    sts["spec"]["template"]["spec"]["nodeSelector"] = {"topology.kubernetes.io/zone": "b"}
    decision = validate(
        request._replace(object=sts), store=kruise_store(pods=False), defaults=Defaults()
    )
    assert (decision.allowed, decision.reason) == (False, "ZoneConflict")
    assert decision.message.startswith("Advanced StatefulSet web: its pod template's "), (
        decision.message
    )


@pytest.mark.parametrize(("with_nodes", "waiting"), [("ab", ()), ("ac", ("b",))])
def test_only_a_zone_a_live_member_goes_to_is_said_to_make_pods_wait(
    with_nodes: str, waiting: tuple[str, ...]
) -> None:
    """The recorded CREATE of web (ordinal 1 reserved) at 2 replicas, over zones a,b,c: live
    ordinals 0 and 2, ranks 0 and 1, go to zones a and b. With no node in c, no member waits
    there and c is not named; with no node in b, ordinal 2 waits there (by ordinal mod 3 it
    would have gone to c)."""
    request = recorded_request("001")
    sts = annotated(request.object)
    sts["spec"]["replicas"] = 2
    store = store_from_objects([node(f"n-{z}", z) for z in with_nodes])
    decision = validate(request._replace(object=sts), store=store, defaults=Defaults())
    assert decision.allowed, decision.message
    assert decision.warnings == (
        "web: 2 replica(s) for 3 zones leaves a zone empty; 3 or more survive the loss of any zone",
        *(
            f"web: no node in zone(s) {z} (topology.kubernetes.io/zone) yet; its pods there wait "
            "for one"
            for z in waiting
        ),
    )


def test_a_create_while_the_view_loads_names_the_advanced_statefulset() -> None:
    """The recorded CREATE of web reaches a live view that has not listed the nodes: it is
    refused for retry, naming the kind the user created."""
    decision = mutate(recorded_request("001"), store=Store(live=True), defaults=Defaults())
    assert (decision.allowed, decision.reason) == (False, "ViewNotSynced")
    assert "cannot judge the zones of Advanced StatefulSet web;" in decision.message


def test_the_extender_names_the_advanced_statefulset_of_a_pod_without_an_ordinal() -> None:
    """The recorded pod web-0, renamed web-x and without its pod-index label."""
    (pod,) = [
        copy.deepcopy(p) for p in recorded_items("pods.json") if p["metadata"]["name"] == "web-0"
    ]
    pod["metadata"]["name"] = "web-x"
    del pod["metadata"]["labels"]["apps.kubernetes.io/pod-index"]
    with pytest.raises(
        Denied, match=r"^pod shop/web-x of Advanced StatefulSet web has no ordinal$"
    ):
        extender.target(pod, store=kruise_store(pods=False))


def _fields(info: Any) -> dict[str, Any]:
    return {f: getattr(info, f) for f in info.__struct_fields__}


def test_kruise_pods_are_not_an_apps_set_of_the_same_name() -> None:
    """An apps/v1 StatefulSet ``web`` beside the Advanced one: neither sees the other's pods."""
    store = kruise_store(zones_of={"web-0": "a", "web-2": "b", "web-3": "c"})
    apps = {
        "kind": "StatefulSet",
        "apiVersion": "apps/v1",
        "metadata": {"name": "web", "namespace": "shop", "annotations": ANNOTATED},
        "spec": {"replicas": 3, "template": {"spec": {}}},
    }
    store.put("statefulsets", statefulset_info(apps))
    assert not store.set_pods("shop", "web").by_name
    assert sorted(store.set_pods("shop", "web", "apps.kruise.io").by_name) == [0, 2, 3]


def test_pods_of_an_earlier_set_are_not_members() -> None:
    """A pod whose owner reference names another uid belongs to a deleted set of that name."""
    store = kruise_store(zones_of={"web-0": "a", "web-2": "b", "web-3": "c"})
    (pod,) = [p for p in recorded_items("pods.json") if p["metadata"]["name"] == "web-3"]
    pod = copy.deepcopy(pod)
    pod["metadata"]["ownerReferences"][0]["uid"] = "0000-earlier"
    store.put("pods", pod_info(pod))
    assert sorted(store.set_pods("shop", "web", "apps.kruise.io").by_name) == [0, 2]


# --- the guard ------------------------------------------------------------------------------


def test_reserving_the_only_member_of_a_zone_is_refused() -> None:
    """Live 0, 2, 3 in a, b, c; reserving 0-1 at replicas 3 makes them 2, 3, 4: zone a lost."""
    store = kruise_store(zones_of={"web-0": "a", "web-2": "b", "web-3": "c"})
    request = annotated_update(recorded_request("011"), replicas=3, reserveOrdinals=["0-1"])
    request.old_object["spec"]["replicas"] = 3
    decision = validate(request, store=store, defaults=Defaults())
    assert not decision.allowed
    assert "reserveOrdinals [1] -> [0-1]" in decision.message
    assert "zone a (ordinal 0 is its only pod)" in decision.message


def test_a_reserve_change_that_keeps_every_zone_is_allowed() -> None:
    """Reserving 3 (zone c) at replicas 3: live 0, 2, 4; the new member 4 is rank 2, zone c."""
    store = kruise_store(zones_of={"web-0": "a", "web-2": "b", "web-3": "c"})
    request = annotated_update(recorded_request("011"), replicas=3, reserveOrdinals=[1, 3])
    request.old_object["spec"]["replicas"] = 3
    decision = validate(request, store=store, defaults=Defaults())
    assert decision.allowed, decision.message


def test_a_reserve_change_counts_new_members_by_their_new_rank() -> None:
    """Reserving 2 (zone b) at replicas 3: live 0, 3, 4. Ranks shift: 3 keeps its pod (and
    data) in c, and the new member 4 is rank 2, zone c too: b is lost, and refused."""
    store = kruise_store(zones_of={"web-0": "a", "web-2": "b", "web-3": "c"})
    request = annotated_update(recorded_request("011"), replicas=3, reserveOrdinals=[1, 2])
    request.old_object["spec"]["replicas"] = 3
    decision = validate(request, store=store, defaults=Defaults())
    assert not decision.allowed
    assert "zone b (ordinal 2 is its only pod)" in decision.message


def test_a_reserve_change_names_a_count_above_the_old_one_that_keeps_every_zone() -> None:
    """Reserving 2 (zone b's only member) at replicas 3: live 0, 3, 4 in a, c (its pod), c
    (rank 2). With [1-2] reserved, ranks 3 and 4 are the new ordinals 5 (a) and 6 (b): no count
    up to 3 keeps b, 5 does. The refusal names 5, to set with the new list, and that passes."""
    store = kruise_store(zones_of={"web-0": "a", "web-2": "b", "web-3": "c"})

    def update(replicas: int) -> Any:
        request = annotated_update(
            recorded_request("011"), replicas=replicas, reserveOrdinals=[1, 2]
        )
        request.old_object["spec"]["replicas"] = 3
        return validate(request, store=store, defaults=Defaults())

    refused = update(3)
    assert (refused.allowed, refused.reason) == (False, "ZoneLoss")
    assert (
        "; the smallest replica count that keeps every zone is 5: set spec.replicas to 5 in the "
        'same update; set stszone.io/allow-zone-loss: "true"'
    ) in refused.message
    assert not update(4).allowed and update(5).allowed


def test_a_start_move_names_a_count_above_the_old_one_that_keeps_every_zone() -> None:
    """With the start honoured, 0 -> 1 at replicas 3 (1 reserved): live 2, 3, 4; 0, zone a's
    only member, goes and 4 is rank 2, zone c. Rank 3 is ordinal 5, zone a: 4 replicas."""
    store = kruise_store(zones_of={"web-0": "a", "web-2": "b", "web-3": "c"})
    store.kruise_start_ordinal = True

    def update(replicas: int) -> Any:
        request = annotated_update(
            recorded_request("011"), replicas=replicas, ordinals={"start": 1}
        )
        request.old_object["spec"].update(replicas=3, reserveOrdinals=[1])
        request.object["spec"]["reserveOrdinals"] = [1]
        return validate(request, store=store, defaults=Defaults())

    refused = update(3)
    assert (refused.allowed, refused.reason) == (False, "ZoneLoss")
    assert (
        "; with ordinals.start 1, the smallest replica count that keeps every zone is 4: set "
        "spec.replicas to 4 in the same update;"
    ) in refused.message
    assert update(4).allowed


def test_a_node_ordinal_reserve_change_names_the_labelled_node_past_the_old_count() -> None:
    """node-ordinal mode, nodes labelled 0, 2, 3, 4, 5 in a, b, c, c, b: reserving 2 (zone b's
    only member) at replicas 3 gives live 0, 3, 4 (a, c, c), b lost. With 4 replicas ordinal
    5 joins, on the node labelled 5 in b: the refusal names 4, and that update passes."""
    store = kruise_store(pins={0: "a", 2: "b", 3: "c", 4: "c", 5: "b"})

    def update(replicas: int) -> Any:
        request = recorded_request("011")
        new = annotated(request.object, {**ANNOTATED, **NODE_ORDINAL})
        new["spec"].update(replicas=replicas, reserveOrdinals=[1, 2])
        old = annotated(request.old_object, {**ANNOTATED, **NODE_ORDINAL})
        old["spec"]["replicas"] = 3
        return validate(
            request._replace(object=new, old_object=old), store=store, defaults=Defaults()
        )

    refused = update(3)
    assert (refused.allowed, refused.reason) == (False, "ZoneLoss")
    assert refused.message.startswith("reserveOrdinals [1] -> [1-2] of web would drop zone b")
    assert (
        "; the smallest replica count that keeps every zone is 4: set spec.replicas to 4 in the "
        'same update; set stszone.io/allow-zone-loss: "true"'
    ) in refused.message
    assert update(4).allowed


def test_a_node_ordinal_reserve_change_with_no_safe_count_is_refused_saying_so() -> None:
    """As above without the node labelled 5: no node for an ordinal past 4 and zone b's only
    member reserved, so no count keeps b. The update is refused, saying no count up to 3 is
    safe (looking one count past the widest set must not fail the review instead)."""
    store = kruise_store(pins={0: "a", 2: "b", 3: "c", 4: "c"})
    request = recorded_request("011")
    new = annotated(request.object, {**ANNOTATED, **NODE_ORDINAL})
    new["spec"].update(replicas=3, reserveOrdinals=[1, 2])
    old = annotated(request.old_object, {**ANNOTATED, **NODE_ORDINAL})
    old["spec"]["replicas"] = 3
    refused = validate(
        request._replace(object=new, old_object=old), store=store, defaults=Defaults()
    )
    assert (refused.allowed, refused.reason) == (False, "ZoneLoss")
    assert "would drop zone b (ordinal 2 is its only pod)" in refused.message
    assert "; no replica count up to 3 is safe; " in refused.message


def test_a_new_zone_list_names_the_members_it_moves_by_rank() -> None:
    """Live 0, 2, 3 are ranks 0, 1, 2: zones a,b,c -> a,c,b moves ranks 1 and 2, ordinals 2
    and 3 (ordinal 1 is reserved), and the Event regards the Advanced StatefulSet."""
    request = annotated_update(recorded_request("011"), replicas=3, reserveOrdinals=[1])
    request.old_object["spec"].update(replicas=3, reserveOrdinals=[1])
    request.object["metadata"]["annotations"]["stszone.io/zones"] = "a,c,b"
    decision = validate(request, store=kruise_store(), defaults=Defaults())
    assert decision.allowed, decision.message
    moved = [w for w in decision.warnings if "when re-created" in w]
    assert moved == [
        "web: new stszone.io/zones moves 2 ordinal(s) when re-created: 2 (b->c) and 3 (c->b)"
    ]
    (notice,) = decision.notices
    assert notice.regarding.api_version == "apps.kruise.io/v1beta1"
    assert (notice.regarding.kind, notice.regarding.name) == ("StatefulSet", "web")


def test_scale_subresource_of_kruise_is_guarded_by_live_members() -> None:
    """/scale 3 -> 2 removes web-3, the highest live ordinal: zone c lost, refused."""
    store = kruise_store(zones_of={"web-0": "a", "web-2": "b", "web-3": "c"})
    decision = validate(recorded_request("009"), store=store, defaults=Defaults())
    assert not decision.allowed
    assert "zone c (ordinal 3 is its only pod)" in decision.message


def test_a_kruise_set_labelled_skip_is_left_alone_on_its_scale_subresource() -> None:
    """A Scale carries none of the set's labels, so the objectSelector that keeps a set
    labelled stszone.io/skip=true from stszone cannot keep its /scale away: allowed here."""
    store = kruise_store(zones_of={"web-0": "a", "web-2": "b", "web-3": "c"})
    assert not validate(recorded_request("009"), store=store, defaults=Defaults()).allowed
    labelled = annotated(recorded_items("statefulsets.v1beta1.json")[0])
    labelled["metadata"].setdefault("labels", {})["stszone.io/skip"] = "true"
    store.put("kruisesets", kruise_set_info(labelled))
    decision = validate(recorded_request("009"), store=store, defaults=Defaults())
    assert decision.allowed and not decision.warnings, decision.message


def test_the_kind_can_be_turned_off() -> None:
    store = kruise_store(zones_of={"web-0": "a", "web-2": "b", "web-3": "c"})
    decision = validate(recorded_request("009"), store=store, defaults=Defaults(kruise=False))
    assert decision.allowed


def test_a_v1alpha1_update_drops_the_reserved_ordinals() -> None:
    """Through v1alpha1 the stored set loses reserveOrdinals: live 0, 2 become 0, 1 -- web-2
    (zone b) goes and the new member 1 goes to rank 1's zone, b: every zone kept."""
    store = kruise_store(zones_of={"web-0": "a", "web-2": "b", "web-3": "c"})
    request = recorded_request("015")
    request = request._replace(
        object=annotated(request.object), old_object=annotated(request.old_object)
    )
    # The view holds replicas 2, reserveOrdinals [1] (read through v1beta1): live 0, 2.
    sts = store.kruisesets[("shop", "web")]
    store.put("kruisesets", type(sts)(**{**_fields(sts), "replicas": 2}))
    request.object["spec"]["replicas"] = 2
    decision = validate(request, store=store, defaults=Defaults())
    assert decision.allowed, decision.message


@settings(max_examples=150, deadline=None)
@given(
    before=st.tuples(st.integers(1, 9), entries),
    after=st.tuples(st.integers(1, 9), entries),
    zones=st.lists(st.sampled_from(ZONES), min_size=40, max_size=40),
)
def test_guard_agrees_with_the_controller(
    before: tuple[int, list[int | str]],
    after: tuple[int, list[int | str]],
    zones: list[str],
) -> None:
    """Members placed anywhere (a pod per live ordinal in a random zone); any change of
    replicas/reserveOrdinals is refused exactly when a zone the members hold before is held
    by no member after, per the controller's live sets; new members go by their rank."""
    old_live = live_ordinals(before[0], reserve=before[1])
    new_live = live_ordinals(after[0], reserve=after[1])
    where = {o: zones[o % 40] for o in old_live}
    expected_after = {where.get(o) or ZONES[new_live.index(o) % 3] for o in new_live}
    lost = set(where.values()) - expected_after
    nodes = [node(f"n-{z}", z) for z in ZONES]
    base = annotated(recorded_items("statefulsets.v1beta1.json")[0])
    pods = live_pods(old_live, lambda o: f"n-{where[o]}")
    decision = answer_to_change(base, before, after, [*nodes, *pods])
    assert decision.allowed == (not lost), decision.message
    for zone in lost:
        assert f"zone {zone} (" in decision.message or f" {zone} (" in decision.message
        removed = set(old_live) - set(new_live)
        holders = [o for o in removed if where[o] == zone]
        assert str(holders[0]) in decision.message


@settings(max_examples=150, deadline=None)
@given(
    before=st.tuples(st.integers(1, 9), entries),
    after=st.tuples(st.integers(1, 9), entries),
    pins=st.lists(st.sampled_from(ZONES), min_size=64, max_size=64),
)
def test_node_ordinal_guard_offers_the_smallest_count_the_controller_makes_safe(
    before: tuple[int, list[int | str]],
    after: tuple[int, list[int | str]],
    pins: list[str],
) -> None:
    """node-ordinal mode, nodes labelled 0-63 in random zones, a pod per live ordinal on its
    node: any change of replicas/reserveOrdinals is refused exactly when a zone the members
    hold before is held by no member after, per the controller's live sets; and the count a
    refusal offers is the smallest whose live set, with the new reserveOrdinals, holds them
    all again (found past the old count too), or none is offered when no count does."""
    old_live = live_ordinals(before[0], reserve=before[1])
    new_live = live_ordinals(after[0], reserve=after[1])
    held = {pins[o] for o in old_live}

    def keeps(live: Iterable[int]) -> bool:
        return held <= {pins[o] for o in live if o < len(pins)}

    objects: list[Any] = [
        node(f"k{o}", z, labels={"example.io/node": str(o)}) for o, z in enumerate(pins)
    ]
    base = annotated(recorded_items("statefulsets.v1beta1.json")[0], {**ANNOTATED, **NODE_ORDINAL})
    decision = answer_to_change(
        base, before, after, [*objects, *live_pods(old_live, lambda o: f"k{o}")]
    )
    assert decision.allowed == keeps(new_live), decision.message
    if decision.allowed:
        return
    counts = range(len(pins) + 1)
    lowest = next((n for n in counts if keeps(live_ordinals(n, reserve=after[1]))), None)
    if lowest is None:
        assert "no replica count up to" in decision.message, decision.message
    else:
        offered = f"the smallest replica count that keeps every zone is {lowest}"
        assert offered in decision.message, decision.message


# --- audit ----------------------------------------------------------------------------------


def test_audit_reads_members_by_rank() -> None:
    """The audit lists the Advanced StatefulSet by kind, its live ordinals 0, 2, 3 with their
    rank zones a, b, c, and web-2 running in c as misplaced."""
    store = kruise_store(zones_of={"web-0": "a", "web-2": "c", "web-3": "c"})
    report = audit(store)
    (web,) = [s for s in report.sets if s.name == "web"]
    assert web.kind == "Advanced StatefulSet"
    rows = {row.ordinal: (row.expected_zone, row.zone, row.status) for row in web.rows}
    assert rows == {0: ("a", "a", "ok"), 2: ("b", "c", "MISPLACED"), 3: ("c", "c", "ok")}
    # As for StatefulSets, the lowest count keeps the zones held now (a, c): 0 and 2.
    assert web.lowest == 2
    (data,) = render_json(report)["statefulsets"]
    assert (data["apiGroup"], data["kind"], data["name"]) == (
        "apps.kruise.io",
        "StatefulSet",
        "web",
    )
    assert "Advanced StatefulSet shop/web" in render_text(report)
    assert "live ordinals 0, 2 and 3" in render_text(report)


def test_audit_lowest_safe_count_follows_the_live_set() -> None:
    """Members where the rule puts them: the lowest count keeping every zone is 3 (0, 2, 3)."""
    store = kruise_store(zones_of={"web-0": "a", "web-2": "b", "web-3": "c"})
    (web,) = audit(store).sets
    assert web.lowest == 3


def test_audit_of_a_stopped_set_offers_zero_as_for_a_statefulset() -> None:
    """replicas: 0: no member holds a zone, so every count keeps them all and the lowest is 0,
    as for a stopped StatefulSet; null is what audit says of a set it does not judge."""
    web = annotated(recorded_items("statefulsets.v1beta1.json")[0])
    web["spec"]["replicas"] = 0
    apps = copy.deepcopy(web)
    apps.update(apiVersion="apps/v1", metadata={**web["metadata"], "name": "db"})
    report = audit(store_from_objects([node("n-a", "a"), web, apps]))
    listed = render_json(report)["statefulsets"]
    lowest = {s["apiGroup"]: s["lowestSafeReplicas"] for s in listed}
    assert lowest == {"apps": 0, "apps.kruise.io": 0}


# --- explain --------------------------------------------------------------------------------


def test_explain_names_members_by_rank_and_judges_smaller_sizes() -> None:
    """``explain asts/web``: members 0, 2, 3 with rule zones a, b, c; 2 replicas would drop c
    (web-3 is its only pod), 1 would drop b and c."""
    store = kruise_store(zones_of={"web-0": "a", "web-2": "b", "web-3": "c"})
    explained = explain_workload(store, "shop", "web", group="apps.kruise.io")
    assert explained is not None
    assert explained.workload.kind == "Advanced StatefulSet"
    assert [(m.row.ordinal, m.rule_zone) for m in explained.members] == [
        (0, "a"),
        (2, "b"),
        (3, "c"),
    ]
    sizes = {s.replicas: s for s in explained.sizes}
    assert not sizes[2].allowed and "zone c (ordinal 3 is its only pod)" in sizes[2].message
    assert not sizes[1].allowed
    # An apps/v1 lookup of the same name finds nothing.
    assert explain_workload(store, "shop", "web") is None


def test_explain_cli_finds_advanced_statefulsets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = kruise_store(zones_of={"web-0": "a", "web-2": "b", "web-3": "c"})
    assert run_explain(store, kind=None, name="web", namespace="shop", output="text") == 0
    assert "Advanced StatefulSet shop/web" in capsys.readouterr().out
    assert run_explain(store, kind="pod", name="web-2", namespace="shop", output="json") == 0
    body = json.loads(capsys.readouterr().out)
    assert body["workload"]["kind"] == "Advanced StatefulSet", body


def test_explain_text_names_the_live_ordinals(capsys: pytest.CaptureFixture[str]) -> None:
    """Ordinal 1 is reserved: the members of web are 0, 2 and 3, and the heading of the set and
    of its member web-3 says so (not "ordinals 0-2", which leaves web-3 out)."""
    store = kruise_store(zones_of={"web-0": "a", "web-2": "b", "web-3": "c"})
    assert run_explain(store, kind=None, name="web", namespace="shop", output="text") == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert head == (
        "Advanced StatefulSet shop/web: mode affinity, zones a,b,c, replicas 3 "
        "(live ordinals 0, 2 and 3)"
    )
    assert run_explain(store, kind="pod", name="web-3", namespace="shop", output="text") == 0
    assert capsys.readouterr().out.splitlines()[0] == f"Pod shop/web-3: ordinal 3 of {head}"


def test_rebalance_moves_a_misplaced_member_to_its_rank_zone() -> None:
    """web-2 (rank 1) runs in c: one step evicts it for b (ordinal 2 mod 3 would say c);
    web-0 and web-3 stay. The recorded pods were Pending: here the kubelet made them Ready."""
    store = kruise_store(zones_of={"web-0": "a", "web-2": "c", "web-3": "c"})
    ready = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    state = live_state([{**p, **ready} for p in recorded_items("pods.json")])
    (sts,) = chosen(store)
    planned = plan_set(sts, store=store, state=state, move_data=False)
    assert [(s.pod, s.source, s.target, s.group) for s in planned.steps] == [
        ("web-2", "c", "b", "apps.kruise.io")
    ]
    assert [row.kind for row in planned.rows] == ["in place", "movable", "in place"]


@pytest.mark.parametrize(
    "path", sorted((FIXTURES / "admission").glob("*.json")), ids=lambda p: p.name[:3]
)
def test_every_recorded_review_is_read(path: Path) -> None:
    """Each review the API server sent (both registrations, both versions) is answered from
    the recorded objects: never a malformed-object answer, and only the shapes the guard
    refuses are refused (no pod is scheduled there, so members are where the rule puts them)."""
    store = kruise_store(pods=False)
    request = from_dict(json.loads(path.read_text())).request
    for decide in (mutate, validate):
        decision = decide(request, store=store, defaults=Defaults())
        assert decision.code != 400, decision.message
        if not decision.allowed:
            # The recorded pods were never mutated (no stszone ran on the lab then): the final
            # check refuses them for lacking their zone, as it should.
            expected = {"ZoneLoss", "ZoneUnknown", "ZoneRequirementMissing"}
            assert decision.reason in expected, decision.message


def test_create_fills_the_zone_list() -> None:
    """The recorded CREATE (review 001) without stszone.io/zones gets the view's zones."""
    store = kruise_store(pods=False)
    decision = mutate(recorded_request("001"), store=store, defaults=Defaults())
    assert ZonesAnnotation(ZONES) in decision.edits
    off = mutate(recorded_request("001"), store=store, defaults=Defaults(kruise=False))
    assert not off.edits
