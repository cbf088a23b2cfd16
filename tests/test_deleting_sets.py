"""A StatefulSet being deleted (``metadata.deletionTimestamp``: a foreground deletion, a
finalizer): its controller creates and deletes no pod any more, whatever ``spec.replicas``
says, so nobody scales it. ``stszone audit`` and ``stszone explain`` say it is being deleted
rather than offer a safe replica count or judge smaller sizes."""

from __future__ import annotations

from typing import Any

import pytest

from tests import builders as b
from webhook.cli.audit import render_json, render_text
from webhook.cli.explain_text import workload_json, workload_text
from webhook.cluster.clusterfile import store_from_objects
from webhook.model.store import Store
from webhook.rules.audit import audit
from webhook.rules.explain import explain_workload

ZONES = {"stszone.io/zones": "zone-a,zone-b,zone-c"}


def _cluster(*, deleting: bool, kruise: bool = False) -> Store:
    """db: three members in zone-a, zone-b, zone-c, each on its node; being deleted or not."""
    sts = b.statefulset("db", replicas=3, annotations=ZONES)
    if kruise:
        sts["apiVersion"] = "apps.kruise.io/v1beta1"
    if deleting:
        sts["metadata"]["deletionTimestamp"] = "2026-12-07T12:00:00Z"
    pods: list[dict[str, Any]] = [
        b.sts_pod("db", i, node=node) for i, node in enumerate(("a1", "b1", "c1"))
    ]
    if kruise:
        for pod in pods:
            pod["metadata"]["ownerReferences"][0]["apiVersion"] = "apps.kruise.io/v1beta1"
    nodes = [b.node("a1", "zone-a"), b.node("b1", "zone-b"), b.node("c1", "zone-c")]
    return store_from_objects([*nodes, sts, *pods])


def test_a_set_not_being_deleted_gets_its_lowest_count_and_each_size() -> None:
    """The contrast: three members, one per zone, so 3 is the lowest count keeping them all."""
    store = _cluster(deleting=False)
    report = audit(store)
    assert report.sets[0].lowest == 3
    assert "lowest replica count that keeps every zone: 3" in render_text(report)
    whole = explain_workload(store, "ns", "db")
    assert whole is not None and [a.replicas for a in whole.sizes] == [2, 1, 0]


@pytest.mark.parametrize("kruise", [False, True], ids=["apps", "kruise"])
def test_audit_of_a_set_being_deleted_offers_no_count(kruise: bool) -> None:
    store = _cluster(deleting=True, kruise=kruise)
    report = audit(store)
    (db,) = report.sets
    assert (db.lowest, db.deleting) == (None, True)
    text = render_text(report)
    assert "lowest replica count" not in text
    assert "is being deleted" in text and "creates and deletes no pod" in text
    body = render_json(report)["statefulsets"][0]
    assert (body["lowestSafeReplicas"], body["deleting"]) == (None, True)
    assert [r["status"] for r in body["ordinals"]] == ["ok", "ok", "ok"]  # members still shown


@pytest.mark.parametrize("kruise", [False, True], ids=["apps", "kruise"])
def test_explain_of_a_set_being_deleted_judges_no_size(kruise: bool) -> None:
    group = "apps.kruise.io" if kruise else ""
    whole = explain_workload(_cluster(deleting=True, kruise=kruise), "ns", "db", group=group)
    assert whole is not None
    assert whole.sizes == () and whole.unjudged == 0 and len(whole.members) == 3
    text = workload_text(whole)
    assert "a scale-down to each smaller size" not in text and "->" not in text
    assert "is being deleted" in text and "creates and deletes no pod" in text
    body = workload_json(whole)
    assert (body["sizes"], body["deleting"]) == ([], True)
